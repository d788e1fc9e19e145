"""The agent arm's reports from a store holding agent records (``tests/agent_store.py``,
figures counted by hand there): the summary aggregated from SQLite and PostgreSQL, the
Markdown and HTML sections, the results file's ``agent_summary``, and the same figures
read back from the results file."""

from __future__ import annotations

import json
from pathlib import Path

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
    from cvb_engine.report.tables import accuracy_table

    table = accuracy_table(summary)
    row = dict(zip(table.header, table.texts()[0], strict=True))
    # the agent variants beside the seed arm, each with its gap to mandated
    assert table.header[1:4] == ["mandated", ags.AGENT, ags.PRELOAD]
    assert row[f"gap (mandated − {ags.AGENT}) [95% CI]"].startswith("+0.500")
    assert row[f"gap (mandated − {ags.PRELOAD}) [95% CI]"].startswith("+1.000")
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


# --------------------------------------------------------------------------- a real run


def test_a_run_of_scripted_agents_reports_what_each_did(
    tmp_path: Path, valid_text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the runner against the scripted tool-calling endpoint: the reader opens the
    rules and follows them, the ignorer opens them and does not, the writer writes at once,
    the messages agent follows only what its messages hold (with preload=true: the rules,
    in its system message, read nothing). ``cvb report`` writes each output from the store
    and from the results file, with the same figures."""
    from scripted_agent import ScriptedAgent
    from test_runner import KEY, KEY_VAR, execute, options, write_scenarios

    from cvb_engine import cli

    monkeypatch.setenv(KEY_VAR, KEY)
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, per_category=1, categories=["library-choice"])
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    models = ["ignorer", "messages", "reader", "writer"]
    arms = ["agent", "agent@preload=true"]
    with ScriptedAgent() as agent:
        execute(options(agent.base_url, scenarios, db, models=models, arms=arms))
    with Session(get_engine(db)) as session:
        summary = db_summary(session, ["r1"])
    got = {
        (s.model, s.arm): (s.read, s.preloaded, s.strict.k, s.strict.n, s.ended.get("answer"))
        for s in summary.agent
    }
    assert got == {
        ("ignorer", "agent"): (1, 0, 0, 1, 1),
        ("ignorer", "agent@preload=true"): (1, 1, 0, 1, 1),
        ("messages", "agent"): (0, 0, 0, 1, 1),
        ("messages", "agent@preload=true"): (0, 1, 1, 1, 1),
        ("reader", "agent"): (1, 0, 1, 1, 1),
        ("reader", "agent@preload=true"): (1, 1, 1, 1, 1),
        ("writer", "agent"): (0, 0, 0, 1, 1),
        ("writer", "agent@preload=true"): (0, 1, 0, 1, 1),
    }
    assert all(s.steps >= 1 and s.tokens_n == 1 for s in summary.agent if s.model != "writer")
    out = tmp_path / "out"
    assert (
        cli.main(
            [
                "report",
                "r1",
                "--db",
                db,
                "--markdown",
                str(out / "r.md"),
                "--html",
                str(out / "r.html"),
                "--json",
                str(out / "r.json"),
            ]
        )
        == 0
    )
    md = (out / "r.md").read_text("utf-8")
    assert "## Agent arm: read versus obeyed" in md
    assert "| reader | agent | 1 | 1.000" in md
    assert "Read versus obeyed (agent arm)" in (out / "r.html").read_text("utf-8")
    data = json.loads((out / "r.json").read_text("utf-8"))
    assert {(e["model"], e["arm"]) for e in data["agent_summary"]} == set(got)
    again = tmp_path / "again.md"
    assert cli.main(["report", str(out / "r.json"), "--markdown", str(again)]) == 0
    section = md.split("## Agent arm", 1)[1]
    assert again.read_text("utf-8").split("## Agent arm", 1)[1] == section
