"""cvb_engine.queries on hand-built stores (SQLite and, when available, PostgreSQL).

Records are scored with the engine's own scoring (the conftest scenario), so the
stored check outcomes and evidence are real; the expected figures are counted
by hand from the table below.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlmodel import Session

from cvb_engine import queries as q
from cvb_engine.metrics import ivr, summarize_rows
from cvb_engine.prompts import PROMPT_VERSION
from cvb_engine.report.notes import ReportNotes
from cvb_engine.report.tables import outcome_table
from cvb_engine.results import db_ivr_rows, export_results, rows_from_results, save_scores
from cvb_engine.scenario import load_text
from cvb_engine.scoring import score_response
from cvb_engine.store import Record, Run, get_engine

GOOD = "```python\nimport httpx\n\n\ndef f(url):\n    return httpx.get(url, timeout=5).json()\n```"
NO_TIMEOUT = "```python\nimport httpx\n\n\ndef f(url):\n    return httpx.get(url).json()\n```"
BAD = "```python\nimport requests\n\n\ndef f(url):\n    return requests.get(url).json()\n```"

# (run, model, scenario, category, arm, rep, reply or None for an API error)
CELLS: list[tuple[str, str, str, str, str, int, str | None]] = [
    ("r1", "m-a", "s1", "security", "cold", 0, BAD),
    ("r1", "m-a", "s1", "security", "mandated", 0, GOOD),
    ("r1", "m-a", "s1", "security", "incentivized", 0, NO_TIMEOUT),
    ("r1", "m-a", "s2", "concurrency", "cold", 0, None),
    ("r1", "m-a", "s2", "concurrency", "mandated", 0, GOOD),
    ("r1", "m-a", "s2", "concurrency", "incentivized", 0, GOOD),
    ("r1", "m-b", "s1", "security", "cold", 0, GOOD),
    ("r1", "m-b", "s1", "security", "mandated", 0, GOOD),
    ("r1", "m-b", "s1", "security", "incentivized", 0, GOOD),
    ("r2", "m-a", "s1", "security", "cold", 0, GOOD),
    ("r2", "m-a", "s1", "security", "mandated", 0, GOOD),
    ("r2", "m-a", "s1", "security", "incentivized", 0, GOOD),
]


def _add_run(session: Session, run_id: str) -> None:
    session.add(Run(id=run_id, prompt_version=PROMPT_VERSION, params_json="{}", status="finished"))


def fill(db_url: str, valid_text: str, cells: list = CELLS) -> None:  # type: ignore[type-arg]
    scenario = load_text(valid_text).scenario
    with Session(get_engine(db_url)) as session:
        for run_id in sorted({c[0] for c in cells}):
            _add_run(session, run_id)
        session.commit()
        for run_id, model, sid, cat, arm, rep, reply in cells:
            record = Record(
                run_id=run_id,
                model=model,
                scenario_id=sid,
                scenario_version=1,
                scenario_sha256="x",
                category=cat,
                arm=arm,
                rep=rep,
                status="ok" if reply is not None else "error",
                error=None if reply is not None else "HTTP 500",
                response=reply,
                messages_sha256="m",
                prompt_version=PROMPT_VERSION,
            )
            session.add(record)
            session.flush()
            if reply is not None:
                save_scores(session, record, score_response(scenario, reply))
        session.commit()


@pytest.fixture
def filled(db_url: str, valid_text: str) -> str:
    fill(db_url, valid_text)
    return db_url


def test_list_runs_counts_from_the_index(filled: str) -> None:
    with Session(get_engine(filled)) as session:
        runs = {r.id: r for r in q.list_runs(session)}
    assert set(runs) == {"r1", "r2"}
    assert (runs["r1"].n_records, runs["r1"].models) == (9, ("m-a", "m-b"))
    assert (runs["r2"].n_records, runs["r2"].models) == (3, ("m-a",))
    assert "r1 · " in runs["r1"].label and "9 records" in runs["r1"].label


def test_data_version_changes_with_new_and_rescored_records(filled: str, valid_text: str) -> None:
    engine = get_engine(filled)
    with Session(engine) as session:
        before = q.data_version(session, ["r1"])
        assert (before.n_records, before.has_ivr) == (9, False)
        assert q.data_version(session, []) == q.DataVersion(0, 0, "", False)
        record = session.get(Record, 1)
        assert record is not None
        save_scores(session, record, score_response(load_text(valid_text).scenario, GOOD))
        session.commit()
        rescored = q.data_version(session, ["r1"])
    assert rescored != before and rescored.n_records == 9
    assert q.data_version(Session(engine), ["r2"]).n_records == 3


def test_aggregates_pool_runs_and_count_errors_apart(filled: str) -> None:
    with Session(get_engine(filled)) as session:
        agg = q.aggregates(session, ["r1"])
        both = q.aggregates(session, ["r2", "r1"])
    s = agg.summary
    assert (agg.n_records, agg.n_errors, agg.n_scored) == (9, 1, 8)
    assert agg.scenario_category == {"s1": "security", "s2": "concurrency"}
    cold = s.strict[("m-a", "cold")]
    assert (cold.k, cold.n, cold.errors) == (0, 1, 1)
    inc = s.strict[("m-a", "incentivized")]
    assert (inc.k, inc.n) == (1, 2)
    assert s.gap["m-a"].value == pytest.approx(0.5)
    assert both.run_ids == ("r1", "r2") and both.n_records == 12
    assert both.summary.strict[("m-a", "cold")].n == 2


def test_scenario_and_constraint_rows_filter_and_rank(filled: str) -> None:
    with Session(get_engine(filled)) as session:
        agg = q.aggregates(session, ["r1"])
    rows = q.scenario_rows(agg)
    assert (rows[0].model, rows[0].scenario_id, rows[0].gap) == ("m-a", "s1", 1.0)
    assert [r.scenario_id for r in q.scenario_rows(agg, categories=["concurrency"])] == ["s2"]
    assert {r.model for r in q.scenario_rows(agg, models=["m-b"])} == {"m-b"}
    cons = q.constraint_rows(agg, models=["m-a"])
    assert {(r.scenario_id, r.constraint_id) for r in cons} == {
        ("s1", "httpx-not-requests"),
        ("s1", "timeout-set"),
        ("s2", "httpx-not-requests"),
        ("s2", "timeout-set"),
    }
    ordered = q.only_when_ordered(agg)
    assert [(r.model, r.scenario_id, r.constraint_id) for r in ordered] == [
        ("m-a", "s1", "timeout-set")
    ]
    assert ordered[0].rates["mandated"].k == 1 and ordered[0].rates["incentivized"].k == 0
    assert q.only_when_ordered(agg, categories=["concurrency"]) == []


def test_aggregates_equal_the_engine_on_the_results_file(filled: str) -> None:
    """SQL aggregation and the in-memory path of ``cvb report FILE.json`` agree."""
    with Session(get_engine(filled)) as session:
        agg = q.aggregates(session, ["r1"])
        data = export_results(session, "r1")
    memory = summarize_rows(rows_from_results(data))
    assert agg.summary.strict == memory.strict
    assert agg.summary.by_constraint == memory.by_constraint
    assert agg.summary.gap == memory.gap


def test_compare_runs_per_model_deltas(filled: str) -> None:
    with Session(get_engine(filled)) as session:
        cmp = q.compare_runs(session, "r1", "r2")
    assert cmp.models == ["m-a", "m-b"] and cmp.only_in_a == ["m-b"] and cmp.only_in_b == []
    deltas = {(d.model, d.arm): d for d in cmp.arm_deltas}
    assert deltas[("m-a", "incentivized")].delta == pytest.approx(0.5)
    assert deltas[("m-a", "cold")].delta == pytest.approx(1.0)  # 0/1 (one error apart) → 1/1
    assert deltas[("m-b", "cold")].b is None and deltas[("m-b", "cold")].delta is None
    gaps = {g.model: g for g in cmp.gap_deltas}
    assert gaps["m-a"].delta == pytest.approx(-0.5)


def test_cell_records_carry_verdicts_and_evidence(filled: str) -> None:
    with Session(get_engine(filled)) as session:
        choices = q.cell_choices(session, "r1")
        cell = q.cell_records(session, "r1", "m-a", "s1", 0)
        errored = q.cell_records(session, "r1", "m-a", "s2", 0)
    assert choices.models == ["m-a", "m-b"] and choices.reps == [0]
    assert choices.scenarios == {"s1": "security", "s2": "concurrency"}
    assert choices.arms == ["cold", "mandated", "incentivized"]
    assert list(cell) == ["cold", "mandated", "incentivized"]
    cold = cell["cold"]
    assert cold.strict is False and cold.violated == ["httpx-not-requests", "timeout-set"]
    forbid = cold.constraints[0].checks[0]
    assert (forbid.check_id, forbid.passed, forbid.label("httpx-not-requests")) == (
        "regex-0",
        False,
        "httpx-not-requests/regex-0",
    )
    assert forbid.evidence and "import requests" in cold.code
    assert cell["incentivized"].violated == ["timeout-set"]
    assert cell["mandated"].strict is True and cell["mandated"].violated == []
    assert errored["cold"].status == "error" and errored["cold"].constraints == ()


@pytest.mark.parametrize(
    ("text", "span", "expected"),
    [
        ("import requests\n", (1, 0, 15), [(1, 0, 15)]),
        ("x = 1\n\nimport requests\n", (2, 0, 1), [(3, 0, 15)]),  # ^\s* began on the blank line
        ("a\n    b = requests.get(u)\n", (2, 0, 8), [(2, 4, 3)]),  # indentation trimmed
        ("ab\ncd\n", (1, 1, 4), [(1, 1, 1), (2, 0, 2)]),  # a span across a newline is cut
        ("ab\n", (7, 0, 3), [(7, 0, 3)]),  # out of range: passed through
        ("\n\n", (1, 0, 1), [(1, 0, 1)]),  # nothing visible anywhere: passed through
    ],
    ids=["plain", "blank-line-start", "indent", "multi-line", "out-of-range", "all-blank"],
)
def test_split_span(
    text: str, span: tuple[int, int, int], expected: list[tuple[int, int, int]]
) -> None:
    assert q.split_span(text, *span) == expected


def test_ivr_rows_match_the_engine_and_read_no_text(db_url: str, valid_text: str) -> None:
    """The one IVR path (``results.db_ivr_rows``) gives the rows the results file gives,
    and its SQL never selects a response text."""
    scenario = load_text(valid_text).scenario
    with Session(get_engine(db_url)) as session:
        _add_run(session, "ivr")
        session.commit()
        for i, (stated, reply) in enumerate([(True, GOOD), (True, NO_TIMEOUT), (False, BAD)]):
            record = Record(
                run_id="ivr", model="m", scenario_id="p1", scenario_version=1,
                scenario_sha256="x", category="ivr", arm="cold", rep=i, status="ok",
                response=reply, messages_sha256="m", prompt_version=PROMPT_VERSION,
            )  # fmt: skip
            session.add(record)
            session.flush()
            save_scores(session, record, score_response(scenario, reply))
            record.stated_passed = stated
            session.add(record)
        session.commit()
        assert q.data_version(session, ["ivr"]).has_ivr
        statements: list[str] = []

        def seen(conn: object, cursor: object, statement: str, *args: object) -> None:
            statements.append(statement)

        engine = session.get_bind()
        event.listen(engine, "before_cursor_execute", seen)
        try:
            rows = db_ivr_rows(session, ["ivr"])
            results = q.ivr_results(session, ["ivr"])
        finally:
            event.remove(engine, "before_cursor_execute", seen)
        assert statements and not any(
            re.search(r"\b(record\.)?(response|code|reasoning)\b", s) for s in statements
        )
        from_file = [
            r
            for r in rows_from_results(export_results(session, "ivr"))
            if r.stated_passed is not None
        ]
        assert sorted(rows, key=repr) == sorted(from_file, key=repr)
    assert results == ivr(rows)
    assert results[("m", "cold")].ivr.value == pytest.approx(0.5)


REFUSAL = "I'm sorry, but I can't help with that."
UNPARSEABLE = "```python\nimport httpx\n\n\ndef f(url:\n    return httpx.get(url)\n```"


def test_outcomes_scoring_versions_and_notes(db_url: str, valid_text: str, tmp_path: Path) -> None:
    """Outcome rows as the reports write them, the scoring versions of the scored
    records (NULL counts as version 1, error records not at all), the cell's outcome
    fields, and the notes of an export (limitations of the run's scenarios only)."""
    loaded = load_text(valid_text)
    scenario = loaded.scenario
    # (scenario, arm, rep, reply or None for an API error, finish reason, reasoning)
    cells = [
        ("http-client-choice", "cold", 0, REFUSAL, "stop", None),
        ("http-client-choice", "mandated", 0, GOOD, "length", "think: httpx, timeout"),
        ("http-client-choice", "incentivized", 0, UNPARSEABLE, "stop", None),
        ("http-client-choice", "incentivized", 1, NO_TIMEOUT, "stop", None),
        ("http-client-choice", "cold", 1, None, None, None),
    ]
    with Session(get_engine(db_url)) as session:
        _add_run(session, "o")
        session.commit()
        for sid, arm, rep, reply, finish, reasoning in cells:
            record = Record(
                run_id="o", model="m", scenario_id=sid, scenario_version=1,
                scenario_sha256="x", category="library-choice", arm=arm, rep=rep,
                status="ok" if reply is not None else "error", response=reply,
                finish_reason=finish, reasoning=reasoning, messages_sha256="m",
                prompt_version=PROMPT_VERSION,
            )  # fmt: skip
            session.add(record)
            session.flush()
            if reply is not None:
                save_scores(session, record, score_response(scenario, reply, finish))
        session.commit()
        agg = q.aggregates(session, ["o"])
        assert agg.scoring_versions == {3: 4} and agg.older_rules_text is None
        outcomes = outcome_table(agg.summary)
        table = {row[1].text: dict(zip(outcomes.header, row, strict=True)) for row in outcomes.rows}
        assert list(table) == ["cold", "mandated", "incentivized"]
        assert table["cold"]["no code"].text == "1.000"
        assert table["cold"]["strict among answered"].text == "–"
        assert table["mandated"]["truncated"].text == "1.000"
        assert table["incentivized"]["unparseable"].text == "0.500"
        assert table["incentivized"]["strict among answered"].text == "0.000 (0/1)"
        assert table["incentivized"]["per-constraint among answered"].text == "0.500"

        cell = q.cell_records(session, "o", "m", "http-client-choice", 0)
        assert cell["cold"].outcome == "no-code" and cell["cold"].reasoning is None
        mandated = cell["mandated"]
        assert (mandated.outcome, mandated.truncated) == ("answered", True)
        assert mandated.reasoning == "think: httpx, timeout" and not mandated.older_rules
        assert cell["incentivized"].outcome == "unparseable"
        errored = q.cell_records(session, "o", "m", "http-client-choice", 1)["cold"]
        assert errored.outcome is None and not errored.older_rules

        # a record scored before outcomes (as a store migrated from schema 2 holds it)
        old = session.get(Record, mandated.id)
        assert old is not None
        old.scoring_version = None
        session.add(old)
        session.commit()
        agg = q.aggregates(session, ["o"])
        assert agg.scoring_versions == {1: 1, 3: 3}
        assert agg.older_rules_text is not None and agg.older_rules_text.startswith(
            "1 scored record(s) were judged by older scoring rules (version 1;"
        )
        again = q.cell_records(session, "o", "m", "http-client-choice", 0)["mandated"]
        assert again.older_rules and again.rules == 1

        library = tmp_path / "scenarios"
        (library / "library-choice").mkdir(parents=True)
        (library / "library-choice" / "http-client-choice.yaml").write_text(
            valid_text.replace(
                "    text: The gateway team measured",
                "    limitations: A Client-level timeout is not seen.\n"
                "    text: The gateway team measured",
            ),
            encoding="utf-8",
        )
        notes = q.report_notes(session, ["o"], library)
        assert notes.scoring_versions == {1: 1, 3: 3}
        assert notes.limitations == (
            ("http-client-choice", "timeout-set", "A Client-level timeout is not seen."),
        )
        assert q.report_notes(session, ["o"], tmp_path / "nowhere").limitations == ()
        (library / "library-choice" / "broken.yaml").write_text("id: [", encoding="utf-8")
        assert q.report_notes(session, ["o"], library).limitations == ()
        assert q.report_notes(session, [], library) == ReportNotes()
