"""Many runners, one run (see the README): a run's open cells as a queue in the store,
claimed in batches with leases.

**The queue.** A runner that binds a run puts the cells it would send (no record,
then error records; only error records under ``--retry-errors``) in ``cellclaim``,
one unclaimed row each (``worker`` NULL); rows already there are left as they are.
The recorder deletes a cell's row in the transaction that commits its record, so
a cell with a record has no row. A row for a cell that has an answer (a runner
that read the records just before another committed one, then enqueued) is never
handed out, and is swept when the queue runs dry.

**Claiming** is one statement, atomic on its own::

    WITH picked AS MATERIALIZED (
        SELECT id FROM cellclaim
        WHERE run_id = :run AND (lease_until IS NULL OR lease_until < :now)
          AND NOT EXISTS (an ok record of the cell)         -- errors only: EXISTS an error record
          AND NOT EXISTS (the run's cancel_requested)
        ORDER BY id LIMIT :batch
        FOR UPDATE SKIP LOCKED)
    UPDATE cellclaim SET worker = :me, claimed_at = :now, lease_until = :now + lease
    WHERE id IN (SELECT id FROM picked)
    RETURNING model, scenario_id, arm, rep

On PostgreSQL the rows another claim is taking are skipped, not waited for; a row
whose lease another claimer has just renewed or taken is re-read after its lock
and fails the lease test (READ COMMITTED re-checks a locked row's newest
version), so two runners never hold the same cell. (``MATERIALIZED``: a plain
``IN (SELECT … LIMIT … SKIP LOCKED)`` may be re-run by the planner and take more
rows than asked.) On SQLite the statement holds the single write lock from its
start, which serialises claims. A claim costs one round trip for ``batch`` cells
(a dedicated connection in autocommit: no BEGIN/COMMIT, no pool ping).

**Leases.** A runner renews the leases of every row it holds, in one statement,
every ``lease_s / 3`` (its heartbeat, which also reads the cancel flag and writes
its counters in :class:`~cvb_engine.store.RunWorker`). A runner that dies stops
renewing: after ``lease_until`` its cells are claimable again. A runner that
starts on a host frees at once the claims of that run's runners it finds gone
there (their process ids), so a resume right after a ``kill -9`` does not wait out
the lease.

**Time.** Leases and heartbeats are stamped in the database server's clock
(UTC): the offset between this machine's clock and the server's is measured
once when a runner joins, so runners on machines whose clocks disagree still agree
on when a lease ends. SQLite is local: its clock is this machine's.

**The end.** A claim that gets nothing looks at what is left: nothing claimable
and nothing held by another runner means the run's sending is over for this
runner (its own cells in flight finish); cells that other runners hold mean it
waits (polling) and takes over those whose lease lapses. The run's final status
is written by the last runner out (:meth:`RunClaims.leave` says who else is live).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Table,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from cvb_engine.cells import Cell
from cvb_engine.kinds import RecordStatus, RunnerStatus
from cvb_engine.processes import process_alive, this_host
from cvb_engine.store import CellClaim, Record, Run, RunWorker, as_utc

#: Seconds a claim lasts without renewal (``cvb run --lease``, hidden: for tests).
LEASE_S = 60.0
#: A runner waiting for cells that other runners hold asks again this often (at most).
POLL_S = 1.0

_CLAIM: Table = CellClaim.__table__  # type: ignore[attr-defined]
_RECORD: Table = Record.__table__  # type: ignore[attr-defined]
_RUN: Table = Run.__table__  # type: ignore[attr-defined]
_WORKER: Table = RunWorker.__table__  # type: ignore[attr-defined]
# Rows are numbered in the order given: the queue's order (cells without a record first).
_ENQUEUE_PG = text(
    "INSERT INTO cellclaim (run_id, model, scenario_id, arm, rep) "
    "SELECT :run, t.model, t.scenario_id, t.arm, t.rep FROM unnest("
    "CAST(:models AS VARCHAR[]), CAST(:sids AS VARCHAR[]), CAST(:arms AS VARCHAR[]), "
    "CAST(:reps AS INTEGER[])) WITH ORDINALITY AS t(model, scenario_id, arm, rep, n) "
    "ORDER BY t.n ON CONFLICT DO NOTHING"
)


def worker_name(given: str | None = None) -> str:
    """The runner's name: ``--worker``, else ``host:pid``."""
    return given or f"{socket.gethostname()}:{os.getpid()}"


