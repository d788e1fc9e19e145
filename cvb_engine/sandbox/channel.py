"""What passes between the studio and the harness, whatever launched it.

In: the solution and the test as two files of the working directory, and a
random nonce on a pipe (not env, not argv). Out: stdout and stderr, of which
the first bytes are kept, and the harness's records on a result pipe, of which
only the verdict is kept (:class:`ResultChannel`; the records are written by
:mod:`cvb_engine.sandbox.harness`). :func:`collect` drains all three until the
harness exits or time runs out.

:class:`ResultChannel`, :class:`Verdict` and :func:`parse_results` are public
so that the protocol can be tested and read without running anything.
"""

from __future__ import annotations

import os
import selectors
import time
from dataclasses import dataclass, field
from typing import Protocol

from cvb_engine.sandbox.limits import Limits


def write_sources(workdir: str, code: str, test: str) -> None:
    """The solution and the test, where the harness reads (and deletes) them."""
    for fname, source in ((".cvb-solution", code), (".cvb-test", test)):
        with open(os.path.join(workdir, fname), "wb") as f:
            f.write(source.encode("utf-8", "surrogatepass"))


def nonce_pipe(nonce: str) -> int:
    """A pipe holding the nonce, read end returned: the harness reads it, nobody else can."""
    nonce_r, nonce_w = os.pipe()
    os.write(nonce_w, nonce.encode())
    os.close(nonce_w)
    return nonce_r


@dataclass
class Stream:
    """stdout or stderr: the first ``keep`` bytes, and how many there were."""

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
class Verdict:
    """What the harness reported: how far it got, and a pass or a failure.

    ``failure`` maps the keys of a ``FAIL`` record (``where``, ``exc``, ``msg``,
    ``line_solution``, ``line_test``, ``inner``) to their decoded values.
    """

    phase: str = ""
    passed: bool = False
    failure: dict[str, object] | None = None


class ResultChannel:
    """Parses the harness's records as they arrive, keeping only the verdict.

    Nothing is buffered but the current line (capped), so code that floods the
    result pipe cannot push the verdict out of a buffer or grow our memory;
    lines without this execution's nonce are ignored.
    """

    MAX_LINE = 16 << 10

    def __init__(self, nonce: str) -> None:
        self.prefix = nonce.encode() + b" "
        self.verdict = Verdict()
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


def parse_results(data: bytes, nonce: str) -> Verdict:
    """The verdict in a complete result stream (for tests and tools)."""
    channel = ResultChannel(nonce)
    channel.add(data + b"\n")
    return channel.verdict


class Watch(Protocol):
    """How :func:`collect` learns that the harness process has exited."""

    def fileno(self) -> int:
        """A descriptor readable when something happened; -1 to be polled instead."""
        ...

    def exited(self) -> bool:
        """Consume what is readable; True once the harness has exited."""
        ...

    def reap(self) -> None:
        """The harness exited: kill whatever it left behind."""
        ...


def collect(
    out_fd: int,
    err_fd: int,
    result_fd: int,
    channel: ResultChannel,
    watch: Watch,
    start: float,
    timeout_s: float,
    limits: Limits,
) -> tuple[Stream, Stream, bool, bool, float]:
    """Drain stdout, stderr and the result pipe until the harness exits or time runs out.

    Returns stdout, stderr, whether it timed out, whether the output went over
    the limit, and when the harness ended.
    """
    out, err = Stream(limits.output_keep_bytes), Stream(limits.output_keep_bytes)
    streams: dict[int, Stream | ResultChannel] = {out_fd: out, err_fd: err, result_fd: channel}
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


def _wait_exit(watch: Watch, deadline: float) -> float | None:
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
