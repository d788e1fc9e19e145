"""Copying runs between stores (``cvb db``, :mod:`cvb_engine.cli.db`).

``cvb db copy --from URL --to URL`` moves runs (a laptop's SQLite into a
team's PostgreSQL, say). A run already in the target with the same matrix is
merged cell by cell: cells the target lacks are added, an error record in the
target is replaced by a successful one from the source, nothing is ever
duplicated. A run whose id exists in the target with a *different* matrix is
left alone and reported.

A source store is untrusted input (a teammate's, a careless script's): each run is
validated before anything of it is written (:func:`run_problem`: its id, its params,
every record by the results file's rules, read back as a file would be) and written in
one transaction, so a malformed run is refused with its reason and leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import ValidationError
from sqlalchemy import String, cast, func
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, delete, select

from cvb_engine.claims import RunnerState
from cvb_engine.kinds import RecordStatus
from cvb_engine.results import constraint_details, iter_run_records, record_entry
from cvb_engine.results_format import READING, RecordEntry, first_problem
from cvb_engine.run_ids import run_id_problem
from cvb_engine.safe_text import terminal_text
from cvb_engine.store import (
    CheckOutcome,
    ConstraintResult,
    Record,
    Run,
    StoreError,
)

_RECORD_FIELDS = [name for name in Record.model_fields if name not in ("id",)]


@dataclass
class CopyReport:
    runs_created: list[str] = field(default_factory=list)
    runs_merged: list[str] = field(default_factory=list)
    runs_conflicting: list[str] = field(default_factory=list)
    # (run id, why) for each run that did not validate: nothing of it was written
    runs_refused: list[tuple[str, str]] = field(default_factory=list)
    records_added: int = 0
    records_replaced: int = 0
    records_kept: int = 0


def _children(
    session: Session, record_id: int
) -> tuple[list[ConstraintResult], list[CheckOutcome]]:
    constraints = list(
        session.exec(select(ConstraintResult).where(ConstraintResult.record_id == record_id))
    )
    outcomes = list(session.exec(select(CheckOutcome).where(CheckOutcome.record_id == record_id)))
    return constraints, outcomes


def _copy_children(src: Session, dst: Session, src_id: int, dst_id: int) -> None:
    constraints, outcomes = _children(src, src_id)
    for c in constraints:
        dst.add(
            ConstraintResult(record_id=dst_id, constraint_id=c.constraint_id, honored=c.honored)
        )
    for o in outcomes:
        data = o.model_dump(exclude={"id", "record_id"})
        dst.add(CheckOutcome(record_id=dst_id, **data))


def run_problem(session: Session, run: Run, *, batch: int = 500) -> str | None:
    """Why ``run`` may not be copied (its id, its params, its first malformed record or
    verdict, described), or None when every value reads as a results file's would."""
    problem = run_id_problem(run.id)
    if problem is not None:
        return f"run id: {problem}"
    problem = _boolean_problem(session, run.id)
    if problem is not None:
        return problem
    try:
        if not isinstance(run.params, dict):
            return "params: expected an object"
        for kept in (run.prompt_version, run.status):
            if not isinstance(kept, str) or len(kept) > 500:
                return "prompt version or status: expected a short text"
        records = iter_run_records(session, run.id, batch)
        while chunk := [r for _, r in zip(range(batch), records, strict=False)]:
            ids = [r.id for r in chunk if r.id is not None]
            details = constraint_details(session, ids)
            honored = _constraint_results(session, ids)
            for record in chunk:
                rid = record.id or 0
                if honored.get(rid, {}).keys() - details.get(rid, {}).keys() and details.get(rid):
                    return f"record {rid}: a constraint result without its checks"
                entry = record_entry(record, details.get(rid))
                try:
                    RecordEntry.model_validate(entry.model_dump(), context={READING: True})
                except ValidationError as exc:
                    return f"record {rid}: {first_problem(exc)}"
            session.expunge_all()
    except ValidationError as exc:
        return first_problem(exc)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        # a stored value of the wrong type or shape (SQLite keeps what it is given)
        return f"a malformed stored value ({type(exc).__name__}: {str(exc)[:200]})"
    return None


_FLAGS = ("strict", "stated_passed", "truncated", "response_cut")
_FLAG_TEXTS = ("0", "1", "true", "false")


def _boolean_problem(session: Session, run_id: str) -> str | None:
    # A store's driver turns any stored value of a boolean column into True or False
    # (SQLite keeps "yes" in one): read as text, each must be one a boolean is stored as.
    for column in (*(getattr(Record, name) for name in _FLAGS), ConstraintResult.honored):
        text = cast(col(column), String)
        query = sa_select(col(Record.id), text).where(
            col(Record.run_id) == run_id,
            col(column).is_not(None),
            func.lower(text).not_in(_FLAG_TEXTS),
        )
        if column is ConstraintResult.honored:
            query = query.join(ConstraintResult, col(ConstraintResult.record_id) == col(Record.id))
        found = session.execute(query.limit(1)).first()
        if found is not None:
            return f"record {found[0]}: {column.key}: expected true or false"
    return None


