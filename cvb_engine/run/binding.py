"""Binding a run to the store: create or resume it, refuse a different matrix, find what is left.

A run id is bound to its matrix (:attr:`~cvb_engine.run.plan.Matrix.sha256`): the
same id with another matrix is refused, with the differences named. ``--join``
reads the matrix options it was not given from the stored run.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from cvb_engine import sandbox
from cvb_engine.arms import parse_arm
from cvb_engine.claims import runners
from cvb_engine.cost import configured_prices, prices_param
from cvb_engine.endpoints import Endpoint
from cvb_engine.kinds import RecordStatus, RunStatus
from cvb_engine.prompts import PROMPT_VERSION
from cvb_engine.run.errors import RunError
from cvb_engine.run.plan import Cell, Matrix, diff_matrices
from cvb_engine.run_ids import new_run_id
from cvb_engine.run_options import RunOptions
from cvb_engine.store import Record, Run, database_url, get_engine, redact_params, utcnow


class Bound(NamedTuple):
    """A run bound to the store."""

    run_id: str
    #: The cells to send, in order.
    todo: list[Cell]
    #: Record ids of the cells that already have a record (errors to overwrite).
    stored: dict[Cell, int]


def cells_to_send(cells: list[Cell], status: dict[Cell, str], *, retry_errors: bool) -> list[Cell]:
    """What is left of ``cells`` given the stored records' ``status``, in sending order.

    Cells without any record first, then the errors: a request that keeps failing
    costs its own retries, never the cells behind it. ``retry_errors``: only the errors.
    """
    errors = [c for c in cells if status.get(c) == RecordStatus.ERROR]
    if retry_errors:
        return errors
    return [c for c in cells if c not in status] + errors


def bind(
    session: Session,
    matrix: Matrix,
    o: RunOptions,
    endpoint: Endpoint,
    *,
    worker: str,
    sandbox_name: str | None,
) -> Bound:
    """Create or resume the run ``o.run_id`` (a fresh id when None) with ``matrix``.

    Raises:
        RunError: the id holds another matrix, ``--retry-errors`` of a run that does
            not exist, a live runner of the run has this ``worker`` name, or the run
            is being cancelled.
    """
    run_id = o.run_id or new_run_id()
    run = session.get(Run, run_id)
    params = redact_params(
        {
            **matrix.as_dict(),
            "endpoint": endpoint.name,
            "base_url": endpoint.base_url,
            "api_key_env": endpoint.api_key_env,
            "concurrency": o.concurrency,
            "timeout_s": o.timeout_s,
            "max_attempts": o.max_attempts,
            "max_response_chars": o.max_response_chars,
            "scenarios_path": str(o.scenarios),
            # what the run's tokens cost, as configured when it started (cvb_engine.cost)
            "prices": prices_param(
                configured_prices(matrix.models, endpoint.name, o.price_in, o.price_out)
            ),
            # provenance, not the matrix: the version of each arm kind that built messages
            "arm_versions": {v.kind.name: v.kind.version for v in map(parse_arm, matrix.arms)},
        }
    )
    if run is None:
        if o.retry_errors:
            raise RunError(f"no run {run_id!r} to retry")
        run = Run(
            id=run_id,
            prompt_version=PROMPT_VERSION,
            params_json=json.dumps(params),
            matrix_sha256=matrix.sha256,
            total_cells=matrix.size,
            note=o.note,
        )
    elif run.matrix_sha256 != matrix.sha256:
        old = {k: run.params.get(k) for k in matrix.as_dict()}
        changes = "; ".join(diff_matrices(old, matrix.as_dict()))
        raise RunError(
            f"run {run_id!r} exists with a different matrix ({changes}). "
            "Resume it with the same arguments, or choose a new --run-id."
        )
    else:
        check_runners(run, session, worker)
    rows = session.execute(
        sa_select(
            col(Record.model),
            col(Record.scenario_id),
            col(Record.arm),
            col(Record.rep),
            col(Record.status),
            col(Record.id),
        ).where(col(Record.run_id) == run_id)
    ).all()
    status = {(m, s, a, r): st for m, s, a, r, st, _ in rows}
    stored = {(m, s, a, r): rid for m, s, a, r, _, rid in rows}
    todo = cells_to_send(matrix.cells(), status, retry_errors=o.retry_errors)
    run.params_json = json.dumps(sandbox.with_backend(run.params, sandbox_name))
    run.status = RunStatus.RUNNING
    run.pid = os.getpid()
    run.host = socket.gethostname()
    run.updated = utcnow()
    session.add(run)
    try:
        session.commit()
    except IntegrityError:
        # Another process created this run id a moment ago: bind to it instead.
        session.rollback()
        if o.run_id is None:
            raise
        return bind(session, matrix, o, endpoint, worker=worker, sandbox_name=sandbox_name)
    return Bound(run_id, todo, stored)


def check_runners(run: Run, session: Session, worker: str) -> None:
    """Before binding an existing run: this runner's name is free, and a cancel that
    its runners still carry out is not undone (a cancel nobody carries out any more
    is cleared: this runner resumes the run).

    Raises:
        RunError: a live runner of the run has this name, or the run is being cancelled.
    """
    states = runners(session, run.id)
    live = [s for s in states if s.live]
    if any(s.worker == worker for s in live):
        raise RunError(
            f"a runner named {worker!r} is already taking part in run {run.id!r}: "
            "give this one another --worker name"
        )
    if run.cancel_requested:
        if live:
            raise RunError(
                f"run {run.id!r} is being cancelled: {len(live)} runner(s) still finish "
                "their cells; resume it once they have stopped"
            )
        run.cancel_requested = None


def stored_cells(session: Session, run_id: str) -> int:
    """Cells of the run with a record, ok or error (a cell is unique in the store)."""
    return int(
        session.execute(
            sa_select(func.count()).select_from(Record).where(col(Record.run_id) == run_id)
        ).scalar_one()
    )


def join_options(o: RunOptions) -> RunOptions:
    """``o`` with every matrix option it does not set taken from the stored run ``o.run_id``.

    What it does set is kept: a different matrix is then refused when the run is bound.

    Raises:
        RunError: no run id, no such run, or its scenario library is not where it says.
    """
    if not o.run_id:
        raise RunError("--join needs --run-id: the run to take part in")
    url = database_url(o.db)
    with Session(get_engine(url)) as session:
        run = session.get(Run, o.run_id)
    if run is None:
        label = make_url(url).render_as_string(hide_password=True)
        raise RunError(
            f"no run {o.run_id!r} to join in the store {label}: start it without --join "
            "(or point --db at the store it is in)"
        )
    params = run.params
    given = o.given_matrix()
    take: dict[str, Any] = {}
    if "scenarios" not in given and params.get("scenarios_path"):
        take["scenarios"] = str(params["scenarios_path"])
        if not Path(take["scenarios"]).exists():
            raise RunError(
                f"run {o.run_id!r} was started with the scenario library "
                f"{take['scenarios']!r}, which is not here: point --scenarios at a copy of it"
            )
    if not {"only", "categories"} & given and params.get("scenarios"):
        take["only"] = sorted(params["scenarios"])
    if "models" not in given and params.get("models"):
        take["models"] = list(params["models"])
    if not {"arms", "memory_sweep"} & given and params.get("arms"):
        take["arms"], take["memory_sweep"] = list(params["arms"]), ()
    for name in ("runs", "temperature", "max_tokens", "seed"):
        if name not in given and name in params:
            take[name] = params[name]
    return o.changed(**take)


__all__ = ["Bound", "bind", "cells_to_send", "check_runners", "join_options", "stored_cells"]
