"""The Run page's live tables as table models (cvb_engine/report/live.py): strict accuracy so
far and a run's runners."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cvb_engine.claims import RunnerState
from cvb_engine.metrics import Rate
from cvb_engine.monitor import ArmAccuracy
from cvb_engine.report import tables
from cvb_engine.report.live import live_accuracy_table, runner_table

HOSTILE = "![x](http://evil.test/a.png) <img src=x onerror=alert(1)> :red[red]"


def test_live_accuracy_per_model_and_arm_in_the_matrix_order() -> None:
    table = live_accuracy_table(
        [
            ArmAccuracy("m-b", "incentivized@load=10", Rate(1, 3, 0)),
            ArmAccuracy("m-b", "mandated", Rate(2, 3, 1)),
            ArmAccuracy("m-a", "cold", Rate(0, 0, 2)),
            ArmAccuracy("m-a", "mandated", Rate(6, 6, 0)),
        ]
    )
    assert table.header == ["model", "cold", "mandated", "incentivized@load=10"]
    assert table.texts() == [
        ["m-b", "", "67% (2/3)", "33% (1/3)"],  # "": no record of this arm yet
        ["m-a", "–", "100% (6/6)", ""],  # "–": only errors so far
    ]
    assert table.rows[1][2].value == 1.0 and table.title == "Strict accuracy so far"
    assert table.columns[0].outside and all(c.outside_name for c in table.columns[1:])


def test_live_accuracy_keeps_to_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tables, "MAX_COLUMNS", 1)
    monkeypatch.setattr(tables, "MAX_CELLS", 2)  # 2 columns: 1 row
    rows = [ArmAccuracy(m, a, Rate(1, 1, 0)) for m in ("m-a", "m-b") for a in ("cold", "mandated")]
    table = live_accuracy_table(rows)
    assert table.texts() == [["m-a", "100% (1/1)"]]
    assert table.omitted.startswith("1 more rows and 1 more columns not shown")


def state(**over: object) -> RunnerState:
    now = datetime.now(UTC)
    base: dict[str, object] = {
        "worker": "lab-2",
        "host": "lab-2.example",
        "pid": 4242,
        "api_key_env": "GROQ_TEAM_B_API_KEY",
        "status": "running",
        "state": "live",
        "started": now,
        "heartbeat": now,
        "heartbeat_age_s": 3.4,
        "lease_s": 60.0,
        "cells_done": 12,
        "cells_failed": 1,
        "held": 4,
        "per_min": 18.25,
    }
    base.update(over)
    return RunnerState(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("over", "column", "shown"),
    [
        pytest.param({}, "cells/min", "18.2", id="live-rate"),
        pytest.param({"state": "lapsed", "per_min": None}, "cells/min", "–", id="lapsed-no-rate"),
        pytest.param({}, "last heartbeat", "3 s ago", id="heartbeat"),
        pytest.param({}, "stored", "12 (1 errors)", id="stored"),
        pytest.param({}, "holding", "4", id="holding"),
        pytest.param({}, "where", "lab-2.example · pid 4242", id="where"),
        pytest.param({"host": None}, "where", "? · pid 4242", id="no-host"),
        pytest.param({"api_key_env": None}, "key variable", "none", id="no-key"),
    ],
)
def test_runner_table(over: dict[str, object], column: str, shown: str) -> None:
    table = runner_table([state(**over)])
    assert table.texts()[0][table.header.index(column)] == shown


def test_runner_table_keeps_order_budget_and_names_as_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tables, "MAX_CELLS", 16)  # 8 columns: 2 rows
    table = runner_table(
        [state(worker=HOSTILE, host=HOSTILE, api_key_env=HOSTILE), state(worker="b"), state()]
    )
    assert [r[0] for r in table.texts()] == [HOSTILE, "b"]
    assert table.omitted.startswith("1 more rows not shown")
    outside = [c.outside for c in table.columns]
    assert outside == [True, False, False, False, False, False, True, True]
    assert table.texts()[0][-1] == HOSTILE  # kept as written: the studio draws it as text


def test_error_table_says_who_failed_and_keeps_reasons_as_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cvb_engine.monitor import ErrorRow
    from cvb_engine.report.live import error_table

    at = datetime(2026, 12, 5, 17, 4, 9, tzinfo=UTC)
    rows = [
        ErrorRow(at, HOSTILE, "sid-a", "cold", 2, 5, f"HTTP 500: {HOSTILE}", "api"),
        ErrorRow(at, "m", "sid-b", "memory", 0, 1, "layer gone", "memory"),
        ErrorRow(at, "m", "sid-c", "cold", 1, 3, "timed out", None),  # before schema 5
    ]
    table = error_table(rows)
    assert table.header[0] == "at (UTC)" and table.title == "Latest errors"
    assert table.texts() == [
        ["17:04:09", HOSTILE, "sid-a", "cold", "2", "5", "endpoint", f"HTTP 500: {HOSTILE}"],
        ["17:04:09", "m", "sid-b", "memory", "0", "1", "memory layer", "layer gone"],
        ["17:04:09", "m", "sid-c", "cold", "1", "3", "endpoint", "timed out"],
    ]
    assert [c.name for c in table.columns if c.outside] == ["model", "scenario", "arm", "reason"]
    monkeypatch.setattr(tables, "MAX_CELLS", 16)  # 8 columns: 2 rows
    assert error_table(rows).omitted.startswith("1 more rows not shown")
