"""Paired comparisons and flakiness, against figures computed independently."""

from __future__ import annotations

import json
import sys
from math import comb
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_dbtools import BAD, GOOD, cvb

from cvb_engine.compare import (
    Pair,
    compare_groups,
    compare_pairs,
    comparison_markdown,
    flakiness,
    mcnemar_exact,
    pair_models,
    pair_runs,
    verdicts,
)
from cvb_engine.metrics import BOOTSTRAP_SEED

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_openai import FakeOpenAI


@pytest.mark.parametrize(
    ("lost", "gained", "p"),
    [
        pytest.param(0, 0, 1.0, id="no-discordant"),
        pytest.param(1, 0, 1.0, id="one"),
        pytest.param(5, 0, 2 / 32, id="five-one-way"),
        pytest.param(0, 5, 2 / 32, id="symmetric"),
        pytest.param(10, 2, 2 * (1 + 12 + 66) / 4096, id="ten-two"),
        pytest.param(3, 3, 1.0, id="balanced-capped"),
        pytest.param(20, 0, 2 / 2**20, id="tiny"),
    ],
)
def test_mcnemar_exact_by_hand(lost: int, gained: int, p: float) -> None:
    assert mcnemar_exact(lost, gained) == pytest.approx(p, rel=1e-12)


def test_mcnemar_large_counts_stay_exact() -> None:
    # 200 vs 150 discordant: the binomial tail summed with exact integers here too
    n, k = 350, 150
    want = min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n)
    assert mcnemar_exact(200, 150) == pytest.approx(want, rel=1e-12)


def rec(model: str, sid: str, arm: str, rep: int, strict: bool | None, status: str = "ok") -> dict:
    return {
        "model": model,
        "scenario_id": sid,
        "arm": arm,
        "rep": rep,
        "status": status,
        "strict": strict,
    }


def independent_ci(
    pairs: list[tuple[str, bool, bool]], resamples: int, seed: int
) -> tuple[float, float]:
    """Resample scenarios with replacement, B − A on the resampled cells (plain Python)."""
    ids = sorted({s for s, _, _ in pairs})
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(ids), size=(resamples, len(ids)))
    diffs = []
    for row in draws:
        ka = kb = n = 0
        for i in row:
            for s, a, b in pairs:
                if s == ids[i]:
                    ka, kb, n = ka + a, kb + b, n + 1
        diffs.append((kb - ka) / n)
    low, high = np.quantile(diffs, [0.025, 0.975])
    return float(low), float(high)


def test_compare_pairs_against_a_hand_computation() -> None:
    cells = [  # scenario, A, B
        ("s1", True, True), ("s1", True, False), ("s1", False, False),
        ("s2", False, True), ("s2", False, True), ("s2", True, True),
        ("s3", True, False), ("s3", True, True),
        ("s4", False, True),
    ]  # fmt: skip
    pairs = [Pair("m", s, "cold", i, a, b) for i, (s, a, b) in enumerate(cells)]
    got = compare_pairs(pairs, resamples=400, seed=BOOTSTRAP_SEED)
    assert (got.pairs, got.scenarios, got.strict_a, got.strict_b) == (9, 4, 5, 6)
    assert (got.lost, got.gained) == (2, 3)
    assert got.difference == pytest.approx(1 / 9)
    assert got.p_value == pytest.approx(1.0)  # 2 vs 3: nowhere near
    low, high = independent_ci(cells, 400, BOOTSTRAP_SEED)
    assert (got.ci_low, got.ci_high) == (pytest.approx(low), pytest.approx(high))
    flips = {f.scenario_id: (len(f.lost), len(f.gained)) for f in got.flips}
    assert flips == {"s1": (1, 0), "s2": (0, 2), "s3": (1, 0), "s4": (0, 1)}


def test_identical_runs_have_no_difference() -> None:
    pairs = [Pair("m", f"s{i}", "cold", 0, i % 2 == 0, i % 2 == 0) for i in range(10)]
    got = compare_pairs(pairs, resamples=200)
    assert got.difference == 0 and (got.ci_low, got.ci_high) == (0, 0) and got.p_value == 1
    assert "No shared cell flipped." in comparison_markdown("t", [got], a="A", b="B")


def test_only_cells_both_answered_pair() -> None:
    a = verdicts(
        [
            rec("m", "s1", "cold", 0, True),
            rec("m", "s1", "cold", 1, True),
            rec("m", "s2", "cold", 0, False),
            rec("m", "s3", "cold", 0, None, "error"),
            rec("x", "s1", "cold", 0, True),  # a model B never ran
        ]
    )
    b = verdicts(
        [
            rec("m", "s1", "cold", 0, False),
            rec("m", "s1", "cold", 1, None, "error"),  # an API failure is not a verdict
            rec("m", "s2", "cold", 0, True),
            rec("m", "s3", "cold", 0, True),
        ]
    )
    pairs = pair_runs(a, b)
    assert sorted((p.scenario_id, p.rep, p.a, p.b) for p in pairs) == [
        ("s1", 0, True, False),
        ("s2", 0, False, True),
    ]


