"""The run's end as a table: how the sending ended × what else is true → the run's status."""

from __future__ import annotations

import pytest

from cvb_engine.kinds import RunStatus
from cvb_engine.run.status import FinalStatus, final_status, runner_status

F, C, X = RunStatus.FINISHED, RunStatus.CANCELLED, RunStatus.FAILED
RUNNING, INCOMPLETE = RunStatus.RUNNING, RunStatus.INCOMPLETE


@pytest.mark.parametrize(
    ("sent", "recorder_failed", "complete", "others_live", "expected"),
    [
        # alone (or the last one out): this runner writes the run's status
        pytest.param(F, False, True, False, FinalStatus(F, True), id="all-sent"),
        pytest.param(F, False, False, False, FinalStatus(INCOMPLETE, True), id="cells-missing"),
        pytest.param(C, False, False, False, FinalStatus(C, True), id="cancelled"),
        pytest.param(C, False, True, False, FinalStatus(F, True), id="cancelled-after-last"),
        pytest.param(X, False, False, False, FinalStatus(X, True), id="sending-failed"),
        pytest.param(X, False, True, False, FinalStatus(X, True), id="failed-though-complete"),
        pytest.param(F, True, True, False, FinalStatus(X, True), id="recorder-failed"),
        pytest.param(C, True, False, False, FinalStatus(X, True), id="recorder-failed-cancel"),
        # other runners go on with the run: they write its status
        pytest.param(F, False, False, True, FinalStatus(RUNNING, False), id="others-go-on"),
        pytest.param(C, False, False, True, FinalStatus(C, False), id="others-stopping"),
        pytest.param(X, False, False, True, FinalStatus(RUNNING, False), id="failed-others-go-on"),
        pytest.param(
            F, True, False, True, FinalStatus(RUNNING, False), id="recorder-failed-others"
        ),
        # every cell has a record: nobody is left to send anything
        pytest.param(F, False, True, True, FinalStatus(F, True), id="complete-others-live"),
        pytest.param(C, False, True, True, FinalStatus(F, True), id="complete-cancelled-others"),
    ],
)
def test_final_status(
    sent: RunStatus,
    recorder_failed: bool,
    complete: bool,
    others_live: bool,
    expected: FinalStatus,
) -> None:
    got = final_status(
        sent, recorder_failed=recorder_failed, complete=complete, others_live=others_live
    )
    assert got == expected


@pytest.mark.parametrize(
    ("sent", "recorder_failed", "expected"),
    [
        pytest.param(F, False, F, id="finished"),
        pytest.param(C, False, C, id="cancelled"),
        pytest.param(X, False, X, id="failed"),
        pytest.param(F, True, X, id="recorder-failed"),
        pytest.param(C, True, X, id="recorder-failed-cancelled"),
    ],
)
def test_runner_status(sent: RunStatus, recorder_failed: bool, expected: RunStatus) -> None:
    assert runner_status(sent, recorder_failed=recorder_failed) == expected
