"""`cvb db`: schema versions, migrations, and copying runs between stores.

The copy test goes SQLite → every backend of the `db_url` fixture (SQLite and
PostgreSQL): a run started on SQLite, copied, resumed in the target and
reported there gives the same numbers as the same run done on SQLite alone.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import Session, delete, select

from cvb_engine.dbtools import copy_runs
from cvb_engine.metrics import summarize
from cvb_engine.report import markdown
from cvb_engine.results import db_tallies
from cvb_engine.runner import BenchmarkRun, RunOptions
from cvb_engine.store import (
    SCHEMA_VERSION,
    CheckOutcome,
    ConstraintResult,
    Record,
    StoreError,
    dispose_engines,
    get_engine,
    stored_version,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_openai import FakeOpenAI

GOOD = "```python\nimport httpx\nhttpx.get(url, timeout=5)\n```"
BAD = "```python\nimport requests\nrequests.get(url)\n```"


def reply(request: dict) -> str:
    content = request["messages"][-1]["content"]
    return GOOD if "Project memory" in content or "Requirements" in content else BAD


def run(scenarios: Path, base_url: str, url: str, run_id: str) -> None:
    options = RunOptions(
        scenarios=str(scenarios),
        models=["m-a", "m-b"],
        runs=2,
        base_url=base_url,
        api_key_env="",
        concurrency=4,
        db=url,
        run_id=run_id,
    )
    asyncio.run(BenchmarkRun(options).execute())


def report(url: str, run_id: str) -> str:
    with Session(get_engine(url)) as session:
        return markdown(summarize(*db_tallies(session, [run_id])))


def cvb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cvb_engine.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_copy_then_resume_in_the_target_matches_a_run_done_in_one_place(
    scenario_dir: Path, tmp_path: Path, db_url: str
) -> None:
    source = f"sqlite:///{tmp_path / 'laptop.db'}"
    alone = f"sqlite:///{tmp_path / 'alone.db'}"
    with FakeOpenAI(models=["m-a", "m-b"], reply=reply) as server:
        run(scenario_dir, server.base_url, alone, "r")
        run(scenario_dir, server.base_url, source, "r")
        # A crash on the laptop: three cells never made it.
        with Session(get_engine(source)) as session:
            victims = list(session.exec(select(Record.id).limit(3)))
            session.exec(delete(CheckOutcome).where(CheckOutcome.record_id.in_(victims)))  # type: ignore[union-attr]
            session.exec(delete(ConstraintResult).where(ConstraintResult.record_id.in_(victims)))  # type: ignore[union-attr]
            session.exec(delete(Record).where(Record.id.in_(victims)))  # type: ignore[union-attr]
            session.commit()
        first = copy_runs(get_engine(source), get_engine(db_url))
        assert first.runs_created == ["r"] and first.records_added == 3 * 2 * 2 - 3
        again = copy_runs(get_engine(source), get_engine(db_url))
        assert again.records_added == 0 and again.records_kept == 9  # nothing duplicated
        served_before = len(server.log)
        run(scenario_dir, server.base_url, db_url, "r")  # resume in the target
        assert len(server.log) - served_before == 1 + 3  # the /models probe and the 3 missing cells
    with Session(get_engine(db_url)) as session:
        cells = session.exec(select(Record.model, Record.scenario_id, Record.arm, Record.rep)).all()
    assert len(cells) == len(set(cells)) == 12
    assert report(db_url, "r") == report(alone, "r")


def test_a_changed_matrix_in_the_target_is_not_merged(scenario_dir: Path, tmp_path: Path) -> None:
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    with FakeOpenAI(models=["m-a", "m-b"], reply=reply) as server:
        run(scenario_dir, server.base_url, a, "r")
        options = RunOptions(
            scenarios=str(scenario_dir),
            models=["m-a"],
            runs=1,
            base_url=server.base_url,
            api_key_env="",
            db=b,
            run_id="r",
        )
        asyncio.run(BenchmarkRun(options).execute())
    result = copy_runs(get_engine(a), get_engine(b))
    assert result.runs_conflicting == ["r"] and result.records_added == 0


def test_an_older_store_is_refused_then_upgraded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = get_engine(url)
    with engine.begin() as conn:  # make it look like a schema-1 store
        conn.execute(text("DROP INDEX ix_constraintresult_constraint_id"))
        conn.execute(text("UPDATE meta SET value = '1' WHERE key = 'schema_version'"))
    dispose_engines()
    with pytest.raises(StoreError, match="cvb db upgrade"):
        get_engine(url)
    out = cvb("report", "--db", url)
    assert out.returncode == 2 and "cvb db upgrade" in out.stderr and "Traceback" not in out.stderr
    info = cvb("db", "info", "--db", url)
    assert "schema version  1 (older" in info.stdout
    up = cvb("db", "upgrade", "--db", url)
    assert up.returncode == 0 and f"schema {SCHEMA_VERSION}" in up.stdout
    engine = get_engine(url)
    assert stored_version(engine) == SCHEMA_VERSION
    with engine.connect() as conn:
        names = {
            r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type='index'"))
        }
    assert "ix_constraintresult_constraint_id" in names
    assert "nothing to do" in cvb("db", "upgrade", "--db", url).stdout


def test_a_newer_store_is_refused_without_change(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    with get_engine(url).begin() as conn:
        conn.execute(text("UPDATE meta SET value = '99' WHERE key = 'schema_version'"))
    dispose_engines()
    before = (tmp_path / "new.db").read_bytes()
    out = cvb("db", "upgrade", "--db", url)
    assert out.returncode == 2 and "newer" in out.stderr
    assert stored_version(get_engine(url, create=False)) == 99
    assert len((tmp_path / "new.db").read_bytes()) == len(before)


def test_concurrent_runs_share_one_store_without_duplicates(
    scenario_dir: Path, tmp_path: Path, db_url: str
) -> None:
    """Two `cvb run` processes on different runs and a third on the same run id as
    the first, all at once, while a reader polls the store: every cell once."""
    import os
    import time

    from cvb_engine.monitor import accuracy_so_far, run_progress  # the Run page's readers

    fake = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).parent / "fake_openai.py"),
            "--port",
            "0",
            "--models",
            "m-a,m-b",
            "--delay",
            "0.05",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None
        base_url = fake.stdout.readline().split()[1]
        env = {**os.environ, "CVB_DATABASE_URL": db_url}

        def start(run_id: str) -> subprocess.Popen[str]:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cvb_engine.cli",
                    "run",
                    "--scenarios",
                    str(scenario_dir),
                    "--models",
                    "m-a,m-b",
                    "--runs",
                    "3",
                    "--base-url",
                    base_url,
                    "--api-key-env",
                    "",
                    "--concurrency",
                    "3",
                    "--run-id",
                    run_id,
                    "--quiet",
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

        procs = [start("team-a"), start("team-b"), start("team-a")]
        reads = 0
        while any(p.poll() is None for p in procs):
            with Session(get_engine(db_url)) as session:
                progress = run_progress(session, "team-a")
                if progress is not None:
                    accuracy_so_far(session, "team-a")
                    reads += 1
            time.sleep(0.1)
        outputs = [p.communicate() for p in procs]
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out + err
        assert "Traceback" not in err
    assert reads > 0
    with Session(get_engine(db_url)) as session:
        for run_id in ("team-a", "team-b"):
            cells = session.exec(
                select(Record.model, Record.scenario_id, Record.arm, Record.rep).where(
                    Record.run_id == run_id
                )
            ).all()
            assert len(cells) == len(set(cells)) == 2 * 3 * 3, run_id
            unscored = session.exec(
                select(Record.id).where(Record.run_id == run_id, Record.scored_at == None)  # noqa: E711
            ).all()
            assert unscored == []


# --------------------------------------------------------------------------- untrusted source

MALFORMED = {
    "evidence-not-json": "UPDATE checkoutcome SET evidence_json = '{not json' "
    "WHERE record_id = (SELECT min(id) FROM record WHERE run_id = 'bad')",
    "rep-as-text": "UPDATE record SET rep = 'many' WHERE run_id = 'bad' AND arm = 'cold'",
    "traversal-scenario-id": "UPDATE record SET scenario_id = '../../etc/passwd' "
    "WHERE id = (SELECT min(id) FROM record WHERE run_id = 'bad')",
    "status-unknown": "UPDATE record SET status = 'maybe' WHERE run_id = 'bad' AND arm = 'cold'",
    "latency-infinite": "UPDATE record SET latency_s = 9e999 WHERE run_id = 'bad'",
    "params-not-an-object": "UPDATE run SET params_json = '[1]' WHERE id = 'bad'",
    "honored-as-text": "UPDATE constraintresult SET honored = 'yes' WHERE record_id = "
    "(SELECT min(id) FROM record WHERE run_id = 'bad')",
    "huge-model-name": "UPDATE record SET model = printf('%.*c', 5000, 'x') "
    "WHERE id = (SELECT min(id) FROM record WHERE run_id = 'bad')",
}


@pytest.mark.parametrize("corruption", list(MALFORMED), ids=list(MALFORMED))
def test_copy_refuses_a_malformed_run_and_writes_nothing_of_it(
    tmp_path: Path, corruption: str
) -> None:
    """One malformed run in the source: refused with its reason, no traceback, nothing of
    it in the target; the other runs are copied whole."""
    import sqlite3

    from stored_runs import add_run

    source, target = tmp_path / "source.db", tmp_path / "target.db"
    for run_id in ("good", "bad", "also-good"):
        add_run(f"sqlite:///{source}", run_id)
    with sqlite3.connect(source) as con:
        con.execute(MALFORMED[corruption])
    out = subprocess.run(
        [sys.executable, "-m", "cvb_engine.cli", "db", "copy", "--from",
         f"sqlite:///{source}", "--to", f"sqlite:///{target}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "refused bad: " in out.stdout and "nothing of it was written" in out.stdout
    with sqlite3.connect(target) as con:
        runs = {r for (r,) in con.execute("SELECT id FROM run")}
        per_run = dict(con.execute("SELECT run_id, count(*) FROM record GROUP BY run_id"))
        orphans = con.execute(
            "SELECT count(*) FROM constraintresult WHERE record_id NOT IN (SELECT id FROM record)"
        ).fetchone()[0]
    assert runs == {"good", "also-good"} and per_run == {"good": 12, "also-good": 12}
    assert orphans == 0
