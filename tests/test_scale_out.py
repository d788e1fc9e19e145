"""Many runners, one run (README: Many runners, one run, issue 21): cell claims with leases in the store.

Real processes against the loopback fake endpoint (``tests/fake_openai.py`` as a
process, with a per-request delay and its request log), on SQLite and on the
session's throwaway PostgreSQL server. A cell is known in the endpoint's log by
its model, messages sha256 and seed (the repetition).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
import sqlalchemy.exc
from sqlalchemy.pool import NullPool
from sqlmodel import Session

from cvb_engine import monitor
from cvb_engine.arms import build_messages
from cvb_engine.claims import RunClaims, request_cancel, runners
from cvb_engine.dbtools import runner_lines
from cvb_engine.prompts import messages_sha256
from cvb_engine.run_options import DEFAULT_OPTIONS
from cvb_engine.runner import BenchmarkRun, RunError, RunOptions
from cvb_engine.scenario import load_library
from cvb_engine.store import Run, dispose_engines, get_engine

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from fake_openai import CHAT_PATH, FakeOpenAI  # noqa: E402
from test_runner import cvb_command, write_scenarios  # noqa: E402

FAKE_SCRIPT = TESTS / "fake_openai.py"
SEED = DEFAULT_OPTIONS.seed
#: One key variable per runner, as on three machines with three quotas.
KEYS = {
    "a": ("CVB_SCALE_A_KEY", "sk-scale-A-LeakCanary-51c0"),
    "b": ("CVB_SCALE_B_KEY", "sk-scale-B-LeakCanary-93d2"),
    "c": ("CVB_SCALE_C_KEY", "sk-scale-C-LeakCanary-07e4"),
    "d": ("CVB_SCALE_D_KEY", "sk-scale-D-LeakCanary-6a1f"),
}
MODELS = ["m-a", "m-b"]
RUNS = 3
CONCURRENCY = 2
LEASE = "3"
#: Waits for processes on a loaded machine: generous, a guard against hangs only.
PROCESS_S = 120.0

Cell = tuple[str, str, str, int]


# --------------------------------------------------------------------------- helpers


def env_for(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CVB_DATABASE_URL"}
    env.update(CVB_ENDPOINTS=str(tmp / "no-endpoints.json"), NO_PROXY="127.0.0.1,localhost")
    env["no_proxy"] = env["NO_PROXY"]
    env.update(dict(KEYS.values()))
    return env


def query(url: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    engine = sqlalchemy.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sqlalchemy.text(sql), params)]
    finally:
        engine.dispose()


def poll_store(
    url: str,
    sql: str,
    until: Callable[[list[tuple[Any, ...]]], bool],
    what: str,
    procs: dict[str, subprocess.Popen[str]] | None = None,
) -> list[tuple[Any, ...]]:
    """Poll ``sql`` until ``until(rows)``; a runner of ``procs`` that ended meanwhile fails it."""
    deadline = time.monotonic() + PROCESS_S
    while time.monotonic() < deadline:
        for name, proc in (procs or {}).items():
            if proc.poll() is not None:
                _, err = proc.communicate()
                raise AssertionError(f"runner {name} ended (exit {proc.returncode}): {err[-3000:]}")
        try:
            rows = query(url, sql)
        except sqlalchemy.exc.DBAPIError:  # no tables yet
            rows = []
        if until(rows):
            return rows
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def fake_endpoint(tmp: Path, log: Path, delay: str, *more: str) -> Iterator[str]:
    argv = ["--port", "0", "--models", ",".join(MODELS), "--delay", delay, "--log", str(log)]
    argv += more
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_SCRIPT), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), line
        yield line.split()[1]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def runner_argv(name: str, url: str, scenarios: Path, db: str, *, join: bool) -> list[str]:
    argv = ["run", "--run-id", "so", "--worker", name, "--base-url", url, "--db", db]
    argv += ["--api-key-env", KEYS[name][0], "--concurrency", str(CONCURRENCY), "--lease", LEASE]
    argv += ["--scenarios", str(scenarios), "--quiet"]
    if join:
        return [*argv, "--join"]  # the matrix comes from the store
    return [*argv, "--models", ",".join(MODELS), "--arms", "cold", "--runs", str(RUNS)]


def start(argv: list[str], tmp: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*cvb_command(), *argv],
        cwd=tmp,
        env=env_for(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def cvb(argv: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cvb_command(), *argv],
        cwd=tmp,
        env=env_for(tmp),
        capture_output=True,
        text=True,
        timeout=PROCESS_S,
    )


def served_cells(log: Path, scenarios: Path) -> Counter[Cell]:
    """How often the endpoint answered each cell (model, scenario, arm, repetition)."""
    library = load_library(scenarios)
    index = {
        messages_sha256(build_messages(item.scenario, "cold")): sid for sid, item in library.items()
    }
    out: Counter[Cell] = Counter()
    for line in log.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry["path"] == CHAT_PATH and entry["outcome"] == "ok":
            sid = index[entry["messages_sha256"]]
            out[(entry["model"], sid, "cold", int(entry["seed"]) - SEED)] += 1
    return out


def records(db: str) -> list[tuple[Any, ...]]:
    return query(
        db,
        "SELECT model, scenario_id, arm, rep, status, worker, strict FROM record "
        "WHERE run_id = 'so'",
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=PROCESS_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"runner did not end: {err[-2000:]}") from None
    return proc.returncode, out, err


# --------------------------------------------------------------------------- three runners


def test_three_runners_one_killed_send_every_cell_once(
    tmp_path: Path, valid_text: str, db_url: str
) -> None:
    scenarios = tmp_path / "scenarios"
    sids = write_scenarios(scenarios, valid_text, 2, ["library-choice", "security", "concurrency"])
    matrix = {(m, s, "cold", r) for m in MODELS for s in sids for r in range(RUNS)}  # 36
    log = tmp_path / "served.jsonl"
    # The endpoint holds every answer until the three runners have joined and claimed:
    # on a loaded machine the first could otherwise finish the run before the others start.
    hold = tmp_path / "hold"
    hold.touch()
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        with fake_endpoint(tmp_path, log, "1.0", "--hold-file", str(hold)) as url:
            procs["a"] = start(runner_argv("a", url, scenarios, db_url, join=False), tmp_path)
            poll_store(db_url, "SELECT id FROM run WHERE id = 'so'", bool, "the run", procs)
            for name in ("b", "c"):
                procs[name] = start(runner_argv(name, url, scenarios, db_url, join=True), tmp_path)
            # Once all three work (b has stored answers and holds claims), `cvb db info`
            # lists them; then b is killed mid-run.
            working = (
                "SELECT (SELECT count(*) FROM runworker WHERE status = 'running'), "
                "(SELECT count(*) FROM record WHERE worker = 'b'), "
                "(SELECT count(*) FROM cellclaim WHERE worker = 'b')"
            )
            poll_store(
                db_url,
                working,
                lambda rows: bool(rows) and rows[0][0] == 3 and rows[0][2] >= 1,
                "the three runners to join and claim",
                procs,
            )
            hold.unlink()
            poll_store(
                db_url,
                working,
                lambda rows: bool(rows) and rows[0][0] == 3 and rows[0][1] >= 1,
                "the three runners to work",
                procs,
            )
            # Paused again (requests in flight finish, new ones wait): on a loaded machine
            # the runners could otherwise end the run while `cvb db info` looks.
            hold.touch()
            info = cvb(["db", "info", "--db", db_url], tmp_path)
            poll_store(
                db_url,
                working,
                lambda rows: bool(rows) and rows[0][2] >= 1,
                "runner b to hold claims",
                procs,
            )
            os.kill(procs["b"].pid, signal.SIGKILL)
            procs["b"].wait(PROCESS_S)
            [(stored_at_kill,)] = query(db_url, "SELECT count(*) FROM record WHERE run_id = 'so'")
            with Session(get_engine(db_url)) as session:
                after_kill = runners(session, "so")
            hold.unlink()
            ended = {name: finish(procs[name]) for name in ("a", "c")}
            late = cvb(runner_argv("d", url, scenarios, db_url, join=True), tmp_path)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    for name, (code, out, err) in ended.items():
        assert code == 0, (name, out, err)
        assert "run so: finished" in out, (name, out)
    # The run has exactly its matrix, each cell once, and says so.
    stored = records(db_url)
    cells = [row[:4] for row in stored]
    assert sorted(Counter(cells).values()) == [1] * len(matrix)
    assert set(cells) == matrix
    # Scored, b's too: its recorder outlives it long enough to score what it committed,
    # and the runners still working score anything a kill left between the two.
    unscored = [row for row in stored if row[4] != "ok" or row[6] is None]
    assert not unscored, unscored
    assert query(db_url, "SELECT status FROM run WHERE id = 'so'") == [("finished",)]
    assert query(db_url, "SELECT count(*) FROM cellclaim WHERE run_id = 'so'") == [(0,)]
    # Every record names the runner that produced it. b stored some before it was killed
    # (waited for above); what was missing then was sent by the runners still alive,
    # except what b's recorder had already received (one per worker). How a and c
    # shared the rest depends on the machine's load, so it is not asserted.
    workers = Counter(row[5] for row in stored)
    assert set(workers) <= {"a", "b", "c"} and workers["b"] >= 1, workers
    assert workers["a"] + workers["c"] >= len(matrix) - stored_at_kill - CONCURRENCY, (
        workers,
        stored_at_kill,
    )
    # The endpoint saw every cell, and a cell twice only if b had it in flight when killed.
    served = served_cells(log, scenarios)
    assert set(served) == matrix
    twice = {cell: n for cell, n in served.items() if n > 1}
    assert sum(n - 1 for n in twice.values()) <= CONCURRENCY, twice
    by_cell = {row[:4]: row[5] for row in stored}
    assert all(by_cell[cell] != "b" for cell in twice)  # b never stored what it lost
    # Runners keep only the name of their key variable; no key is stored.
    rows = query(db_url, "SELECT worker, api_key_env, status FROM runworker WHERE run_id = 'so'")
    assert {(w, k) for w, k, _ in rows} == {(n, KEYS[n][0]) for n in "abcd"}
    # b stays "running" in the store until a runner starting on its host finds it gone.
    assert {w: s for w, _, s in rows} == {
        "a": "finished",
        "b": "died",
        "c": "finished",
        "d": "finished",
    }
    dump = json.dumps(
        [list(map(str, r)) for r in query(db_url, "SELECT * FROM runworker")]
        + [list(map(str, r)) for r in query(db_url, "SELECT * FROM run")]
    )
    assert not any(key in dump for _, key in KEYS.values())
    # While they worked, `cvb db info` listed each runner, live, with its rate; once b
    # was killed it was shown as lapsed (its process gone on this host).
    assert info.returncode == 0, info.stderr
    lines = {line.split()[1]: line for line in info.stdout.splitlines() if "runner " in line}
    assert set(lines) == {"a", "b", "c"}, info.stdout
    assert all(" live " in lines[n] and "cells/min" in lines[n] for n in "abc"), info.stdout
    assert {s.worker: s.state for s in after_kill} == {"a": "live", "b": "lapsed", "c": "live"}
    lapsed = next(line for line in runner_lines(after_kill) if line.split()[1] == "b")
    assert "lease lapsed (3 s)" in lapsed and f"key ${KEYS['b'][0]}" in lapsed
    # A runner that comes after the run finished sends nothing.
    assert late.returncode == 0, late.stderr
    assert "nothing to send: run so is complete" in late.stdout
    assert sum(served_cells(log, scenarios).values()) == sum(served.values())


# --------------------------------------------------------------------------- joining


@pytest.fixture
def store(tmp_path: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp_path / 'cvb.db'}"
    dispose_engines()


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(MODELS, delay_s=0.05) as fake:
        yield fake


def options(scenarios: Path, base_url: str, db: str, **over: Any) -> RunOptions:
    base: dict[str, Any] = {
        "scenarios": str(scenarios),
        "models": ["m-a"],
        "arms": ["cold"],
        "runs": 1,
        "base_url": base_url,
        "api_key_env": KEYS["a"][0],
        "db": db,
        "run_id": "j",
        "concurrency": 2,
        "timeout_s": 30.0,
    }
    base.update(over)
    return RunOptions(**base)


def test_join_takes_the_matrix_from_the_store_and_refuses_another(
    tmp_path: Path,
    valid_text: str,
    store: str,
    endpoint: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for var, key in KEYS.values():
        monkeypatch.setenv(var, key)
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, 1, ["library-choice", "security"])
    # Nothing to join yet: refused, nothing sent.
    with pytest.raises(RunError, match="no run 'j' to join"):
        BenchmarkRun(options(scenarios, endpoint.base_url, store, join=True))
    first = asyncio.run(BenchmarkRun(options(scenarios, endpoint.base_url, store)).execute())
    assert first.status == "finished" and first.progress.ok == 2
    # A joiner gives only the run id and its own endpoint and key: the rest is stored.
    joiner = BenchmarkRun(
        RunOptions(
            run_id="j",
            join=True,
            db=store,
            base_url=endpoint.base_url,
            api_key_env=KEYS["b"][0],
            worker="second",
        )
    )
    assert joiner.matrix(joiner.o.models or []).sha256 == first.matrix.sha256
    assert joiner.endpoint.api_key_env == KEYS["b"][0]
    late = asyncio.run(joiner.execute())
    assert (late.status, late.progress.total, late.progress.done) == ("finished", 0, 0)
    # A matrix option given with --join that differs from the run's is refused.
    for over in ({"runs": 2}, {"models": ["m-a", "m-b"]}, {"arms": ["cold", "mandated"]}):
        with pytest.raises(RunError, match="different matrix"):
            asyncio.run(
                BenchmarkRun(
                    options(scenarios, endpoint.base_url, store, join=True, **over)
                ).execute()
            )
    # So is a library whose files changed since the run was started.
    target = next(scenarios.rglob("*.yaml"))
    target.write_text(target.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    with pytest.raises(RunError, match="changed files"):
        asyncio.run(
            BenchmarkRun(
                RunOptions(
                    run_id="j",
                    join=True,
                    db=store,
                    base_url=endpoint.base_url,
                    api_key_env=KEYS["c"][0],
                )
            ).execute()
        )
    chats = [e for e in endpoint.log if e.path == CHAT_PATH]
    assert len(chats) == 2  # only the first run's two cells were ever sent


def test_cli_join_refusals(tmp_path: Path, valid_text: str) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, 1, ["library-choice"])
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    missing = cvb(
        ["run", "--join", "--run-id", "nope", "--db", db, "--base-url", "http://127.0.0.1:9/v1"],
        tmp_path,
    )
    assert missing.returncode == 2, missing.stderr
    assert "no run 'nope' to join" in missing.stderr and "Traceback" not in missing.stderr
    no_id = cvb(["run", "--join", "--db", db, "--base-url", "http://127.0.0.1:9/v1"], tmp_path)
    assert no_id.returncode == 2 and "--join needs --run-id" in no_id.stderr


# --------------------------------------------------------------------------- claims


def fresh_run(url: str, run_id: str = "q") -> None:
    with Session(get_engine(url)) as session:
        session.add(Run(id=run_id, prompt_version="2.0", params_json="{}"))
        session.commit()


def test_concurrent_claims_never_hand_out_a_cell_twice(db_url: str) -> None:
    fresh_run(db_url)
    cells = [(f"m{i % 3}", f"s{i}", "cold", i % 2) for i in range(240)]
    n = 8
    sides = [RunClaims(get_engine(db_url), "q", f"w{i}", lease_s=30) for i in range(n)]
    for side in sides:
        side.join(cells)  # every runner enqueues the same cells: each row once
    assert query(db_url, "SELECT count(*) FROM cellclaim") == [(len(cells),)]
    got: dict[str, list[Cell]] = {}
    barrier = threading.Barrier(n)

    def drain(side: RunClaims) -> None:
        barrier.wait()
        mine = got.setdefault(side.worker, [])
        while batch := side.claim(3):
            mine += batch

    with ThreadPoolExecutor(n) as pool:
        list(pool.map(drain, sides))
    claimed = [c for batch in got.values() for c in batch]
    assert Counter(claimed) == Counter(cells)  # all of them, none twice
    assert sum(1 for batch in got.values() if batch) > 1  # they shared the work
    for side in sides:
        side.close()


def test_an_expired_lease_is_taken_over_and_the_slow_runner_learns_it(db_url: str) -> None:
    fresh_run(db_url)
    cells = [("m", f"s{i}", "cold", 0) for i in range(6)]
    slow = RunClaims(get_engine(db_url), "q", "slow", lease_s=0.4)
    slow.join(cells)
    held = slow.claim(4)
    other = RunClaims(get_engine(db_url), "q", "other", lease_s=30)
    other.join([])
    assert other.claim(10) == cells[4:]  # the slow runner's cells are not free yet
    outlook = other.outlook()
    assert (outlook.cancelled, outlook.elsewhere) == (False, 4)
    time.sleep(0.6)
    assert other.claim(10) == held  # expired: taken over
    assert slow.beat(0, 0).held == frozenset()  # the slow runner sees it lost them
    assert request_cancel(get_engine(db_url), "q")
    assert other.beat(0, 0).cancelled
    assert other.outlook().cancelled
    assert other.leave("cancelled", 0, 0) == ["slow"]  # in this process: live
    assert slow.leave("cancelled", 0, 0) == []  # nobody else is live: the last one out
    assert query(db_url, "SELECT count(*) FROM cellclaim WHERE worker IS NOT NULL") == [(0,)]
    slow.close()
    other.close()


def test_cancel_stops_every_runner_and_a_resume_clears_it(
    tmp_path: Path, valid_text: str, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for var, key in KEYS.values():
        monkeypatch.setenv(var, key)
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, 3, ["library-choice", "security"])  # 6 scenarios
    with FakeOpenAI(MODELS, delay_s=0.3) as server:
        base = {"models": MODELS, "runs": 3, "run_id": "cx", "lease_s": 3.0}  # 36 cells
        outcomes: dict[str, Any] = {}

        def one(name: str, join: bool) -> None:
            opts = options(scenarios, server.base_url, store, worker=name, join=join, **base)
            outcomes[name] = asyncio.run(BenchmarkRun(opts).execute())

        first = threading.Thread(target=one, args=("x", False))
        first.start()
        poll_store(store, "SELECT id FROM run WHERE id = 'cx'", bool, "the run to exist")
        second = threading.Thread(target=one, args=("y", True))
        second.start()
        poll_store(
            store,
            "SELECT count(DISTINCT worker) FROM record WHERE run_id = 'cx'",
            lambda rows: bool(rows) and rows[0][0] == 2,
            "both runners to store answers",
        )
        assert request_cancel(get_engine(store), "cx")
        first.join(PROCESS_S)
        second.join(PROCESS_S)
        assert {o.status for o in outcomes.values()} == {"cancelled"}
        kept = query(store, "SELECT count(*) FROM record WHERE run_id = 'cx'")[0][0]
        assert 2 <= kept < 36
        served = len([e for e in server.log if e.path == CHAT_PATH])
        assert served == kept  # in-flight cells finished and were stored; nothing else sent
        assert query(store, "SELECT status FROM run WHERE id = 'cx'") == [("cancelled",)]
        assert query(store, "SELECT count(*) FROM cellclaim WHERE worker IS NOT NULL") == [(0,)]
        with Session(get_engine(store)) as session:
            assert {s.worker: s.state for s in runners(session, "cx")} == {
                "x": "cancelled",
                "y": "cancelled",
            }
        # A resume clears the cancel and sends the rest.
        one("x", False)
    assert outcomes["x"].status == "finished"
    assert outcomes["x"].progress.done == 36 - kept
    assert query(store, "SELECT cancel_requested FROM run WHERE id = 'cx'") == [(None,)]


def test_a_run_whose_stored_process_died_is_running_while_another_runner_is_live(
    store: str,
) -> None:
    fresh_run(store, "lv")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with Session(get_engine(store)) as session:
        run = session.get(Run, "lv")
        assert run is not None
        run.status, run.pid, run.host = "running", gone.pid, monitor.this_host()
        session.add(run)
        session.commit()
    with Session(get_engine(store)) as session:
        assert monitor.run_progress(session, "lv").state == "died"  # type: ignore[union-attr]
    side = RunClaims(get_engine(store), "lv", "alive-here", lease_s=30)
    side.join([])  # this process: live
    with Session(get_engine(store)) as session:
        assert monitor.run_progress(session, "lv").state == "running"  # type: ignore[union-attr]
    side.leave("finished", 0, 0)
    side.close()