def store_now(conn: Connection | Session) -> datetime:
    """The database server's time, in UTC (this machine's for SQLite)."""
    dialect = conn.dialect if isinstance(conn, Connection) else conn.get_bind().dialect
    if dialect.name == "postgresql":
        value = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
        return as_utc(value)
    return datetime.now(UTC)


def _same_cell(claim: Table) -> Any:
    r = _RECORD
    return and_(
        r.c.run_id == claim.c.run_id,
        r.c.model == claim.c.model,
        r.c.scenario_id == claim.c.scenario_id,
        r.c.arm == claim.c.arm,
        r.c.rep == claim.c.rep,
    )


def _sendable(errors_only: bool) -> Any:
    """Rows whose cell may be sent: no answer yet (or, retrying errors, an error record)."""
    if errors_only:
        return exists().where(_same_cell(_CLAIM), _RECORD.c.status == RecordStatus.ERROR)
    return ~exists().where(_same_cell(_CLAIM), _RECORD.c.status == RecordStatus.OK)


#: Deletes a runner's claim on a cell (the recorder runs it, once per cell of a batch, in
#: the transaction that commits their records): :func:`release_params` gives the rows.
RELEASE = delete(_CLAIM).where(
    _CLAIM.c.run_id == bindparam("c_run"),
    _CLAIM.c.worker == bindparam("c_worker"),
    _CLAIM.c.model == bindparam("c_model"),
    _CLAIM.c.scenario_id == bindparam("c_sid"),
    _CLAIM.c.arm == bindparam("c_arm"),
    _CLAIM.c.rep == bindparam("c_rep"),
)


