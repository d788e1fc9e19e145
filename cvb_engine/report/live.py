"""The Run page's tables of a run in progress as table models: its strict accuracy so far,
its runners and its latest errors. Like the report's tables (:mod:`.tables`), plain-text cells; model names,
arms, runner names, hosts and key variable names come from the store (text from outside).
"""

from __future__ import annotations

from collections.abc import Sequence

from cvb_engine.claims import RunnerState
from cvb_engine.metrics import Rate, ordered_arms
from cvb_engine.monitor import ArmAccuracy, ErrorRow
from cvb_engine.report.tables import Cell, Column, Table, fit

ACCURACY_SO_FAR = "Strict accuracy so far"


def _so_far(rate: Rate | None) -> Cell:
    if rate is None:
        return Cell("")  # the arm has no record of this model yet
    if rate.value is None:
        return Cell("–")
    return Cell(f"{rate.value:.0%} ({rate.k}/{rate.n})", rate.value)


def live_accuracy_table(rows: Sequence[ArmAccuracy]) -> Table:
    """Strict accuracy so far per model (first seen first) and arm (the seed arms first, then
    the variants in the matrix's order): ``67% (4/6)``; error records are outside ``n``."""
    rates = {(r.model, r.arm): r.rate for r in rows}
    every = list(dict.fromkeys(r.model for r in rows))
    models, arms, omitted = fit(every, ordered_arms({r.arm for r in rows}))
    columns = (
        Column("model", outside=True),
        *(
            Column(a, outside_name=True, numeric=True, help=f"strict accuracy so far, {a}")
            for a in arms
        ),
    )
    cells = tuple((Cell(m), *(_so_far(rates.get((m, a))) for a in arms)) for m in models)
    return Table(
        "live-accuracy",
        ACCURACY_SO_FAR,
        columns,
        cells,
        "Share of answers honoring every constraint; error records are left out.",
        omitted=omitted,
    )


_RUNNER_COLUMNS = (
    Column("runner", outside=True),
    Column("state", help="live, lapsed (its lease ran out without a heartbeat), or how it left"),
    Column("cells/min", help="records it stored per minute over the last minute (live only)"),
    Column("last heartbeat"),
    Column("stored", help="records stored (of which errors)"),
    Column("holding", help="cells it holds a claim on now"),
    Column("where", outside=True),
    Column("key variable", outside=True, help="the name of the variable it reads its key from"),
)


def runner_table(states: Sequence[RunnerState]) -> Table:
    """One row per runner of a run, in the order given (:func:`cvb_engine.claims.runners`:
    live ones first)."""
    shown, _, omitted = fit(states, _RUNNER_COLUMNS[1:])
    cells = tuple(
        (
            Cell(s.worker),
            Cell(s.state),
            Cell("–" if s.per_min is None else f"{s.per_min:.1f}", s.per_min),
            Cell(f"{s.heartbeat_age_s:.0f} s ago", s.heartbeat_age_s),
            Cell(f"{s.cells_done} ({s.cells_failed} errors)", s.cells_done),
            Cell(str(s.held), s.held),
            Cell(f"{s.host or '?'} · pid {s.pid}"),
            Cell(s.api_key_env or "none"),
        )
        for s in shown
    )
    return Table("runners", "Runners", _RUNNER_COLUMNS, cells, omitted=omitted)


_ERROR_COLUMNS = (
    Column("at (UTC)"),
    Column("model", outside=True),
    Column("scenario", outside=True),
    Column("arm", outside=True),
    Column("rep", numeric=True),
    Column("attempts", numeric=True),
    Column("failed", help="the endpoint, or a memory layer"),
    Column(
        "reason", outside=True, help="as the endpoint or the layer said it, scrubbed of the key"
    ),
)


def error_table(errors: Sequence[ErrorRow]) -> Table:
    """The run's latest error records, newest first as given (:func:`cvb_engine.monitor`)."""
    shown, _, omitted = fit(errors, _ERROR_COLUMNS[1:])
    cells = tuple(
        (
            Cell(f"{e.created:%H:%M:%S}"),
            Cell(e.model),
            Cell(e.scenario_id),
            Cell(e.arm),
            Cell(str(e.rep), e.rep),
            Cell(str(e.attempts), e.attempts),
            Cell("memory layer" if e.kind == "memory" else "endpoint"),
            Cell(e.reason),
        )
        for e in shown
    )
    return Table("latest-errors", "Latest errors", _ERROR_COLUMNS, cells, omitted=omitted)
