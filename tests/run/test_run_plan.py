"""The plan's pure parts: option checks, the order cells are sent in, matrix differences."""

from __future__ import annotations

from typing import Any

import pytest

from cvb_engine.run.binding import cells_to_send
from cvb_engine.run.plan import Cell, diff_matrices
from cvb_engine.run.validate import option_problems
from cvb_engine.run_options import RunOptions

RUNS_RULE = "--runs, --concurrency, --max-tokens and --max-response-chars must be at least 1"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param({}, [], id="defaults"),
        pytest.param({"run_id": "nightly-2026-12-01"}, [], id="good-run-id"),
        pytest.param({"runs": 0}, [RUNS_RULE], id="no-runs"),
        pytest.param({"concurrency": 0}, [RUNS_RULE], id="no-concurrency"),
        pytest.param({"max_tokens": -1}, [RUNS_RULE], id="negative-tokens"),
        pytest.param({"max_response_chars": 0}, [RUNS_RULE], id="no-chars"),
        pytest.param({"lease_s": 0}, ["--lease must be more than 0 seconds"], id="no-lease"),
        pytest.param(
            {"join": True}, ["--join needs --run-id: the run to take part in"], id="join-no-id"
        ),
        pytest.param(
            {"runs": 0, "lease_s": -1},
            [RUNS_RULE, "--lease must be more than 0 seconds"],
            id="every-problem-named",
        ),
    ],
)
def test_option_problems(options: dict[str, Any], expected: list[str]) -> None:
    assert option_problems(RunOptions(**options)) == expected


@pytest.mark.parametrize("run_id", ["../escape", "a b", "", "x" * 200])
def test_a_bad_run_id_is_a_problem(run_id: str) -> None:
    [problem] = option_problems(RunOptions(run_id=run_id))
    assert "run_id" in problem or "run id" in problem


A: Cell = ("m", "a", "cold", 0)
B: Cell = ("m", "b", "cold", 0)
C: Cell = ("m", "c", "cold", 0)
D: Cell = ("m", "d", "cold", 0)


@pytest.mark.parametrize(
    ("status", "retry_errors", "expected"),
    [
        pytest.param({}, False, [A, B, C, D], id="fresh"),
        pytest.param({A: "ok", C: "ok"}, False, [B, D], id="resume"),
        pytest.param({A: "error", C: "ok"}, False, [B, D, A], id="errors-last"),
        pytest.param({A: "error", B: "ok", C: "error"}, True, [A, C], id="retry-errors-only"),
        pytest.param({A: "ok", B: "ok", C: "ok", D: "ok"}, False, [], id="complete"),
        pytest.param({A: "ok"}, True, [], id="retry-without-errors"),
    ],
)
def test_cells_to_send(status: dict[Cell, str], retry_errors: bool, expected: list[Cell]) -> None:
    assert cells_to_send([A, B, C, D], status, retry_errors=retry_errors) == expected


def test_diff_matrices_names_what_changed() -> None:
    old = {"runs": 3, "scenarios": {"a": {"version": 1}, "b": {"version": 1}}}
    new = {"runs": 5, "scenarios": {"a": {"version": 2}, "c": {"version": 1}}}
    assert diff_matrices(old, new) == [
        "runs: 3 → 5",
        "scenarios: added ['c']; removed ['b']; changed files ['a']",
    ]
    assert diff_matrices(old, old) == []
