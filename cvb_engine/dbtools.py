"""Copying runs between stores (``cvb db``, :mod:`cvb_engine.cli.db`).

``cvb db copy --from URL --to URL`` moves runs (a laptop's SQLite into a
team's PostgreSQL, say). A run already in the target with the same matrix is
merged cell by cell: cells the target lacks are added, an error record in the
target is replaced by a successful one from the source, nothing is ever
duplicated. A run whose id exists in the target with a *different* matrix is
left alone and reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, delete, select

from cvb_engine.claims import RunnerState
from cvb_engine.kinds import RecordStatus
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
            existing = dst.get(Run, run.id)
            if existing is not None and existing.matrix_sha256 != run.matrix_sha256:
                report.runs_conflicting.append(run.id)
                continue
            if existing is None:
                data = run.model_dump()
                data.update(pid=None, host=None)
                dst.add(Run(**data))
                dst.commit()
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
                        dst.exec(
                            delete(CheckOutcome).where(col(CheckOutcome.record_id) == target_id)
                        )
                        dst.exec(
                            delete(ConstraintResult).where(
                                col(ConstraintResult.record_id) == target_id
                            )
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
                dst.commit()
                src.expunge_all()
            dst.commit()
    return report


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
