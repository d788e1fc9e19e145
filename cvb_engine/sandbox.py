"""Run model-written Python code and a test against it — the only module that does.

Threat model
------------
The code comes from a model answering a benchmark task. We defend against
*accidental damage* (a fork bomb, a runaway loop, a 10 GB allocation, a write
to the wrong path, a daemon left running) and *casual escape* (reading API keys
from the environment, phoning home, killing the harness, ``sys.exit(0)`` to
look successful). This is **not** a security boundary against a determined
attacker: the code shares the kernel with the host (a kernel exploit wins),
and because it runs in the same process as the harness it can, with
deliberate effort (walking interpreter frames to find the per-execution
nonce), forge a passing verdict. Semantic tricks such as returning an object
that compares equal to everything are the test author's business, not ours.

Every execution, whatever the backend:

* one child process (tree), in a fresh temporary directory removed afterwards
  (also ``HOME`` and ``TMPDIR``), stdin ``/dev/null``;
* an environment reduced to an allow-list (``PATH``, ``LANG``,
  ``PYTHONHASHSEED=0`` …): no API key or token of the parent is visible;
* rlimits: CPU time, address space (1 GiB), file size, open files, no core;
* a wall-clock timeout after which the whole tree is killed from outside
  (SIGKILL: ignoring SIGTERM or holding the GIL in a C loop does not help);
* stdout/stderr drained concurrently, the first 64 KiB of each kept, and the
  run killed beyond 16 MiB of output, so a 200 MB writer neither blocks nor
  fills memory;
* a verdict that comes from the harness, not from the exit code: the harness
  reads a random nonce from a pipe (not env, not argv) before the code runs and
  writes ``<nonce> PASS`` to a second pipe only after the test returned. Exit
  status 0, ``os._exit``, ``SystemExit``, closed stdout, a killed harness: all
  fail;
* when the cgroup file system is writable (root on most Linux machines), a
  per-execution ``pids`` cgroup caps processes + threads (64) and is emptied
  with SIGKILL afterwards, which also removes double-forked daemons.
  ``RLIMIT_NPROC`` is no substitute: the kernel does not enforce it for root.

Not bounded: the *total* memory of several processes (each has its own
1 GiB; there is no memory cgroup), the total size of the files written in the
temporary directory (each file ≤ 64 MiB), and CPU shares between executions.

Backends: model code runs in ``bwrap``. A weaker backend is used only when
the user names it (``--sandbox unshare|plain`` or ``CVB_SANDBOX``), with a
:class:`WeakSandboxWarning`; when bwrap does not work and none is named,
:func:`backend` raises with what is missing, before anything executes.

``bwrap``
    bubblewrap with new PID, network, IPC, UTS, user and cgroup namespaces,
    all capabilities dropped, and a read-only view of ``/usr``, a few ``/etc``
    files and the Python installation only — ``/root``, ``/home``, the
    project and the host ``/tmp`` are not there. Writable: the temporary
    directory, a 64 MiB private ``/tmp`` and ``/dev/shm``. No network at all
    (only a down loopback). Killing bwrap kills the namespace.

    Executions are forked from a *zygote*: a harness process started once
    inside such a namespace, as its PID 1, which forks one child per
    execution and, after it, kills every other process of the namespace and
    empties its ``/tmp``, ``/dev/shm`` and working area, so that nothing of
    one execution reaches the next (see the zygote section below for what
    holds it apart). This saves the 20–40 ms of a bwrap launch and a fresh
    interpreter. A timeout, an output flood or a zygote that stops answering
    tears the namespace down. ``CVB_SANDBOX_ZYGOTE=0`` launches bwrap for every
    execution instead; so does a machine where a zygote cannot start.
``unshare``
    util-linux ``unshare`` with new PID, network, IPC and UTS namespaces. No
    network and every process dies with the namespace, but the code runs as
    the caller (root in CI) on the real file system: it **can** write or
    delete files anywhere the caller can.
``plain``
    A process group and rlimits only. **No** network isolation, no file
    system isolation, no PID namespace: the code can see and signal other
    processes of the same user (``os.kill(-1, 9)`` as root takes the machine
    down). Leftover processes are killed through the cgroup when there is one,
    else through a sub-reaper and the process group. Last resort only.

Semantics: the code and then the test run in one module namespace (the
HumanEval ``check`` convention), as module ``solution`` (so an
``if __name__ == "__main__":`` demo block does not run). The interpreter is
``sys.executable`` started with ``-S -P``: site-packages are on ``sys.path``
but ``.pth`` hooks are not executed (they cost 30–100 ms per start here and
are code from outside the benchmark).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "BACKENDS",
    "DEFAULT_LIMITS",
    "ExecResult",
    "Limits",
    "SandboxError",
    "SandboxInfo",
    "WeakSandboxWarning",
    "available_backends",
    "backend",
    "bwrap_fix",
    "choose",
    "info",
    "run_many",
    "run_python",
    "self_test",
    "with_backend",
]

BACKENDS = ("bwrap", "unshare", "plain")
ENV_BACKEND = "CVB_SANDBOX"
# Set to 0 to run without the pids cgroup (e.g. to exercise the plain fallback).
ENV_CGROUP = "CVB_SANDBOX_CGROUP"
MAX_TIMEOUT_S = 600.0


class SandboxError(RuntimeError):
    """No usable backend, or a forced backend that does not work on this machine."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one execution.

    ``cpu_s`` None means one second more than the wall-clock timeout, so that
    the wall clock usually decides and the CPU limit only stops CPU burnt in
    parallel by several processes.
    """

    memory_bytes: int = 1 << 30
    file_bytes: int = 64 << 20
    open_files: int = 256
    # processes + threads, enforced through a pids cgroup when there is one
    tasks: int = 64
    cpu_s: float | None = None
    output_keep_bytes: int = 64 << 10
    output_limit_bytes: int = 16 << 20
    tmpfs_bytes: int = 64 << 20


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class ExecResult:
    """The outcome of one execution.

    ``reason`` is the failing assertion or exception with the line it came from,
    ``"timed out after 5s"``, ``"killed by SIGKILL"``…, or ``"passed (0.04s)"``.
    ``test_line`` / ``solution_line`` locate the failure (1-based) when known.
    ``phase`` is how far the harness got: ``start`` (before the solution ran),
    ``solution``, ``test`` or ``done``.
    """

    passed: bool
    reason: str
    duration_s: float
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    backend: str = ""
    exit_code: int | None = None
    phase: str = "start"
    test_line: int | None = None
    solution_line: int | None = None


@dataclass(frozen=True, slots=True)
class SandboxInfo:
    """What a backend isolates on this machine."""

    backend: str
    network_isolated: bool
    pid_namespace: bool
    filesystem_isolated: bool
    # the cap on processes + threads, or None when nothing enforces one
    task_limit: int | None

    def describe(self) -> str:
        parts = [
            "own network" if self.network_isolated else "host network",
            "PID namespace" if self.pid_namespace else "no PID namespace",
            "read-only system view" if self.filesystem_isolated else "host file system",
            f"≤{self.task_limit} tasks" if self.task_limit else "no task limit",
        ]
        return f"{self.backend} ({', '.join(parts)})"


# --- the harness: runs inside the sandbox -----------------------------------
#
# Everything it needs after the solution starts running is bound to locals
# before, so that patching builtins, json, os or this module from the solution
# cannot change what it reports. Records on the result pipe are lines
# "<nonce> PHASE <name>", "<nonce> PASS" or "<nonce> FAIL key=hex ..."; the PASS line
# is built before any untrusted code runs and written only after the test
# returned normally. It imports nothing beyond os, resource and sys (json alone
# would add ~5 ms to every start).
_HARNESS = r"""
def _harness(workdir, nonce_fd, result_fd, mode, limits, path):
    import os, resource, sys
    # workdir is not used here: it names the run in ps and /proc/*/cmdline
    nonce_fd, result_fd = int(nonce_fd), int(result_fd)
    nonce = os.read(nonce_fd, 128).decode()
    os.close(nonce_fd)
    sources = []
    for name in (".cvb-solution", ".cvb-test"):
        with open(name, "rb") as f:
            sources.append(f.read().decode("utf-8", "surrogatepass"))
        os.unlink(name)  # the hidden test is not left lying around for the code to read
    code, test = sources
    for item in limits.split(","):
        name, want = item.split("=")
        res, want = getattr(resource, name), int(want)
        hard = resource.getrlimit(res)[1]
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        resource.setrlimit(res, (want, want + 1 if name == "RLIMIT_CPU" else want))
    sys.path.extend(p for p in path.split(os.pathsep) if p)
    if mode != "direct":
        # unshare and plain: stay as the parent of the code, so that the code's
        # os.getppid() is us and not the studio, and reap what it leaves behind.
        if mode == "supervise-reap":
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
            libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG = SIGKILL
        pid = os.fork()
        if pid:
            os.close(result_fd)
            status = os.waitpid(pid, 0)[1]
            me = os.getpid()
            for _ in range(100):
                kids = []
                for entry in os.listdir("/proc"):
                    if entry.isdigit():
                        try:
                            with open("/proc/%s/stat" % entry, "rb") as f:
                                stat = f.read()
                        except OSError:
                            continue
                        if int(stat[stat.rfind(b")") + 2 :].split()[1]) == me:
                            kids.append(int(entry))
                if not kids:
                    break
                for kid in kids:
                    try:
                        os.kill(kid, 9)
                    except OSError:
                        pass
                for kid in kids:
                    try:
                        os.waitpid(kid, 0)
                    except OSError:
                        pass
            rc = os.waitstatus_to_exitcode(status)
            os._exit(128 - rc if rc < 0 else rc)
    import builtins
    write, b_str, b_type, b_len, b_isinstance = os.write, str, type, len, isinstance
    exit_now, exc_base, syntax_error = os._exit, BaseException, SyntaxError
    run, b_compile = exec, compile
    pass_line = ("\n" + nonce + " PASS\n").encode()

    def phase(name):
        try:
            write(result_fd, ("\n" + nonce + " PHASE " + name + "\n").encode())
        except exc_base:
            pass

    def fail(where, exc):
        info = {"where": where}
        try:
            info["exc"] = b_str(b_type(exc).__name__)
            try:
                msg = b_str(exc)
            except exc_base:
                msg = "<unprintable message>"
            info["msg"] = msg[:600]
            if b_isinstance(exc, syntax_error) and exc.filename in ("<solution>", "<test>"):
                info["line_" + exc.filename[1:-1]] = exc.lineno
                info["msg"] = b_str(exc.msg)
            tb = exc.__traceback__
            last = None
            while tb is not None:
                fname, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
                if fname in ("<solution>", "<test>"):
                    info["line_" + fname[1:-1]] = line
                last = (fname, line)
                tb = tb.tb_next
            if last is not None and last[0] not in ("<solution>", "<test>"):
                info["inner"] = "%s:%d" % (last[0].rsplit("/", 1)[-1], last[1])
        except exc_base:
            pass
        parts = []
        for key, value in info.items():
            try:
                parts.append(key + "=" + b_str(value).encode("utf-8", "backslashreplace").hex())
            except exc_base:
                pass
        try:
            write(result_fd, ("\n" + nonce + " FAIL " + " ".join(parts) + "\n").encode())
        except exc_base:
            pass
        try:  # a traceback for the human reading stderr; cosmetic, so last
            import linecache, traceback
            for name, src in (("<solution>", code), ("<test>", test)):
                linecache.cache[name] = (b_len(src), None, src.splitlines(True), name)
            traceback.print_exception(exc)
            sys.stderr.flush()
        except exc_base:
            pass
        exit_now(1)

    module = b_type(sys)("solution")
    sys.modules["solution"] = module
    ns = module.__dict__
    ns["__builtins__"] = builtins
    phase("start")
    try:
        code_obj = b_compile(code, "<solution>", "exec", dont_inherit=True)
    except exc_base as exc:
        fail("compile-solution", exc)
    try:
        test_obj = b_compile(test, "<test>", "exec", dont_inherit=True)
    except exc_base as exc:
        fail("compile-test", exc)
    phase("solution")
    try:
        run(code_obj, ns)
    except exc_base as exc:
        fail("solution", exc)
    phase("test")
    try:
        run(test_obj, ns)
    except exc_base as exc:
        fail("test", exc)
    write(result_fd, pass_line)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except exc_base:
        pass
    exit_now(0)
