"""The agent arm's reports from a store holding agent records (``tests/agent_store.py``,
figures counted by hand there): the summary aggregated from SQLite and PostgreSQL, the
Markdown and HTML sections, the results file's ``agent_summary``, and the same figures
read back from the results file."""

from __future__ import annotations

import json

import agent_store as ags
import pytest
from sqlmodel import Session

from cvb_engine.metrics import Summary, summarize_rows
from cvb_engine.queries import aggregates, cell_records
from cvb_engine.report import html_report, markdown
from cvb_engine.results import db_summary, export_results, rows_from_results
from cvb_engine.results_format import ResultsFile
from cvb_engine.store import get_engine


@pytest.fixture
def store(db_url: str, valid_text: str) -> str:
    ags.fill(db_url, valid_text)
    return db_url


@pytest.fixture
def summary(store: str) -> Summary:
    with Session(get_engine(store)) as session:
        return db_summary(session, [ags.RUN_ID])


def _by_arm(summary: Summary) -> dict[str, object]:
    return {s.arm: s for s in summary.agent}


def test_the_figures_by_hand(summary: Summary) -> None:
    stats = _by_arm(summary)
    assert list(stats) == [ags.AGENT, ags.PRELOAD]
    plain, pre = stats[ags.AGENT], stats[ags.PRELOAD]
    assert (plain.strict.k, plain.strict.n, plain.read, plain.traced) == (1, 2, 1, 2)
    assert (plain.strict_read.k, plain.strict_read.n) == (1, 1)
    assert (plain.strict_unread.k, plain.strict_unread.n) == (0, 1)
    assert (plain.constraint.k, plain.constraint.n) == (2, 4)
    assert plain.gap.value == pytest.approx(0.5)
    assert (plain.steps, plain.tokens, plain.tokens_n) == (3, 420, 2)
    assert dict(plain.ended) == {"answer": 2}
    assert (pre.strict.k, pre.strict.n, pre.read, pre.read_all, pre.preloaded) == (0, 2, 1, 0, 2)
    assert (pre.strict_read.k, pre.strict_read.n, pre.strict_unread.n) == (0, 1, 1)
    assert (pre.constraint_read.k, pre.constraint_read.n) == (0, 1)  # timeout-set, violated
    assert plain.preloaded == 0
    assert (pre.constraint.k, pre.constraint.n) == (1, 4)  # httpx honored once; no-code: none
    assert pre.gap.value == pytest.approx(1.0)
    assert (pre.refused, pre.refused_episodes, pre.no_file) == (2, 1, 1)
    assert (pre.tokens, pre.tokens_n) == (80, 1)
    assert dict(pre.ended) == {"answer": 1, "steps": 1}


def test_the_agent_variants_stand_beside_the_seed_arm(store: str, summary: Summary) -> None:
    assert summary.arms == ["mandated", ags.AGENT, ags.PRELOAD]
    with Session(get_engine(store)) as session:
        agg = aggregates(session, [ags.RUN_ID])
        cell = cell_records(session, ags.RUN_ID, ags.MODEL, ags.SID, 0)
    assert [s.arm for s in agg.summary.agent] == [ags.AGENT, ags.PRELOAD]
    assert list(cell) == ["mandated", ags.AGENT, ags.PRELOAD]
    assert cell[ags.AGENT].agent is not None and cell[ags.AGENT].code == ags.GOOD_CODE


def test_markdown_and_html_sections(summary: Summary) -> None:
    md = markdown(summary)
    section = md.split("## Agent arm: read versus obeyed", 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("| m-a")]
    assert lines[0].startswith("| m-a | agent | 2 | 0.500 [")
    assert "| 0.500 (1/2) |" in lines[0]  # read the rules
    assert (
        "agent@preload=true" in lines[1]
        and "| 0.500 (1/2) | 0.000 (0/2) | 1.000 (2/2) |" in lines[1]
    )
    assert "evil.test" not in md  # transcripts are not in reports
    page = html_report(summary, reference=None)
    assert "Read versus obeyed (agent arm)" in page and "evil.test" not in page


def test_the_results_file_carries_the_summary_and_reads_back_the_same(store: str) -> None:
    with Session(get_engine(store)) as session:
        data = export_results(session, ags.RUN_ID)
        stored = db_summary(session, [ags.RUN_ID])
    ResultsFile.model_validate_json(json.dumps(data))  # as a reader reads the file
    entries = {e["arm"]: e for e in data["agent_summary"]}
    assert entries[ags.AGENT]["strict_when_read"]["k"] == 1
    assert entries[ags.PRELOAD]["ended"] == {"answer": 1, "steps": 1, "error": 0, "timeout": 0}
    assert entries[ags.PRELOAD]["episodes_with_refusals"] == 1
    assert entries[ags.PRELOAD]["tokens"] == 80
    assert all(r.get("agent") for r in data["records"] if r["arm"].startswith("agent"))
    again = summarize_rows(rows_from_results(data))
    assert again.agent == stored.agent
