"""Zygotes from the studio's side: starting one, talking to it, reusing and retiring it.

A zygote (the program is :mod:`cvb_engine.sandbox.zygote`, which describes
what keeps executions apart) serves one execution at a time over a control
socket; a clean one goes back to the pool, anything unusual tears its
namespace down. Executions use a zygote when their backend has a
``zygote_prefix`` and ``CVB_SANDBOX_ZYGOTE`` is not ``0``; when zygotes do
not work on a machine, :func:`run` says so and the caller launches once.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cvb_engine.sandbox import cgroup, launch
from cvb_engine.sandbox.backends import Backend
from cvb_engine.sandbox.channel import ResultChannel, collect, nonce_pipe, write_sources
from cvb_engine.sandbox.limits import Limits, rlimit_arg
from cvb_engine.sandbox.outcome import ExecResult, finish

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
    """One pre-started harness in its own namespace (and pids cgroup, when there is one)."""

    def __init__(
        self, backend: Backend, key: tuple[object, ...], root: str, limits: Limits
    ) -> None:
        self.backend = backend
        self.key = key
        self.root = root
        self.group = cgroup.current()
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
        assert self.backend.zygote_prefix is not None
        ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ctl = ctl
        try:
            if self.group is not None:
                # the outer bwrap and the zygote count too
                self.cg_path = self.group.create(limits.tasks + 2)
            python = [sys.executable, "-S", "-P", "-c", launch.ZYGOTE_PROGRAM]
            python += [str(theirs.fileno()), os.pathsep.join(launch.site_paths()), self.root]
            python += [os.pathsep.join(launch.python_roots())]
            argv = self.backend.zygote_prefix(self.root, limits) + python
            if self.cg_path is not None:
                argv = cgroup.join(self.cg_path, argv)
            self.proc = _spawn(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                env=launch.env(self.root),
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
        launch.end_launch(self.proc, self.group, self.cg_path)
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

    # -- channel.Watch, for collect

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
        channel = ResultChannel(nonce)
        self.status = None
        theirs: list[int] = []
        ours: list[int] = []
        reusable = False
        try:
            write_sources(workdir, code, test)
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            result_r, result_w = os.pipe()
            ours += [out_r, err_r, result_r]
            theirs += [out_w, err_w, result_w]
            nonce_r = nonce_pipe(nonce)
            theirs.insert(2, nonce_r)
            start = time.monotonic()
            message = f"{workdir}\0{rlimit_arg(timeout_s, limits)}".encode()
            try:
                socket.send_fds(self.ctl, [message], theirs)
            except OSError as exc:
                # died while idle (killed from outside): nothing ran, try another
                self.lost = True
                raise _ZygoteLost(f"the zygote is gone: {exc}") from exc
            for fd in theirs:
                os.close(fd)
            theirs.clear()
            out, err, timed_out, flooded, end = collect(
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
        result = finish(
            code=code,
            test=test,
            name=self.backend.name,
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

    def run(
        self, backend: Backend, code: str, test: str, timeout_s: float, limits: Limits
    ) -> ExecResult | None:
        """One execution in a zygote; None when zygotes do not work here (use a one-shot launch)."""
        key = (backend.name, tempfile.gettempdir(), limits.tmpfs_bytes, limits.tasks)
        for _ in range(3):
            zygote = self._take(backend, key, limits)
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

    def _take(self, backend: Backend, key: tuple[object, ...], limits: Limits) -> _Zygote | None:
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
            return _Zygote(backend, key, root, limits)
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


def run(
    backend: Backend, code: str, test: str, timeout_s: float, limits: Limits
) -> ExecResult | None:
    """One execution in a zygote of ``backend``; None when zygotes do not work here."""
    return _POOL.run(backend, code, test, timeout_s, limits)


def shutdown() -> None:
    """Stop the idle zygotes (they are also stopped at exit, and die with this process)."""
    _POOL.shutdown()


def zygote_pids() -> list[int]:
    """Host pids of the idle zygotes' own processes: sandbox infrastructure, not leftovers."""
    return _POOL.pids()
