"""Transport ``command``: one process per request, the request on stdin, the reply on stdout.

The command line is split with :mod:`shlex` and run without a shell, in a
session of its own (so a timeout kills the process group: the command and
anything it started). It inherits cvb's environment and current directory; a
relative executable path resolves against the directory current when the layer
was opened. The request carries ``state_dir``: a directory cvb creates where
the layer may keep its index between invocations. stdout is read up to
:data:`MAX_REPLY_BYTES`; stderr is kept for the error message (its end).

This runs the user's own program, as the user: it is not a sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
from pathlib import Path
from typing import Any

from cvb_engine.memory_layers.base import MemoryLayer, register_transport
from cvb_engine.memory_layers.protocol import (
    MAX_QUOTED_CHARS,
    MAX_REPLY_BYTES,
    LayerError,
    LayerFault,
    LayerSpec,
    Op,
    decode_json,
    encode,
    quote,
)

_CHUNK = 64 * 1024
#: Bytes of stderr kept (its end), enough for MAX_QUOTED_CHARS characters of UTF-8 text.
_STDERR_BYTES = 4 * MAX_QUOTED_CHARS


def split_command(target: str) -> list[str]:
    """The argv of a command line; raise :class:`LayerError` when it has none or cannot split."""
    try:
        argv = shlex.split(target)
    except ValueError as exc:
        raise LayerError(f"memory layer command {target!r} cannot be split: {exc}") from None
    if not argv:
        raise LayerError("memory layer command= is empty; name an executable")
    return argv


def resolve_executable(exe: str, cwd: Path) -> str:
    """The path to run for ``exe``: a path with a separator against ``cwd``, a bare name
    from PATH, else from ``cwd``. Raise :class:`LayerFault` saying why it cannot run."""
    if os.sep in exe or (os.altsep and os.altsep in exe):
        path = Path(exe) if Path(exe).is_absolute() else cwd / exe
    else:
        found = shutil.which(exe)
        if found is not None:
            return found
        path = cwd / exe
        if not path.exists():
            raise LayerFault(f"cannot start {exe!r}: no such command on PATH or in {cwd}")
    if not path.exists():
        raise LayerFault(f"cannot start {exe!r}: no such file ({path})")
    if path.is_dir() or not os.access(path, os.X_OK):
        raise LayerFault(
            f"cannot start {exe!r}: {path} is not an executable file "
            f"(chmod +x it, or name its interpreter first: python {exe})"
        )
    return str(path)


@register_transport("command")
class CommandLayer(MemoryLayer):
    def __init__(self, spec: LayerSpec, *, state_dir: Path) -> None:
        super().__init__(spec, state_dir=state_dir.resolve())
        self._argv = split_command(spec.target)
        self._cwd = Path.cwd()

    @classmethod
    def check_target(cls, target: str, key_env: str | None) -> str:
        if key_env:
            raise LayerError("memory layer key_env= applies to url= layers only, not command=")
        split_command(target)
        return target.strip()

    async def _exchange(self, op: Op, request: dict[str, Any]) -> object:
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LayerFault(
                f"cannot create its state_dir {self.state_dir}: {exc.strerror}"
            ) from None
        payload = encode({**request, "state_dir": str(self.state_dir)})
        argv = [resolve_executable(self._argv[0], self._cwd), *self._argv[1:]]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise LayerFault(f"cannot start {self._argv[0]!r}: {exc.strerror or exc}") from None
        assert proc.stdin and proc.stdout and proc.stderr
        stderr = bytearray()
        feeder = asyncio.create_task(_feed(proc.stdin, payload))
        drainer = asyncio.create_task(_drain(proc.stderr, stderr))
        done = False
        try:
            out = await _read_bounded(proc.stdout)
            await drainer
            status = await proc.wait()
            done = True
        finally:
            if not done:  # timed out, cancelled or too much output: the whole group goes
                _kill_group(proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
            feeder.cancel()
            drainer.cancel()
            await asyncio.gather(feeder, drainer, return_exceptions=True)
        if status != 0:
            text = bytes(stderr[-_STDERR_BYTES:]).decode("utf-8", "replace").strip()
            tail = quote(text[-MAX_QUOTED_CHARS:])  # its end says what went wrong
            if len(text) > MAX_QUOTED_CHARS:
                tail = "…" + tail
            if status < 0:
                how = f"was killed by signal {-status} ({_signal_name(-status)})"
            else:
                how = f"exited with status {status}"
            raise LayerFault(f"{how}: {tail}" if tail else f"{how} (nothing on stderr)")
        return decode_json(out, " on stdout")


async def _feed(stdin: asyncio.StreamWriter, payload: bytes) -> None:
    # A layer may answer without reading its request; that is its business.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(payload)
        await stdin.drain()
        stdin.close()
        await stdin.wait_closed()


async def _drain(stream: asyncio.StreamReader, tail: bytearray) -> None:
    while chunk := await stream.read(_CHUNK):
        tail += chunk
        if len(tail) > 2 * _STDERR_BYTES:
            del tail[:-_STDERR_BYTES]


async def _read_bounded(stream: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(_CHUNK):
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise LayerFault(f"wrote more than {MAX_REPLY_BYTES // 2**20} MiB to stdout")
        chunks.append(chunk)
    return b"".join(chunks)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
