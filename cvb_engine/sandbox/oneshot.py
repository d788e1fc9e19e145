"""One execution in a process launched for it alone (every backend; bwrap without zygotes)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

from cvb_engine.sandbox import cgroup, launch
from cvb_engine.sandbox.backends import Backend
from cvb_engine.sandbox.channel import ResultChannel, collect, nonce_pipe, write_sources
from cvb_engine.sandbox.limits import Limits, rlimit_arg
from cvb_engine.sandbox.outcome import ExecResult, finish


class _ProcWatch:
    """A launched process, through a pidfd when the kernel has them (a :class:`channel.Watch`)."""

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
        launch.kill_group(self.proc)

    def close(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


def execute(code: str, test: str, timeout_s: float, limits: Limits, backend: Backend) -> ExecResult:
    """Run ``code`` then ``test`` in a fresh launch of the harness on ``backend``."""
    workdir = tempfile.mkdtemp(prefix="cvb-sbx-")
    group = cgroup.current()
    cg_path = group.create(limits.tasks) if group is not None else None
    nonce = secrets.token_hex(16)
    channel = ResultChannel(nonce)
    proc: subprocess.Popen[bytes] | None = None
    watch: _ProcWatch | None = None
    fds: list[int] = []
    start = time.monotonic()
    try:
        write_sources(workdir, code, test)
        nonce_r = nonce_pipe(nonce)
        fds.append(nonce_r)
        result_r, result_w = os.pipe()
        fds += [result_r, result_w]
        rlimits = rlimit_arg(timeout_s, limits)
        python = [sys.executable, "-S", "-P", "-c", launch.HARNESS_PROGRAM, workdir, str(nonce_r)]
        python += [
            str(result_w),
            backend.supervision,
            rlimits,
            os.pathsep.join(launch.site_paths()),
        ]
        argv = backend.prefix(workdir, limits) + python
        if cg_path is not None:
            argv = cgroup.join(cg_path, argv)
        start = time.monotonic()
        # No preexec_fn (unsafe in the threaded studio): limits are set by the harness.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=launch.env(workdir),
            cwd=workdir,
            pass_fds=(nonce_r, result_w),
            start_new_session=True,
        )
        for fd in (nonce_r, result_w):
            os.close(fd)
            fds.remove(fd)
        assert proc.stdout is not None and proc.stderr is not None
        watch = _ProcWatch(proc)
        out, err, timed_out, flooded, end = collect(
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
        launch.end_launch(proc, group, cg_path)
        if proc is not None:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        for fd in fds:
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
    return finish(
        code=code,
        test=test,
        name=backend.name,
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
