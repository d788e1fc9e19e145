"""Progress read from the store (cvb_engine.monitor), on SQLite and PostgreSQL.

Runs are real: the runner sends its requests to the loopback fake endpoint
(``tests/fake_openai.py``) and stores them; the monitor then reads the store.
Liveness cases that need a dead or reused process id, or a heartbeat from
another machine, write the run row by hand.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from cvb_engine import monitor
from cvb_engine.arms import build_messages
from cvb_engine.metrics import Rate, summarize
from cvb_engine.prompts import messages_sha256
from cvb_engine.results import db_tallies
from cvb_engine.runner import BenchmarkRun, RunOptions
from cvb_engine.scenario import ARMS, load_library
from cvb_engine.store import Record, Run, get_engine

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai import FakeOpenAI, FaultPlan
from fake_openai import messages_sha256 as served_sha256

KEY_VAR = "CVB_TEST_MONITOR_KEY"
COMPLIANT = "```python\nimport httpx\n\ndef fetch_json(url):\n    return httpx.get(url, timeout=5).json()\n```"
PARTIAL = "```python\nimport httpx\n\ndef fetch_json(url):\n    return httpx.get(url).json()\n```"
VIOLATING = (
    "```python\nimport requests\n\ndef fetch_json(url):\n    return requests.get(url).json()\n```"
)
MODELS = ["m-a", "m-b"]
SIDS = ["lib-one", "lib-two"]
FAULTED = ("m-b", "lib-two", "mandated")  # this cell always answers HTTP 500


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(KEY_VAR, "sk-monitor-test")
    monkeypatch.setenv("CVB_ENDPOINTS", str(tmp_path / "endpoints.json"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def library(tmp_path: Path, valid_text: str) -> Path:
    """Two copies of the conftest scenario (two regex constraints each)."""
    root = tmp_path / "scenarios" / "library-choice"
    root.mkdir(parents=True)
    for sid in SIDS:
        text = valid_text.replace("id: http-client-choice", f"id: {sid}", 1).replace(
            "returns the parsed JSON.", f"returns the parsed JSON ({sid}).", 1
        )
        (root / f"{sid}.yaml").write_text(text, encoding="utf-8")
    return root.parent


def policy(scenarios: Path) -> Any:
    """cold violates, mandated complies, incentivized: m-a complies, m-b forgets the timeout."""
    lib = load_library(scenarios)
    index = {
        messages_sha256(build_messages(item.scenario, arm)): (sid, arm)
        for sid, item in lib.items()
        for arm in ARMS
    }

    def reply(request: dict[str, Any]) -> str:
        _, arm = index[served_sha256(request["messages"])]
        if arm == "cold":
            return VIOLATING
        if arm == "mandated" or request["model"] == "m-a":
            return COMPLIANT
        return PARTIAL

    return reply


def faulted_request(scenarios: Path) -> tuple[str, str]:
    model, sid, arm = FAULTED
    item = load_library(scenarios)[sid]
    return model, served_sha256(build_messages(item.scenario, arm))


def options(server: FakeOpenAI, scenarios: Path, db: str, **over: Any) -> RunOptions:
    base: dict[str, Any] = {
        "scenarios": str(scenarios),
        "models": MODELS,
        "runs": 1,
        "base_url": server.base_url,
        "api_key_env": KEY_VAR,
        "db": db,
        "run_id": "mon-1",
        "concurrency": 4,
        "timeout_s": 10.0,
        "max_attempts": 1,
    }
    base.update(over)
    return RunOptions(**base)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def add_run(session: Session, run_id: str, **fields: Any) -> Run:
    run = Run(id=run_id, prompt_version="2.0", params_json='{"models": ["m"]}', **fields)
    session.add(run)
    session.commit()
    return run


def add_record(session: Session, run_id: str, n: int, created: datetime, **fields: Any) -> None:
    values: dict[str, Any] = {
        "run_id": run_id,
        "model": "m",
        "scenario_id": f"s{n}",
        "scenario_version": 1,
        "scenario_sha256": "x",
        "category": "library-choice",
        "arm": "cold",
        "rep": 0,
        "status": "ok",
        "strict": True,
        "messages_sha256": "x",
        "prompt_version": "2.0",
        "created": created,
    }
    values.update(fields)
    session.add(Record(**values))


# --------------------------------------------------------------------------- real runs


def test_finished_run_progress_accuracy_errors_and_latest(db_url: str, library: Path) -> None:
    faults = FaultPlan(per_request={faulted_request(library): ["500"] * 3})
    with FakeOpenAI(MODELS, reply=policy(library), faults=faults) as server:
        outcome = asyncio.run(BenchmarkRun(options(server, library, db_url)).execute())
    assert outcome.status == "finished"

    with Session(get_engine(db_url)) as session:
        [p] = monitor.list_progress(session)
        detail = monitor.run_detail(session, p)
        summary = summarize(*db_tallies(session, ["mon-1"]))

    assert (p.run_id, p.state, p.status) == ("mon-1", "finished", "finished")
    assert (p.total, p.done, p.ok, p.errors) == (12, 12, 11, 1)
    assert p.fraction == 1.0 and p.missing == 1
    assert p.calls_per_s is None and p.eta_s is None  # only measured while running
    assert p.retryable and not p.resumable and not p.active
    assert p.models == MODELS and p.arms == list(ARMS)

    # Strict accuracy so far, per model × arm, in arm order; the error is outside n.
    got = {(a.model, a.arm): a.rate for a in detail.accuracy}
    assert [(a.model, a.arm) for a in detail.accuracy] == [(m, a) for m in MODELS for a in ARMS]
    assert got[("m-a", "cold")] == Rate(0, 2, 0)
    assert got[("m-a", "incentivized")] == Rate(2, 2, 0)
    assert got[("m-b", "mandated")] == Rate(1, 1, 1)
    assert got[("m-b", "incentivized")] == Rate(0, 2, 0)
    # ... and the same numbers as the metrics module (README: Metrics).
    assert {k: (r.k, r.n) for k, r in got.items()} == {
        k: (r.k, r.n) for k, r in summary.strict.items()
    }

    [err] = detail.errors
    assert (err.model, err.scenario_id, err.arm, err.rep) == (*FAULTED, 0)
    assert "HTTP 500" in err.reason and err.attempts == 1

    # The latest record: the one stored last, with the constraints it broke.
    with Session(get_engine(db_url)) as session:
        stored = session.exec(select(Record).where(Record.run_id == "mon-1")).all()
        newest = max(stored, key=lambda r: (r.created, r.id or 0))
    latest = detail.latest
    assert latest is not None
    assert (latest.model, latest.scenario_id, latest.arm, latest.status) == (
        newest.model,
        newest.scenario_id,
        newest.arm,
        newest.status,
    )
    if latest.status == "ok":
        expected = {
            "cold": ["httpx-not-requests", "timeout-set"],
            "mandated": [],
            "incentivized": [] if latest.model == "m-a" else ["timeout-set"],
        }[latest.arm]
        assert latest.violated == expected and latest.strict is (not expected)


def test_progress_while_a_run_is_going(db_url: str, library: Path) -> None:
    with FakeOpenAI(MODELS, reply=policy(library), delay_s=0.25) as server:
        opts = options(server, library, db_url, concurrency=2, runs=2, run_id="mon-live")
        worker = threading.Thread(target=lambda: asyncio.run(BenchmarkRun(opts).execute()))
        worker.start()
        seen: list[monitor.RunProgress] = []
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline and worker.is_alive():
                with Session(get_engine(db_url)) as session:
                    found = monitor.run_progress(session, "mon-live")
                if found is not None and found.active and 2 <= found.done < found.total:
                    seen.append(found)
                    if len(seen) >= 2:
                        break
                time.sleep(0.2)
        finally:
            worker.join(timeout=60)
    assert seen, "never saw the run in progress"
    mid = seen[-1]
    assert mid.state == "running" and mid.pid == os.getpid() and mid.host == monitor.this_host()
    assert mid.total == 24 and 0 < mid.fraction < 1
    assert mid.calls_per_s is not None and mid.calls_per_s > 0
    assert mid.eta_s is not None and mid.eta_s > 0
    assert mid.cancellable_here
    with Session(get_engine(db_url)) as session:
        end = monitor.run_progress(session, "mon-live")
    assert end is not None and end.state == "finished" and end.done == end.total == 24


# --------------------------------------------------------------------------- hand-made rows


def test_rate_and_eta_over_the_last_minute(db_url: str) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    with Session(get_engine(db_url)) as session:
        add_run(
            session,
            "r-rate",
            status="running",
            pid=os.getpid(),
            host=monitor.this_host(),
            total_cells=100,
            updated=now,
        )
        for i in range(20):  # one record every 2 s over the last 39 s
            add_record(session, "r-rate", i, now - timedelta(seconds=1 + 2 * i))
        for i in range(20, 30):  # older than the window: counted as done, not in the rate
            add_record(session, "r-rate", i, now - timedelta(minutes=5, seconds=i))
        add_record(session, "r-rate", 99, now - timedelta(minutes=6), status="error", strict=None)
        session.commit()
        p = monitor.run_progress(session, "r-rate", now=now)
    assert p is not None and p.state == "running"
    assert (p.done, p.ok, p.errors, p.total) == (31, 30, 1, 100)
    assert p.calls_per_s == pytest.approx(20 / 39)
    assert p.eta_s == pytest.approx(69 / (20 / 39))
    assert monitor.format_duration(p.eta_s) == "02:15"


def test_died_runs_are_told_apart_and_listed_first(db_url: str) -> None:
    now = datetime.now(UTC)
    here = monitor.this_host()
    with Session(get_engine(db_url)) as session:
        add_run(session, "old-done", status="finished", updated=now - timedelta(days=2))
        add_run(
            session,
            "killed",
            status="running",
            pid=dead_pid(),
            host=here,
            total_cells=4,
            updated=now - timedelta(days=1),
        )
        add_record(session, "killed", 1, now - timedelta(seconds=5))
        add_run(
            session,
            "silent",
            status="running",
            pid=12345,
            host="another-machine",
            total_cells=4,
            updated=now - timedelta(seconds=monitor.DEAD_AFTER_S + 5),
        )
        for i in range(5):
            add_run(session, f"recent-{i}", status="finished", updated=now - timedelta(minutes=i))
        session.commit()
        listed = monitor.list_progress(session, limit=3, now=now)
    by_id = {p.run_id: p for p in listed}
    # The 3 most recently updated runs, and every running one whatever the limit, first.
    assert [p.run_id for p in listed] == ["killed", "silent", "recent-0", "recent-1"]
    killed, silent = by_id["killed"], by_id["silent"]
    assert killed.state == "died" and killed.status == "running"
    assert "is gone" in (killed.died_reason or "")
    assert killed.resumable and killed.missing == 3 and not killed.cancellable_here
    assert silent.state == "died" and "no heartbeat" in (silent.died_reason or "")


# --------------------------------------------------------------------------- liveness


NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
HERE = "studio-host"


@pytest.mark.parametrize(
    ("status", "pid", "host", "age_s", "state"),
    [
        ("finished", None, None, 3600, "finished"),
        ("cancelled", None, HERE, 3600, "cancelled"),
        ("failed", None, HERE, 10, "failed"),
        ("incomplete", None, HERE, 10, "incomplete"),
        ("running", "self", HERE, 1, "running"),
        # the process is there (it started before the heartbeat): a slow endpoint
        # that lets nothing be stored for minutes does not make the run dead
        ("running", "self", HERE, 600, "running"),
        ("running", "dead", HERE, 1, "died"),
        ("running", "self", "another-machine", 5, "running"),
        ("running", "self", "another-machine", monitor.DEAD_AFTER_S + 1, "died"),
        ("running", None, None, 5, "running"),
        ("running", None, None, monitor.DEAD_AFTER_S + 1, "died"),
    ],
    ids=[
        "finished",
        "cancelled",
        "failed",
        "incomplete",
        "alive-here",
        "alive-here-quiet",
        "pid-gone",
        "elsewhere-fresh",
        "elsewhere-stale",
        "no-pid-fresh",
        "no-pid-stale",
    ],
)
def test_liveness(status: str, pid: str | None, host: str | None, age_s: float, state: str) -> None:
    pids = {"self": os.getpid(), "dead": dead_pid(), None: None}
    # The heartbeat is stamped now, after this process started (the process check
    # compares the two), and the run is looked at age_s later: no assumption about
    # how long any other process on the machine has been up.
    heartbeat = datetime.now(UTC)
    got = monitor.liveness(
        status,
        pids[pid],
        host,
        heartbeat,
        now=heartbeat + timedelta(seconds=age_s),
        local_host=HERE,
    )
    assert got.state == state
    assert (got.reason is not None) == (state == "died")


def test_a_reused_pid_is_not_the_run() -> None:
    # This process started after the year 2000: as the pid of a run whose last
    # heartbeat was then, it is another program that got the same number.
    long_ago = datetime(2000, 1, 1, tzinfo=UTC)
    assert monitor.process_alive(os.getpid())
    assert not monitor.process_alive(os.getpid(), started_by=long_ago)
    got = monitor.liveness("running", os.getpid(), HERE, long_ago, now=NOW, local_host=HERE)
    assert got.state == "died"


def test_zombie_counts_as_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{proc.pid}/stat")
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    try:
        assert not monitor.process_alive(proc.pid)  # exited, not yet reaped
    finally:
        proc.wait()