def _constraint_results(session: Session, ids: list[int]) -> dict[int, dict[str, bool]]:
    out: dict[int, dict[str, bool]] = {rid: {} for rid in ids}
    for c in session.exec(select(ConstraintResult).where(col(ConstraintResult.record_id).in_(ids))):
        if not isinstance(c.constraint_id, str) or not isinstance(c.honored, bool):
            raise TypeError(f"record {c.record_id}: a constraint result of the wrong type")
        out[c.record_id][c.constraint_id] = c.honored
    return out


def copy_runs(
    source: Engine, target: Engine, run_ids: Iterable[str] | None = None, *, batch: int = 500
) -> CopyReport:
    """Copy runs from ``source`` to ``target`` without duplicating a cell."""
    report = CopyReport()
    wanted = set(run_ids) if run_ids else None
    with Session(source) as src, Session(target) as dst:
        runs = [r for r in src.exec(select(Run)) if wanted is None or r.id in wanted]
        if wanted:
            missing = wanted - {r.id for r in runs}
            if missing:
                raise StoreError(f"no run(s) {', '.join(sorted(missing))} in the source store")
        for run in runs:
            problem = run_problem(src, run, batch=batch)
            if problem is not None:
                report.runs_refused.append((run.id, problem))
                continue
            existing = dst.get(Run, run.id)
            if existing is not None and existing.matrix_sha256 != run.matrix_sha256:
                report.runs_conflicting.append(run.id)
                continue
            try:
                _copy_run(src, dst, run, existing is None, report, batch)
            except BaseException:
                dst.rollback()  # one transaction per run: nothing of it stays
                raise
    return report


def _copy_run(
    src: Session, dst: Session, run: Run, create: bool, report: CopyReport, batch: int
) -> None:
    """Write one validated run into ``dst`` in one transaction (committed at its end)."""
    if create:
        data = run.model_dump()
        data.update(pid=None, host=None)
        dst.add(Run(**data))
        dst.flush()
        report.runs_created.append(run.id)
    else:
        report.runs_merged.append(run.id)
    cells = {
        (m, s, a, rep): (rid, status)
        for rid, m, s, a, rep, status in dst.execute(
            sa_select(
                col(Record.id),
                col(Record.model),
                col(Record.scenario_id),
                col(Record.arm),
                col(Record.rep),
                col(Record.status),
            ).where(col(Record.run_id) == run.id)
        )
    }
    pending = 0
    last = 0
    while True:
        chunk = list(
            src.exec(
                select(Record)
                .where(Record.run_id == run.id, col(Record.id) > last)
                .order_by(col(Record.id))
                .limit(batch)
            )
        )
        if not chunk:
            break
        last = chunk[-1].id or last
        for record in chunk:
            assert record.id is not None
            key = (record.model, record.scenario_id, record.arm, record.rep)
            target_cell = cells.get(key)
            if target_cell is not None:
                target_id, status = target_cell
                if status == RecordStatus.OK or record.status != RecordStatus.OK:
                    report.records_kept += 1
                    continue
                # The target only has an error here and the source an answer.
                dst.exec(delete(CheckOutcome).where(col(CheckOutcome.record_id) == target_id))
                dst.exec(
                    delete(ConstraintResult).where(col(ConstraintResult.record_id) == target_id)
                )
                replacement = dst.get(Record, target_id)
                assert replacement is not None
                for name in _RECORD_FIELDS:
                    setattr(replacement, name, getattr(record, name))
                dst.add(replacement)
                _copy_children(src, dst, record.id, target_id)
                cells[key] = (target_id, "ok")
                report.records_replaced += 1
            else:
                new = Record(**record.model_dump(exclude={"id"}))
                dst.add(new)
                dst.flush()
                assert new.id is not None
                _copy_children(src, dst, record.id, new.id)
                cells[key] = (new.id, new.status)
                report.records_added += 1
            pending += 1
        dst.flush()
        dst.expunge_all()  # flushed: the transaction holds them, memory need not
        src.expunge_all()
    dst.commit()


def runner_lines(states: list[RunnerState]) -> list[str]:
    """One line per runner of a run, as ``cvb db info`` prints them."""
    lines = []
    for s in states:
        name = terminal_text(s.worker, multiline=False)
        where = terminal_text(f"{s.host or '?'} pid {s.pid}", multiline=False)
        key = f" key ${terminal_text(s.api_key_env, multiline=False)}" if s.api_key_env else ""
        if s.live:
            pace = f"{s.per_min or 0.0:.1f} cells/min"
        elif s.state == "lapsed":
            pace = f"lease lapsed ({s.lease_s:g} s)"
        else:
            pace = "left"
        lines.append(
            f"runner {name:<24} {s.state:<9} {pace:<22} heartbeat {s.heartbeat_age_s:.0f} s ago, "
            f"{s.cells_done} done ({s.cells_failed} errors), holding {s.held}; {where}{key}"
        )
    return lines
