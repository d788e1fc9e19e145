"""Progress of one runner, and how a terminal shows it."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO


def format_duration(seconds: float | None, unknown: str = "–") -> str:
    """``1:02:03``, ``02:03``, or ``unknown`` when there is no figure."""
    if seconds is None:
        return unknown
    total = round(seconds)
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


@dataclass
class Progress:
    """Counters a progress display reads."""

    total: int
    skipped: int = 0
    ok: int = 0
    errors: int = 0
    started: float = field(default_factory=time.monotonic)
    last_error: str | None = None

    @property
    def done(self) -> int:
        return self.ok + self.errors

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        remaining = self.total - self.done
        return remaining / self.rate if self.rate > 0 else None


def _fmt_rate(rate: float) -> str:
    return f"{rate:.1f} calls/s" if rate >= 1 else f"{rate * 60:.1f} calls/min"


class TerminalProgress:
    """A one-line progress bar on a terminal; plain periodic lines otherwise."""

    def __init__(self, stream: TextIO = sys.stderr, *, tty: bool | None = None) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self._last = 0.0
        self._last_pct = -1
        self._last_line: tuple[int, int, int] | None = None

    def __call__(self, p: Progress, final: bool = False) -> None:
        now = time.monotonic()
        if final and (p.total == 0 or (p.done, p.ok, p.errors) == self._last_line):
            # nothing was sent (cmd_run says so), or the last line already said it all
            if self.tty and p.total:
                self.stream.write("\n")
            return
        pct = int(100 * p.done / p.total) if p.total else 100
        eta = format_duration(p.eta_s, unknown="--:--")
        if self.tty:
            if not final and now - self._last < 0.1:
                return
            width = 30
            filled = int(width * p.done / p.total) if p.total else width
            bar = "█" * filled + "·" * (width - filled)
            line = (
                f"\r[{bar}] {p.done}/{p.total} ok {p.ok} err {p.errors} "
                f"| {_fmt_rate(p.rate)} | ETA {eta} "
            )
            self.stream.write(line + ("\n" if final else ""))
        else:
            step = pct // 10
            if not final and step == self._last_pct and now - self._last < 30:
                return
            self._last_pct = step
            self.stream.write(
                f"progress {p.done}/{p.total} ({pct}%) ok={p.ok} errors={p.errors} "
                f"rate={p.rate:.2f}/s eta={eta}\n"
            )
        self._last = now
        self._last_line = (p.done, p.ok, p.errors)
        self.stream.flush()


__all__ = ["Progress", "TerminalProgress", "format_duration"]
