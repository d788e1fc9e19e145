"""Progress of runs, read from the store: what a live view shows while ``cvb run`` works.

Everything here reads the database only, so it sees every run the same way:
one started from the studio, from a terminal, or on another machine sharing a
PostgreSQL store. Counts are aggregated in SQL (``GROUP BY``), never by
loading records into Python.

Liveness. A run's stored ``status`` says ``running`` until its process writes
something else, so a process that was killed (``kill -9``, a reboot, an
out-of-memory kill) would look like it runs forever. :func:`liveness` tells a
*died* run apart:

* on this host, the process id stored with the run is checked: gone, a zombie,
  or a process that started after the run's last heartbeat (the id was reused)
  means the run died — whatever the heartbeat says;
* on another host (or without a pid), the heartbeat decides: the runner
  refreshes ``Run.updated`` every ~2 s while it stores results, and a run
  silent for longer than :data:`DEAD_AFTER_S` is reported as died;
* a run that several runners send (``cvb run --join``) is running while any
  of them is live (:func:`cvb_engine.claims.runners`), whatever became of the
  process stored with it.

Timestamps: the runner writes UTC; SQLite hands them back without a zone, and
they are read as UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import case, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from cvb_engine.claims import live_runner_count
from cvb_engine.kinds import RecordStatus, RunStatus
from cvb_engine.metrics import ARM_ORDER, Rate
from cvb_engine.processes import process_alive, this_host
from cvb_engine.run.progress import format_duration
from cvb_engine.store import ConstraintResult, Record, Run, as_utc

#: A running run whose heartbeat is older than this (and whose process cannot be
#: checked on this host) is reported as died.
DEAD_AFTER_S = 30.0
#: calls/s is measured over the records stored in this last window.
RATE_WINDOW_S = 60.0

RunState = Literal["created", "running", "finished", "incomplete", "cancelled", "failed", "died"]
_STORED: dict[str, RunState] = {
    RunStatus.CREATED: "created",
    RunStatus.FINISHED: "finished",
    RunStatus.CANCELLED: "cancelled",
    RunStatus.FAILED: "failed",
    # Sending ended as it should with cells still missing (a runner gave up on
    # them, or left before the others were done): not a failure, and resumable.
    RunStatus.INCOMPLETE: "incomplete",
}


# --------------------------------------------------------------------------- liveness


@dataclass(frozen=True)
class Liveness:
    state: RunState
    reason: str | None = None  # why a run is reported as died, in words


def liveness(
    status: str,
    pid: int | None,
    host: str | None,
    updated: datetime,
    *,
    now: datetime | None = None,
    local_host: str | None = None,
) -> Liveness:
    """The state to show for a run: its stored status, or ``died`` (see the module doc)."""
    if status != RunStatus.RUNNING:
        return Liveness(_STORED.get(status, "failed"))
    now = as_utc(now or datetime.now(UTC))
    age = (now - as_utc(updated)).total_seconds()
    local = host is not None and host == (local_host or this_host())
    if local and pid is not None:
        if process_alive(pid, started_by=updated):
            return Liveness("running")
        return Liveness("died", f"its process {pid} on {host} is gone")
    if age > DEAD_AFTER_S:
        where = f" on {host}" if host else ""
        return Liveness("died", f"no heartbeat for {age:.0f} s (process{where} not reachable)")
    return Liveness("running")


# --------------------------------------------------------------------------- progress


@dataclass(frozen=True)
class RunProgress:
    """Where one run stands, as the store tells it."""

    run_id: str
    status: str  # as stored
    state: RunState  # the status, or "died"
    died_reason: str | None
    total: int
    done: int  # cells with a record (ok or error)
    ok: int
    errors: int
    calls_per_s: float | None  # records stored per second over the last minute
    eta_s: float | None  # while running, at that rate
    created: datetime
    updated: datetime
    heartbeat_age_s: float
    pid: int | None
    host: str | None
    note: str | None
    params: dict[str, Any] = field(default_factory=dict)
    matrix_sha256: str = ""

    @property
    def fraction(self) -> float:
        return min(self.done / self.total, 1.0) if self.total else 0.0

    @property
    def missing(self) -> int:
        """Cells without a successful record: what a resume would send."""
        return max(self.total - self.ok, 0)

    @property
    def active(self) -> bool:
        return self.state == "running"

    @property
    def resumable(self) -> bool:
        return (
            self.state in ("incomplete", "cancelled", "died", "failed", "created")
            and self.missing > 0
        )

    @property
    def retryable(self) -> bool:
        return not self.active and self.errors > 0

    @property
    def cancellable_here(self) -> bool:
        """Running on this host, with a process id to signal."""
        return self.active and self.pid is not None and self.host == this_host()

    @property
    def n_scenarios(self) -> int:
        """Scenarios in the matrix, from its size (the stored parameters may lack some ids)."""
        per = len(self.models) * len(self.arms) * int(self.params.get("runs") or 0)
        return self.total // per if per else len(self.params.get("scenarios") or {})

    @property
    def models(self) -> list[str]:
        return list(self.params.get("models") or [])

    @property
    def arms(self) -> list[str]:
        return list(self.params.get("arms") or [])


def _run_ids_to_show(session: Session, limit: int, run_ids: list[str] | None) -> list[Run]:
    if run_ids is not None:
        if not run_ids:
            return []
        rows = session.exec(select(Run).where(col(Run.id).in_(run_ids))).all()
        order = {rid: i for i, rid in enumerate(run_ids)}
        return sorted(rows, key=lambda r: order[r.id])
    recent = list(session.exec(select(Run).order_by(col(Run.updated).desc()).limit(limit)))
    seen = {r.id for r in recent}
    # A running run is always shown, however many runs were touched since.
    running = session.exec(select(Run).where(col(Run.status) == RunStatus.RUNNING)).all()
    return [*(r for r in running if r.id not in seen), *recent]


def list_progress(
    session: Session,
    *,
    limit: int = 10,
    run_ids: list[str] | None = None,
    now: datetime | None = None,
    local_host: str | None = None,
) -> list[RunProgress]:
    """Progress of the ``limit`` most recently active runs (every running one included),
    or of ``run_ids`` in that order. Running and died runs come first."""
    now = as_utc(now or datetime.now(UTC))
    runs = _run_ids_to_show(session, limit, run_ids)
    if not runs:
        return []
    ids = [r.id for r in runs]
    is_ok = case((col(Record.status) == RecordStatus.OK, 1), else_=0)
    counts = {
        rid: (int(n or 0), int(k or 0))
        for rid, n, k in session.execute(
            sa_select(col(Record.run_id), func.count(), func.sum(is_ok))
            .where(col(Record.run_id).in_(ids))
            .group_by(col(Record.run_id))
        )
    }
    since = now - timedelta(seconds=RATE_WINDOW_S)
    recent = {
        rid: (int(n or 0), first)
        for rid, n, first in session.execute(
            sa_select(col(Record.run_id), func.count(), func.min(col(Record.created)))
            .where(col(Record.run_id).in_(ids), col(Record.created) >= since)
            .group_by(col(Record.run_id))
        )
    }
    out = []
    for run in runs:
        done, ok = counts.get(run.id, (0, 0))
        live = liveness(run.status, run.pid, run.host, run.updated, now=now, local_host=local_host)
        if live.state == "died" and live_runner_count(session, run.id):
            # The process stored with the run is gone, but another of its runners works on.
            live = Liveness("running")
        rate = eta = None
        if live.state == "running":
            n_recent, first = recent.get(run.id, (0, None))
            rate = 0.0
            if n_recent and first is not None:
                # From the window's first record to now: a run that stalls slows down.
                span = min(max((now - as_utc(first)).total_seconds(), 1.0), RATE_WINDOW_S)
                rate = n_recent / span
            remaining = max(run.total_cells - done, 0)
            eta = remaining / rate if rate else None
        out.append(
            RunProgress(
                run_id=run.id,
                status=run.status,
                state=live.state,
                died_reason=live.reason,
                total=run.total_cells,
                done=done,
                ok=ok,
                errors=done - ok,
                calls_per_s=rate,
                eta_s=eta,
                created=as_utc(run.created),
                updated=as_utc(run.updated),
                heartbeat_age_s=max((now - as_utc(run.updated)).total_seconds(), 0.0),
                pid=run.pid,
                host=run.host,
                note=run.note,
                params=run.params,
                matrix_sha256=run.matrix_sha256,
            )
        )
    first_states = ("running", "died")
    return sorted(out, key=lambda p: p.state not in first_states)  # stable: keeps the order


def run_progress(
    session: Session, run_id: str, *, now: datetime | None = None
) -> RunProgress | None:
    found = list_progress(session, run_ids=[run_id], now=now)
    return found[0] if found else None


# --------------------------------------------------------------------------- details


@dataclass(frozen=True)
class ArmAccuracy:
    """Strict accuracy so far for one (model, arm); errors are outside the denominator."""

    model: str
    arm: str
    rate: Rate


@dataclass(frozen=True)
class ErrorRow:
    created: datetime
    model: str
    scenario_id: str
    arm: str
    rep: int
    attempts: int
    reason: str
    # "memory" for a memory layer's failure; "api" (or None, before schema 5) the endpoint's
    kind: str | None = None


@dataclass(frozen=True)
class FinishedRow:
    created: datetime
    model: str
    scenario_id: str
    category: str
    arm: str
    rep: int
    status: str
    strict: bool | None
    latency_s: float | None
    violated: list[str]  # constraint ids not honored
    error: str | None
    code: str | None
    error_kind: str | None = None  # "memory": the memory layer failed, not the endpoint


def accuracy_so_far(session: Session, run_id: str) -> list[ArmAccuracy]:
    """Strict accuracy per model × arm over the records stored so far (README: Metrics)."""
    scored = (col(Record.status) == RecordStatus.OK) & col(Record.strict).is_not(None)
    n_scored = func.sum(case((scored, 1), else_=0))
    n_strict = func.sum(case((scored & col(Record.strict).is_(True), 1), else_=0))
    n_errors = func.sum(case((col(Record.status) == RecordStatus.OK, 0), else_=1))
    rows = session.execute(
        sa_select(col(Record.model), col(Record.arm), n_scored, n_strict, n_errors)
        .where(col(Record.run_id) == run_id)
        .group_by(col(Record.model), col(Record.arm))
    ).all()
    order = {a: i for i, a in enumerate(ARM_ORDER)}
    out = [
        ArmAccuracy(model, arm, Rate(int(k or 0), int(n or 0), int(e or 0)))
        for model, arm, n, k, e in rows
    ]
    return sorted(out, key=lambda a: (a.model, order.get(a.arm, len(order)), a.arm))


def latest_errors(session: Session, run_id: str, limit: int = 5) -> list[ErrorRow]:
    """The most recent error records of a run, newest first, with the runner's reason."""
    rows = session.exec(
        select(Record)
        .where(col(Record.run_id) == run_id, col(Record.status) == RecordStatus.ERROR)
        .order_by(col(Record.created).desc(), col(Record.id).desc())
        .limit(limit)
    ).all()
    return [
        ErrorRow(
            as_utc(r.created),
            r.model,
            r.scenario_id,
            r.arm,
            r.rep,
            r.attempts,
            r.error or "(no reason stored)",
            r.error_kind,
        )
        for r in rows
    ]


