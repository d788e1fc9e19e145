"""A bound on processes that holds for root: a ``pids`` cgroup per execution.

``RLIMIT_NPROC`` is no substitute: the kernel does not enforce it for root.
When the cgroup file system is writable (root on most Linux machines), each
launch joins a fresh group whose ``pids.max`` caps processes + threads, and
everything still in it is SIGKILLed afterwards, which also removes
double-forked daemons. Elsewhere :func:`current` is None and nothing bounds
the number of processes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from pathlib import Path

# Set to 0 to run without the pids cgroup (e.g. to exercise the plain fallback).
ENV_CGROUP = "CVB_SANDBOX_CGROUP"


class PidsCgroup:
    """Per-execution ``pids`` cgroups under one parent directory we may write.

    cgroup v1 (a ``pids`` hierarchy) and v2 (the unified hierarchy with the
    ``pids`` controller) are both handled; the directory of each execution is
    created before the launch and removed after its processes are killed.
    """

    def __init__(self, parent: Path) -> None:
        self.parent = parent
        self._stale: list[Path] = []
        self._lock = threading.Lock()
        self._seq = 0

    @classmethod
    def discover(cls) -> PidsCgroup | None:
        if os.environ.get(ENV_CGROUP, "1") == "0":
            return None
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            rel = path.lstrip("/")
            if "pids" in controllers.split(","):
                base = Path("/sys/fs/cgroup/pids") / rel
            elif controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
                base = Path("/sys/fs/cgroup") / rel
                if "pids" not in (base / "cgroup.controllers").read_text().split():
                    continue
            else:
                continue
            group = cls._prepare(base, v2=controllers == "")
            if group is not None:
                return group
        return None

    @classmethod
    def _prepare(cls, base: Path, *, v2: bool) -> PidsCgroup | None:
        parent = base / "cvb-sandbox"
        try:
            if v2:
                # The no-internal-process rule only lets this succeed where it
                # may (the root cgroup, or a delegated empty one).
                (base / "cgroup.subtree_control").write_text("+pids")
            parent.mkdir(exist_ok=True)
            if v2:
                (parent / "cgroup.subtree_control").write_text("+pids")
            cls._remove_orphans(parent)
            probe = parent / f"probe-{os.getpid()}-{secrets.token_hex(4)}"
            probe.mkdir()
            try:
                (probe / "pids.max").write_text("8")
            finally:
                probe.rmdir()
        except OSError:
            return None
        return cls(parent)

    @staticmethod
    def _remove_orphans(parent: Path) -> None:
        """Remove the empty groups of studio processes that died mid-run."""
        for child in parent.iterdir():
            owner = child.name.split("-")[1] if child.name.startswith("x-") else ""
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    child.rmdir()

    def create(self, tasks: int) -> Path | None:
        with self._lock:
            self._seq += 1
            name = f"x-{os.getpid()}-{self._seq}-{secrets.token_hex(3)}"
            stale, self._stale = self._stale, []
        for path in stale:
            self._remove(path)
        path = self.parent / name
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(tasks))
        except OSError:
            return None
        return path

    def kill(self, path: Path) -> None:
        """SIGKILL everything still in the group, until it is empty."""
        kill_file = path / "cgroup.kill"  # v2, Linux >= 5.14: atomic, no PID reuse race
        for _ in range(500):
            try:
                pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            if not pids:
                break
            if kill_file.exists():
                kill_file.write_text("1")
            else:
                # A pid read here can in theory be reused before the kill; the
                # window is microseconds and the group is tiny.
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)

    def remove(self, path: Path) -> None:
        """Remove an emptied group; if the kernel still holds it busy, at a later call."""
        if not self._remove(path):
            with self._lock:
                self._stale.append(path)

    @staticmethod
    def _remove(path: Path) -> bool:
        for _ in range(50):
            try:
                path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.005)
        return False


_LOCK = threading.Lock()
# discovered once per value of CVB_SANDBOX_CGROUP
_FOUND: dict[str, PidsCgroup | None] = {}


def current() -> PidsCgroup | None:
    """The cgroup parent this process launches into, or None when there is none to write."""
    key = os.environ.get(ENV_CGROUP, "1")
    with _LOCK:
        if key not in _FOUND:
            _FOUND[key] = PidsCgroup.discover()
        return _FOUND[key]


def join(cg_path: Path, argv: list[str]) -> list[str]:
    """Join the cgroup before anything can fork: a shell moves itself, then execs."""
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cg_path / "cgroup.procs"), *argv]
