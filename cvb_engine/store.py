"""Storage: every SQLModel table and the engine/session helpers, in one module.

The default store is the SQLite file ``data/cvb.db`` (WAL mode, a 30 s busy
timeout, ``synchronous=NORMAL``); any SQLAlchemy URL can be given through
``CVB_DATABASE_URL``. A cell of the matrix — (run, model, scenario, arm, rep)
— is unique in ``record``: the database itself refuses a second copy.

API keys are never stored: a run's parameters keep the *name* of the
environment variable, and :func:`redact_params` strips anything that looks
like a secret before parameters are written.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, Index, Text, UniqueConstraint, event, inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Field, Session, SQLModel, create_engine

if TYPE_CHECKING:
    from cvb_engine.scoring import Scored

SCHEMA_VERSION = 7
DEFAULT_DB_PATH = Path("data") / "cvb.db"


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC time: SQLite hands back naive values (stored as UTC),
    PostgreSQL aware ones in the session's time zone."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class Meta(SQLModel, table=True):
    """Key/value facts about the store itself (its schema version)."""

    key: str = Field(primary_key=True)
    value: str


class Run(SQLModel, table=True):
    """One benchmark run: a named matrix and the parameters it was sent with."""

    id: str = Field(primary_key=True)
    created: datetime = Field(default_factory=utcnow)
    updated: datetime = Field(default_factory=utcnow)
    prompt_version: str
    # JSON: models, scenarios (id → version/sha), arms, runs, temperature, ...
    params_json: str = Field(sa_column=Column(Text, nullable=False))
    matrix_sha256: str = ""
    total_cells: int = 0
    # created | running | finished | incomplete | cancelled | failed. ``finished``: every
    # cell of the matrix has a record; ``incomplete``: the sending ended with cells
    # still missing (a resume sends them).
    status: str = "created"
    pid: int | None = None
    host: str | None = None
    note: str | None = None
    # schema 5: set by Cancel (the studio's Run page): every runner of the run stops
    # sending at its next cell, on any machine (NULL: never asked).
    cancel_requested: bool | None = None
    # schema 6: True when the stored params cannot rebuild the run's matrix (an older
    # secret filter dropped some of them; see _migrate_5_to_6): such a run is not resumed
    # from the store. NULL: the params are whole.
    legacy_params: bool | None = None

    @property
    def params(self) -> dict[str, Any]:
        return dict(json.loads(self.params_json))


class Record(SQLModel, table=True):
    """One cell of the matrix: a model's answer to one scenario under one arm."""

    __table_args__ = (
        UniqueConstraint("run_id", "model", "scenario_id", "arm", "rep", name="uq_record_cell"),
        Index("ix_record_run_model_arm", "run_id", "model", "arm"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", index=True)
    model: str
    scenario_id: str
    scenario_version: int
    scenario_sha256: str
    category: str
    arm: str
    rep: int
    status: str  # ok | error
    error: str | None = Field(default=None, sa_column=Column(Text))
    attempts: int = 1
    response: str | None = Field(default=None, sa_column=Column(Text))
    code: str | None = Field(default=None, sa_column=Column(Text))
    messages_sha256: str
    prompt_version: str
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    # An API's separate reasoning field (reasoning_content / reasoning): kept, never scored.
    reasoning: str | None = Field(default=None, sa_column=Column(Text))  # schema 3
    # schema 4: cvb cut the reply (its content or its reasoning) at --max-response-chars,
    # or its body at the read limit; NULL for records stored before (never cut).
    response_cut: bool | None = None
    # schema 5: what failed, for an error record: "api" (the endpoint) or "memory" (a
    # memory layer: never an API failure, never a violation); NULL before schema 5 (api).
    error_kind: str | None = None
    # schema 5: JSON of what a memory layer gave this cell (memory and memory-tool arms:
    # the layer's name and version, the context or every tool call and result, latencies;
    # the memory trace of cvb_engine.memory_run); NULL for arms that use no layer.
    memory_json: str | None = Field(default=None, sa_column=Column(Text))
    # schema 7: JSON of an agent episode (the agent arm: the transcript, the files written,
    # steps, tokens, per-constraint read flags; cvb_engine.agent.trace.AgentTrace); NULL
    # for the other arms.
    agent_json: str | None = Field(default=None, sa_column=Column(Text))
    # schema 5: the runner that produced the record (`--worker`, host:pid by default).
    worker: str | None = None
    created: datetime = Field(default_factory=utcnow)
    # Scoring (re-computable from response + the scenario's checks)
    scored_at: datetime | None = None
    strict: bool | None = None
    stated_passed: bool | None = None
    n_constraints: int | None = None
    n_honored: int | None = None
    # schema 3: what kind of answer it was (answered | unparseable | no-code), whether
    # the endpoint cut it at max_tokens, and the scoring rules that judged it.
    outcome: str | None = None
    truncated: bool | None = None
    scoring_version: int | None = None


class ConstraintResult(SQLModel, table=True):
    """Whether one record honored one constraint (kept apart for aggregation in SQL)."""

    __table_args__ = (
        UniqueConstraint("record_id", "constraint_id", name="uq_constraint_result"),
        Index("ix_constraintresult_constraint_id", "constraint_id"),  # schema 2
    )

    id: int | None = Field(default=None, primary_key=True)
    record_id: int = Field(foreign_key="record.id", index=True)
    constraint_id: str
    honored: bool


class CheckOutcome(SQLModel, table=True):
    """One check's verdict on one record, with the evidence spans for highlighting."""

    id: int | None = Field(default=None, primary_key=True)
    record_id: int = Field(foreign_key="record.id", index=True)
    constraint_id: str
    check_index: int
    check_id: str
    kind: str
    passed: bool
    reason: str = Field(sa_column=Column(Text, nullable=False))
    scope: str = "code"
    evidence_json: str = Field(default="[]", sa_column=Column(Text, nullable=False))

    @property
    def evidence(self) -> list[dict[str, int]]:
        return list(json.loads(self.evidence_json))


class CellClaim(SQLModel, table=True):
    """schema 5: one open cell of a run in the run's queue, and the lease a runner holds on it
    (many runners, one run; :mod:`cvb_engine.claims`).

    A runner that binds a run puts the cells it would send here, unclaimed (``worker``
    NULL); a runner claims a batch of rows that are unclaimed or whose lease has expired,
    renews the leases of the rows it holds while it works, and the recorder deletes a
    row in the transaction that commits the cell's record.
    """

    __table_args__ = (
        UniqueConstraint("run_id", "model", "scenario_id", "arm", "rep", name="uq_claim_cell"),
        # claims take a run's rows in queue order
        Index("ix_cellclaim_run_queue", "run_id", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id")
    model: str
    scenario_id: str
    arm: str
    rep: int
    # the runner holding the cell, NULL while nobody does; times in the database
    # server's clock (cvb_engine.claims)
    worker: str | None = None
    claimed_at: datetime | None = None
    lease_until: datetime | None = None


class RunWorker(SQLModel, table=True):
    """schema 5: one runner taking part in a run, with its heartbeat (never its key)."""

    __table_args__ = (UniqueConstraint("run_id", "worker", name="uq_run_worker"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", index=True)
    worker: str
    host: str | None = None
    pid: int | None = None
    # the *name* of the key variable this runner reads (never its value)
    api_key_env: str | None = None
    started: datetime = Field(default_factory=utcnow)
    heartbeat: datetime = Field(default_factory=utcnow)
    # the lease it takes on the cells it claims, in seconds (its heartbeat renews them
    # every third of that): a running worker silent for longer has lapsed
    lease_s: float = 60.0
    # records it committed, and how many of them are error records
    cells_done: int = 0
    cells_failed: int = 0
    # running | finished | cancelled | failed | died (found gone on its host by a runner
    # starting there); a running worker whose heartbeat is older than its lease has
    # lapsed (cvb_engine.claims)
    status: str = "running"


def database_url(url: str | None = None) -> str:
    """The URL to use: the argument, else ``CVB_DATABASE_URL``, else ``sqlite:///data/cvb.db``.

    A value without a scheme (``data/team.db``, ``/tmp/x.db``) names a SQLite file: a
    bare path given to ``--db`` is what people type first.
    """
    for given in (url, os.environ.get("CVB_DATABASE_URL")):
        if given:
            if "://" in given:
                return given
            return f"sqlite:///{Path(given).expanduser().resolve()}"
    return f"sqlite:///{DEFAULT_DB_PATH}"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def get_engine(url: str | None = None, *, create: bool = True) -> Engine:
    """An engine for ``url`` (cached per URL), with the schema created if missing.

    With ``create=False`` the schema is neither created nor checked (``cvb db``
    uses this to inspect and migrate stores of other versions).
    """
    resolved = database_url(url)
    engine = _ENGINES.get(resolved)
    if engine is not None:
        return engine
    # One creator at a time in this process: two threads (a runner and a live
    # view) opening a fresh store would otherwise both create its tables.
    with _ENGINES_LOCK:
        engine = _ENGINES.get(resolved)
        if engine is not None:
            return engine
        return _new_engine(resolved, create)


def _new_engine(resolved: str, create: bool) -> Engine:
    if resolved.startswith("sqlite:///") and not resolved.startswith("sqlite:///:memory:"):
        Path(resolved.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {}
    if resolved.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": 30, "check_same_thread": False}
    else:
        kwargs["pool_pre_ping"] = True
    engine = create_engine(resolved, **kwargs)
    if resolved.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
    if create:
        try:
            init_schema(engine)
        except BaseException:
            engine.dispose()
            raise
        _ENGINES[resolved] = engine
    return engine


class StoreError(RuntimeError):
    """A store that cannot be used as it is (wrong schema version); the message says what to do."""


def _label(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def _migrate_1_to_2(conn: Connection) -> None:
    # Per-constraint views group by constraint id across 100,000s of rows.
    conn.execute(
        text(
            "CREATE INDEX IF NOT EXISTS ix_constraintresult_constraint_id "
            "ON constraintresult (constraint_id)"
        )
    )


def _migrate_2_to_3(conn: Connection) -> None:
    # Answer outcomes and the scoring version (README: Answer outcomes). Records scored
    # before keep NULL there: judged by scoring version 1, until `cvb score`.
    present = {c["name"] for c in inspect(conn).get_columns("record")}
    for column, sql_type in (
        ("reasoning", "TEXT"),
        ("outcome", "VARCHAR"),
        ("truncated", "BOOLEAN"),
        ("scoring_version", "INTEGER"),
    ):
        if column not in present:  # a store made by hand may have some already
            conn.execute(text(f"ALTER TABLE record ADD COLUMN {column} {sql_type}"))


def _migrate_3_to_4(conn: Connection) -> None:
    # Replies cut at --max-response-chars are flagged.
    if "response_cut" not in {c["name"] for c in inspect(conn).get_columns("record")}:
        conn.execute(text("ALTER TABLE record ADD COLUMN response_cut BOOLEAN"))


def _migrate_4_to_5(conn: Connection) -> None:
    # Memory layers and many runners on one run; the tables
    # cellclaim and runworker are created by create_all after this step.
    present = {c["name"] for c in inspect(conn).get_columns("record")}
    for column, sql_type in (
        ("error_kind", "VARCHAR"),
        ("memory_json", "TEXT"),
        ("worker", "VARCHAR"),
    ):
        if column not in present:
            conn.execute(text(f"ALTER TABLE record ADD COLUMN {column} {sql_type}"))
    if "cancel_requested" not in {c["name"] for c in inspect(conn).get_columns("run")}:
        conn.execute(text("ALTER TABLE run ADD COLUMN cancel_requested BOOLEAN"))


def _params_incomplete(params: dict[str, Any], total_cells: int) -> bool:
    if params.get("max_tokens") is None:
        return True
    per = (
        len(params.get("models") or [])
        * len(params.get("arms") or [])
        * int(params.get("runs") or 0)
    )
    return bool(per) and len(params.get("scenarios") or {}) < total_cells // per


def _migrate_5_to_6(conn: Connection) -> None:
    # Before 2026-11-30 redact_params dropped every key that *mentioned* key, token,
    # secret, password or authorization, at any depth: `max_tokens`, and the ids of
    # scenarios such as `reset-token-generator` (keys of the `scenarios` map). Such a
    # run's matrix cannot be rebuilt from its params, so it cannot be resumed from the
    # store. Marked legacy: params without `max_tokens` (every run stored since has it),
    # or whose `scenarios` map holds fewer ids than the matrix has scenarios
    # (total_cells / (models x arms x runs)).
    if "legacy_params" not in {c["name"] for c in inspect(conn).get_columns("run")}:
        conn.execute(text("ALTER TABLE run ADD COLUMN legacy_params BOOLEAN"))
    rows = conn.execute(text("SELECT id, params_json, total_cells FROM run")).all()
    for run_id, params_json, total_cells in rows:
        if _params_incomplete(json.loads(params_json), int(total_cells or 0)):
            conn.execute(
                text("UPDATE run SET legacy_params = :t WHERE id = :id"), {"t": True, "id": run_id}
            )


def _migrate_6_to_7(conn: Connection) -> None:
    # Agent episodes (the agent arm): the episode's trace on its record.
    if "agent_json" not in {c["name"] for c in inspect(conn).get_columns("record")}:
        conn.execute(text("ALTER TABLE record ADD COLUMN agent_json TEXT"))


#: MIGRATIONS[n] takes a store from schema n to n + 1.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
    3: _migrate_3_to_4,
    4: _migrate_4_to_5,
    5: _migrate_5_to_6,
    6: _migrate_6_to_7,
}


def stored_version(engine: Engine) -> int | None:
    """The store's schema version; None for an empty database, 1 for a store
    made before versioning (its tables exist but no version row)."""
    tables = set(inspect(engine).get_table_names())
    if "record" not in tables:
        return None
    if "meta" not in tables:
        return 1
    with engine.connect() as conn:
        value = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).scalar()
    return int(value) if value is not None else 1


def init_schema(engine: Engine) -> None:
    """Create a new store, or check that an existing one has this cvb's schema.

    An older store is refused with the command that migrates it; a newer one
    is refused rather than touched.
    """
    version = stored_version(engine)
    if version is None:
        _create_schema(engine)
        return
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the store at {_label(engine)} has schema version {version}, newer than this "
            f"cvb-studio understands ({SCHEMA_VERSION}); upgrade cvb-studio to use it"
        )
    if version < SCHEMA_VERSION:
        raise StoreError(
            f"the store at {_label(engine)} has schema version {version}; this cvb-studio uses "
            f"{SCHEMA_VERSION}. Migrate it with: cvb db upgrade --db '{_label(engine)}'"
        )


def _create_schema(engine: Engine) -> None:
    """Create the tables and the version row, safe against another process doing the same.

    PostgreSQL serialises creators with an advisory lock; elsewhere a creator
    that loses the race sees the tables exist and leaves them be.
    """
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(7261033120)"))
            SQLModel.metadata.create_all(conn)
            present = conn.execute(
                text("SELECT count(*) FROM meta WHERE key = 'schema_version'")
            ).scalar()
            if not present:
                conn.execute(
                    text("INSERT INTO meta (key, value) VALUES ('schema_version', :v)"),
                    {"v": str(SCHEMA_VERSION)},
                )
    except DBAPIError:
        # Another process created the schema between our check and our CREATE.
        if stored_version(engine) is None:
            raise


def upgrade_schema(engine: Engine) -> list[int]:
    """Migrate the store forward to :data:`SCHEMA_VERSION`; return the versions passed."""
    version = stored_version(engine)
    if version is None:
        init_schema(engine)
        return []
    if version > SCHEMA_VERSION:
        init_schema(engine)  # raises the "newer" error
    passed = []
    while version < SCHEMA_VERSION:
        with engine.begin() as conn:
            MIGRATIONS[version](conn)
            SQLModel.metadata.create_all(conn)  # tables added by later versions
            updated = conn.execute(
                text("UPDATE meta SET value = :v WHERE key = 'schema_version'"),
                {"v": str(version + 1)},
            ).rowcount
            if not updated:
                conn.execute(
                    text("INSERT INTO meta (key, value) VALUES ('schema_version', :v)"),
                    {"v": str(version + 1)},
                )
        version += 1
        passed.append(version)
    return passed


def dispose_engines() -> None:
    for engine in _ENGINES.values():
        engine.dispose()
    _ENGINES.clear()


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    with Session(get_engine(url), expire_on_commit=False) as session:
        yield session


_SECRET_NAME = re.compile(
    r"^(api_?key|key|token|access_token|auth_token|secret|client_secret|password|passwd|"
    r"authorization|bearer)$|_(api_?key|token|secret|password)$",
    re.IGNORECASE,
)
# Maps whose keys are data (scenario ids such as `reset-token-generator`), not settings.
_DATA_MAPS = frozenset({"scenarios", "models"})


def redact_params(params: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``params`` without values stored under a secret's name.

    ``api_key_env`` (a variable *name*) is kept, so is ``max_tokens``; maps of
    data such as ``scenarios`` are copied as they are.
    """
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key != "api_key_env" and _SECRET_NAME.search(key):
            continue
        if isinstance(value, dict) and key not in _DATA_MAPS:
            value = redact_params(value)
        out[key] = value
    return out


def score_rows(
    record_id: int, scored: Scored
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """What scoring ``record_id`` writes: the record's score columns, its
    ``constraintresult`` rows and its ``checkoutcome`` rows.

    Shared by :func:`cvb_engine.results.save_scores` (``cvb score``) and the runner's
    recorder, which writes them with Core statements in batches; here, beside the tables,
    so that the recorder does not import the read side to write them.
    """
    record_values: dict[str, Any] = {
        "code": scored.code,
        "strict": scored.strict,
        "stated_passed": scored.stated_passed,
        "n_constraints": len(scored.constraints),
        "n_honored": scored.n_honored,
        "outcome": scored.outcome,
        "truncated": scored.truncated,
        "scoring_version": scored.scoring_version,
        "scored_at": utcnow(),
    }
    constraint_rows = [
        {"record_id": record_id, "constraint_id": v.constraint_id, "honored": v.honored}
        for v in scored.constraints
    ]
    check_rows = [
        {
            "record_id": record_id,
            "constraint_id": v.constraint_id,
            "check_index": index,
            "check_id": check.check_id,
            "kind": check.kind,
            "passed": check.result.passed,
            "reason": check.result.reason,
            "scope": check.result.scope,
            "evidence_json": json.dumps([s.as_dict() for s in check.result.evidence]),
        }
        for v in scored.constraints
        for index, check in enumerate(v.checks)
    ]
    return record_values, constraint_rows, check_rows