def latest_record(session: Session, run_id: str) -> FinishedRow | None:
    """The record stored last, with the constraints it did not honor."""
    r = session.exec(
        select(Record)
        .where(col(Record.run_id) == run_id)
        .order_by(col(Record.created).desc(), col(Record.id).desc())
        .limit(1)
    ).first()
    if r is None:
        return None
    violated = list(
        session.exec(
            select(ConstraintResult.constraint_id)
            .where(
                col(ConstraintResult.record_id) == r.id,
                col(ConstraintResult.honored).is_(False),
            )
            .order_by(col(ConstraintResult.id))
        )
    )
    return FinishedRow(
        created=as_utc(r.created),
        model=r.model,
        scenario_id=r.scenario_id,
        category=r.category,
        arm=r.arm,
        rep=r.rep,
        status=r.status,
        strict=r.strict,
        latency_s=r.latency_s,
        violated=violated,
        error=r.error,
        code=r.code,
        error_kind=r.error_kind,
    )


@dataclass(frozen=True)
class RunDetail:
    """Everything the live panel shows for one run."""

    progress: RunProgress
    accuracy: list[ArmAccuracy]
    errors: list[ErrorRow]
    latest: FinishedRow | None


def run_detail(session: Session, progress: RunProgress, *, errors_limit: int = 5) -> RunDetail:
    return RunDetail(
        progress=progress,
        accuracy=accuracy_so_far(session, progress.run_id),
        errors=latest_errors(session, progress.run_id, errors_limit) if progress.errors else [],
        latest=latest_record(session, progress.run_id) if progress.done else None,
    )


__all__ = [
    "DEAD_AFTER_S",
    "RATE_WINDOW_S",
    "ArmAccuracy",
    "ErrorRow",
    "FinishedRow",
    "Liveness",
    "RunDetail",
    "RunProgress",
    "RunState",
    "accuracy_so_far",
    "format_duration",
    "latest_errors",
    "latest_record",
    "list_progress",
    "liveness",
    "process_alive",
    "run_detail",
    "run_progress",
    "this_host",
]
