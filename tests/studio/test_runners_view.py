"""The Run page's table of a run's runners (studio/components/runners.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from markdown_support import HOSTILE, assert_inert

from cvb_engine.claims import RunnerState
from studio.components.runners import runner_rows


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
        pytest.param({"api_key_env": None}, "key variable", "none", id="no-key"),
    ],
)
def test_runner_rows(over: dict[str, object], column: str, shown: str) -> None:
    table = runner_rows([state(**over)])
    assert table.iloc[0][column] == shown


def test_runner_names_hosts_and_variables_are_shown_as_text() -> None:
    table = runner_rows([state(worker=HOSTILE, host=HOSTILE, api_key_env=HOSTILE)])
    cells = [str(table.index[0]), str(table.iloc[0]["where"]), str(table.iloc[0]["key variable"])]
    assert_inert(cells)
