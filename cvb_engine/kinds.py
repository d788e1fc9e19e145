"""The closed vocabularies of stored data: seed arms, record, run and runner statuses.

Each is a :class:`~enum.StrEnum`: a member *is* its string (``RecordStatus.OK == "ok"``),
so it compares with, and is stored and serialised as, the text the store and the
results file have always held. These values are part of stored data: never rename one.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ErrorKind", "RecordStatus", "RunStatus", "RunnerStatus", "SeedArm"]


class SeedArm(StrEnum):
    """The three arms every matrix is built from; variants such as
    ``incentivized@channel=system`` and the memory arms are named after them."""

    COLD = "cold"
    MANDATED = "mandated"
    INCENTIVIZED = "incentivized"


class RecordStatus(StrEnum):
    """Whether a cell got a reply (``ok``, then scored) or failed (``error``)."""

    OK = "ok"
    ERROR = "error"


class ErrorKind(StrEnum):
    """What failed for an error record: the endpoint, or the memory layer of a memory arm
    (never an API failure, never a violation). A record stored before error kinds
    existed (NULL) is an API failure."""

    API = "api"
    MEMORY = "memory"


class RunStatus(StrEnum):
    """A run's stored status. ``finished``: every cell of the matrix has a record;
    ``incomplete``: the sending ended with cells still missing (a resume sends them)."""

    CREATED = "created"
    RUNNING = "running"
    FINISHED = "finished"
    INCOMPLETE = "incomplete"
    CANCELLED = "cancelled"
    FAILED = "failed"


class RunnerStatus(StrEnum):
    """One runner's stored status (:mod:`cvb_engine.claims`). ``died``: found gone on its
    host by a runner starting there; a ``running`` runner whose heartbeat is older than
    its lease has lapsed."""

    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    FAILED = "failed"
    DIED = "died"
