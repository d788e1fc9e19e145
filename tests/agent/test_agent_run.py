"""The agent arm through the real runner, against the scripted tool-calling endpoint.

Each scripted agent (tests/scripted_agent.py) does something known: reads the
rules then follows them, writes at once, follows only what is in its messages,
tries hostile calls, never stops. The records must say what each did: the
verdicts of the file it wrote, per constraint whether it read the rule, the
refusals, the steps; nothing outside the workspace changes.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from scripted_agent import (  # noqa: E402
    FETCH_COMPLIANT,
    FETCH_HTTPX_ONLY,
    FETCH_VIOLATING,
    HOSTILE_CALLS,
    ScriptedAgent,
)
from sqlmodel import Session  # noqa: E402
from test_runner import (  # noqa: E402, F401 (_isolated_env: the runner tests' autouse fixture)
    _isolated_env,
    execute,
    options,
    query,
    write_scenarios,
)

from cvb_engine.agent.trace import AgentTrace, read_any  # noqa: E402
from cvb_engine.results import (  # noqa: E402
    export_results,
    load_results_file,
    rows_from_results,
    write_json_atomic,
)
from cvb_engine.store import get_engine  # noqa: E402

CONSTRAINTS = ("httpx-not-requests", "timeout-set")


def agent_records(db: str, run_id: str = "r1") -> dict[tuple[str, str], dict[str, Any]]:
    cols = ["model", "arm", "status", "error", "strict", "outcome", "code", "agent_json"]
    cols += ["prompt_tokens", "completion_tokens", "response"]
    rows = query(db, f"SELECT {', '.join(cols)} FROM record WHERE run_id = :r", r=run_id)
    out = {}
    for row in rows:
        rec = dict(zip(cols, row, strict=True))
        rec["trace"] = AgentTrace.from_json(rec["agent_json"])
        rec["honored"] = dict(
            query(
                db,
                "SELECT c.constraint_id, c.honored FROM constraintresult c JOIN record r "
                "ON r.id = c.record_id WHERE r.run_id = :r AND r.model = :m AND r.arm = :a",
                r=run_id,
                m=rec["model"],
                a=rec["arm"],
            )
        )
        out[(rec["model"], rec["arm"])] = rec
    return out


@pytest.fixture
def scenarios(tmp_path: Path, valid_text: str) -> Path:
    root = tmp_path / "scenarios"
    write_scenarios(root, valid_text, per_category=1, categories=["library-choice"])
    return root


def run_agents(
    tmp_path: Path, scenarios: Path, models: list[str], arms: list[str], **server: Any
) -> dict[tuple[str, str], dict[str, Any]]:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    with ScriptedAgent(**server) as agent:
        outcome = execute(options(agent.base_url, scenarios, db, models=models, arms=arms))
    assert outcome.progress.done == len(models) * len(arms)
    return agent_records(db)


# (model, arm) -> (the file written, honored per constraint, read per constraint, ended_by)
EXPECTED = [
    ("reader", "agent", FETCH_COMPLIANT, (True, True), (True, True), "answer"),
    ("reader", "agent@rules=claude-md", FETCH_COMPLIANT, (True, True), (True, True), "answer"),
    ("reader", "agent@rules=adr,load=6", FETCH_COMPLIANT, (True, True), (True, True), "answer"),
    ("reader", "agent@rules=readme", FETCH_COMPLIANT, (True, True), (True, True), "answer"),
    ("reader", "agent@rules=nested,load=4", FETCH_COMPLIANT, (True, True), (True, True), "answer"),
    ("ignorer", "agent", FETCH_VIOLATING, (False, False), (True, True), "answer"),
    ("writer", "agent", FETCH_VIOLATING, (False, False), (False, False), "answer"),
    ("writer", "agent@preload=true", FETCH_VIOLATING, (False, False), (False, False), "answer"),
    ("messages", "agent", FETCH_VIOLATING, (False, False), (False, False), "answer"),
    ("messages", "agent@preload=true", FETCH_COMPLIANT, (True, True), (False, False), "answer"),
    ("searcher", "agent", FETCH_COMPLIANT, (True, True), (True, True), "answer"),
    ("hostile", "agent", FETCH_VIOLATING, (False, False), (False, False), "answer"),
]


def test_verdicts_and_read_flags_match_what_each_agent_did(tmp_path: Path, scenarios: Path) -> None:
    models = sorted({m for m, *_ in EXPECTED})
    arms = sorted({a for _, a, *_ in EXPECTED})
    recs = run_agents(tmp_path, scenarios, models, arms)
    for model, arm, code, honored, read, ended in EXPECTED:
        rec = recs[(model, arm)]
        trace = rec["trace"]
        assert rec["status"] == "ok", (model, arm, rec["error"])
        assert trace is not None, (model, arm)
        assert rec["code"] == code, (model, arm)
        assert trace.files[0].content == code
        assert tuple(rec["honored"][c] for c in CONSTRAINTS) == honored, (model, arm)
        assert rec["strict"] == all(honored)
        assert tuple(trace.read[c] for c in CONSTRAINTS) == read, (model, arm)
        assert read_any(trace) == any(read)
        assert trace.ended_by == ended
        assert trace.steps <= 12 and trace.requests == trace.steps + 1
        assert rec["prompt_tokens"] and rec["prompt_tokens"] > 0
    # preload: the rules were in the system message, listed apart from what was opened
    preloaded = recs[("messages", "agent@preload=true")]["trace"]
    assert set(preloaded.preloaded) == set(CONSTRAINTS) and preloaded.preload
    assert recs[("messages", "agent")]["trace"].preloaded == ()


def test_a_partial_reader_is_judged_per_constraint(tmp_path: Path, scenarios: Path) -> None:
    """The searcher looks for "httpx" only: it sees (and follows) one rule of two."""
    recs = run_agents(tmp_path, scenarios, ["searcher"], ["agent"], query="httpx")
    rec = recs[("searcher", "agent")]
    assert rec["code"] == FETCH_HTTPX_ONLY
    assert rec["honored"] == {"httpx-not-requests": True, "timeout-set": False}
    assert rec["trace"].read == {"httpx-not-requests": True, "timeout-set": False}


def test_hostile_calls_are_refused_and_nothing_outside_changes(
    tmp_path: Path, scenarios: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = [
        Path("/tmp/cvb-hostile-absolute.txt"),
        Path("/tmp/outside.txt"),
        Path("/tmp/outside2.txt"),
    ]
    before = {p: p.exists() for p in outside}
    # The episodes' workspaces go into a temporary folder of this test's own, so that
    # what is left there is this run's (other runs on the machine use /tmp meanwhile).
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    recs = run_agents(tmp_path, scenarios, ["hostile"], ["agent"])
    trace = recs[("hostile", "agent")]["trace"]
    hostile = [c for c in trace.calls if c.refused]
    assert len([c for c in trace.calls if c.refused]) == len(HOSTILE_CALLS)
    assert all(c.reason for c in trace.calls if c.refused)
    reasons = " | ".join(c.reason or "" for c in hostile)
    for needle in ("absolute", "'..'", "unknown tool", "not JSON", "needs the field", "string"):
        assert needle in reasons, needle
    assert "longer than 20000" in reasons and "at most 16000" in reasons
    assert {p: p.exists() for p in outside} == before
    # no file of the episode is left behind (the workspace is removed)
    assert not [n for n in os.listdir(own_tmp) if n.startswith("cvb-agent-")]
    # the real solution write went through
    assert trace.calls[-1].name == "write_file" and not trace.calls[-1].refused


def test_an_endless_agent_ends_within_its_steps(tmp_path: Path, scenarios: Path) -> None:
    recs = run_agents(tmp_path, scenarios, ["endless"], ["agent", "agent@steps=3"])
    for arm, steps in (("agent", 12), ("agent@steps=3", 3)):
        rec = recs[("endless", arm)]
        trace = rec["trace"]
        assert trace.ended_by == "steps" and trace.steps == steps
        assert trace.requests == steps + 1  # then one last request without tools
        # its last reply's calls are recorded, refused, never run
        last = [c for c in trace.calls if c.round == steps + 1]
        assert last and all(c.refused for c in last)
        assert rec["outcome"] == "no-code" and not rec["strict"]
        assert rec["honored"] == {c: False for c in CONSTRAINTS}


def test_an_agent_that_never_calls_a_tool_wrote_nothing(tmp_path: Path, scenarios: Path) -> None:
    recs = run_agents(tmp_path, scenarios, ["talker"], ["agent"])
    rec = recs[("talker", "agent")]
    assert rec["status"] == "ok" and rec["outcome"] == "no-code"
    assert rec["trace"].files == () and rec["trace"].steps == 0
    assert "```python" in rec["response"]  # kept, not scored


def test_the_results_file_carries_the_trace(tmp_path: Path, scenarios: Path) -> None:
    recs = run_agents(tmp_path, scenarios, ["reader"], ["agent"])
    data = json.loads(recs[("reader", "agent")]["agent_json"])
    assert data["format"] == "cvb-agent-trace/1" and data["transport"] == "tools"
    assert data["targets"] == ["fernhollow/fetch_json.py"]
    assert data["rules_files"][0]["path"] == "AGENTS.md"
    with Session(get_engine(f"sqlite:///{tmp_path / 'cvb.db'}")) as session:
        exported = export_results(session, "r1")
    [entry] = exported["records"]
    assert entry["agent"]["files"][0]["content"] == FETCH_COMPLIANT
    assert entry["code"] == FETCH_COMPLIANT
    path = tmp_path / "results.json"
    write_json_atomic(path, exported)
    loaded = load_results_file(path)  # validated by the file's own model
    assert loaded["records"][0]["agent"] == entry["agent"]
    rows = rows_from_results(loaded)
    assert read_any(AgentTrace.from_json(rows[0].agent))


def test_an_ivr_problem_runs_its_tests_and_is_judged_by_its_hidden_tests(
    tmp_path: Path,
) -> None:
    """The tester writes, runs the workspace's tests in the sandbox and reads the summary;
    the file is then judged by the stated tests and the hidden ones (the constraints)."""
    import shutil

    shipped = Path(__file__).resolve().parents[2] / "scenarios" / "ivr" / "he-003-below-zero.yaml"
    root = tmp_path / "scenarios" / "ivr"
    root.mkdir(parents=True)
    shutil.copy(shipped, root)
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    arms = ["agent", "agent@preload=true"]
    with ScriptedAgent() as agent:
        execute(options(agent.base_url, tmp_path / "scenarios", db, models=["tester"], arms=arms))
    recs = agent_records(db)
    plain, preloaded = recs[("tester", "agent")], recs[("tester", "agent@preload=true")]
    for rec in (plain, preloaded):
        trace = rec["trace"]
        tests_call = next(c for c in trace.calls if c.name == "run_tests")
        assert tests_call.result.startswith("1 passed, 0 failed"), tests_call.result
        assert trace.final_text and "1 passed" in trace.final_text
    stated = dict(query(db, "SELECT arm, stated_passed FROM record"))
    assert stated == {"agent": 1, "agent@preload=true": 1}
    # without the rules it sums (fails the hidden "any point in time" test); with them loaded
    # into its messages it checks every running balance
    assert plain["honored"]["any-point-in-time"] == 0
    assert preloaded["honored"]["any-point-in-time"] == 1


def test_the_dry_run_says_what_an_agent_cell_does(tmp_path: Path, scenarios: Path) -> None:
    import io

    from cvb_engine.runner import BenchmarkRun, print_dry_run

    arms = ["agent", "agent@steps=3,preload=true", "agent@command=./x.sh,timeout=30"]
    opts = options("http://127.0.0.1:9/v1", scenarios, "sqlite://", models=["m"], arms=arms)
    out = io.StringIO()
    print_dry_run(BenchmarkRun(opts), out)
    text = out.getvalue()
    assert (
        "agent      agent: an episode in the workspace (rules=agents-md): up to 13 requests" in text
    )
    assert "up to 4 requests a cell (3 tool rounds)" in text and "preloaded" in text
    assert "runs './x.sh' in the workspace (rules=agents-md), up to 30s a cell" in text


def test_malformed_tool_calls_and_huge_replies_are_data(tmp_path: Path, scenarios: Path) -> None:
    recs = run_agents(tmp_path, scenarios, ["garbled"], ["agent"])
    rec = recs[("garbled", "agent")]
    trace = rec["trace"]
    assert rec["status"] == "ok"
    # The three entries that are no function call are refused on the trace with the
    # reason (nothing the model sent goes unseen); the good write and the
    # null-arguments read reached the tools.
    malformed = [c for c in trace.calls if c.name == ""]
    assert len(malformed) == 3 and all(c.refused for c in malformed)
    reasons = sorted(c.reason or "" for c in malformed)
    assert reasons == [
        "not run: the function name is not a tool name (a number)",
        "not run: the tool call has no function object (its function is null)",
        "not run: the tool call is a string",
    ]
    assert {c.call_id for c in malformed} == {"call_0", "x", "call_2"}
    ran = [c for c in trace.calls if c.name]
    assert [c.name for c in ran] == ["write_file", "read_file"]
    assert not ran[0].refused and ran[1].refused
    assert rec["code"] == FETCH_VIOLATING and trace.files
    assert trace.final_text is not None and len(trace.final_text) <= 8_000
    assert len(rec["response"]) <= 8_000
    # its 300,000-character answer was cut at --max-response-chars, and the trace says so
    assert trace.replies_cut == 1


def test_a_broken_server_mid_episode_is_an_error_record_with_its_trace(
    tmp_path: Path, scenarios: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    with ScriptedAgent() as agent:
        opts = options(agent.base_url, scenarios, db, models=["broken"], arms=["agent"])
        execute(opts.model_copy(update={"max_attempts": 2}))
    rec = agent_records(db)[("broken", "agent")]
    assert rec["status"] == "error" and "after 2 attempts" in rec["error"]
    trace = rec["trace"]
    assert trace.ended_by == "error" and trace.error == rec["error"]
    assert trace.steps == 1 and trace.calls[0].name == "write_file"
    assert rec["strict"] is None  # an error record is not scored: retried with --retry-errors


def test_cvb_score_rejudges_agent_records_from_their_files(tmp_path: Path, scenarios: Path) -> None:
    """Re-scoring reads the files in the trace, never the reply: same verdicts."""
    from cvb_engine.rescore import rescore_run
    from cvb_engine.scenario import load_library

    recs = run_agents(tmp_path, scenarios, ["reader", "writer", "talker"], ["agent"])
    before = {k: (r["strict"], r["outcome"], r["code"]) for k, r in recs.items()}
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    done = rescore_run("r1", load_library(scenarios), db=db)
    assert done.scored == 3 and done.verdicts_changed == 0
    after = {k: (r["strict"], r["outcome"], r["code"]) for k, r in agent_records(db).items()}
    assert after == before
    assert before[("talker", "agent")][1] == "no-code"  # its reply's code block is not scored
