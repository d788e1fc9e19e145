"""The memory-layer arms through the real runner (README: Bring your own memory layer).

``memory``: a layer (the built-in bm25, a command, an HTTP server) ingests the
project's memory once and gives each cell its context; ``memory-tool``: the
model looks memory up with a tool, answered by the layer. Layers and the
endpoint are real processes and servers on 127.0.0.1; what a layer gave each
cell is on its record, and a layer that fails gives a memory error record,
never an API error and never a violation.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session
from test_runner import (  # noqa: F401 (_isolated_env: the runner tests' autouse fixture)
    COMPLIANT,
    KEY,
    _isolated_env,
    cli_args,
    cvb,
    execute,
    fake_process,
    launch_and_kill,
    options,
    query,
    run_status,
    served_log,
    write_scenarios,
)

from cvb_engine.arms import parse_arm
from cvb_engine.arms.layered import TOOL_NAME, layer_entries
from cvb_engine.metrics import summarize
from cvb_engine.results import db_tallies
from cvb_engine.runner import RunError
from cvb_engine.scenario import load_library
from cvb_engine.store import get_engine

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from fake_openai import CHAT_PATH, FakeOpenAI  # noqa: E402
from memory_layer_server import MemoryLayerServer  # noqa: E402

LAYER_CMD = f"{sys.executable} {TESTS / 'memory_layer_cmd.py'}"
FIXED = "The platform team settled on httpx with an explicit timeout for every outbound call."


def memory_records(db: str, run_id: str) -> list[dict[str, Any]]:
    cols = ["model", "scenario_id", "arm", "rep", "status", "error", "error_kind"]
    cols += ["memory_json", "strict", "messages_sha256"]
    rows = query(db, f"SELECT {', '.join(cols)} FROM record WHERE run_id = :r", r=run_id)
    return [dict(zip(cols, row, strict=True)) for row in rows]


class Capture:
    """A reply function that keeps every request it answers."""

    def __init__(self, answer: str = COMPLIANT) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer = answer

    def __call__(self, request: dict[str, Any]) -> str:
        self.requests.append(request)
        return self.answer


@pytest.fixture
def scenarios(tmp_path: Path, valid_text: str) -> Path:
    root = tmp_path / "scenarios"
    write_scenarios(root, valid_text, per_category=1, categories=["library-choice", "security"])
    return root


# --------------------------------------------------------------------------- what a layer holds


def test_layer_memory_holds_every_constraint_among_opaque_distractors(scenarios: Path) -> None:
    library = load_library(scenarios)
    pool = [
        type("E", (), {"id": f"ops-{i:03d}", "kind": "ops", "text": f"Rack {i} moved."})()
        for i in range(30)
    ]
    scs = [item.scenario for item in library.values()]
    entries, owner = layer_entries(scs, 10, pool)
    n_constraints = sum(len(s.constraints) for s in scs)
    assert len(entries) == n_constraints + 10 and len(owner) == n_constraints
    # one id shape for constraints and distractors; no constraint id shows through
    assert {len(e.id) for e in entries} == {12} and all(e.id.startswith("m") for e in entries)
    cids = {c.id for s in scs for c in s.constraints}
    assert not any(cid in e.id or cid in e.text for e in entries for cid in cids)
    assert {e.kind for e in entries} <= {"dependencies", "ops", "data", "naming", "process"}
    bigger, _ = layer_entries(scs, 20, pool)  # a larger load extends a smaller one
    assert {e.id for e in entries} < {e.id for e in bigger}
    with pytest.raises(ValueError, match="only 30"):
        layer_entries(scs, 31, pool)


def test_layer_parameters_are_checked_before_anything_runs(scenarios: Path, tmp_path: Path) -> None:
    assert parse_arm("memory@command=./l.py,load=5").name == "memory@command=./l.py,load=5"
    for bad, needle in [
        ("memory@command=a,url=http://x", "not both"),
        ("memory@url=ftp://x", r"http\(s\)"),
        ("memory@key_env=K", "HTTP layer"),
        ("memory@url=http://x,key_env=no-name", "variable name"),
        ("memory-tool@rounds=0", "rounds"),
    ]:
        with pytest.raises(ValueError, match=needle):
            parse_arm(bad)
    with pytest.raises(RunError, match="bm99"):
        execute(
            options("http://127.0.0.1:9/v1", scenarios, "sqlite://", arms=["memory@layer=bm99"])
        )


# --------------------------------------------------------------------------- memory


def test_the_builtin_bm25_layer_gives_each_cell_its_context(
    tmp_path: Path, valid_text: str
) -> None:
    # one constraint shares words with the task ("downloads a URL"), one does not
    scenarios = tmp_path / "scenarios"
    text = valid_text.replace("caused the 2025 stalls.", "caused the 2025 stalls on URL downloads.")
    write_scenarios(scenarios, text, per_category=1, categories=["library-choice", "security"])
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    capture = Capture()
    with FakeOpenAI(["m-a"], reply=capture) as server:
        outcome = execute(options(server.base_url, scenarios, db, arms=["cold", "memory"]))
    assert outcome.status == "finished"
    recs = memory_records(db, "r1")
    live = [r for r in recs if r["arm"] == "memory"]
    assert len(live) == 2 and all(r["status"] == "ok" for r in live)
    assert all(r["memory_json"] is None for r in recs if r["arm"] == "cold")
    library = load_library(scenarios)
    for r in live:
        trace = json.loads(r["memory_json"])
        assert trace["arm"] == "memory" and trace["layer"]["transport"] == "builtin"
        assert trace["layer"]["name"] == "bm25" and trace["ingest"]["entries"] > 0
        (call,) = trace["calls"]
        assert call["source"] == "prompt" and call["context"] and call["error"] is None
        # lexical retrieval finds the constraint that shares the task's words, not the other
        assert trace["held"] == ["timeout-set"], trace
        assert set(call["entries"]) and len(call["entries"]) <= 5
        assert library[r["scenario_id"]].scenario.category in ("library-choice", "security")
    # the context reached the model, before the task
    with_memory = [q for q in capture.requests if "Project memory" in q["messages"][-1]["content"]]
    assert len(with_memory) == 2


def test_a_layer_that_finds_nothing_gives_the_task_alone(scenarios: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    capture = Capture()
    with FakeOpenAI(["m-a"], reply=capture) as server:
        execute(options(server.base_url, scenarios, db, arms=["cold", "memory"]))
    recs = memory_records(db, "r1")
    for r in (r for r in recs if r["arm"] == "memory"):
        trace = json.loads(r["memory_json"])
        assert trace["calls"][0]["context"] == "" and trace["held"] == []
    by_arm: dict[str, set[str]] = {}
    for r in recs:
        by_arm.setdefault(r["arm"], set()).add(r["messages_sha256"])
    assert by_arm["memory"] == by_arm["cold"]  # nothing found: the cold prompt, exactly


def test_a_command_layer_context_is_what_the_model_reads(scenarios: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    log = tmp_path / "layer.jsonl"
    arm = f"memory@command={LAYER_CMD} --context '{FIXED}' --log {log}"
    capture = Capture()
    with FakeOpenAI(["m-a"], reply=capture) as server:
        execute(options(server.base_url, scenarios, db, arms=[arm], runs=2))
    ops = Counter(json.loads(line)["op"] for line in log.read_text().splitlines())
    assert ops == {"ingest": 1, "query": 4}  # ingest once per run; a query per cell
    sent = [q["messages"][-1]["content"] for q in capture.requests]
    assert len(sent) == 4 and all(FIXED in text for text in sent)
    for r in memory_records(db, "r1"):
        trace = json.loads(r["memory_json"])
        assert trace["calls"][0]["context"].strip() == FIXED
        assert trace["layer"]["transport"] == "command"
        assert "category" not in trace["calls"][0]["query"]
    queries = [json.loads(line) for line in log.read_text().splitlines()][1:]
    library = load_library(scenarios)
    cids = {c.id for item in library.values() for c in item.scenario.constraints}
    for q in queries:  # the task and the category; never a constraint's id
        assert q["category"] in ("library-choice", "security")
        assert not any(cid in json.dumps(q) for cid in cids)


@pytest.mark.parametrize(
    "flags, needle",
    [
        ("--fail-on query --exit 3", "status 3"),
        ("--bad-json", "not JSON"),
        ("--sleep 5", "timed out"),
    ],
    ids=["exit-status", "bad-json", "timeout"],
)
def test_a_failing_command_layer_gives_memory_error_records(
    scenarios: Path, tmp_path: Path, flags: str, needle: str
) -> None:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    timeout = ",timeout=1" if "sleep" in flags else ""
    fail_query = flags.replace("--bad-json", "--bad-json --fail-on query").replace(
        "--sleep 5", "--sleep 5 --fail-on query"
    )
    arm = f"memory@command={LAYER_CMD} --context x {fail_query}{timeout}"
    capture = Capture()
    with FakeOpenAI(["m-a"], reply=capture) as server:
        outcome = execute(options(server.base_url, scenarios, db, arms=["cold", arm]))
    assert outcome.status == "finished"  # every cell has its record
    recs = memory_records(db, "r1")
    failed = [r for r in recs if r["arm"] != "cold"]
    assert len(failed) == 2
    for r in failed:
        assert (r["status"], r["error_kind"], r["strict"]) == ("error", "memory", None)
        assert needle in r["error"], r["error"]
        assert json.loads(r["memory_json"])["error"]
    assert all(r["status"] == "ok" for r in recs if r["arm"] == "cold")
    assert len(capture.requests) == 2  # nothing was sent for the cells whose layer failed
    with Session(get_engine(db)) as session:  # excluded from accuracy, counted apart
        summary = summarize(*db_tallies(session, ["r1"]))
    rate = summary.strict[("m-a", parse_arm(arm).name)]
    assert (rate.n, rate.errors, rate.memory_errors) == (0, 0, 2)


def test_an_http_layer_500_and_a_layer_that_cannot_ingest(scenarios: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    capture = Capture()
    with FakeOpenAI(["m-a"], reply=capture) as server:
        with MemoryLayerServer(context=FIXED, fail_query_status=500) as layer:
            execute(options(server.base_url, scenarios, db, arms=[f"memory@url={layer.base_url}"]))
        recs = memory_records(db, "r1")
        assert {(r["status"], r["error_kind"]) for r in recs} == {("error", "memory")}
        assert all("500" in r["error"] for r in recs)
        # a layer that fails its ingest stops the run before any request is sent
        with pytest.raises(RunError, match="memory layer"):
            arm = f"memory@command={LAYER_CMD} --fail-on ingest --exit 4"
            execute(options(server.base_url, scenarios, db, arms=[arm], run_id="r2"))
    assert capture.requests == []


def test_an_http_layer_key_is_sent_and_never_stored(
    scenarios: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "lk-layer-Canary-91ab"
    monkeypatch.setenv("CVB_TEST_LAYER_KEY", secret)
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    with (
        FakeOpenAI(["m-a"], reply=Capture()) as server,
        MemoryLayerServer(context=FIXED, api_key=secret) as layer,
    ):
        arm = f"memory@url={layer.base_url},key_env=CVB_TEST_LAYER_KEY"
        execute(options(server.base_url, scenarios, db, arms=[arm]))
    recs = memory_records(db, "r1")
    assert all(r["status"] == "ok" for r in recs)
    assert secret.encode() not in (tmp_path / "cvb.db").read_bytes()


# --------------------------------------------------------------------------- memory-tool


def test_tool_calls_are_answered_by_the_layer_and_stored(scenarios: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    capture = Capture()
    with FakeOpenAI(["m-a"], reply=capture, tool_rounds=2) as server:
        execute(options(server.base_url, scenarios, db, arms=["memory-tool@rounds=3"]))
        outcomes = Counter(e.outcome for e in server.log if e.path == CHAT_PATH)
    # one probe, then per cell two rounds of calls and the answer
    assert outcomes == {"tool_call": 1 + 2 * 2, "ok": 2}
    for r in memory_records(db, "r1"):
        assert r["status"] == "ok" and r["strict"] is not None
        trace = json.loads(r["memory_json"])
        assert trace["arm"] == "memory-tool" and trace["rounds"] == 2
        assert [c["round"] for c in trace["calls"]] == [1, 2]
        assert all(c["source"] == "tool" and c["query"] and c["call_id"] for c in trace["calls"])
        assert all(c["context"] is not None for c in trace["calls"])
    # the model saw each result as a tool message answering its call
    final = capture.requests[-1]["messages"]
    tool_messages = [m for m in final if m["role"] == "tool"]
    assert len(tool_messages) == 2
    called = {c["id"] for m in final if m.get("tool_calls") for c in m["tool_calls"]}
    assert {m["tool_call_id"] for m in tool_messages} == called
    assert capture.requests[-1]["tools"][0]["function"]["name"] == TOOL_NAME


def test_tool_rounds_are_bounded_and_bad_arguments_are_answered(
    scenarios: Path, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    capture = Capture()
    fake = FakeOpenAI(["m-a"], reply=capture, tool_rounds=50, tool_arguments="{not json")
    with fake as server:
        # the probe passes (a call is made); every call's arguments are unusable
        execute(options(server.base_url, scenarios, db, arms=["memory-tool@rounds=2"]))
    for r in memory_records(db, "r1"):
        assert r["status"] == "ok"
        trace = json.loads(r["memory_json"])
        assert trace["rounds"] == 2 and len(trace["calls"]) == 2
        assert all("JSON object" in c["error"] for c in trace["calls"])
    last = capture.requests[-1]
    assert last["tool_choice"] == "none"  # every round used: the answer, without tools


@pytest.mark.parametrize("mode", ["refuse", "ignore"])
def test_an_endpoint_without_tool_calls_is_refused_before_the_run(
    scenarios: Path, tmp_path: Path, mode: str
) -> None:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    with FakeOpenAI(["m-a"], reply=Capture(), tools=mode) as server:  # type: ignore[arg-type]
        with pytest.raises(RunError, match="memory-tool arm needs tool calls"):
            execute(options(server.base_url, scenarios, db, arms=["cold", "memory-tool"]))
        assert len([e for e in server.log if e.path == CHAT_PATH]) == 1  # the probe only
    assert not (tmp_path / "cvb.db").exists()  # refused before the run was even bound


# --------------------------------------------------------------------------- kill -9, resume


def test_kill_9_mid_run_then_resume_sends_no_cell_twice(scenarios: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    served = tmp_path / "served.jsonl"
    layer_log = tmp_path / "layer.jsonl"
    arm = f"memory@command={LAYER_CMD} --context '{FIXED}' --log {layer_log}"
    runs, concurrency = 8, 2
    size = 2 * 2 * runs  # scenarios x arms x runs
    with fake_process(tmp_path, "--models", "m-a", "--delay", "0.1", "--log", str(served)) as url:
        argv = ["run", "--models", "m-a", "--runs", str(runs), "--run-id", "mk9"]
        argv += ["--arms", f"cold,{arm}", "--concurrency", str(concurrency)]
        argv += cli_args(url, scenarios, db)
        before = launch_and_kill(tmp_path, argv, db, "mk9", 6)
        assert 6 <= len(before) < size
        t_resume = time.time()
        resumed = cvb(argv, tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert KEY not in resumed.stdout + resumed.stderr
    after = memory_records(db, "mk9")
    assert len(after) == size and run_status(db, "mk9") == "finished"
    assert len({(r["scenario_id"], r["arm"], r["rep"]) for r in after}) == size
    assert all(r["status"] == "ok" for r in after)
    assert all(json.loads(r["memory_json"])["calls"] for r in after if r["arm"] != "cold")
    chats = [e for e in served_log(served) if e["path"] == CHAT_PATH]
    resumed_chats = [e for e in chats if e["t"] >= t_resume]
    assert len(resumed_chats) == size - len(before)  # only the cells without a record
    assert len(chats) - size <= concurrency  # lost to the kill: at most what was in flight


def test_a_sweep_sets_the_layer_curve_beside_the_prompt_curve(
    scenarios: Path, tmp_path: Path
) -> None:
    from test_runner import cvb as run_cvb

    argv = ["run", "--dry-run", "--models", "m-a", "--runs", "1", "--scenarios", str(scenarios)]
    argv += ["--arms", "cold", "--memory-sweep", "arm=incentivized,memory", "load=0,5"]
    proc = run_cvb(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr
    arms = next(line for line in proc.stdout.splitlines() if line.startswith("arms"))
    assert (
        arms.split(None, 1)[1] == "cold, incentivized, incentivized@load=5, memory, memory@load=5"
    )
    layers = [line for line in proc.stdout.splitlines() if line.startswith("layer")]
    assert len(layers) == 2 and all("bm25 gives the context" in line for line in layers)
    assert "nothing was sent" in proc.stdout


def test_the_live_view_names_a_memory_failure_as_one(scenarios: Path, tmp_path: Path) -> None:
    from cvb_engine import monitor

    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    arm = f"memory@command={LAYER_CMD} --context x --fail-on query --exit 3"
    with FakeOpenAI(["m-a"], reply=Capture()) as server:
        execute(options(server.base_url, scenarios, db, arms=[arm]))
    with Session(get_engine(db)) as session:
        errors = monitor.latest_errors(session, "r1")
        last = monitor.latest_record(session, "r1")
    assert len(errors) == 2 and {e.kind for e in errors} == {"memory"}
    assert last is not None and last.error_kind == "memory"
