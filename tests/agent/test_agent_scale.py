"""An agent episode is one cell: a kill -9 mid-episode loses it whole and a resume runs it
again from the start; two runners on one PostgreSQL (and SQLite) store send every cell once.

Real ``cvb run`` processes against the scripted agent endpoint run as a process
(``tests/scripted_agent.py --delay``), so that episodes are in flight when a runner dies.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from test_runner import (  # noqa: E402, F401 (_isolated_env: the runner tests' autouse fixture)
    _isolated_env,
    cli_args,
    cvb,
    launch_and_kill,
    query,
    run_status,
    write_scenarios,
)
from test_scale_out import finish, poll_store, runner_argv, start  # noqa: E402

from cvb_engine.agent.trace import AgentTrace  # noqa: E402

SCRIPT = TESTS / "scripted_agent.py"


@contextmanager
def scripted_process(*args: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
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


def agent_rows(db: str, run_id: str) -> list[tuple[object, ...]]:
    return query(
        db,
        "SELECT model, scenario_id, arm, rep, status, strict, agent_json, worker FROM record "
        "WHERE run_id = :r",
        r=run_id,
    )


def check_complete(rows: list[tuple[object, ...]], expected: int) -> None:
    cells = Counter(row[:4] for row in rows)
    assert len(cells) == expected and max(cells.values()) == 1, cells.most_common(3)
    for model, _, _, _, status, strict, agent_json, _ in rows:
        trace = AgentTrace.from_json(str(agent_json))
        assert status == "ok" and trace is not None
        # a whole episode: the reader listed, read, wrote and answered; nothing half-done
        assert trace.ended_by == "answer" and trace.files
        assert bool(strict) is (model == "reader")
        if model == "reader":
            assert all(trace.read.values()) and trace.steps >= 3


def test_kill_9_mid_episode_then_resume(tmp_path: Path, valid_text: str) -> None:
    scenarios = tmp_path / "scenarios"
    sids = write_scenarios(scenarios, valid_text, per_category=2, categories=["library-choice"])
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    size = 2 * len(sids) * 3  # models x scenarios x runs
    with scripted_process("--delay", "0.1") as url:
        argv = ["run", "--models", "reader,writer", "--arms", "agent", "--runs", "3"]
        argv += ["--run-id", "ak9", "--concurrency", "4", *cli_args(url, scenarios, db)]
        before = launch_and_kill(tmp_path, argv, db, "ak9", 3)
        assert 3 <= len(before) < size
        assert run_status(db, "ak9") == "running"
        resumed = cvb(argv, tmp_path, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    rows = agent_rows(db, "ak9")
    check_complete(rows, size)
    assert run_status(db, "ak9") == "finished"


@pytest.mark.parametrize("joiners", [1])
def test_two_runners_share_agent_episodes(
    tmp_path: Path, valid_text: str, db_url: str, joiners: int
) -> None:
    scenarios = tmp_path / "scenarios"
    sids = write_scenarios(scenarios, valid_text, per_category=2, categories=["library-choice"])
    size = 2 * len(sids) * 3
    with scripted_process("--delay", "0.05") as url:
        first = runner_argv("a", url, scenarios, db_url, join=False)
        first = [a for a in first if a not in ("--models", "m-a,m-b", "--arms", "cold")]
        first += ["--models", "reader,writer", "--arms", "agent"]
        procs = {"a": start(first, tmp_path)}
        poll_store(db_url, "SELECT id FROM run WHERE id = 'so'", bool, "the run", procs)
        procs["b"] = start(runner_argv("b", url, scenarios, db_url, join=True), tmp_path)
        results = {name: finish(proc) for name, proc in procs.items()}
    for name, (code, _, err) in results.items():
        assert code == 0, (name, err[-2000:])
    rows = agent_rows(db_url, "so")
    check_complete(rows, size)
    assert query(db_url, "SELECT status FROM run WHERE id = 'so'") == [("finished",)]