"""

# A one-shot launch: the harness is the whole program.
_HARNESS_MAIN = _HARNESS + "\n_harness(*__import__('sys').argv[1:])\n"


# --- cgroups: a bound on processes that holds for root ----------------------


class _PidsCgroup:
    """Per-execution ``pids`` cgroups under one parent directory we may write.

    cgroup v1 (a ``pids`` hierarchy) and v2 (the unified hierarchy with the
    ``pids`` controller) are both handled; the directory of each execution is
    created before the launch and removed after its processes are killed.
    """

    def __init__(self, parent: Path) -> None:
        self.parent = parent
        self._stale: list[Path] = []
        self._lock = threading.Lock()
        self._seq = 0

    @classmethod
    def discover(cls) -> _PidsCgroup | None:
        if os.environ.get(ENV_CGROUP, "1") == "0":
            return None
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            rel = path.lstrip("/")
            if "pids" in controllers.split(","):
                base = Path("/sys/fs/cgroup/pids") / rel
            elif controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
                base = Path("/sys/fs/cgroup") / rel
                if "pids" not in (base / "cgroup.controllers").read_text().split():
                    continue
            else:
                continue
            group = cls._prepare(base, v2=controllers == "")
            if group is not None:
                return group
        return None

    @classmethod
    def _prepare(cls, base: Path, *, v2: bool) -> _PidsCgroup | None:
        parent = base / "cvb-sandbox"
        try:
            if v2:
                # The no-internal-process rule only lets this succeed where it
                # may (the root cgroup, or a delegated empty one).
                (base / "cgroup.subtree_control").write_text("+pids")
            parent.mkdir(exist_ok=True)
            if v2:
                (parent / "cgroup.subtree_control").write_text("+pids")
            cls._remove_orphans(parent)
            probe = parent / f"probe-{os.getpid()}-{secrets.token_hex(4)}"
            probe.mkdir()
            try:
                (probe / "pids.max").write_text("8")
            finally:
                probe.rmdir()
        except OSError:
            return None
        return cls(parent)

    @staticmethod
    def _remove_orphans(parent: Path) -> None:
        """Remove the empty groups of studio processes that died mid-run."""
        for child in parent.iterdir():
            owner = child.name.split("-")[1] if child.name.startswith("x-") else ""
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    child.rmdir()

    def create(self, tasks: int) -> Path | None:
        with self._lock:
            self._seq += 1
            name = f"x-{os.getpid()}-{self._seq}-{secrets.token_hex(3)}"
            stale, self._stale = self._stale, []
        for path in stale:
            self._remove(path)
        path = self.parent / name
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(tasks))
        except OSError:
            return None
        return path

    def kill(self, path: Path) -> None:
        """SIGKILL everything still in the group, until it is empty."""
        kill_file = path / "cgroup.kill"  # v2, Linux >= 5.14: atomic, no PID reuse race
        for _ in range(500):
            try:
                pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            if not pids:
                break
            if kill_file.exists():
                kill_file.write_text("1")
            else:
                # A pid read here can in theory be reused before the kill; the
                # window is microseconds and the group is tiny.
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)

    def remove(self, path: Path) -> None:
        """Remove an emptied group; if the kernel still holds it busy, at a later call."""
        if not self._remove(path):
            with self._lock:
                self._stale.append(path)

    @staticmethod
    def _remove(path: Path) -> bool:
        for _ in range(50):
            try:
                path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.005)
        return False


_CGROUP_LOCK = threading.Lock()
_CGROUP: dict[str, _PidsCgroup | None] = {}


def _cgroup() -> _PidsCgroup | None:
    key = os.environ.get(ENV_CGROUP, "1")
    with _CGROUP_LOCK:
        if key not in _CGROUP:
            _CGROUP[key] = _PidsCgroup.discover()
        return _CGROUP[key]


# --- launch commands per backend --------------------------------------------

# /etc entries the interpreter and common libraries read; the rest of /etc
# (shadow, ssh keys, pip credentials) stays out of the bwrap view.
_ETC = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "protocols",
    "services",
    "ssl",
    "timezone",
)


def _site_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    return [d for d in dict.fromkeys((paths["purelib"], paths["platlib"])) if os.path.isdir(d)]


#: Directories too wide to show the code whole, whatever lives in them.
_NEVER_BOUND = frozenset(
    {
        "/",
        "/tmp",
        "/var",
        "/var/tmp",
        "/home",
        "/root",
        "/dev",
        "/dev/shm",
        "/opt",
        "/srv",
        "/mnt",
        "/media",
        "/run",
        "/etc",
        "/proc",
        "/sys",
        "/boot",
    }
)


def _python_roots() -> list[str]:
    """Directories holding the interpreter, its stdlib and site-packages.

    Directories that ``.pth`` files point to elsewhere (an editable install of
    the project, say) are deliberately not among them.
    """
    candidates = [
        sys.base_prefix,
        sys.prefix,
        sys.exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *_site_dirs(),
    ]
    roots: list[str] = []
    for path in sorted({os.path.realpath(p) for p in candidates if os.path.isdir(p)}):
        if path == "/usr" or path.startswith("/usr/"):
            continue
        if path in _NEVER_BOUND:
            # An interpreter installed straight into /, /tmp or /home would
            # expose all of it: leave it out, and the self-test says why.
            continue
        if not any(path == r or path.startswith(r + "/") for r in roots):
            roots.append(path)
    return roots


_SITE_PATHS: list[str] | None = None


def _site_paths() -> list[str]:
    """site-packages and the directories their ``.pth`` files list (not their import hooks)."""
    global _SITE_PATHS
    if _SITE_PATHS is None:
        found = _site_dirs()
        for site_dir in list(found):
            for pth in sorted(Path(site_dir).glob("*.pth")):
                try:
                    lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()
                except OSError:
                    continue
                for line in lines:
                    line = line.strip()
                    if not line or line.startswith(("#", "import ", "import\t")):
                        continue
                    path = os.path.join(site_dir, line)
                    if os.path.isdir(path) and path not in found:
                        found.append(path)
        _SITE_PATHS = found
    return _SITE_PATHS


_TOOLS: dict[str, str | None] = {}


def _tool(name: str) -> str | None:
    """Absolute path of a program, looked up once on the studio's PATH (the child's is minimal)."""
    if name not in _TOOLS:
        _TOOLS[name] = shutil.which(name)
    return _TOOLS[name]


def _bwrap_prefix(workdir: str, limits: Limits, *, as_pid_1: bool = False) -> list[str]:
    args = [
        _tool("bwrap") or "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        *(["--as-pid-1"] if as_pid_1 else []),
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in _ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    size = str(limits.tmpfs_bytes)
    args += ["--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--proc", "/proc"]
    args += ["--size", size, "--tmpfs", "/tmp"]
    # After the private /tmp and /dev/shm: mounted before them, an interpreter
    # that lives there (a venv under /tmp, as CI layouts have) would be hidden.
    for root in _python_roots():
        args += ["--ro-bind", root, root]
    args += ["--bind", workdir, workdir, "--chdir", workdir]
    args += ["--remount-ro", "/", "--"]
    return args


def _unshare_prefix() -> list[str]:
    args = [_tool("unshare") or "unshare", "--net", "--pid", "--ipc", "--uts", "--fork"]
    args += ["--mount-proc", "--kill-child"]
    if os.geteuid() != 0:
        args.append("--map-root-user")
    return [*args, "--"]


def _env(workdir: str) -> dict[str, str]:
    """The child's whole environment: an allow-list, nothing inherited."""
    bin_dir = os.path.dirname(sys.executable)
    return {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": workdir,
        "PWD": workdir,
        "TMPDIR": workdir,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        # one thread per numeric library: threads count against the task limit
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _rlimits(timeout_s: float, limits: Limits) -> list[tuple[str, int]]:
    cpu = limits.cpu_s if limits.cpu_s is not None else timeout_s + 1
    return [
        ("RLIMIT_CPU", max(1, int(cpu + 0.999))),
        ("RLIMIT_AS", limits.memory_bytes),
        ("RLIMIT_FSIZE", limits.file_bytes),
        ("RLIMIT_NOFILE", limits.open_files),
        ("RLIMIT_CORE", 0),
    ]


# --- the parent side ---------------------------------------------------------


@dataclass
class _Stream:
    keep: int
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    def text(self) -> str:
        out = self.data.decode("utf-8", errors="replace")
        if self.total > len(self.data):
            out += f"\n[... {self.total - len(self.data)} more bytes discarded]"
        return out


@dataclass
class _Verdict:
    phase: str = ""
    passed: bool = False
    failure: dict[str, object] | None = None


class _ResultChannel:
    """Parses the harness's records as they arrive, keeping only the verdict.

    Nothing is buffered but the current line (capped), so code that floods the
    result pipe cannot push the verdict out of a buffer or grow our memory;
    lines without this execution's nonce are ignored.
    """

    MAX_LINE = 16 << 10

    def __init__(self, nonce: str) -> None:
        self.prefix = nonce.encode() + b" "
        self.verdict = _Verdict()
        self._line = bytearray()
        self._skipping = False

    def add(self, chunk: bytes) -> None:
        *complete, rest = chunk.split(b"\n")
        for piece in complete:
            if not self._skipping:
                self._line += piece
                self._record(bytes(self._line))
            self._line.clear()
            self._skipping = False
        if not self._skipping:
            self._line += rest
            if len(self._line) > self.MAX_LINE:
                self._line.clear()
                self._skipping = True

    def _record(self, line: bytes) -> None:
        if not line.startswith(self.prefix):
            return
        rest = line[len(self.prefix) :]
        verdict = self.verdict
        if rest.startswith(b"PHASE "):
            verdict.phase = rest[6:].decode("ascii", errors="replace")
        elif rest == b"PASS":
            verdict.passed, verdict.failure = True, None
        elif rest.startswith(b"FAIL "):
            failure: dict[str, object] = {}
            for part in rest[5:].split():
                key, _, value = part.partition(b"=")
                try:
                    text = bytes.fromhex(value.decode("ascii")).decode("utf-8", "replace")
                except ValueError:
                    continue
                name = key.decode("ascii", "replace")
                failure[name] = int(text) if name.startswith("line_") and text.isdigit() else text
            verdict.passed, verdict.failure = False, failure


def _parse_results(data: bytes, nonce: str) -> _Verdict:
    """The verdict in a complete result stream (for tests and tools)."""
    channel = _ResultChannel(nonce)
    channel.add(data + b"\n")
    return channel.verdict


def _line_text(source: str, line: object) -> str:
    if not isinstance(line, int) or line < 1:
        return ""
    lines = source.splitlines()
    if line > len(lines):
        return ""
    text = lines[line - 1].strip()
    return text if len(text) <= 120 else text[:117] + "..."


def _failure_reason(failure: dict[str, object], code: str, test: str) -> str:
    exc = str(failure.get("exc", "error"))
    msg = " ".join(str(failure.get("msg", "")).split())
    if len(msg) > 300:
        msg = msg[:297] + "..."
    head = f"{exc}: {msg}" if msg else exc
    if exc == "MemoryError":
        head += " (memory limit reached)"
    where = failure.get("where")
    solution_at = _at("solution", failure.get("line_solution"), code)
    test_at = _at("test", failure.get("line_test"), test)
    if where == "compile-solution":
        return f"solution does not compile: {head}{solution_at}"
    if where == "compile-test":
        return f"test does not compile: {head}{test_at}"
    if where == "solution":
        return f"solution raised {head}{solution_at}"
    if exc == "AssertionError" and test_at and not solution_at:
        # the test's own assertion: its line says more than the (usually empty) message
        return f"AssertionError{test_at}" + (f" ({msg})" if msg else "")
    if solution_at and test_at:
        return f"{head}{solution_at} (called{test_at.replace(' at ', ' from ', 1)})"
    if solution_at or test_at:
        return f"{head}{solution_at or test_at}"
    inner = failure.get("inner")
    return f"{head} (in {inner})" if inner else head


def _at(label: str, line: object, source: str) -> str:
    """`` at test line 3: assert f(1) == 2`` — or empty when the line is unknown."""
    if not isinstance(line, int):
        return ""
    text = _line_text(source, line)
    return f" at {label} line {line}" + (f": {text}" if text else "")


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _exit_reason(returncode: int | None, phase: str) -> str:
    when = {
        "start": "before the solution ran",
        "solution": "while the solution ran",
        "test": "during the test",
    }.get(phase, "before the harness started")
    if returncode is None:
        return f"no verdict from the harness {when}"
    sig = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if sig:
        if sig == signal.SIGXCPU:
            return f"killed: CPU time limit {when}"
        return f"killed by {_signal_name(sig)} {when}"
    return f"exited with status {returncode} {when}, without a verdict"


def _write_sources(workdir: str, code: str, test: str) -> None:
    for fname, source in ((".cvb-solution", code), (".cvb-test", test)):
        with open(os.path.join(workdir, fname), "wb") as f:
            f.write(source.encode("utf-8", "surrogatepass"))


def _nonce_pipe(nonce: str) -> int:
    """A pipe holding the nonce, read end returned: the harness reads it, nobody else can."""
    nonce_r, nonce_w = os.pipe()
    os.write(nonce_w, nonce.encode())
    os.close(nonce_w)
    return nonce_r


class _Watch(Protocol):
    """How ``_collect`` learns that the harness process has exited."""

    def fileno(self) -> int:
        """A descriptor readable when something happened; -1 to be polled instead."""
        ...

    def exited(self) -> bool:
        """Consume what is readable; True once the harness has exited."""
        ...

    def reap(self) -> None:
        """The harness exited: kill whatever it left behind."""
        ...


class _ProcWatch:
    """A launched process, through a pidfd when the kernel has them."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pidfd = -1
        with contextlib.suppress(OSError):
            self.pidfd = os.pidfd_open(proc.pid)

    def fileno(self) -> int:
        return self.pidfd

    def exited(self) -> bool:
        return self.pidfd >= 0 or self.proc.poll() is not None

    def reap(self) -> None:
        _kill_group(self.proc)

    def close(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


def _finish(
    *,
    code: str,
    test: str,
    name: str,
    channel: _ResultChannel,
    out: _Stream,
    err: _Stream,
    timed_out: bool,
    flooded: bool,
    duration: float,
    returncode: int | None,
    timeout_s: float,
    limits: Limits,
) -> ExecResult:
    """The result of one execution, from what the harness reported and how it ended."""
    verdict = channel.verdict
    phase = verdict.phase or "start"
    failure = verdict.failure or {}
    test_line = failure.get("line_test")
    solution_line = failure.get("line_solution")
    passed = False
    if timed_out:
        reason = f"timed out after {timeout_s:g}s"
    elif flooded:
        reason = f"output limit exceeded: more than {_mib(limits.output_limit_bytes)} written"
    elif verdict.passed:
        passed = True
        reason = f"passed ({duration:.2f}s)"
        phase = "done"
    elif verdict.failure is not None:
        reason = _failure_reason(verdict.failure, code, test)
    else:
        reason = _exit_reason(returncode, verdict.phase)
    return ExecResult(
        passed=passed,
        reason=reason,
        duration_s=duration,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        backend=name,
        exit_code=returncode,
        phase=phase,
        test_line=test_line if isinstance(test_line, int) else None,
        solution_line=solution_line if isinstance(solution_line, int) else None,
    )


def _execute(code: str, test: str, timeout_s: float, limits: Limits, name: str) -> ExecResult:
    """One execution in a process launched for it alone (every backend; the bwrap self-test)."""
    workdir = tempfile.mkdtemp(prefix="cvb-sbx-")
    group = _cgroup()
    cg_path = group.create(limits.tasks) if group is not None else None
    nonce = secrets.token_hex(16)
    channel = _ResultChannel(nonce)
    proc: subprocess.Popen[bytes] | None = None
    watch: _ProcWatch | None = None
    fds: list[int] = []
    start = time.monotonic()
    try:
        _write_sources(workdir, code, test)
        nonce_r = _nonce_pipe(nonce)
        fds.append(nonce_r)
        result_r, result_w = os.pipe()
        fds += [result_r, result_w]
        mode = (
            "direct" if name == "bwrap" else "supervise" if name == "unshare" else "supervise-reap"
        )
        rlimits = _rlimit_arg(timeout_s, limits)
        python = [sys.executable, "-S", "-P", "-c", _HARNESS_MAIN, workdir, str(nonce_r)]
        python += [str(result_w), mode, rlimits, os.pathsep.join(_site_paths())]
        if name == "bwrap":
            argv = _bwrap_prefix(workdir, limits) + python
        elif name == "unshare":
            argv = _unshare_prefix() + python
        else:
            argv = python
        if cg_path is not None:
            argv = _join_cgroup(cg_path, argv)
        start = time.monotonic()
        # No preexec_fn (unsafe in the threaded studio): limits are set by the harness.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(workdir),
            cwd=workdir,
            pass_fds=(nonce_r, result_w),
            start_new_session=True,
        )
        for fd in (nonce_r, result_w):
            os.close(fd)
            fds.remove(fd)
        assert proc.stdout is not None and proc.stderr is not None
        watch = _ProcWatch(proc)
        out, err, timed_out, flooded, end = _collect(
            proc.stdout.fileno(),
            proc.stderr.fileno(),
            result_r,
            channel,
            watch,
            start,
            timeout_s,
            limits,
        )
    finally:
        if watch is not None:
            watch.close()
        _end_launch(proc, group, cg_path)
        if proc is not None:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        for fd in fds:
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
    return _finish(
        code=code,
        test=test,
        name=name,
        channel=channel,
        out=out,
        err=err,
        timed_out=timed_out,
        flooded=flooded,
        duration=end - start,
        returncode=proc.returncode if proc else None,
        timeout_s=timeout_s,
        limits=limits,
    )


def _rlimit_arg(timeout_s: float, limits: Limits) -> str:
    return ",".join(f"{k}={v}" for k, v in _rlimits(timeout_s, limits))


def _join_cgroup(cg_path: Path, argv: list[str]) -> list[str]:
    """Join the cgroup before anything can fork: a shell moves itself, then execs."""
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cg_path / "cgroup.procs"), *argv]


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def _collect(
    out_fd: int,
    err_fd: int,
    result_fd: int,
    channel: _ResultChannel,
    watch: _Watch,
    start: float,
    timeout_s: float,
    limits: Limits,
) -> tuple[_Stream, _Stream, bool, bool, float]:
    """Drain stdout, stderr and the result pipe until the harness exits or time runs out."""
    out, err = _Stream(limits.output_keep_bytes), _Stream(limits.output_keep_bytes)
    streams: dict[int, _Stream | _ResultChannel] = {out_fd: out, err_fd: err, result_fd: channel}
    sel = selectors.DefaultSelector()
    for fd in streams:
        sel.register(fd, selectors.EVENT_READ)
    watch_fd = watch.fileno()
    if watch_fd >= 0:
        sel.register(watch_fd, selectors.EVENT_READ)
    deadline = start + timeout_s
    timed_out = flooded = False
    exited_at: float | None = None
    try:
        while streams:
            now = time.monotonic()
            if exited_at is None:
                wait = deadline - now
                if wait <= 0:
                    timed_out = True
                    break
                if watch_fd < 0:
                    wait = min(wait, 0.02)
            else:
                # The harness is gone; whatever still holds a pipe open is a
                # straggler about to be killed. Drain what is there, briefly.
                wait = exited_at + 0.2 - now
                if wait <= 0:
                    break
            for key, _ in sel.select(wait):
                fd = int(key.fd)
                if fd == watch_fd:
                    if watch.exited():
                        sel.unregister(watch_fd)
                        exited_at = time.monotonic()
                        watch.reap()
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    sel.unregister(fd)
                    del streams[fd]
                    continue
                streams[fd].add(chunk)
            if out.total + err.total > limits.output_limit_bytes:
                flooded = True
                break
            if exited_at is None and watch_fd < 0 and watch.exited():
                exited_at = time.monotonic()
        if exited_at is None and not timed_out and not flooded:
            # All pipes closed: the harness is done or about to be.
            exited_at = _wait_exit(watch, deadline)
            timed_out = exited_at is None
        end = exited_at if exited_at is not None and not timed_out else time.monotonic()
        return out, err, timed_out, flooded, end
    finally:
        sel.close()


def _wait_exit(watch: _Watch, deadline: float) -> float | None:
    """When the harness exits, before ``deadline``; None if it does not."""
    watch_fd = watch.fileno()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        if watch_fd >= 0:
            with selectors.DefaultSelector() as sel:
                sel.register(watch_fd, selectors.EVENT_READ)
                ready = sel.select(remaining)
            if ready and watch.exited():
                return time.monotonic()
        elif watch.exited():
            return time.monotonic()
        else:
            time.sleep(min(remaining, 0.01))


def _end_launch(
    proc: subprocess.Popen[bytes] | None, group: _PidsCgroup | None, cg_path: Path | None
) -> None:
    """Kill a launch's process group and everything in its cgroup, reap it, remove the cgroup."""
    if proc is not None:
        _kill_group(proc)
    if cg_path is not None and group is not None:
        group.kill(cg_path)
    if proc is not None:
        proc.wait()
    if cg_path is not None and group is not None:
        group.remove(cg_path)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the launch's process group (the pid is not reaped yet, so it cannot be reused)."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


# --- the zygote: a pre-started harness inside one bwrap namespace -------------
#
# Starting bwrap and a fresh interpreter costs 20-40 ms per execution, more than
# most tests take. A zygote is a Python process started once inside a bwrap
# namespace, as its PID 1, that forks one child per execution. What each child
# gets is what a one-shot launch gets — the same namespaces and read-only view,
# the harness with its nonce, rlimits, a fresh working directory, the scrubbed
# environment — and what it could leave behind is removed before the next one:
#
# * processes: after the child exits, the zygote SIGKILLs every other process
#   of its PID namespace (``kill(-1)`` from PID 1) and reaps them all;
# * files: the working directory is removed by the studio; the private /tmp
#   and /dev/shm are emptied by the zygote;
# * the zygote itself: a process cannot signal its namespace's init (except
#   with signals init handles; only SIGINT would be, and it is ignored), and
#   the zygote is not dumpable, so the code cannot ptrace it or write its
#   memory through /proc/1/mem;
# * anything unusual (timeout, output flood, a zygote that does not answer)
#   tears the whole namespace down; the next execution starts a new one.
#
# The pids cgroup of a zygote holds the namespace's processes, so the task
# limit bounds each execution the way it bounds a one-shot launch.
_ZYGOTE = r"""
def _zygote(ctl_fd, path, root, mounts=""):
    # root names the zygote, and every fork of it, in ps; it and mounts (the
    # interpreter's read-only binds, when they live under /tmp) survive a sweep
    import ctypes, os, shutil, signal, socket
    keep = [root] + [m for m in mounts.split(os.pathsep) if m]
    for name in ("collections", "copy", "dataclasses", "datetime", "decimal", "fractions",
                 "functools", "hashlib", "heapq", "itertools", "json", "math", "operator",
                 "random", "re", "statistics", "string", "typing"):
        try:  # what tests usually import; random reseeds itself in each fork
            __import__(name)
        except BaseException:
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    base_env = dict(os.environ)
    ctl = socket.socket(fileno=int(ctl_fd))
    ctl_no = ctl.fileno()

    def sweep():
        for _ in range(100):
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    break
            if not [p for p in os.listdir("/proc") if p.isdigit() and p != "1"]:
                break
        clean("/tmp")
        clean("/dev/shm")
        clean(root)  # the working directory, and whatever the code put beside it

    def clean(top):
        # empty a private tmpfs, but for the bind mounts kept (and the way to them)
        for entry in os.listdir(top):
            where = os.path.join(top, entry)
            if where in keep:
                continue
            if any(k.startswith(where + "/") for k in keep):
                clean(where)
            elif os.path.isdir(where) and not os.path.islink(where):
                shutil.rmtree(where, ignore_errors=True)
            else:
                try:
                    os.unlink(where)
                except OSError:
                    pass

    ctl.sendall(b"R\n")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 4)
        except OSError:
            os._exit(0)
        if not msg or len(fds) != 4:
            os._exit(0)  # the studio is gone
        workdir, limits = msg.decode().split("\0")
        out_fd, err_fd, nonce_fd, result_fd = fds
        pid = os.fork()
        if pid == 0:
            try:
                null = os.open("/dev/null", os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(out_fd, 1)
                os.dup2(err_fd, 2)
                low, high = sorted((nonce_fd, result_fd))
                os.closerange(3, low)
                os.closerange(low + 1, high)
                os.closerange(high + 1, 1 << 16)
                ctl.detach()
                os.chdir(workdir)
                os.environ.clear()
                os.environ.update(base_env, HOME=workdir, PWD=workdir, TMPDIR=workdir)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                libc.prctl(4, 1, 0, 0, 0)
                os.setsid()
            except BaseException:
                os._exit(71)
            _harness(workdir, nonce_fd, result_fd, "direct", limits, path)
            os._exit(70)
        for fd in fds:
            os.close(fd)
        status = -1
        while True:
            try:
                status = os.waitpid(pid, 0)[1]
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            break
        try:
            ctl.sendall(b"E %d\n" % status)
            sweep()
            ctl.sendall(b"D\n")
        except OSError:
            os._exit(0)


_zygote(*__import__("sys").argv[1:])
"""

ENV_ZYGOTE = "CVB_SANDBOX_ZYGOTE"
_ZYGOTE_START_S = 20.0
# How long a zygote may take to clean up after an execution before it is torn down.
_ZYGOTE_SWEEP_S = 2.0
_ZYGOTE_IDLE_MAX = 8
# An idle zygote is closed after this long: a studio left open holds no processes,
# and a batch of executions (audit, lint, re-scoring) keeps reusing its zygotes.
_ZYGOTE_IDLE_S = 1.0


class _ZygoteLost(RuntimeError):
    """The zygote died or stopped answering."""


class _Zygote:
    """One pre-started harness in its own bwrap namespace (and pids cgroup, when there is one)."""

    def __init__(self, key: tuple[object, ...], root: str, limits: Limits) -> None:
        self.key = key
        self.root = root
        self.group = _cgroup()
        self.cg_path: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.ctl: socket.socket | None = None
        self._buffer = b""
        self.status: int | None = None
        self.lost = False
        self.idle_since = 0.0
        # the zygote's own stderr, read only when it fails to start
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._start(limits)

    # -- life cycle

    def _start(self, limits: Limits) -> None:
        ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ctl = ctl
        try:
            if self.group is not None:
                # the outer bwrap and the zygote count too
                self.cg_path = self.group.create(limits.tasks + 2)
            python = [sys.executable, "-S", "-P", "-c", _HARNESS + _ZYGOTE, str(theirs.fileno())]
            python += [os.pathsep.join(_site_paths()), self.root, os.pathsep.join(_python_roots())]
            argv = _bwrap_prefix(self.root, limits, as_pid_1=True) + python
            if self.cg_path is not None:
                argv = _join_cgroup(self.cg_path, argv)
            self.proc = _spawn(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                env=_env(self.root),
                cwd=self.root,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        finally:
            theirs.close()
        if self._read_line(time.monotonic() + _ZYGOTE_START_S) != b"R":
            self._log.seek(0)
            log = self._log.read(2000).decode("utf-8", "replace").strip()
            self.close()
            raise _ZygoteLost(f"the zygote did not start: {log or 'no output'}")

    def close(self) -> None:
        """Kill the namespace and everything in it; remove the root and the cgroup."""
        _end_launch(self.proc, self.group, self.cg_path)
        self.proc, self.cg_path = None, None
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def pids(self) -> list[int]:
        """Host pids of the zygote's own processes (outer bwrap, the zygote)."""
        if self.proc is None:
            return []
        found = [self.proc.pid]
        with contextlib.suppress(OSError):
            for line in (
                Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            ):
                found.append(int(line))
        return found

    # -- the control socket

    def _read_line(self, deadline: float) -> bytes | None:
        """The next line from the zygote, or None when it is gone or silent past ``deadline``."""
        assert self.ctl is not None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            with selectors.DefaultSelector() as sel:
                sel.register(self.ctl, selectors.EVENT_READ)
                if not sel.select(remaining):
                    return None
            chunk = self.ctl.recv(4096)
            if not chunk:
                self.lost = True
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    # -- _Watch, for _collect

    def fileno(self) -> int:
        assert self.ctl is not None
        return self.ctl.fileno()

    def exited(self) -> bool:
        if self.status is not None or self.lost:
            return True
        assert self.ctl is not None
        try:
            chunk = self.ctl.recv(4096, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            self.lost = True
            return True
        self._buffer += chunk
        if b"\n" in self._buffer:
            line = self._read_line(time.monotonic())
            if line is not None and line.startswith(b"E "):
                self.status = int(line[2:])
        return self.status is not None

    def reap(self) -> None:
        """Nothing to do here: the zygote sweeps its namespace itself."""

    # -- one execution

    def execute(
        self, code: str, test: str, timeout_s: float, limits: Limits
    ) -> tuple[ExecResult, bool]:
        """Run one execution; the result and whether this zygote can be used again."""
        assert self.ctl is not None
        workdir = tempfile.mkdtemp(prefix="cvb-sbx-", dir=self.root)
        nonce = secrets.token_hex(16)
        channel = _ResultChannel(nonce)
        self.status = None
        theirs: list[int] = []
        ours: list[int] = []
        reusable = False
        try:
            _write_sources(workdir, code, test)
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            result_r, result_w = os.pipe()
            ours += [out_r, err_r, result_r]
            theirs += [out_w, err_w, result_w]
            nonce_r = _nonce_pipe(nonce)
            theirs.insert(2, nonce_r)
            start = time.monotonic()
            message = f"{workdir}\0{_rlimit_arg(timeout_s, limits)}".encode()
            try:
                socket.send_fds(self.ctl, [message], theirs)
            except OSError as exc:
                # died while idle (killed from outside): nothing ran, try another
                self.lost = True
                raise _ZygoteLost(f"the zygote is gone: {exc}") from exc
            for fd in theirs:
                os.close(fd)
            theirs.clear()
            out, err, timed_out, flooded, end = _collect(
                out_r, err_r, result_r, channel, self, start, timeout_s, limits
            )
            if not (timed_out or flooded or self.lost):
                reusable = self._read_line(time.monotonic() + _ZYGOTE_SWEEP_S) == b"D"
        finally:
            for fd in theirs + ours:
                os.close(fd)
            shutil.rmtree(workdir, ignore_errors=True)
        status = self.status
        returncode = (
            os.waitstatus_to_exitcode(status) if status is not None and status >= 0 else None
        )
        result = _finish(
            code=code,
            test=test,
            name="bwrap",
            channel=channel,
            out=out,
            err=err,
            timed_out=timed_out,
            flooded=flooded,
            duration=end - start,
            returncode=returncode,
            timeout_s=timeout_s,
            limits=limits,
        )
        return result, reusable


class _ZygotePool:
    """Idle zygotes, taken by one execution at a time and returned when still clean."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Zygote] = []
        self._disabled: str | None = None
        self._janitor: threading.Thread | None = None

    def run(self, code: str, test: str, timeout_s: float, limits: Limits) -> ExecResult | None:
        """One execution in a zygote; None when zygotes do not work here (use a one-shot launch)."""
        key = (tempfile.gettempdir(), limits.tmpfs_bytes, limits.tasks)
        for _ in range(3):
            zygote = self._take(key, limits)
            if zygote is None:
                return None
            try:
                result, reusable = zygote.execute(code, test, timeout_s, limits)
            except _ZygoteLost:
                zygote.close()
                continue
            except BaseException:
                zygote.close()
                raise
            if reusable:
                self._give_back(zygote)
            else:
                zygote.close()
            return result
        return None

    def _take(self, key: tuple[object, ...], limits: Limits) -> _Zygote | None:
        stale: list[_Zygote] = []
        with self._lock:
            if self._disabled is not None:
                return None
            found = None
            for zygote in list(self._idle):
                if zygote.key == key and found is None:
                    found = zygote
                elif zygote.key != key:
                    stale.append(zygote)
            self._idle = [z for z in self._idle if z is not found and z not in stale]
        for zygote in stale:
            zygote.close()
        if found is not None:
            return found
        root = tempfile.mkdtemp(prefix="cvb-zygote-")
        try:
            return _Zygote(key, root, limits)
        except (OSError, _ZygoteLost) as exc:
            shutil.rmtree(root, ignore_errors=True)
            with self._lock:
                self._disabled = f"{type(exc).__name__}: {exc}"
            return None

    def _give_back(self, zygote: _Zygote) -> None:
        with self._lock:
            if len(self._idle) < _ZYGOTE_IDLE_MAX:
                zygote.idle_since = time.monotonic()
                self._idle.append(zygote)
                if self._janitor is None:
                    self._janitor = threading.Thread(
                        target=self._retire_idle, name="cvb-zygote-janitor", daemon=True
                    )
                    self._janitor.start()
                return
        zygote.close()

    def _retire_idle(self) -> None:
        """Close zygotes idle for ``_ZYGOTE_IDLE_S``; end when none is left."""
        while True:
            time.sleep(_ZYGOTE_IDLE_S / 4)
            now = time.monotonic()
            with self._lock:
                expired = [z for z in self._idle if now - z.idle_since > _ZYGOTE_IDLE_S]
                self._idle = [z for z in self._idle if z not in expired]
                done = not self._idle
                if done:
                    self._janitor = None
            for zygote in expired:
                zygote.close()
            if done:
                return

    def shutdown(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._disabled = None
        for zygote in idle:
            zygote.close()

    def pids(self) -> list[int]:
        with self._lock:
            return [pid for zygote in self._idle for pid in zygote.pids()]


_POOL = _ZygotePool()
# bwrap's --die-with-parent ties a zygote to the *thread* that started it
# (PR_SET_PDEATHSIG follows the parent thread), so zygotes are started from one
# thread that lives as long as the process.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cvb-zygote-spawner")


def _forget_zygotes_in_child() -> None:
    """A forked copy of this process must not talk to its parent's zygotes."""
    global _POOL, _SPAWNER
    _POOL = _ZygotePool()
    _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cvb-zygote-spawner")


os.register_at_fork(after_in_child=_forget_zygotes_in_child)
atexit.register(lambda: _POOL.shutdown())


def _spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, **kwargs)

    return _SPAWNER.submit(start).result()


def shutdown() -> None:
    """Stop the idle zygotes (they are also stopped at exit, and die with this process)."""
    _POOL.shutdown()


def zygote_pids() -> list[int]:
    """Host pids of the idle zygotes' own processes: sandbox infrastructure, not leftovers."""
    return _POOL.pids()


# --- backend selection --------------------------------------------------------

_PROBE_LOCK = threading.Lock()
_PROBES: dict[str, str | None] = {}

_PROBE_TEST = {
    # The probe proves the isolation is in effect, not merely that something ran.
    "bwrap": "import os, socket\n"
    "assert x == 1\n"
    "assert os.getpid() <= 3, os.getpid()\n"
    "assert [n for _, n in socket.if_nameindex()] == ['lo']\n"
    "assert not os.path.exists('/root/.bash_history') and not os.path.exists('/home')\n",
    "unshare": "import os, socket\n"
    "assert x == 1\n"
    "assert os.getpid() <= 3, os.getpid()\n"
    "assert [n for _, n in socket.if_nameindex()] == ['lo']\n",
    "plain": "assert x == 1\n",
}


def self_test(name: str) -> str | None:
    """Self-test backend ``name``: None when it works here, else why not. Cached per process."""
    with _PROBE_LOCK:
        if name in _PROBES:
            return _PROBES[name]
        problem: str | None = None
        if name == "bwrap" and _tool("bwrap") is None:
            problem = "bwrap is not installed (not on PATH)"
        elif name == "unshare" and _tool("unshare") is None:
            problem = "unshare (util-linux) is not installed"
        else:
            try:
                result = _execute("x = 1\n", _PROBE_TEST[name], 10.0, DEFAULT_LIMITS, name)
            except OSError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if not result.passed:
                    problem = f"self-test failed: {result.reason}; {result.stderr.strip()[:300]}"
        _PROBES[name] = problem
        return problem


def available_backends() -> list[str]:
    """The backends that pass their self-test on this machine, strongest first."""
    return [name for name in BACKENDS if self_test(name) is None]


#: What each backend weaker than bwrap leaves open, for the warning and for ``cvb doctor``.
WEAKNESS = {
    "unshare": "the code runs as you on the real file system: it can write, delete and "
    "plant files anywhere you can (no network, its processes die with it)",
    "plain": "no isolation at all: the code can read and change your files, reach the "
    "network and signal your processes",
}


class WeakSandboxWarning(UserWarning):
    """Model code is about to run on a backend weaker than bwrap, because the user named it."""


def bwrap_fix(problem: str) -> str:
    """How to make bwrap work, given why its self-test failed."""
    if "not installed" in problem:
        return "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
    if any(
        s in problem for s in ("uid map", "user namespace", "Operation not permitted", "setting up")
    ):
        return (
            "allow unprivileged user namespaces (e.g. sysctl -w kernel.unprivileged_userns_clone=1, "
            "or on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0), or run as root"
        )
    return "see the self-test's message above; `cvb doctor` shows every backend"


def _refusal(problem: str) -> str:
    return (
        f"model code runs only in the bwrap sandbox, and bwrap does not work here: {problem}. "
        f"Fix: {bwrap_fix(problem)}. To run on a weaker backend anyway, name it: "
        f"--sandbox unshare (no file-system isolation) or --sandbox plain (no isolation at "
        f"all), or set {ENV_BACKEND}. `cvb doctor` shows what this machine offers."
    )


_WARNED: set[str] = set()


def backend() -> str:
    """The backend ``run_python`` uses: bwrap, or the one ``CVB_SANDBOX`` names.

    There is no silent fallback: when bwrap does not work and no backend is
    named, this raises, with what is missing and how to install it. A weaker
    backend, when named, works with a :class:`WeakSandboxWarning` (once per
    process).

    Raises:
        SandboxError: bwrap does not work and no backend is named, or the one
            named is unknown or does not work here.
    """
    forced = os.environ.get(ENV_BACKEND, "").strip()
    if not forced:
        problem = self_test("bwrap")
        if problem is not None:
            raise SandboxError(_refusal(problem))
        return "bwrap"
    if forced not in BACKENDS:
        raise SandboxError(f"{ENV_BACKEND}={forced!r}: expected one of {', '.join(BACKENDS)}")
    problem = self_test(forced)
    if problem is not None:
        raise SandboxError(f"{ENV_BACKEND}={forced} does not work here: {problem}")
    if forced != "bwrap" and forced not in _WARNED:
        _WARNED.add(forced)
        warnings.warn(
            f"model code runs on the {forced} sandbox backend, as asked: {WEAKNESS[forced]}",
            WeakSandboxWarning,
            stacklevel=2,
        )
    return forced


def choose(name: str | None) -> str:
    """Apply a ``--sandbox`` choice to this process and its children, and return the
    backend model code will run on (see :func:`backend`).

    Args:
        name: a backend the user named, or None to keep ``CVB_SANDBOX`` / bwrap.
    """
    if name:
        os.environ[ENV_BACKEND] = name
    return backend()


def with_backend(params: dict[str, Any], name: str | None) -> dict[str, Any]:
    """A run's params with backend ``name`` among those that judged it (``sandbox``,
    strongest first: a resume or a re-score on another machine may add one; None
    when this pass executes no model code)."""
    seen = {str(b) for b in params.get("sandbox") or ()} | ({name} if name else set())
    return {**params, "sandbox": [b for b in BACKENDS if b in seen]}


def info(name: str | None = None) -> SandboxInfo:
    """What ``name`` (default: the current backend) isolates on this machine."""
    name = name or backend()
    isolated = name in ("bwrap", "unshare")
    group = _cgroup()
    return SandboxInfo(
        backend=name,
        network_isolated=isolated,
        pid_namespace=isolated,
        filesystem_isolated=name == "bwrap",
        task_limit=DEFAULT_LIMITS.tasks if group is not None else None,
    )


# --- public API ----------------------------------------------------------------


def run_python(
    code: str,
    test: str,
    *,
    timeout_s: float = 5.0,
    limits: Limits = DEFAULT_LIMITS,
    backend_name: str | None = None,
) -> ExecResult:
    """Run ``code`` then ``test`` in one namespace in a fresh sandboxed process.

    Args:
        code: the solution (model-written).
        test: the test, run after the solution in the same module namespace;
            it passes when it returns normally.
        timeout_s: wall-clock limit for the whole execution, start-up included.
        limits: resource limits.
        backend_name: one of ``BACKENDS``; default :func:`backend`.

    Returns:
        An :class:`ExecResult`. Problems of the code are results, not exceptions.

    Raises:
        SandboxError: no backend works, or the one asked for does not.
        ValueError: a timeout outside (0, 600].
    """
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise ValueError(f"timeout_s must be in (0, {MAX_TIMEOUT_S:g}], got {timeout_s}")
    name = backend_name or backend()
    if name not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {name!r}")
    if backend_name is not None and (problem := self_test(name)) is not None:
        raise SandboxError(f"backend {name} does not work here: {problem}")
    if name == "bwrap" and os.environ.get(ENV_ZYGOTE, "1") != "0":
        result = _POOL.run(code, test, timeout_s, limits)
        if result is not None:
            return result
    return _execute(code, test, timeout_s, limits, name)


def run_many(
    items: Iterable[tuple[str, str]],
    *,
    workers: int = 2,
    timeout_s: float = 5.0,
    limits: Limits = DEFAULT_LIMITS,
    backend_name: str | None = None,
) -> list[ExecResult]:
    """Run ``(code, test)`` pairs with up to ``workers`` sandboxed processes at a time.

    Results come back in the order of ``items``.
    """
    jobs: Sequence[tuple[str, str]] = list(items)
    name = backend_name or backend()
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="cvb-sandbox") as pool:
        return list(
            pool.map(
                lambda job: run_python(
                    job[0], job[1], timeout_s=timeout_s, limits=limits, backend_name=name
                ),
                jobs,
            )
        )
