"""Bring your own agent: ``agent@command=...`` runs the user's agent program in the workspace.

The protocol (README: Bring your own agent):

* the command line runs through ``/bin/sh -c`` with the **workspace as its working
  directory**; a relative program path (``./my-agent.sh``) is taken from the folder
  cvb was started in;
* the **task** (the same text the tool-calling agent gets) arrives **on stdin**,
  which is then closed;
* environment: ``PATH``, ``LANG``, ``TERM=dumb``, ``HOME`` (a fresh empty folder
  of its own), ``TMPDIR``, ``CVB_WORKSPACE`` (the workspace's path),
  ``CVB_FILES`` (the file(s) to write, workspace-relative, one per line),
  ``CVB_MODEL`` (the cell's model name) and every variable named in ``env=``
  (``agent@command=./a.sh,env=OPENAI_API_KEY:OPENAI_BASE_URL``). Nothing else of
  cvb's environment is passed, its endpoint key included;
* it may run for ``timeout`` seconds; then it and everything it started are killed
  (``SIGKILL``) and the files it left are scored as they are;
* what it leaves in the named file(s) is the solution; its exit status, and the
  first :data:`MAX_OUTPUT_CHARS` characters of its stdout and stderr, are kept on
  the record.

What the sandbox promises: the program runs under ``bwrap`` in new user, PID,
IPC, UTS and cgroup namespaces with the host's file system **read-only**, except
the workspace and its own ``HOME`` (writable) and a private ``/tmp``; it keeps
the network (it has to reach its model). It cannot write outside the workspace,
and it outlives neither its time limit nor the runner. It *can* read what the
runner's user can read on disk (the program needs its own installation and
configuration): do not run an agent you do not trust with files you would not
show it. There is no fallback: without a working ``bwrap`` a run with this arm
does not start.

Which rules files it read is seen through access times: each memory file starts
with an access time older than its modification time, which the kernel moves
forward on the first read (``relatime``). Where reads cannot be seen that way
(a ``noatime`` mount), :attr:`~cvb_engine.agent.trace.CommandRun.reads_observed`
is false and no constraint counts as read.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from cvb_engine.agent.trace import CommandRun

__all__ = ["MAX_OUTPUT_CHARS", "CommandError", "bwrap_problem", "reads_observable", "run_command"]

MAX_OUTPUT_CHARS = 20_000
#: Output read past this is drained and dropped (the program is not blocked by a full pipe).
_DRAIN_CHUNK = 65_536


class CommandError(RuntimeError):
    """The agent program cannot be run here at all (no working bwrap)."""


def _bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def bwrap_problem() -> str | None:
    """None when bwrap can run a program here with the view the command gets; else why not."""
    exe = _bwrap()
    if exe is None:
        return "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    with tempfile.TemporaryDirectory(prefix="cvb-agent-probe-") as tmp:
        argv = _argv(exe, Path(tmp), Path(tmp), ["/bin/true"])
        try:
            done = subprocess.run(argv, capture_output=True, timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap did not run: {exc}"
    if done.returncode != 0:
        return f"bwrap failed: {done.stderr.decode(errors='replace').strip()[:300]}"
    return None


def _argv(bwrap: str, workspace: Path, home: Path, command: Sequence[str]) -> list[str]:
    argv = [
        bwrap,
        "--unshare-all",
        "--share-net",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    # A Python installation under /tmp (CI layouts) is hidden by the private /tmp:
    # shown again, read-only.
    for root in _tmp_roots():
        argv += ["--ro-bind", root, root]
    argv += ["--bind", str(home), str(home), "--bind", str(workspace), str(workspace)]
    argv += ["--chdir", str(workspace), "--", *command]
    return argv


def _tmp_roots() -> list[str]:
    candidates = {
        sys.base_prefix,
        sys.prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    return sorted(
        {
            os.path.realpath(p)
            for p in candidates
            if os.path.realpath(p).startswith("/tmp/") and os.path.isdir(p)
        }
    )


def command_line(command: str, cwd: Path) -> tuple[str, list[str]]:
    """``command`` with its program made absolute from ``cwd`` when it is a relative path
    (``./my-agent.sh``), and the folders of the paths it names under /tmp (bound
    read-only, since the program sees a private /tmp)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = []
    extra: list[str] = []
    text = command.strip()
    if words and "/" in words[0] and not os.path.isabs(words[0]) and text.startswith(words[0]):
        program = os.path.normpath(os.path.join(cwd, words[0]))
        text = shlex.quote(program) + text[len(words[0]) :]
        words[0] = program
    # Every existing absolute path the line names under /tmp (the program, and a script
    # an interpreter is given: ``python /tmp/x/agent.py``) is shown again, read-only.
    for word in words:
        real = os.path.realpath(word) if os.path.isabs(word) else ""
        if real.startswith("/tmp/") and os.path.exists(real):
            folder = real if os.path.isdir(real) else os.path.dirname(real)
            if folder not in extra:
                extra.append(folder)
    return text, extra


