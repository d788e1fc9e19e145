"""Processes on this host: is the process a stored pid names still the one that was meant?

:mod:`cvb_engine.monitor` (a run's liveness) and :mod:`cvb_engine.claims` (a runner's)
both ask; neither imports the other for it.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime
from pathlib import Path

from cvb_engine.store import as_utc

#: Tolerance between the clock that stamps the heartbeat and process start times.
_CLOCK_SLACK_S = 2.0


def this_host() -> str:
    return socket.gethostname()


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def _proc_stat(pid: int) -> tuple[str, float | None] | None:
    """(state letter, start time as a Unix timestamp) from /proc, or None if unreadable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    state = fields[0] if fields else "?"
    boot = _boot_time()
    try:
        ticks = int(fields[19])
        started = boot + ticks / os.sysconf("SC_CLK_TCK") if boot is not None else None
    except (IndexError, ValueError, OSError):
        started = None
    return state, started


def process_alive(pid: int, *, started_by: datetime | None = None) -> bool:
    """Whether process ``pid`` exists on this host and is not a zombie.

    With ``started_by``, a process that started later than that moment is not
    the one that was meant (its id was reused) and counts as gone.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc here: existence is all we can tell
    state, started = stat
    if state in ("Z", "X"):
        return False
    if started_by is not None and started is not None:
        return started <= as_utc(started_by).timestamp() + _CLOCK_SLACK_S
    return True


__all__ = ["process_alive", "this_host"]
