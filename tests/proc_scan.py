"""Find live processes by a marker in their command line (tests of code that spawns children)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path


def processes_with(marker: str, wait_s: float = 1.0, exclude: Iterable[int] = ()) -> list[str]:
    """Command lines of live processes that mention ``marker`` (waiting briefly for exits).

    ``exclude``: pids that are expected to be there (the sandbox's idle zygotes).
    """
    deadline = time.monotonic() + wait_s
    skip = {os.getpid(), *exclude}
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in skip:
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(cmdline.replace(b"\0", b" ").decode(errors="replace")[:200])
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)
