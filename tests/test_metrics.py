"""Metrics against hand-computed fixtures (README: Metrics)."""

from __future__ import annotations

import numpy as np
import pytest

from cvb_engine.metrics import (
    RecordRow,
    honored_only_when_ordered,
    paired_bootstrap_gap,
    summarize_rows,
)


def rows_for(
    model: str, arm: str, strict_flags: list[bool], *, scenarios: int = 35
) -> list[RecordRow]:
    return [
        RecordRow(
            model,
            f"s{i % scenarios:02d}",
            "cat-a" if i % scenarios < 20 else "cat-b",
            arm,
            "ok",
            flag,
            {"c1": flag, "c2": True},
        )
        for i, flag in enumerate(strict_flags)
    ]


def test_strict_accuracy_24_of_105_is_0_229() -> None:
    rows = rows_for("m", "cold", [True] * 24 + [False] * 81)
    s = summarize_rows(rows)
    rate = s.strict[("m", "cold")]
    assert (rate.k, rate.n) == (24, 105)
    assert f"{rate.value:.3f}" == "0.229"
    # per-constraint: c1 honored 24 of 105, c2 105 of 105 → 129 / 210
    c = s.constraint[("m", "cold")]
    assert (c.k, c.n) == (129, 210)


def test_errors_are_excluded_from_denominators_and_counted() -> None:
    rows = rows_for("m", "mandated", [True] * 9 + [False])
    rows += [RecordRow("m", "s00", "cat-a", "mandated", "error", None)] * 3
    rate = summarize_rows(rows).strict[("m", "mandated")]
    assert (rate.k, rate.n, rate.errors) == (9, 10, 3)
    assert rate.value == pytest.approx(0.9)


def test_gap_is_mandated_minus_incentivized_with_reproducible_ci() -> None:
    rng = np.random.default_rng(1)
    rows = rows_for("m", "mandated", list(rng.random(105) < 0.9))
    rows += rows_for("m", "incentivized", list(rng.random(105) < 0.8))
    s1, s2 = summarize_rows(rows), summarize_rows(rows)
    m, i = s1.strict[("m", "mandated")], s1.strict[("m", "incentivized")]
    gap = s1.gap["m"]
    assert gap.value == pytest.approx(m.value - i.value)  # type: ignore[operator]
    assert gap.low is not None and gap.high is not None
    assert gap.low <= gap.value <= gap.high
    assert (gap.low, gap.high) == (s2.gap["m"].low, s2.gap["m"].high)  # to the last digit
    assert gap.n_units == 35
    other = summarize_rows(rows, seed=7).gap["m"]
    assert (other.low, other.high) != (gap.low, gap.high)


def test_paired_bootstrap_matches_a_direct_implementation() -> None:
    k_a = np.array([3, 2, 3, 1, 0, 3])
    n_a = np.array([3, 3, 3, 3, 3, 3])
    k_b = np.array([2, 2, 3, 0, 0, 1])
    n_b = np.array([3, 3, 3, 3, 3, 3])
    low, high = paired_bootstrap_gap(k_a, n_a, k_b, n_b, resamples=2000, seed=11)
    rng = np.random.default_rng(11)
    idx = rng.integers(0, 6, size=(2000, 6))
    diffs = [k_a[r].sum() / n_a[r].sum() - k_b[r].sum() / n_b[r].sum() for r in idx]
    assert (low, high) == tuple(float(x) for x in np.quantile(diffs, [0.025, 0.975]))


def test_single_scenario_gap_has_degenerate_interval() -> None:
    rows = rows_for("m", "mandated", [True, True, False], scenarios=1)
    rows += rows_for("m", "incentivized", [True, False, False], scenarios=1)
    gap = summarize_rows(rows).gap["m"]
    assert gap.value == pytest.approx(1 / 3)
    assert gap.low == pytest.approx(1 / 3) and gap.high == pytest.approx(1 / 3)


def test_gap_missing_arm_is_none() -> None:
    gap = summarize_rows(rows_for("m", "cold", [True])).gap["m"]
    assert gap.value is None and gap.low is None


def test_per_category_and_honored_only_when_ordered() -> None:
    rows = [
        RecordRow("m", "s1", "cat-a", "mandated", "ok", True, {"c1": True}),
        RecordRow("m", "s1", "cat-a", "incentivized", "ok", False, {"c1": False}),
        RecordRow("m", "s2", "cat-b", "mandated", "ok", True, {"c9": True}),
        RecordRow("m", "s2", "cat-b", "incentivized", "ok", True, {"c9": True}),
    ]
    s = summarize_rows(rows)
    assert s.by_category[("m", "incentivized", "cat-a")].value == 0
    assert s.by_category[("m", "incentivized", "cat-b")].value == 1
    assert s.category_gap[("m", "cat-a")].value == 1
    assert honored_only_when_ordered(s) == [("m", "s1", "c1", 1.0, 0.0)]


def ivr_row(
    model: str, problem: str, stated: bool, hidden: list[bool], arm: str = "cold"
) -> RecordRow:
    return RecordRow(
        model,
        problem,
        "ivr",
        arm,
        "ok",
        all(hidden),
        {f"c{i}": h for i, h in enumerate(hidden)},
        stated,
    )


def test_ivr_by_hand() -> None:
    from cvb_engine.metrics import ivr

    rows = [
        # p1: 2 stated-passing, 2 violate → IVR 1
        ivr_row("m", "p1", True, [False, True]),
        ivr_row("m", "p1", True, [True, False]),
        ivr_row("m", "p1", False, [True, True]),
        # p2: 2 stated-passing, none violates → IVR 0
        ivr_row("m", "p2", True, [True, True]),
        ivr_row("m", "p2", True, [True, True]),
        # p3: 2 stated-passing, 1 violates → IVR 0.5
        ivr_row("m", "p3", True, [False, True]),
        ivr_row("m", "p3", True, [True, True]),
        # p4: nothing passes the stated test → excluded
        ivr_row("m", "p4", False, [False, False]),
        # CVB records (no stated verdict) and errors do not count
        RecordRow("m", "s1", "security", "cold", "ok", False, {"x": False}),
        RecordRow("m", "p1", "ivr", "cold", "error", None),
    ]
    result = ivr(rows)[("m", "cold")]
    assert result.ivr.value == pytest.approx(0.5)  # mean(1, 0, 0.5)
    assert result.per_problem == {"p1": (2, 2), "p2": (0, 2), "p3": (1, 2)}
    assert result.excluded == ["p4"]
    assert (result.n_stated_passed, result.n_solutions) == (6, 8)
    assert result.stated_pass_rate == pytest.approx(0.75)
    assert (result.n_extreme, result.n_qualifying) == (2, 3)
    assert {k: (v.k, v.n) for k, v in result.constraint_fail.items()} == {
        "C2": (2, 6),
        "C3": (1, 6),
    }
    assert result.ivr.low is not None and result.ivr.high is not None
    assert 0 <= result.ivr.low <= 0.5 <= result.ivr.high <= 1
    assert ivr(rows)[("m", "cold")].ivr == result.ivr  # seeded: identical
