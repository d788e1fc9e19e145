"""The memory-arm metrics (README: Memory arms) against hand-computed fixtures, and their report tables."""

from __future__ import annotations

import pytest

from cvb_engine.metrics import RecordRow, summarize_rows
from cvb_engine.report import (
    markdown,
    memory_channel_table,
    memory_curve_table,
    memory_position_table,
)

MANDATED, SEED = "mandated", "incentivized"
L10 = "incentivized@load=10"
L10_START = "incentivized@load=10,position=start"
L10_SYS = "incentivized@load=10,channel=system"
L50 = "incentivized@load=50"


def rows(arm: str, strict_by_scenario: dict[str, list[bool]], model: str = "m") -> list[RecordRow]:
    return [
        RecordRow(model, sid, "concurrency", arm, "ok", value, {"c1": value})
        for sid, values in strict_by_scenario.items()
        for value in values
    ]


# Per scenario (s1, s2, s3), two repetitions each:
FIXTURE = [
    *rows(MANDATED, {"s1": [True, True], "s2": [True, True], "s3": [True, False]}),  # 5/6
    *rows(SEED, {"s1": [True, True], "s2": [True, False], "s3": [True, False]}),  # 4/6
    *rows(L10, {"s1": [True, False], "s2": [True, False], "s3": [False, False]}),  # 2/6
    *rows(L10_START, {"s1": [True, True], "s2": [True, False], "s3": [False, False]}),  # 3/6
    *rows(L10_SYS, {"s1": [True, True], "s2": [True, True], "s3": [True, True]}),  # 6/6
    *rows(L50, {"s1": [False, False], "s2": [False, False], "s3": [True, False]}),  # 1/6
]


@pytest.fixture(scope="module")
def summary():  # type: ignore[no-untyped-def]
    return summarize_rows(FIXTURE)


def stat(summary, arm):  # type: ignore[no-untyped-def]
    return next(m for m in summary.memory if m.arm == arm)


@pytest.mark.parametrize(
    ("arm", "k", "load", "position", "channel", "gap"),
    [
        pytest.param(SEED, 4, 0, "spread", "inline", 1 / 6, id="seed"),
        pytest.param(L10, 2, 10, "spread", "inline", 3 / 6, id="load-10"),
        pytest.param(L10_START, 3, 10, "start", "inline", 2 / 6, id="start"),
        pytest.param(L10_SYS, 6, 10, "spread", "system", -1 / 6, id="system"),
        pytest.param(L50, 1, 50, "spread", "inline", 4 / 6, id="load-50"),
    ],
)
def test_each_variant_by_hand(  # type: ignore[no-untyped-def]
    summary, arm: str, k: int, load: int, position: str, channel: str, gap: float
) -> None:
    s = stat(summary, arm)
    assert (s.strict.k, s.strict.n) == (k, 6)
    assert (s.load, s.position, s.channel) == (load, position, channel)
    assert s.gap.value == pytest.approx(gap)
    assert s.strict_ci.n_units == 3
    assert s.strict_ci.low is not None and s.strict_ci.high is not None
    assert s.strict_ci.low <= s.strict.value <= s.strict_ci.high
    assert s.gap.low is not None and s.gap.low <= s.gap.value <= s.gap.high


def test_a_ci_is_a_point_when_every_scenario_agrees(summary) -> None:  # type: ignore[no-untyped-def]
    s = stat(summary, L10_SYS)  # 2/2 on every scenario
    assert s.strict_ci.low == s.strict_ci.high == 1.0


def test_seed_arms_only_have_no_memory_section() -> None:
    plain = summarize_rows([r for r in FIXTURE if r.arm in (MANDATED, SEED)])
    assert plain.memory == []
    assert "## Memory arms" not in markdown(plain)


def test_curve_table_puts_the_load_0_point_on_every_position(summary) -> None:  # type: ignore[no-untyped-def]
    built = memory_curve_table(summary)
    header, table = built.header, built.texts()
    assert header == ["model", "channel", "position", "load 0", "load 10", "load 50"]
    by = {(r[1], r[2]): r[3:] for r in table}
    assert by[("inline", "spread")][0].startswith("0.667 [")  # the seed arm at load 0
    assert by[("inline", "spread")][1].startswith("0.333 [")
    assert by[("inline", "spread")][2].startswith("0.167 [")
    assert by[("inline", "start")][0].startswith("0.667 [")  # load 0 joins every position
    assert by[("inline", "start")][1].startswith("0.500 [")
    assert by[("inline", "start")][2] == "–"
    assert by[("system", "spread")][1].startswith("1.000 [1.000, 1.000]")


def test_channel_and_position_tables(summary) -> None:  # type: ignore[no-untyped-def]
    built = memory_channel_table(summary)
    header, table = built.header, built.texts()
    assert header == ["model", "load", "position", "gap: inline", "gap: system"]
    row = next(r for r in table if r[1] == "10" and r[2] == "spread")
    assert row[3].startswith("+0.500") and row[4].startswith("−0.167")
    built = memory_position_table(summary)
    header, table = built.header, built.texts()
    assert header[3:] == ["start", "spread"]
    assert table == [["m", "10", "inline", table[0][3], table[0][4]]]
    assert table[0][3].startswith("0.500") and table[0][4].startswith("0.333")


def test_markdown_report_has_the_memory_section(summary) -> None:  # type: ignore[no-untyped-def]
    text = markdown(summary)
    assert "## Memory arms" in text
    assert "### Adherence versus memory size" in text and "### Channels: gap to mandated" in text


def test_html_report_draws_the_curve_with_bands_and_escapes_names() -> None:
    from cvb_engine.report.html import html_report

    hostile = "<img src=x onerror=alert(1)>"
    summary = summarize_rows(
        [*FIXTURE, *(r.__class__(**{**r.__dict__, "model": hostile}) for r in FIXTURE)]
    )
    page = html_report(summary, title="t")
    assert "<h2>Memory arms</h2>" in page
    assert page.count("<polygon") >= 2 and 'data-curve="m · inline · spread"' in page
    assert hostile not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
