"""The backends: what each one isolates, how it launches, and what it leaves open.

One :class:`Backend` per way of running model code, strongest first in
:data:`TABLE`; the rest of the sandbox asks the object, never its name. The
names are the public interface (``--sandbox``, ``CVB_SANDBOX``, a run's
stored ``sandbox`` params, :attr:`ExecResult.backend`) and never change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from cvb_engine.sandbox import launch
from cvb_engine.sandbox.limits import Limits

#: How the harness holds the code: ``direct`` runs it in the harness's process
#: (a namespace holds whatever it starts); ``supervise`` forks it and stays its
#: parent, killing the children it leaves; ``supervise-reap`` also makes the
#: harness a sub-reaper that dies with its parent, where nothing else collects
#: orphans.
Supervision = Literal["direct", "supervise", "supervise-reap"]

Prefix = Callable[[str, Limits], list[str]]


class SandboxError(RuntimeError):
    """No usable backend, or a forced backend that does not work on this machine."""


@dataclass(frozen=True, slots=True)
class Backend:
    """One way of running model code, and what it isolates."""

    name: str
    network_isolated: bool
    pid_namespace: bool
    filesystem_isolated: bool
    supervision: Supervision
    #: the command around the harness, given the working directory and the limits
    prefix: Prefix
    #: the self-test's test: it proves the isolation is in effect, not merely that
    #: something ran (the solution is ``x = 1``)
    probe: str
    #: what it leaves open, for the warning and ``cvb doctor``; None for the
    #: backend used when none is named
    weakness: str | None = None
    #: the program it launches through, and the self-test's problem without it
    tool: str | None = None
    missing: str = ""
    #: the command a zygote starts in, when executions are forked from one
    zygote_prefix: Prefix | None = None


_NAMESPACE_PROBE = (
    "import os, socket\n"
    "assert x == 1\n"
    "assert os.getpid() <= 3, os.getpid()\n"
    "assert [n for _, n in socket.if_nameindex()] == ['lo']\n"
)

TABLE: tuple[Backend, ...] = (
    Backend(
        name="bwrap",
        network_isolated=True,
        pid_namespace=True,
        filesystem_isolated=True,
        supervision="direct",
        prefix=launch.bwrap_prefix,
        zygote_prefix=launch.bwrap_zygote_prefix,
        probe=_NAMESPACE_PROBE
        + "assert not os.path.exists('/root/.bash_history') and not os.path.exists('/home')\n",
        tool="bwrap",
        missing="bwrap is not installed (not on PATH)",
    ),
    Backend(
        name="unshare",
        network_isolated=True,
        pid_namespace=True,
        filesystem_isolated=False,
        supervision="supervise",
        prefix=launch.unshare_prefix,
        probe=_NAMESPACE_PROBE,
        weakness="the code runs as you on the real file system: it can write, delete and "
        "plant files anywhere you can (no network, its processes die with it)",
        tool="unshare",
        missing="unshare (util-linux) is not installed",
    ),
    Backend(
        name="plain",
        network_isolated=False,
        pid_namespace=False,
        filesystem_isolated=False,
        supervision="supervise-reap",
        prefix=launch.no_prefix,
        probe="assert x == 1\n",
        weakness="no isolation at all: the code can read and change your files, reach the "
        "network and signal your processes",
    ),
)

#: The backend model code runs on when none is named: the strongest.
DEFAULT = TABLE[0]
#: The backends' names, strongest first.
BACKENDS = tuple(b.name for b in TABLE)
#: What each backend weaker than the default leaves open, for the warning and ``cvb doctor``.
WEAKNESS = {b.name: b.weakness for b in TABLE if b.weakness is not None}

_BY_NAME = {b.name: b for b in TABLE}


def is_weaker(name: str) -> bool:
    """Whether the backend called ``name`` isolates less than :data:`DEFAULT`; a name no
    backend has (an old or edited store's) counts as weaker."""
    return _BY_NAME.get(name) is not DEFAULT


def get(name: str) -> Backend:
    """The backend called ``name``.

    Raises:
        SandboxError: there is none.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise SandboxError(f"unknown sandbox backend {name!r}") from None
