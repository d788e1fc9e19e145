"""How a runner's end becomes the run's status: pure decisions, tested as tables.

A runner ends its sending as ``finished`` (no cell left to claim), ``cancelled``
(Ctrl-C, the studio's cancel, a cancel asked of the run) or ``failed`` (an error
stopped it). What the *run* then is depends on what else is true once
everything sent is committed: whether the recorder failed, whether every cell
of the matrix has a record, and whether other runners of the run are still
live (``cvb run --join``).
"""

from __future__ import annotations

from dataclasses import dataclass

from cvb_engine.kinds import RunStatus


@dataclass(frozen=True)
class FinalStatus:
    """What this runner reports, and whether it writes the run's stored status."""

    #: The run's status as this runner reports it (``running``: others go on with it).
    status: RunStatus
    #: True: this runner is the last one out and stores ``status`` on the run (and
    #: clears its process id); False: the live runners will, and the run's process
    #: becomes one of theirs.
    ends_run: bool


def runner_status(sent: RunStatus, *, recorder_failed: bool) -> RunStatus:
    """This runner's own end, as its claims record it: a failed recorder fails it."""
    return RunStatus.FAILED if recorder_failed or sent == RunStatus.FAILED else sent


def final_status(
    sent: RunStatus, *, recorder_failed: bool, complete: bool, others_live: bool
) -> FinalStatus:
    """The run's status once this runner has stopped and everything it sent is stored.

    Args:
        sent: How the sending ended: ``finished``, ``cancelled`` or ``failed``.
        recorder_failed: The recorder could not store everything it was given.
        complete: Every cell of the run's matrix has a record (ok or error).
        others_live: Other runners of the run are still live.

    Returns:
        With other runners live and cells missing, the run goes on: ``running``
        (``cancelled`` when this runner was, since the others are stopping too),
        and this runner does not write the run's status. Otherwise this runner is
        the last one out: ``failed`` if anything failed, ``finished`` when every
        cell has a record, ``incomplete`` when the sending ended as it should with
        cells still missing (a resume sends them), else what the sending was.
    """
    if others_live and not complete:
        going_on = RunStatus.CANCELLED if sent == RunStatus.CANCELLED else RunStatus.RUNNING
        return FinalStatus(going_on, ends_run=False)
    if runner_status(sent, recorder_failed=recorder_failed) == RunStatus.FAILED:
        return FinalStatus(RunStatus.FAILED, ends_run=True)
    if complete:
        return FinalStatus(RunStatus.FINISHED, ends_run=True)
    if sent == RunStatus.FINISHED:
        return FinalStatus(RunStatus.INCOMPLETE, ends_run=True)
    return FinalStatus(sent, ends_run=True)


__all__ = ["FinalStatus", "final_status", "runner_status"]
