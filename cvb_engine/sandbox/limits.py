"""The resource limits of one execution, and how they reach the harness."""

from __future__ import annotations

from dataclasses import dataclass

MAX_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one execution.

    ``cpu_s`` None means one second more than the wall-clock timeout, so that
    the wall clock usually decides and the CPU limit only stops CPU burnt in
    parallel by several processes.
    """

    memory_bytes: int = 1 << 30
    file_bytes: int = 64 << 20
    open_files: int = 256
    # processes + threads, enforced through a pids cgroup when there is one
    tasks: int = 64
    cpu_s: float | None = None
    output_keep_bytes: int = 64 << 10
    output_limit_bytes: int = 16 << 20
    tmpfs_bytes: int = 64 << 20


DEFAULT_LIMITS = Limits()


def rlimits(timeout_s: float, limits: Limits) -> list[tuple[str, int]]:
    """The rlimits the harness sets on itself before the code runs, by ``resource`` name."""
    cpu = limits.cpu_s if limits.cpu_s is not None else timeout_s + 1
    return [
        ("RLIMIT_CPU", max(1, int(cpu + 0.999))),
        ("RLIMIT_AS", limits.memory_bytes),
        ("RLIMIT_FSIZE", limits.file_bytes),
        ("RLIMIT_NOFILE", limits.open_files),
        ("RLIMIT_CORE", 0),
    ]


def rlimit_arg(timeout_s: float, limits: Limits) -> str:
    """:func:`rlimits` as the harness's ``limits`` argument: ``NAME=value,...``."""
    return ",".join(f"{k}={v}" for k, v in rlimits(timeout_s, limits))
