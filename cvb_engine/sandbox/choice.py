"""Which backend runs model code here: self-tests, the user's choice, what it isolates.

Model code runs in the default backend (bwrap). A weaker one is used only
when the user names it (``--sandbox`` or ``CVB_SANDBOX``), with a
:class:`WeakSandboxWarning`; when the default does not work and none is
named, :func:`backend` raises with what is missing, before anything executes.

:data:`PROBES` and :data:`WARNED` hold, per process, each backend's self-test
result and the weaker backends already warned about; a test replaces them
(with :data:`cvb_engine.sandbox.launch.TOOLS`) to play another machine.
"""

from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from cvb_engine.sandbox import backends, cgroup, launch, oneshot
from cvb_engine.sandbox.backends import BACKENDS, DEFAULT, SandboxError
from cvb_engine.sandbox.limits import DEFAULT_LIMITS

ENV_BACKEND = "CVB_SANDBOX"


class WeakSandboxWarning(UserWarning):
    """Model code is about to run on a backend weaker than bwrap, because the user named it."""


@dataclass(frozen=True, slots=True)
class SandboxInfo:
    """What a backend isolates on this machine."""

    backend: str
    network_isolated: bool
    pid_namespace: bool
    filesystem_isolated: bool
    # the cap on processes + threads, or None when nothing enforces one
    task_limit: int | None

    def describe(self) -> str:
        parts = [
            "own network" if self.network_isolated else "host network",
            "PID namespace" if self.pid_namespace else "no PID namespace",
            "read-only system view" if self.filesystem_isolated else "host file system",
            f"≤{self.task_limit} tasks" if self.task_limit else "no task limit",
        ]
        return f"{self.backend} ({', '.join(parts)})"


_PROBE_LOCK = threading.Lock()
#: Backend name -> None when its self-test passed in this process, else why not.
PROBES: dict[str, str | None] = {}
#: The weaker backends this process has warned about (once each).
WARNED: set[str] = set()


def self_test(name: str) -> str | None:
    """Self-test backend ``name``: None when it works here, else why not. Cached per process."""
    with _PROBE_LOCK:
        if name in PROBES:
            return PROBES[name]
        chosen = backends.get(name)
        problem: str | None = None
        if chosen.tool is not None and launch.tool(chosen.tool) is None:
            problem = chosen.missing
        else:
            try:
                result = oneshot.execute("x = 1\n", chosen.probe, 10.0, DEFAULT_LIMITS, chosen)
            except OSError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if not result.passed:
                    problem = f"self-test failed: {result.reason}; {result.stderr.strip()[:300]}"
        PROBES[name] = problem
        return problem


def available_backends() -> list[str]:
    """The backends that pass their self-test on this machine, strongest first."""
    return [name for name in BACKENDS if self_test(name) is None]


def bwrap_fix(problem: str) -> str:
    """How to make bwrap work, given why its self-test failed."""
    if "not installed" in problem:
        return "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
    if any(
        s in problem for s in ("uid map", "user namespace", "Operation not permitted", "setting up")
    ):
        return (
            "allow unprivileged user namespaces (e.g. sysctl -w kernel.unprivileged_userns_clone=1, "
            "or on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0), or run as root"
        )
    return "see the self-test's message above; `cvb doctor` shows every backend"


def _refusal(problem: str) -> str:
    return (
        f"model code runs only in the bwrap sandbox, and bwrap does not work here: {problem}. "
        f"Fix: {bwrap_fix(problem)}. To run on a weaker backend anyway, name it: "
        f"--sandbox unshare (no file-system isolation) or --sandbox plain (no isolation at "
        f"all), or set {ENV_BACKEND}. `cvb doctor` shows what this machine offers."
    )


def backend() -> str:
    """The backend ``run_python`` uses: bwrap, or the one ``CVB_SANDBOX`` names.

    There is no silent fallback: when bwrap does not work and no backend is
    named, this raises, with what is missing and how to install it. A weaker
    backend, when named, works with a :class:`WeakSandboxWarning` (once per
    process).

    Raises:
        SandboxError: bwrap does not work and no backend is named, or the one
            named is unknown or does not work here.
    """
    forced = os.environ.get(ENV_BACKEND, "").strip()
    if not forced:
        problem = self_test(DEFAULT.name)
        if problem is not None:
            raise SandboxError(_refusal(problem))
        return DEFAULT.name
    if forced not in BACKENDS:
        raise SandboxError(f"{ENV_BACKEND}={forced!r}: expected one of {', '.join(BACKENDS)}")
    problem = self_test(forced)
    if problem is not None:
        raise SandboxError(f"{ENV_BACKEND}={forced} does not work here: {problem}")
    weakness = backends.get(forced).weakness
    if weakness is not None and forced not in WARNED:
        WARNED.add(forced)
        warnings.warn(
            f"model code runs on the {forced} sandbox backend, as asked: {weakness}",
            WeakSandboxWarning,
            stacklevel=2,
        )
    return forced


def choose(name: str | None) -> str:
    """Apply a ``--sandbox`` choice to this process and its children, and return the
    backend model code will run on (see :func:`backend`).

    Args:
        name: a backend the user named, or None to keep ``CVB_SANDBOX`` / bwrap.
    """
    if name:
        os.environ[ENV_BACKEND] = name
    return backend()


def with_backend(params: dict[str, Any], name: str | None) -> dict[str, Any]:
    """A run's params with backend ``name`` among those that judged it (``sandbox``,
    strongest first: a resume or a re-score on another machine may add one; None
    when this pass executes no model code)."""
    seen = {str(b) for b in params.get("sandbox") or ()} | ({name} if name else set())
    return {**params, "sandbox": [b for b in BACKENDS if b in seen]}


def info(name: str | None = None) -> SandboxInfo:
    """What ``name`` (default: the current backend) isolates on this machine.

    Raises:
        SandboxError: ``name`` is no backend (or, without one, see :func:`backend`).
    """
    chosen = backends.get(name or backend())
    group = cgroup.current()
    return SandboxInfo(
        backend=chosen.name,
        network_isolated=chosen.network_isolated,
        pid_namespace=chosen.pid_namespace,
        filesystem_isolated=chosen.filesystem_isolated,
        task_limit=DEFAULT_LIMITS.tasks if group is not None else None,
    )
