"""Find live processes by a marker in their command line (tests of code that spawns children)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def processes_with(marker: str, wait_s: float = 1.0) -> list[str]:
    """Command lines of live processes that mention ``marker`` (waiting briefly for exits)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
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
