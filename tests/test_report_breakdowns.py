"""The Results page's detail tables as table models (cvb_engine/report/breakdowns.py) and the
comparison of two runs on every arm they share (cvb_engine.queries.compare_summaries).

Figures are counted by hand from ROWS; the store path to the same rows is covered by
tests/test_queries.py and the studio's AppTests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from cvb_engine.agent.trace import AgentTrace, ConstraintPlace
from cvb_engine.metrics import RecordRow, Summary, summarize_rows
from cvb_engine.queries import Aggregates, CellRecord, ConstraintView, compare_summaries
from cvb_engine.report import tables
from cvb_engine.report.breakdowns import (
    compare_table,
    episode_read_table,
    every_constraint_table,
    ordered_table,
    scenario_table,
)
from cvb_engine.report.markdown_report import table_lines

HOSTILE = "![x](http://evil.test/a.png) <img src=x onerror=alert(1)> **b** | c"
VARIANT = "incentivized@load=10"
CATEGORY = {"s1": "security", "s2": "concurrency", HOSTILE: "security"}


def row(model: str, sid: str, arm: str, c1: bool, c2: bool = True) -> RecordRow:
    return RecordRow(
        model=model,
        scenario_id=sid,
        category=CATEGORY[sid],
        arm=arm,
        status="ok",
        strict=c1 and c2,
        constraints={"c1": c1, "c2": c2},
    )


# m-a: s1 honored under orders, c1 forgotten as memory (gap +1); s2 honored everywhere
# (gap 0). m-b: c1 forgotten everywhere on s1 (gap 0).
ROWS = [
    row("m-a", "s1", "mandated", True),
    row("m-a", "s1", "incentivized", False),
    row("m-a", "s1", VARIANT, False),
    row("m-a", "s2", "mandated", True),
    row("m-a", "s2", "incentivized", True),
    row("m-a", "s2", VARIANT, True),
    row("m-b", "s1", "mandated", False),
    row("m-b", "s1", "incentivized", False),
    row("m-b", "s1", VARIANT, True),
]


def aggregates(rows: list[RecordRow]) -> Aggregates:
    return Aggregates(
        run_ids=("r1",),
        summary=summarize_rows(rows),
        scenario_category={r.scenario_id: r.category for r in rows},
        n_records=len(rows),
        n_errors=0,
    )


@pytest.fixture(scope="module")
def agg() -> Aggregates:
    return aggregates(ROWS)


def column(table: tables.Table, name: str) -> list[str]:
    at = table.header.index(name)
    return [r[at] for r in table.texts()]


def test_scenario_table_largest_gap_first_with_every_arm(agg: Aggregates) -> None:
    table = scenario_table(agg)
    assert table.header == [
        "model",
        "scenario",
        "category",
        "mandated",
        "incentivized",
        VARIANT,
        "gap",
    ]
    assert table.texts() == [
        ["m-a", "s1", "security", "1.000", "0.000", "0.000", "+1.000"],
        ["m-a", "s2", "concurrency", "1.000", "1.000", "1.000", "0.000"],
        ["m-b", "s1", "security", "0.000", "0.000", "1.000", "0.000"],
    ]
    first = table.rows[0]
    assert (first[3].value, first[3].detail, first[-1].value) == (1.0, "1/1", 1.0)
    assert table.columns[-1].signed and [c.outside for c in table.columns[:3]] == [True] * 3
    assert table.omitted == ""


@pytest.mark.parametrize(
    ("filters", "header", "rows"),
    [
        pytest.param({"models": ["m-b"]}, None, [["m-b", "s1"]], id="model"),
        pytest.param({"categories": ["concurrency"]}, None, [["m-a", "s2"]], id="category"),
        pytest.param(
            {"arms": [VARIANT, "mandated"]},
            ["model", "scenario", "category", "mandated", VARIANT, "gap"],
            [["m-a", "s1"], ["m-a", "s2"], ["m-b", "s1"]],
            id="arms-in-summary-order",
        ),
        pytest.param({"arms": []}, None, [["m-a", "s1"], ["m-a", "s2"], ["m-b", "s1"]], id="none"),
    ],
)
def test_scenario_table_filters(
    agg: Aggregates, filters: dict[str, list[str]], header: list[str] | None, rows: list[list[str]]
) -> None:
    table = scenario_table(agg, **filters)
    assert [r[:2] for r in table.texts()] == rows
    if header is not None:
        assert table.header == header


def test_ordered_table_lists_what_orders_alone_got_honored(agg: Aggregates) -> None:
    table = ordered_table(agg)
    assert table.header == [
        "model",
        "scenario",
        "constraint",
        "category",
        "mandated",
        "incentivized",
        "mandated − incentivized",
    ]
    assert table.texts() == [["m-a", "s1", "c1", "security", "1.000", "0.000", "+1.000"]]
    assert table.rows[0][4].detail == "1/1" and table.rows[0][-1].value == 1.0
    assert ordered_table(agg, models=["m-b"]).rows == ()
    assert ordered_table(agg, categories=["concurrency"]).rows == ()


def test_every_constraint_table_per_arm(agg: Aggregates) -> None:
    table = every_constraint_table(agg, arms=["incentivized"])
    assert table.header == ["model", "scenario", "constraint", "category", "incentivized"]
    assert table.texts() == [
        ["m-a", "s1", "c1", "security", "0.000"],
        ["m-a", "s1", "c2", "security", "1.000"],
        ["m-a", "s2", "c1", "concurrency", "1.000"],
        ["m-a", "s2", "c2", "concurrency", "1.000"],
        ["m-b", "s1", "c1", "security", "0.000"],
        ["m-b", "s1", "c2", "security", "1.000"],
    ]
    assert [r[4].detail for r in table.rows][:2] == ["0/1", "1/1"]
    assert len(every_constraint_table(agg, models=["m-b"], categories=["security"]).rows) == 2


@pytest.mark.parametrize(
    ("cells", "columns", "shown_rows", "shown_arms", "omitted"),
    [
        pytest.param(14, 100, 2, 3, "1 more rows not shown", id="rows"),
        pytest.param(20_000, 2, 3, 2, "1 more columns not shown", id="columns"),
    ],
)
def test_breakdowns_keep_to_the_budget_and_say_what_they_leave_out(
    agg: Aggregates,
    monkeypatch: pytest.MonkeyPatch,
    cells: int,
    columns: int,
    shown_rows: int,
    shown_arms: int,
    omitted: str,
) -> None:
    monkeypatch.setattr(tables, "MAX_CELLS", cells)
    monkeypatch.setattr(tables, "MAX_COLUMNS", columns)
    table = scenario_table(agg)
    assert len(table.rows) == shown_rows and len(table.header) == 4 + shown_arms
    assert table.omitted.startswith(omitted) and "exports hold every figure" in table.omitted
    assert all(len(r) == len(table.columns) for r in table.rows)


def test_every_constraint_table_keeps_to_the_budget(
    agg: Aggregates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "MAX_CELLS", 21)  # 7 columns: 3 rows
    table = every_constraint_table(agg)
    assert len(table.rows) == 3 and table.omitted.startswith("3 more rows not shown")


def hostile_aggregates() -> Aggregates:
    return aggregates(
        [
            row(HOSTILE, HOSTILE, "mandated", True),
            row(HOSTILE, HOSTILE, "incentivized", False),
        ]
    )


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(scenario_table, id="scenario"),
        pytest.param(ordered_table, id="ordered"),
        pytest.param(every_constraint_table, id="every-constraint"),
    ],
)
def test_hostile_names_stay_text(build: Callable[[Aggregates], tables.Table]) -> None:
    table = build(hostile_aggregates())
    texts = table.texts()
    assert texts and texts[0][:2] == [HOSTILE, HOSTILE]  # kept as written, in cells only
    for col, cell in zip(table.columns, table.rows[0], strict=True):
        assert col.outside or HOSTILE not in cell.text
    markdown = "\n".join(table_lines(table))
    assert "![x]" not in markdown and "<img" not in markdown and "**b**" not in markdown


# --------------------------------------------------------------------------- compare runs


def summary_of(rows: list[RecordRow]) -> Summary:
    return summarize_rows(rows)


def test_compare_summaries_compares_every_arm_both_runs_ran() -> None:
    a = summary_of([*ROWS, row("m-a", "s1", "cold", False)])
    b = summary_of(
        [replace(r, strict=True, constraints={"c1": True, "c2": True}) for r in ROWS]
        + [row("m-a", "s1", "agent", True)]
    )
    cmp = compare_summaries("ra", a, "rb", b)
    assert cmp.arms == ["mandated", "incentivized", VARIANT]  # the variant too
    assert (cmp.arms_only_in_a, cmp.arms_only_in_b) == (["cold"], ["agent"])
    deltas = {(d.model, d.arm): d.delta for d in cmp.arm_deltas}
    assert deltas[("m-a", VARIANT)] == pytest.approx(0.5)
    assert deltas[("m-b", VARIANT)] == pytest.approx(0.0)
    assert ("m-a", "cold") not in deltas and ("m-a", "agent") not in deltas


def test_compare_table_rows_arms_then_gaps() -> None:
    a = summary_of(ROWS)
    b = summary_of([replace(r, strict=True, constraints={"c1": True, "c2": True}) for r in ROWS])
    table = compare_table(compare_summaries("ra", a, "rb", b))
    assert table.header == ["model", "arm", "A: ra", "B: rb", "Δ (B − A)"]
    assert [c.key for c in table.columns[2:]] == ["A", "B", "Δ"]
    assert table.texts() == [
        ["m-a", "mandated", "1.000", "1.000", "0.000"],
        ["m-a", "incentivized", "0.500", "1.000", "+0.500"],
        ["m-a", VARIANT, "0.500", "1.000", "+0.500"],
        ["m-b", "mandated", "0.000", "1.000", "+1.000"],
        ["m-b", "incentivized", "0.000", "1.000", "+1.000"],
        ["m-b", VARIANT, "1.000", "1.000", "0.000"],
        ["m-a", "gap", "+0.500", "0.000", "−0.500"],
        ["m-b", "gap", "0.000", "0.000", "0.000"],
    ]
    gap_a = table.rows[6][2]
    assert gap_a.value == pytest.approx(0.5) and gap_a.detail.startswith("+0.500 [")
    assert table.rows[1][2].detail == "1/2" and table.columns[-1].signed


def test_compare_table_keeps_to_the_budget_and_run_ids_stay_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tables, "MAX_CELLS", 25)  # 5 columns: 5 rows
    a = summary_of(ROWS)
    table = compare_table(compare_summaries(HOSTILE, a, "rb", a))
    assert len(table.rows) == 5 and table.omitted.startswith("3 more rows not shown")
    assert table.columns[2].name == f"A: {HOSTILE}" and table.columns[2].outside_name
    assert "<img" not in table_lines(table)[0]


# --------------------------------------------------------------------------- an agent episode


def cell_record(agent: AgentTrace | None, honored: dict[str, bool]) -> CellRecord:
    return CellRecord(
        id=7,
        run_id="r1",
        model="m",
        scenario_id="s1",
        scenario_version=1,
        category="security",
        arm="agent",
        rep=0,
        status="ok",
        error=None,
        response="",
        code="",
        strict=all(honored.values()),
        stated_passed=None,
        latency_s=None,
        prompt_tokens=None,
        completion_tokens=None,
        finish_reason=None,
        prompt_version="v",
        messages_sha256="m",
        scenario_sha256="s",
        constraints=tuple(ConstraintView(c, ok, ()) for c, ok in honored.items()),
        agent=agent,
    )


def test_episode_read_table_per_constraint() -> None:
    trace = AgentTrace(
        transport="tools",
        variant="agent@preload=true",
        constraints=(
            ConstraintPlace(constraint_id="c1", path="AGENTS.md", line=3, end_line=4),
            ConstraintPlace(constraint_id=HOSTILE, path=HOSTILE, line=9, end_line=9),
        ),
        preloaded=("c1",),
        read={"c1": False, HOSTILE: True},
    )
    table = episode_read_table(cell_record(trace, {"c1": True, "c2": False}))
    assert table.header == ["constraint", "read", "in the system message", "obeyed", "its text"]
    assert table.texts() == [
        ["c1", "✗ not read", "✓ preloaded", "✓ honored", "AGENTS.md:3"],
        ["c2", "✗ not read", "–", "✗ violated", "–"],
        [HOSTILE, "✓ read", "–", "–", f"{HOSTILE}:9"],
    ]
    assert [c.outside for c in table.columns] == [True, False, False, False, True]
    assert episode_read_table(cell_record(None, {"c1": True})).rows == ()
