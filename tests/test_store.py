"""Storage: one cell stored once, SQLite pragmas, schema version, no secrets in params."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from cvb_engine.store import (
    SCHEMA_VERSION,
    Meta,
    Record,
    Run,
    StoreError,
    dispose_engines,
    get_engine,
    redact_params,
)


def make_record(**over: object) -> Record:
    base = dict(
        run_id="r1",
        model="m",
        scenario_id="s",
        scenario_version=1,
        scenario_sha256="x" * 64,
        category="security",
        arm="cold",
        rep=0,
        status="ok",
        messages_sha256="y" * 64,
        prompt_version="2.0",
    )
    base.update(over)
    return Record(**base)  # type: ignore[arg-type]


def test_a_cell_cannot_be_stored_twice(db_url: str) -> None:
    engine = get_engine(db_url)
    with Session(engine) as session:
        session.add(Run(id="r1", prompt_version="2.0", params_json="{}"))
        session.commit()
        session.add(make_record())
        session.commit()
        session.add(make_record(status="error"))
        with pytest.raises(IntegrityError):
            session.commit()
        session.rollback()
        session.add(make_record(rep=1))
        session.commit()


def test_sqlite_runs_in_wal_mode_with_busy_timeout(tmp_path: Path) -> None:
    with get_engine(f"sqlite:///{tmp_path / 'wal.db'}").connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000


def test_newer_schema_is_refused(db_url: str) -> None:
    with Session(get_engine(db_url)) as session:
        meta = session.get(Meta, "schema_version")
        assert meta is not None and meta.value == str(SCHEMA_VERSION)
        meta.value = "99"
        session.add(meta)
        session.commit()
    dispose_engines()
    with pytest.raises(StoreError, match="newer than this cvb-studio"):
        get_engine(db_url)


def test_redact_params_keeps_the_variable_name_only() -> None:
    params = {
        "api_key_env": "GROQ_API_KEY",
        "api_key": "sk-secret",
        "nested": {"token": "t", "ok": 1},
    }
    clean = redact_params(params)
    assert clean == {"api_key_env": "GROQ_API_KEY", "nested": {"ok": 1}}
    assert "sk-secret" not in json.dumps(clean)


def test_a_fresh_store_opened_at_once_by_threads_and_processes(db_url: str) -> None:
    """A runner thread, a live view and other processes may all open a new store first."""
    import subprocess
    import sys
    import threading

    code = "import sys; from cvb_engine.store import get_engine; get_engine(sys.argv[1])"
    procs = [subprocess.Popen([sys.executable, "-c", code, db_url]) for _ in range(3)]
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            get_engine(db_url)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    assert errors == []
    with Session(get_engine(db_url)) as session:
        assert session.get(Meta, "schema_version") is not None


@pytest.mark.parametrize("column_there", [False, True], ids=["schema-3", "column-added-by-hand"])
def test_upgrade_3_to_4_adds_response_cut_once(tmp_path: Path, column_there: bool) -> None:
    from cvb_engine.store import stored_version, upgrade_schema

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = get_engine(url)
    with engine.begin() as conn:
        if not column_there:
            conn.execute(text("ALTER TABLE record DROP COLUMN response_cut"))
        conn.execute(text("UPDATE meta SET value = '3' WHERE key = 'schema_version'"))
    dispose_engines()
    engine = get_engine(url, create=False)
    assert upgrade_schema(engine) == [4, 5, 6, 7]
    assert stored_version(engine) == SCHEMA_VERSION
    with engine.connect() as conn:
        columns = [row[1] for row in conn.execute(text("PRAGMA table_info(record)"))]
    assert columns.count("response_cut") == 1
    engine.dispose()
    dispose_engines()


def test_upgrade_4_to_5_keeps_records_and_adds_the_runner_tables(tmp_path: Path) -> None:
    from cvb_engine.store import Record, Run, stored_version, upgrade_schema

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = get_engine(url)
    with Session(engine) as session:
        session.add(Run(id="r1", prompt_version="2.0", params_json="{}"))
        session.commit()
        session.add(
            Record(
                run_id="r1",
                model="m",
                scenario_id="s",
                scenario_version=1,
                scenario_sha256="x",
                category="c",
                arm="cold",
                rep=0,
                status="ok",
                messages_sha256="d",
                prompt_version="2.0",
            )
        )
        session.commit()
    with engine.begin() as conn:
        for column in ("error_kind", "memory_json", "worker"):
            conn.execute(text(f"ALTER TABLE record DROP COLUMN {column}"))
        conn.execute(text("ALTER TABLE run DROP COLUMN cancel_requested"))
        conn.execute(text("DROP TABLE cellclaim"))
        conn.execute(text("DROP TABLE runworker"))
        conn.execute(text("UPDATE meta SET value = '4' WHERE key = 'schema_version'"))
    dispose_engines()
    engine = get_engine(url, create=False)
    assert upgrade_schema(engine) == [5, 6, 7]
    assert stored_version(engine) == SCHEMA_VERSION
    with engine.connect() as conn:
        columns = [row[1] for row in conn.execute(text("PRAGMA table_info(record)"))]
        tables = {row[0] for row in conn.execute(text("SELECT name FROM sqlite_master"))}
        kept = conn.execute(text("SELECT count(*), max(error_kind) FROM record")).one()
    assert {"error_kind", "memory_json", "worker"} <= set(columns)
    assert {"cellclaim", "runworker"} <= tables
    assert tuple(kept) == (1, None)  # the old record is there, its error kind unknown
    engine.dispose()
    dispose_engines()


@pytest.mark.parametrize(
    ("params", "total_cells", "legacy"),
    [
        pytest.param(
            {
                "models": ["m"],
                "arms": ["cold"],
                "runs": 1,
                "max_tokens": 700,
                "scenarios": {"a": {}, "reset-token-generator": {}},
            },
            2,
            False,
            id="whole",
        ),
        pytest.param(
            {"models": ["m"], "arms": ["cold"], "runs": 1, "scenarios": {"a": {}, "b": {}}},
            2,
            True,
            id="max-tokens-dropped",
        ),
        pytest.param(
            {
                "models": ["m"],
                "arms": ["cold", "mandated"],
                "runs": 2,
                "max_tokens": 1024,
                "scenarios": {"a": {}},
            },
            8,
            True,
            id="a-scenario-id-dropped",
        ),
    ],
)
def test_upgrade_5_to_6_marks_runs_whose_params_cannot_be_resumed(
    tmp_path: Path, params: dict[str, object], total_cells: int, legacy: bool
) -> None:
    """Runs stored while the secret filter dropped ``max_tokens`` and scenario ids that
    mention a token are marked legacy (their resume is refused, not searched for)."""
    from cvb_engine.store import Run, stored_version, upgrade_schema

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = get_engine(url)
    with Session(engine) as session:
        session.add(
            Run(
                id="r1",
                prompt_version="2.0",
                params_json=json.dumps(params),
                total_cells=total_cells,
            )
        )
        session.commit()
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE run DROP COLUMN legacy_params"))
        conn.execute(text("UPDATE meta SET value = '5' WHERE key = 'schema_version'"))
    dispose_engines()
    engine = get_engine(url, create=False)
    assert upgrade_schema(engine) == [6, 7]
    assert stored_version(engine) == SCHEMA_VERSION
    with Session(engine) as session:
        run = session.get(Run, "r1")
        assert run is not None and bool(run.legacy_params) is legacy
    engine.dispose()
    dispose_engines()


@pytest.mark.parametrize("column_there", [False, True], ids=["schema-6", "column-added-by-hand"])
def test_upgrade_6_to_7_adds_agent_json_and_keeps_records(
    tmp_path: Path, column_there: bool
) -> None:
    """Schema 7 adds the agent episode's trace (``Record.agent_json``); a store's records
    stay, with no trace (they are not agent cells)."""
    from cvb_engine.store import init_schema, stored_version, upgrade_schema

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = get_engine(url)
    with Session(engine) as session:
        session.add(Run(id="r1", prompt_version="2.0", params_json="{}"))
        session.commit()
        session.add(
            Record(
                run_id="r1",
                model="m",
                scenario_id="s",
                scenario_version=1,
                scenario_sha256="x",
                category="c",
                arm="cold",
                rep=0,
                status="ok",
                messages_sha256="d",
                prompt_version="2.0",
                response="print(1)",
            )
        )
        session.commit()
    with engine.begin() as conn:
        if not column_there:
            conn.execute(text("ALTER TABLE record DROP COLUMN agent_json"))
        conn.execute(text("UPDATE meta SET value = '6' WHERE key = 'schema_version'"))
    dispose_engines()
    engine = get_engine(url, create=False)
    with pytest.raises(StoreError, match="cvb db upgrade"):
        init_schema(engine)
    assert upgrade_schema(engine) == [7]
    assert stored_version(engine) == SCHEMA_VERSION == 7
    with engine.connect() as conn:
        columns = [row[1] for row in conn.execute(text("PRAGMA table_info(record)"))]
        kept = conn.execute(
            text("SELECT count(*), max(response), max(agent_json) FROM record")
        ).one()
    assert columns.count("agent_json") == 1
    assert tuple(kept) == (1, "print(1)", None)
    engine.dispose()
    dispose_engines()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("sqlite:///data/x.db", "sqlite:///data/x.db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("/tmp/cvb-bare.db", "sqlite:////tmp/cvb-bare.db"),
    ],
    ids=["sqlite-url", "postgres-url", "bare-absolute-path"],
)
def test_a_bare_path_names_a_sqlite_file(given: str, expected: str) -> None:
    from cvb_engine.store import database_url

    assert database_url(given) == expected


def test_a_bare_relative_path_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cvb_engine.store import database_url

    monkeypatch.chdir(tmp_path)
    assert database_url("team.db") == f"sqlite:///{tmp_path.resolve() / 'team.db'}"
