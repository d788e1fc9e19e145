"""Launching the harness: its program, the command lines around it, its environment.

The programs are files of this package (:mod:`cvb_engine.sandbox.harness`,
:mod:`cvb_engine.sandbox.zygote`), read here once and given to the interpreter
with ``-c``; the child never imports ``cvb_engine``. The prefixes put a
command inside a backend's isolation (the table in
:mod:`cvb_engine.sandbox.backends` says which backend uses which); for bwrap
they also build its read-only view of the machine.

Public for tests and tools: :data:`HARNESS_PROGRAM`, :data:`ZYGOTE_PROGRAM`
(what the interpreter is given), :func:`python_roots` (what bwrap binds of the
interpreter) and :data:`TOOLS` (the programs found on ``PATH``; a test sets an
entry to None to play a machine without it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from importlib import resources
from pathlib import Path

from cvb_engine.sandbox.cgroup import PidsCgroup
from cvb_engine.sandbox.limits import Limits

# --- the programs -----------------------------------------------------------


def _program(*files: str, entry: str) -> str:
    """The files' text, then a call of ``entry`` with the command line's arguments."""
    here = resources.files("cvb_engine.sandbox")
    sources = [here.joinpath(name).read_text(encoding="utf-8") for name in files]
    return "\n".join([*sources, f"{entry}(*__import__('sys').argv[1:])\n"])


#: A one-shot launch: the harness is the whole program.
HARNESS_PROGRAM = _program("harness.py", entry="run_harness")
#: A zygote: the harness, and the loop that forks it once per execution.
ZYGOTE_PROGRAM = _program("harness.py", "zygote.py", entry="_zygote")


# --- what bwrap shows of the machine ------------------------------------------

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


def python_roots() -> list[str]:
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


def site_paths() -> list[str]:
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


# --- the command lines --------------------------------------------------------

#: Program name -> absolute path, or None when it is not on the studio's PATH.
TOOLS: dict[str, str | None] = {}


def tool(name: str) -> str | None:
    """Absolute path of a program, looked up once on the studio's PATH (the child's is minimal)."""
    if name not in TOOLS:
        TOOLS[name] = shutil.which(name)
    return TOOLS[name]


def _bwrap(workdir: str, limits: Limits, *, as_pid_1: bool) -> list[str]:
    args = [
        tool("bwrap") or "bwrap",
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
    for root in python_roots():
        args += ["--ro-bind", root, root]
    args += ["--bind", workdir, workdir, "--chdir", workdir]
    args += ["--remount-ro", "/", "--"]
    return args


def bwrap_prefix(workdir: str, limits: Limits) -> list[str]:
    """bubblewrap around one execution in ``workdir``: every namespace, a read-only view."""
    return _bwrap(workdir, limits, as_pid_1=False)


def bwrap_zygote_prefix(workdir: str, limits: Limits) -> list[str]:
    """The same namespace for a zygote, which is its PID 1 (``workdir`` is the zygote's root)."""
    return _bwrap(workdir, limits, as_pid_1=True)


def unshare_prefix(workdir: str, limits: Limits) -> list[str]:
    """util-linux unshare: PID, network, IPC and UTS namespaces, on the real file system."""
    args = [tool("unshare") or "unshare", "--net", "--pid", "--ipc", "--uts", "--fork"]
    args += ["--mount-proc", "--kill-child"]
    if os.geteuid() != 0:
        args.append("--map-root-user")
    return [*args, "--"]


def no_prefix(workdir: str, limits: Limits) -> list[str]:
    """Nothing around the command: a process group and the harness's rlimits only."""
    return []


def env(workdir: str) -> dict[str, str]:
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


# --- ending a launch ------------------------------------------------------------


def end_launch(
    proc: subprocess.Popen[bytes] | None, group: PidsCgroup | None, cg_path: Path | None
) -> None:
    """Kill a launch's process group and everything in its cgroup, reap it, remove the cgroup."""
    if proc is not None:
        kill_group(proc)
    if cg_path is not None and group is not None:
        group.kill(cg_path)
    if proc is not None:
        proc.wait()
    if cg_path is not None and group is not None:
        group.remove(cg_path)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the launch's process group (the pid is not reaped yet, so it cannot be reused)."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