def environment(
    workspace: Path,
    home: Path,
    targets: Sequence[str],
    model: str,
    names: Sequence[str],
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The program's environment: the protocol's variables and those named in ``env=``."""
    source = os.environ if source is None else source
    env = {
        "PATH": source.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "HOME": str(home),
        "TMPDIR": "/tmp",
        "CVB_WORKSPACE": str(workspace),
        "CVB_FILES": "\n".join(targets),
        "CVB_MODEL": model,
    }
    for name in names:
        if name in source:
            env[name] = source[name]
    return env


async def _read(stream: asyncio.StreamReader | None, keep: list[bytes], limit: int) -> bool:
    """Read ``stream`` to its end; keep its first ``limit`` bytes; True when more came."""
    if stream is None:
        return False
    size = 0
    cut = False
    while chunk := await stream.read(_DRAIN_CHUNK):
        if size < limit:
            keep.append(chunk[: limit - size])
        cut = cut or size + len(chunk) > limit
        size += len(chunk)
    return cut


def _text(parts: list[bytes]) -> str:
    return b"".join(parts).decode("utf-8", errors="replace")[:MAX_OUTPUT_CHARS]


async def run_command(
    command: str,
    workspace: Path,
    home: Path,
    task: str,
    *,
    timeout_s: float,
    targets: Sequence[str],
    model: str,
    env_names: Sequence[str] = (),
    cwd: Path | None = None,
) -> CommandRun:
    """Run the agent program in ``workspace`` under bwrap and wait for it (or its time limit).

    Raises:
        CommandError: bwrap does not work here.
    """
    exe = _bwrap()
    problem = bwrap_problem()
    if exe is None or problem is not None:
        raise CommandError(problem or "bwrap is not installed")
    line, extra = command_line(command, cwd or Path.cwd())
    argv = _argv(exe, workspace, home, ["/bin/sh", "-c", line])
    at = argv.index("--bind")
    for folder in extra:
        argv[at:at] = ["--ro-bind", folder, folder]
    env = environment(workspace, home, targets, model, env_names)
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    out: list[bytes] = []
    err: list[bytes] = []
    limit = MAX_OUTPUT_CHARS * 4
    readers = asyncio.gather(
        _read(proc.stdout, out, limit), _read(proc.stderr, err, limit), _feed(proc, task)
    )
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout_s)
    except TimeoutError:
        timed_out = True
    finally:
        _kill(proc)
        await proc.wait()
    try:
        cut_out, cut_err, _ = await asyncio.wait_for(readers, 10)
    except TimeoutError:  # a grandchild kept a pipe open past the kill
        readers.cancel()
        cut_out = cut_err = True
    stdout, stderr = _text(out), _text(err)
    return CommandRun(
        command=command[:2_000],
        exit_code=None if timed_out else proc.returncode,
        stdout=stdout,
        stdout_cut=cut_out or len(b"".join(out).decode("utf-8", "replace")) > len(stdout),
        stderr=stderr,
        stderr_cut=cut_err or len(b"".join(err).decode("utf-8", "replace")) > len(stderr),
        time_s=round(time.monotonic() - started, 3),
        timed_out=timed_out,
        sandbox="bwrap",
        reads_observed=reads_observable(workspace.parent),
    )


async def _feed(proc: asyncio.subprocess.Process, task: str) -> None:
    if proc.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(task.encode("utf-8"))
        await proc.stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.close()
        await proc.stdin.wait_closed()


def _kill(proc: asyncio.subprocess.Process) -> None:
    """Kill the program's whole session (bwrap, and with it its PID namespace)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


_OBSERVABLE: dict[int, bool] = {}


def reads_observable(folder: Path) -> bool:
    """Whether a read moves a file's access time on ``folder``'s file system (once per device)."""
    device = os.stat(folder).st_dev
    if device not in _OBSERVABLE:
        probe = folder / ".cvb-atime-probe"
        try:
            probe.write_bytes(b"x")
            info = probe.stat()
            os.utime(probe, ns=(info.st_mtime_ns - 120 * 10**9, info.st_mtime_ns))
            before = probe.stat().st_atime_ns
            probe.read_bytes()
            _OBSERVABLE[device] = probe.stat().st_atime_ns != before
        except OSError:
            _OBSERVABLE[device] = False
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()
    return _OBSERVABLE[device]


def files_read(workspace: Path, paths: Sequence[str], before: Mapping[str, int]) -> set[str]:
    """Which of ``paths`` were read since their access times were ``before`` (ns)."""
    read = set()
    for rel in paths:
        try:
            info = os.lstat(workspace / rel)
        except OSError:
            continue
        if info.st_atime_ns != before.get(rel):
            read.add(rel)
    return read
