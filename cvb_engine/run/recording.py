"""The runner's side of the recorder process (:mod:`cvb_engine.recorder`): what it is
sent (:class:`Setup`, then a :class:`Finished` per request), the frames, and
:class:`Recorder`, the asyncio handle that starts the process and waits for its
acknowledgements.

Kept apart from the recorder's own half so that starting the recorder imports
nothing heavy: ``cvb run`` starts it first, and the recorder imports its store and
scoring modules on another core while the runner imports its HTTP client, loads
the scenarios and probes the endpoint.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle
import struct
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cvb_engine.cells import Cell, Finished

if TYPE_CHECKING:
    from cvb_engine.scenario import LoadedScenario

HEADER = struct.Struct(">I")


@dataclass(frozen=True)
class Setup:
    """The run the recorder records (the first frame)."""

    url: str
    run_id: str
    library: dict[str, LoadedScenario]
    # Cells that already have a (error) record, by record id; any other cell is new.
    stored: dict[Cell, int]
    # The runner's name (``--worker``): kept on every record it stores, and its claims on
    # the cells it stores are deleted in the same transaction (cvb_engine.claims).
    worker: str | None = None


class RecorderError(RuntimeError):
    """The recorder could not store results (the message says why)."""


def frame(obj: object) -> bytes:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


# --------------------------------------------------------------------------- runner side


class Recorder(asyncio.SubprocessProtocol):
    """The runner's handle on its recorder process.

    An asyncio subprocess protocol: acknowledgements are handled in the very
    callback that reads them off the pipe, and the waiting worker resumes on
    the next turn of the event loop (a stream reader task would add a turn,
    each one as long as the HTTP work of all the other workers).
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray()
        self._tokens = itertools.count()
        self._pending: dict[int, asyncio.Future[None]] = {}
        self._begun = False
        self._stopped = False
        self._finished = False  # the recorder said it is done
        self._gone: asyncio.Future[None] = self._loop.create_future()
        self._process: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self.pid: int | None = None
        self.failure: RecorderError | None = None
        self.scored = 0

    @classmethod
    async def spawn(cls, *, hide: Iterable[str] = ()) -> Recorder:
        """Start the process; it imports its modules while the runner gets ready.

        Args:
            hide: environment variables the recorder does not need to see (the
                API key's): it stores answers, it sends nothing.
        """
        hidden = set(hide)
        _, recorder = await asyncio.get_running_loop().subprocess_exec(
            cls,
            sys.executable,
            "-m",
            "cvb_engine.recorder",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env={k: v for k, v in os.environ.items() if k not in hidden},
            # Its own session: a Ctrl-C on the terminal (SIGINT to the foreground
            # process group) reaches the runner, which then stops the recorder in
            # order; it would otherwise kill it, even while it still imports.
            start_new_session=True,
        )
        return recorder

    def begin(self, setup: Setup) -> None:
        """Tell the recorder which run it records."""
        self._begun = True
        self._send(setup)

    async def commit(self, item: Finished) -> None:
        """Hand ``item`` over and return once it is committed.

        Raises:
            RecorderError: the recorder failed or is gone.
        """
        token = next(self._tokens)
        self._send((token, item))
        done = self._loop.create_future()
        self._pending[token] = done
        await done

    async def close(self) -> None:
        """Stop the recorder once it has committed and scored everything, and reap it.

        A recorder that was never told about a run has nothing to keep: it is killed
        rather than left to finish its imports. Does not raise; a failure is left in
        :attr:`failure`. Closing again just waits for the same end.
        """
        if not self._stopped and self._stdin is not None:
            self._stopped = True
            if self._begun and self.failure is None:
                self._send(None)
            self._stdin.close()
            if not self._begun and self._process is not None:
                self._process.kill()
        await self._gone

    def _send(self, obj: object) -> None:
        if self.failure is not None:
            raise self.failure
        assert self._stdin is not None
        self._stdin.write(frame(obj))

    # ---- asyncio.SubprocessProtocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self._process = transport
        self.pid = transport.get_pid()
        stdin = transport.get_pipe_transport(0)
        assert isinstance(stdin, asyncio.WriteTransport)
        self._stdin = stdin

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(buffer)
            end = HEADER.size + size
            if len(buffer) < end:
                break
            kind, value = pickle.loads(buffer[HEADER.size : end])
            del buffer[:end]
            if kind == "ack":
                for token in value:
                    future = self._pending.pop(token, None)
                    if future is not None and not future.done():
                        future.set_result(None)
            elif kind == "error":
                self._fail(RecorderError(value))
            elif kind == "done":
                self.scored = value
                self._finished = True

    def connection_lost(self, exc: Exception | None) -> None:
        # The process has exited and everything it wrote has been read. Unless it was
        # stopped before it was told about a run, or said it was done, that is a failure:
        # also before ``begin`` (it died while importing), or the run would wait for
        # acknowledgements that never come.
        if not self._finished and (self._begun or not self._stopped):
            assert self._process is not None
            code = self._process.get_returncode()
            how = (
                f"was killed by signal {-code}"
                if code is not None and code < 0
                else f"exited with status {code}"
            )
            self._fail(RecorderError(f"the recorder process (pid {self.pid}) {how}"))
        if self._process is not None:
            self._process.close()
        if not self._gone.done():
            self._gone.set_result(None)

    def _fail(self, error: RecorderError) -> None:
        if self.failure is None:
            self.failure = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self.failure)
        self._pending.clear()


__all__ = ["HEADER", "Finished", "Recorder", "RecorderError", "Setup", "frame"]
