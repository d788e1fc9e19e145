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


def children_with(parent: int, marker: str) -> list[int]:
    """Pids of live child processes of ``parent`` whose command line mentions ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent and fields[0] != "Z" and marker.encode() in cmdline:
            found.append(int(entry))
    return found


def alive(pid: int, wait_s: float = 0.0) -> bool:
    """Whether ``pid`` runs (a zombie does not), waiting up to ``wait_s`` for it to end."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "Z" or time.monotonic() > deadline:
            return state != "Z"
        time.sleep(0.05)