def release_params(run_id: str, worker: str, cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """The parameters of :data:`RELEASE` for ``worker``'s claims on ``cells``.

    One equality lookup per cell (the unique index): a row-value ``IN`` list is a scan
    of the run's queue on SQLite.
    """
    return [
        {"c_run": run_id, "c_worker": worker, "c_model": m, "c_sid": s, "c_arm": a, "c_rep": r}
        for m, s, a, r in cells
    ]


@dataclass(frozen=True)
class Beat:
    """What a heartbeat learnt."""

    cancelled: bool
    held: frozenset[Cell]  # the cells this runner still holds (a lapsed lease may lose some)


@dataclass(frozen=True)
class Outlook:
    """What is left of a run for a runner whose claim got nothing."""

    cancelled: bool
    elsewhere: int  # sendable cells this runner does not hold: held by others, or about to be free
    next_expiry: datetime | None  # the earliest lease among them, store clock


class ClaimError(RuntimeError):
    """A runner that cannot take part in a run as asked (the message says why)."""


class RunClaims:
    """One runner's side of one run's queue.

    Blocking calls on a connection of its own (the runner calls them from a thread);
    one call at a time.
    """

    def __init__(
        self,
        engine: Engine,
        run_id: str,
        worker: str,
        *,
        lease_s: float = LEASE_S,
        errors_only: bool = False,
    ) -> None:
        if lease_s <= 0:
            raise ClaimError("the lease must be longer than 0 s")
        self.engine = engine
        self.run_id = run_id
        self.worker = worker
        self.lease_s = float(lease_s)
        self.errors_only = errors_only
        self.offset = timedelta(0)  # store clock - this machine's clock
        self._conn: Connection | None = None
        self._lock = threading.RLock()
        self._left = False
        self._claims: dict[int, Any] = {}

    # ---- plumbing

    def now(self) -> datetime:
        """The store's time now (UTC), from this machine's clock and the offset."""
        return datetime.now(UTC) + self.offset

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            if self._conn is not None:
                self._conn.close()
            self._conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._conn

    def _run(self, stmt: Any, params: Any = None) -> Any:
        """Execute one statement (autocommit), reconnecting once after a lost connection.

        Raises:
            ClaimError: this runner has left (a claim or heartbeat still on its way in a
                thread when the runner stopped must not take or renew anything).
        """
        with self._lock:
            if self._left:
                raise ClaimError(f"runner {self.worker!r} has left run {self.run_id!r}")
            for attempt in (1, 2):
                conn = self._connection()
                try:
                    return conn.execute(stmt, params) if params is not None else conn.execute(stmt)
                except DBAPIError as exc:
                    if attempt == 2 or not exc.connection_invalidated:
                        raise
            raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            self._left = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # ---- joining

    def join(
        self,
        cells: Iterable[Cell],
        *,
        host: str | None = None,
        pid: int | None = None,
        api_key_env: str | None = None,
    ) -> None:
        """Take part in the run: register this runner and put ``cells`` in the queue.

        Raises:
            ClaimError: a live runner of the run already has this name.
        """
        host = host if host is not None else socket.gethostname()
        pid = pid if pid is not None else os.getpid()
        with self._lock:
            conn = self._connection()
            before = datetime.now(UTC)
            server = store_now(conn)
            after = datetime.now(UTC)
            self.offset = server - (before + (after - before) / 2)
        self._free_gone_runners(host)
        now = self.now()
        w = _WORKER
        mine = and_(w.c.run_id == self.run_id, w.c.worker == self.worker)
        found = self._run(select(w.c.status, w.c.heartbeat, w.c.lease_s).where(mine)).first()
        if found is not None:
            status, heartbeat, lease_s = found
            if status == RunnerStatus.RUNNING and (now - heartbeat).total_seconds() <= lease_s:
                raise ClaimError(
                    f"a runner named {self.worker!r} is already taking part in run "
                    f"{self.run_id!r} (heartbeat {(now - heartbeat).total_seconds():.0f} s ago); "
                    "give this one another --worker name"
                )
        # What an earlier runner of this name held is nobody's now.
        self._run(self._unclaim().where(_CLAIM.c.worker == self.worker))
        row = {
            "host": host,
            "pid": pid,
            "api_key_env": api_key_env,
            "started": now,
            "heartbeat": now,
            "lease_s": self.lease_s,
            "cells_done": 0,
            "cells_failed": 0,
            "status": RunnerStatus.RUNNING.value,
        }
        try:
            if found is None:
                self._run(insert(w).values(run_id=self.run_id, worker=self.worker, **row))
            else:
                self._run(update(w).where(mine).values(**row))
        except IntegrityError:
            raise ClaimError(
                f"another runner named {self.worker!r} joined run {self.run_id!r} just now; "
                "give this one another --worker name"
            ) from None
        self.enqueue(cells)

    def enqueue(self, cells: Iterable[Cell]) -> int:
        """Put ``cells`` in the queue, in order, leaving rows already there; return how many.

        PostgreSQL: one statement for them all (arrays, ``unnest``); SQLite: one local
        transaction.
        """
        cells = list(cells)
        if not cells:
            return 0
        dialect = self.engine.dialect.name
        if dialect == "postgresql":
            models, sids, arms, reps = (list(column) for column in zip(*cells, strict=True))
            self._run(
                _ENQUEUE_PG,
                {"run": self.run_id, "models": models, "sids": sids, "arms": arms, "reps": reps},
            )
        elif dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            rows = [
                {"run_id": self.run_id, "model": m, "scenario_id": s, "arm": a, "rep": r}
                for m, s, a, r in cells
            ]
            with self._lock, self.engine.begin() as conn:
                conn.execute(sqlite_insert(_CLAIM).on_conflict_do_nothing(), rows)
        else:  # pragma: no cover - cvb's stores are SQLite and PostgreSQL
            raise ClaimError(f"cell claims need SQLite or PostgreSQL, not {dialect}")
        return len(cells)

    def _free_gone_runners(self, host: str) -> None:
        """Release the claims of this run's runners on ``host`` whose process is gone."""
        w = _WORKER
        rows = self._run(
            select(w.c.worker, w.c.pid, w.c.started).where(
                w.c.run_id == self.run_id, w.c.host == host, w.c.status == RunnerStatus.RUNNING
            )
        ).all()
        gone = [
            name
            for name, pid, started in rows
            if name != self.worker
            and pid is not None
            # started is in the store's clock: back to this machine's before comparing
            and not process_alive(pid, started_by=started - self.offset)
        ]
        if gone:
            self._run(self._unclaim().where(_CLAIM.c.worker.in_(gone)))
            self._run(
                update(w)
                .where(w.c.run_id == self.run_id, w.c.worker.in_(gone))
                .values(status=RunnerStatus.DIED.value)
            )

    def _unclaim(self) -> Any:
        c = _CLAIM
        return (
            update(c)
            .where(c.c.run_id == self.run_id)
            .values(worker=None, claimed_at=None, lease_until=None)
        )

    # ---- claiming

    def _claim_statement(self, n: int) -> Any:
        stmt = self._claims.get(n)
        if stmt is not None:
            return stmt
        c = _CLAIM
        cancelled = exists().where(_RUN.c.id == c.c.run_id, _RUN.c.cancel_requested.is_(True))
        picked = (
            select(c.c.id)
            .where(
                c.c.run_id == bindparam("run"),
                or_(c.c.lease_until.is_(None), c.c.lease_until < bindparam("t_now")),
                _sendable(self.errors_only),
                ~cancelled,
            )
            .order_by(c.c.id)
            .limit(n)
            .with_for_update(skip_locked=True)
            .cte("picked")
            .prefix_with("MATERIALIZED", dialect="postgresql")
        )
        stmt = (
            update(c)
            .where(c.c.id.in_(select(picked.c.id)))
            .values(
                worker=bindparam("me"),
                claimed_at=bindparam("t_now"),
                lease_until=bindparam("t_until"),
            )
            .returning(c.c.id, c.c.model, c.c.scenario_id, c.c.arm, c.c.rep)
        )
        self._claims[n] = stmt
        return stmt

    def claim(self, n: int) -> list[Cell]:
        """Claim up to ``n`` sendable cells, in queue order (none once cancel was asked)."""
        now = self.now()
        params = {
            "run": self.run_id,
            "me": self.worker,
            "t_now": now,
            "t_until": now + timedelta(seconds=self.lease_s),
        }
        rows = self._run(self._claim_statement(n), params).all()
        rows.sort()  # RETURNING has no order of its own: queue order
        return [(m, s, a, int(r)) for _, m, s, a, r in rows]

    def outlook(self) -> Outlook:
        """After a claim that got nothing: is the run cancelled, and what do others hold?"""
        c = _CLAIM
        cancelled = bool(
            self._run(select(_RUN.c.cancel_requested).where(_RUN.c.id == self.run_id)).scalar()
        )
        elsewhere, expiry = self._run(
            select(func.count(), func.min(c.c.lease_until)).where(
                c.c.run_id == self.run_id,
                or_(c.c.worker.is_(None), c.c.worker != self.worker),
                _sendable(self.errors_only),
            )
        ).one()
        if not elsewhere and not self.errors_only:
            # The queue is dry: sweep rows of cells that got an answer meanwhile.
            self._run(
                delete(c).where(
                    c.c.run_id == self.run_id,
                    exists().where(_same_cell(c), _RECORD.c.status == RecordStatus.OK),
                )
            )
        return Outlook(cancelled, int(elsewhere or 0), expiry)

    # ---- working

    def beat(self, done: int, failed: int) -> Beat:
        """Renew this runner's leases, write its heartbeat and counters, read the cancel flag."""
        now = self.now()
        c, w = _CLAIM, _WORKER
        held = self._run(
            update(c)
            .where(c.c.run_id == self.run_id, c.c.worker == self.worker)
            .values(lease_until=now + timedelta(seconds=self.lease_s))
            .returning(c.c.model, c.c.scenario_id, c.c.arm, c.c.rep)
        ).all()
        self._run(
            update(w)
            .where(w.c.run_id == self.run_id, w.c.worker == self.worker)
            .values(heartbeat=now, cells_done=done, cells_failed=failed)
        )
        cancelled = self._run(
            select(_RUN.c.cancel_requested).where(_RUN.c.id == self.run_id)
        ).scalar()
        return Beat(bool(cancelled), frozenset((m, s, a, int(r)) for m, s, a, r in held))

    def leave(self, status: str, done: int, failed: int) -> list[str]:
        """Stop: give back every cell still held, record ``status`` (finished | cancelled |
        failed); return the names of the run's other live runners (empty: this one is the
        last out and writes the run's status)."""
        now = self.now()
        w = _WORKER
        with self._lock:  # nothing of this runner's runs after it, nor in between
            self._run(self._unclaim().where(_CLAIM.c.worker == self.worker))
            self._run(
                update(w)
                .where(w.c.run_id == self.run_id, w.c.worker == self.worker)
                .values(status=status, heartbeat=now, cells_done=done, cells_failed=failed)
            )
            # Read after this runner's own status is committed: of two runners leaving at
            # once, at least the second sees the first gone.
            states = runners(self._connection(), self.run_id)
            self._left = True
        return [s.worker for s in states if s.live and s.worker != self.worker]


# --------------------------------------------------------------------------- readers


@dataclass(frozen=True)
class RunnerState:
    """One runner of a run, as the store tells it (``cvb db info``, the studio)."""

    worker: str
    host: str | None
    pid: int | None
    api_key_env: str | None  # the variable's name, never its value
    status: str  # as stored
    state: str  # live | lapsed | finished | cancelled | failed | died
    started: datetime  # UTC, store clock
    heartbeat: datetime
    heartbeat_age_s: float
    lease_s: float
    cells_done: int
    cells_failed: int
    held: int  # cells it holds a claim on now
    per_min: float | None  # records it committed per minute over the last minute (live only)

    @property
    def live(self) -> bool:
        return self.state == "live"


#: The window a runner's rate is measured over.
RATE_WINDOW_S = 60.0


def runners(
    conn: Connection | Session, run_id: str, *, local_host: str | None = None
) -> list[RunnerState]:
    """Every runner that took part in ``run_id``, live ones first.

    A runner is *live* while its status is ``running`` and, on this host, its process
    exists, elsewhere its heartbeat is younger than its lease; a running runner that
    is not live has *lapsed*. ``conn`` is a Connection or a Session.
    """
    local = local_host or this_host()
    w, c, r = _WORKER, _CLAIM, _RECORD
    rows = conn.execute(select(w).where(w.c.run_id == run_id).order_by(w.c.started)).all()
    if not rows:
        return []
    now = store_now(conn)
    held: dict[str, int] = dict(
        conn.execute(
            select(c.c.worker, func.count())
            .where(c.c.run_id == run_id, c.c.worker.is_not(None), c.c.lease_until >= now)
            .group_by(c.c.worker)
        ).all()
    )
    # Records are stamped by each recorder's own clock: read with this one's, as the
    # monitor reads them.
    wall = datetime.now(UTC)
    since = wall - timedelta(seconds=RATE_WINDOW_S)
    recent = {
        name: (int(n), first)
        for name, n, first in conn.execute(
            select(r.c.worker, func.count(), func.min(r.c.created))
            .where(r.c.run_id == run_id, r.c.created >= since, r.c.worker.is_not(None))
            .group_by(r.c.worker)
        ).all()
    }
    out = []
    for row in rows:
        age = max((now - row.heartbeat).total_seconds(), 0.0)
        state = row.status
        if row.status == RunnerStatus.RUNNING:
            if row.host == local and row.pid is not None:
                alive = process_alive(row.pid, started_by=row.started - (now - wall))
            else:
                alive = age <= row.lease_s
            state = "live" if alive else "lapsed"
        per_min = None
        if state == "live":
            n, first = recent.get(row.worker, (0, None))
            per_min = 0.0
            if n and first is not None:
                span = min(max((wall - first).total_seconds(), 1.0), RATE_WINDOW_S)
                per_min = 60.0 * n / span
        out.append(
            RunnerState(
                worker=row.worker,
                host=row.host,
                pid=row.pid,
                api_key_env=row.api_key_env,
                status=row.status,
                state=state,
                started=row.started,
                heartbeat=row.heartbeat,
                heartbeat_age_s=age,
                lease_s=row.lease_s,
                cells_done=row.cells_done,
                cells_failed=row.cells_failed,
                held=int(held.get(row.worker, 0)),
                per_min=per_min,
            )
        )
    order = {"live": 0, "lapsed": 1}
    return sorted(out, key=lambda s: order.get(s.state, 2))  # stable: started order within


def live_runner_count(conn: Connection | Session, run_id: str) -> int:
    """How many runners of ``run_id`` are live now."""
    if not conn.execute(
        select(func.count())
        .select_from(_WORKER)
        .where(_WORKER.c.run_id == run_id, _WORKER.c.status == RunnerStatus.RUNNING)
    ).scalar():
        return 0  # the common case, in one cheap query
    return sum(1 for s in runners(conn, run_id) if s.live)


def request_cancel(engine: Engine, run_id: str) -> bool:
    """Ask every runner of ``run_id``, on any machine, to stop sending (at its next claim
    or heartbeat; cells in flight finish and are stored). False: no such run."""
    with engine.begin() as conn:
        done = conn.execute(
            update(_RUN).where(_RUN.c.id == run_id).values(cancel_requested=True)
        ).rowcount
    return bool(done)


def wait_poll_s(outlook: Outlook, now: datetime, lease_s: float) -> float:
    """How long a runner waiting for others' cells sleeps before it asks again."""
    poll = min(POLL_S, lease_s / 3)
    if outlook.next_expiry is not None:
        until = (outlook.next_expiry - now).total_seconds() + 0.05
        poll = min(poll, max(until, 0.05))
    return max(poll, 0.05)


# --------------------------------------------------------------------------- the runner's feed


class CellFeed:
    """The cells one runner sends, claimed as its workers need them: an async iterator
    the workers share, and the heartbeat that renews the leases.

    A batch is claimed once the local queue is down to half a batch, so a worker
    rarely waits for the store. A claim that gets nothing while other runners hold
    cells waits and asks again (taking over cells whose lease lapsed); the iteration
    ends when nothing is left that this runner could send, or when the run is
    cancelled (cells claimed but not started go back to the queue when the runner
    leaves). Store calls run in a thread: a slow store never stalls the event loop.
    """

    def __init__(
        self, claims: RunClaims, batch: int, counts: Callable[[], tuple[int, int]]
    ) -> None:
        self.claims = claims
        self.batch = max(1, batch)
        self.low = self.batch // 2
        self.counts = counts  # (records committed, of which errors)
        self.cancelled = False
        self.claimed = 0
        self._queue: deque[Cell] = deque()
        self._ended = False
        self._refill: asyncio.Task[None] | None = None
        self._beats: asyncio.Task[None] | None = None
        self._dry_until = 0.0  # loop time; no early claim before (the last one got nothing)
        self._failure: ClaimError | None = None

    def start(self) -> None:
        """Start the heartbeat (call from the event loop)."""
        if self._beats is None:
            self._beats = asyncio.create_task(self._beat_loop())

    async def close(self) -> None:
        """Stop claiming and beating."""
        for task in (self._refill, self._beats):
            if task is not None and not task.done():
                task.cancel()
        for task in (self._refill, self._beats):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._refill = self._beats = None

    def __aiter__(self) -> CellFeed:
        return self

    async def __anext__(self) -> Cell:
        loop = asyncio.get_running_loop()
        while True:
            if self._queue:
                cell = self._queue.popleft()
                if (
                    len(self._queue) <= self.low
                    and not self._ended
                    and loop.time() >= self._dry_until
                ):
                    self._claim_soon()
                return cell
            if self._failure is not None:
                raise self._failure
            if self._ended:
                raise StopAsyncIteration
            # Every waiting worker waits for the same claim; one that is cancelled
            # does not cancel it for the others.
            await asyncio.shield(self._claim_soon())

    def _claim_soon(self) -> asyncio.Task[None]:
        if self._refill is None or self._refill.done():
            self._refill = asyncio.create_task(self._claim())
        return self._refill

    def _end(self, *, cancelled: bool = False) -> None:
        self._ended = True
        if cancelled:
            self.cancelled = True
            self._queue.clear()  # not started: given back when the runner leaves

    async def _claim(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._ended:
                got = await self._call(self.claims.claim, self.batch)
                if got:
                    self.claimed += len(got)
                    self._queue.extend(got)
                    return
                outlook = await self._call(self.claims.outlook)
                if outlook.cancelled:
                    self._end(cancelled=True)
                    return
                if not outlook.elsewhere:
                    self._end()  # this runner's own cells in flight finish
                    return
                wait = wait_poll_s(outlook, self.claims.now(), self.claims.lease_s)
                self._dry_until = loop.time() + wait
                if self._queue:
                    return  # an early claim: the workers still have cells
                await asyncio.sleep(wait)  # other runners hold the rest: wait for them
        except ClaimError as exc:
            self._failure = exc
            self._end()

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a thread, retried through a short outage of the store."""
        for attempt in range(4):
            try:
                return await asyncio.to_thread(fn, *args)
            except DBAPIError as exc:
                if attempt == 3:
                    raise ClaimError(
                        f"the store failed while claiming cells: {_reason(exc)}"
                    ) from exc
                await asyncio.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")

    async def _beat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        failing_since: float | None = None
        while True:
            await asyncio.sleep(self.claims.lease_s / 3)
            queued = set(self._queue)  # cells claimed from now on are not in this beat
            try:
                beat = await asyncio.to_thread(self.claims.beat, *self.counts())
            except DBAPIError as exc:
                failing_since = failing_since or loop.time()
                if loop.time() - failing_since > self.claims.lease_s:
                    self._failure = ClaimError(
                        f"the store failed for longer than the lease: {_reason(exc)}"
                    )
                    self._end()
                continue
            failing_since = None
            if beat.cancelled:
                self._end(cancelled=True)
            lost = {c for c in queued if c not in beat.held}
            if lost:  # this runner was too slow to renew: another took them over
                self._queue = deque(c for c in self._queue if c not in lost)


def _reason(exc: DBAPIError) -> str:
    inner = exc.orig if exc.orig is not None else exc
    return f"{type(inner).__name__}: {str(inner).splitlines()[0] if str(inner) else ''}"


__all__ = [
    "LEASE_S",
    "RELEASE",
    "Beat",
    "CellFeed",
    "ClaimError",
    "Outlook",
    "RunClaims",
    "RunnerState",
    "live_runner_count",
    "release_params",
    "request_cancel",
    "runners",
    "store_now",
    "worker_name",
]