def test_pair_models_of_one_run() -> None:
    found = verdicts(
        [
            rec("ma", "s1", "cold", 0, True),
            rec("mb", "s1", "cold", 0, False),
            rec("ma", "s1", "mandated", 0, False),
            rec("mb", "s1", "mandated", 0, True),
            rec("ma", "s2", "cold", 0, True),  # mb has no s2
        ]
    )
    pairs = pair_models(found, "ma", "mb")
    assert sorted((p.arm, p.a, p.b) for p in pairs) == [
        ("cold", True, False),
        ("mandated", False, True),
    ]
    groups = compare_groups(pairs, resamples=100)
    assert [g.label for g in groups] == ["all", "arm cold", "arm mandated"]


@pytest.mark.parametrize(
    ("stricts", "cells", "flaky"),
    [
        pytest.param([[True, True, True]], 1, 0, id="stable"),
        pytest.param([[True, False, True]], 1, 1, id="one-flip"),
        pytest.param([[True], [False, False]], 1, 0, id="single-rep-not-counted"),
        pytest.param([[True, False], [False, False], [True, True, False]], 3, 2, id="mixed"),
        pytest.param([[True, None, True]], 1, 0, id="error-rep-ignored"),
    ],
)
def test_flakiness_table(stricts: list[list[bool | None]], cells: int, flaky: int) -> None:
    records = [
        rec("m", f"s{i}", "cold", rep, v, "ok" if v is not None else "error")
        for i, reps in enumerate(stricts)
        for rep, v in enumerate(reps)
    ]
    [row] = flakiness(verdicts(records))
    assert (row.cells, row.flaky) == (cells, flaky)


def _run(url: str, run_id: str, reply: Any, scenario_dir: Path) -> None:
    with FakeOpenAI(models=["m-a", "m-b"], reply=reply) as server:
        done = cvb(
            "run", "--scenarios", str(scenario_dir), "--base-url", server.base_url,
            "--api-key-env", "", "--models", "m-a,m-b", "--runs", "3", "--run-id", run_id,
            "--db", url,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_cli_compare_matches_the_results_files(scenario_dir: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cmp.db'}"
    calls = {"n": 0}

    def flaky_reply(request: dict[str, Any]) -> str:
        calls["n"] += 1
        return GOOD if calls["n"] % 3 else BAD

    _run(url, "base", lambda r: BAD if r["model"] == "m-b" else GOOD, scenario_dir)
    _run(url, "next", flaky_reply, scenario_dir)
    files = {}
    for rid in ("base", "next"):
        assert (
            cvb("report", rid, "--db", url, "--json", str(tmp_path / f"{rid}.json")).returncode == 0
        )
        files[rid] = json.loads((tmp_path / f"{rid}.json").read_text())["records"]
    # independently, from the two files
    key = lambda r: (r["model"], r["scenario_id"], r["arm"], r["rep"])  # noqa: E731
    a = {key(r): r["strict"] for r in files["base"] if r["status"] == "ok"}
    b = {key(r): r["strict"] for r in files["next"] if r["status"] == "ok"}
    shared = sorted(set(a) & set(b))
    lost = sum(a[k] and not b[k] for k in shared)
    gained = sum(b[k] and not a[k] for k in shared)
    diff = (sum(b[k] for k in shared) - sum(a[k] for k in shared)) / len(shared)
    n = lost + gained
    p = (
        1.0
        if n == 0
        else min(1.0, 2 * sum(comb(n, i) for i in range(min(lost, gained) + 1)) / 2**n)
    )
    assert lost + gained > 0
    out = cvb("report", "--db", url, "--compare", "base", str(tmp_path / "next.json"))
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("| all |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[1]) == len(shared)
    assert float(cells[5]) == pytest.approx(diff, abs=5e-4)
    assert (int(cells[7]), int(cells[8])) == (lost, gained)
    assert float(cells[9]) == pytest.approx(p, rel=1e-2)
    low, high = (float(x) for x in cells[6].replace("\\", "").strip("[]").split(","))
    assert low - 5e-4 <= diff <= high + 5e-4  # shown rounded to 3 places
    assert "### Flipped cells by scenario" in out.stdout
    assert "## Flakiness: next" in out.stdout
    # two models of one run
    models = cvb("report", "base", "--db", url, "--compare-models", "m-a", "m-b")
    assert models.returncode == 0, models.stderr
    row = next(line for line in models.stdout.splitlines() if line.startswith("| all |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # base: m-a always strictly accurate, m-b never: 9 shared cells (3 arms x 3 reps), all lost
    assert cells[1:6] == ["9", "1", "1.000", "0.000", "-1.000"]
    assert (cells[7], cells[8]) == ("9", "0")
    assert float(cells[9]) == pytest.approx(2 / 2**9, rel=1e-2)
    missing = cvb("report", "base", "--db", url, "--compare-models", "m-a", "nope")
    assert missing.returncode == 2 and "no answered record of nope" in missing.stderr
