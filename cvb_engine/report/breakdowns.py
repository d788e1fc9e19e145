"""The Results page's detail tables as table models: by scenario, honored only when ordered,
every constraint per arm, run B against run A, and what one agent episode read.

Built from the rows of :mod:`cvb_engine.queries` (SQL tallies, then the engine's metrics),
as :mod:`.tables` builds the report's: each a :class:`~cvb_engine.report.tables.Table` of
plain-text cells, within the same budget (:func:`~cvb_engine.report.tables.fit`, and the
table says how much it leaves out). Model names, scenario, constraint and run ids, categories,
arms and trace paths are text from outside; their columns say so.
"""

from __future__ import annotations

from collections.abc import Sequence

from cvb_engine.kinds import SeedArm
from cvb_engine.metrics import Interval
from cvb_engine.queries import (
    Aggregates,
    CellRecord,
    Comparison,
    ConstraintRow,
    constraint_rows,
    only_when_ordered,
    scenario_rows,
)
from cvb_engine.report.fmt import fmt_gap, fmt_signed
from cvb_engine.report.tables import GAP, Cell, Column, Table, arm_columns, fit, rate_cell

#: The leading columns of the per-scenario and per-constraint tables (text from outside).
_SCENARIO = (
    Column("model", outside=True),
    Column("scenario", outside=True),
    Column("category", outside=True),
)
_CONSTRAINT = (*_SCENARIO[:2], Column("constraint", outside=True), _SCENARIO[2])
_SEED = (SeedArm.MANDATED.value, SeedArm.INCENTIVIZED.value)


def _chosen(agg: Aggregates, arms: Sequence[str] | None) -> list[str]:
    # the arms filter keeps the summary's order; none chosen is every arm
    return [a for a in agg.summary.arms if not arms or a in arms]


def _constraint_lead(row: ConstraintRow) -> tuple[Cell, ...]:
    return Cell(row.model), Cell(row.scenario_id), Cell(row.constraint_id), Cell(row.category)


def _difference(value: float | None, tone: str | None = None) -> Cell:
    return Cell(fmt_signed(value), value, tone=tone)


def scenario_table(
    agg: Aggregates,
    *,
    models: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
    arms: Sequence[str] | None = None,
) -> Table:
    """Strict accuracy per (model, scenario) and arm, and the mandated − incentivized gap;
    largest gap first (:func:`cvb_engine.queries.scenario_rows`), filtered by model, category
    and arm (None or empty: all)."""
    rows, shown, omitted = fit(
        scenario_rows(agg, models=models, categories=categories), _chosen(agg, arms), 4
    )
    columns = (
        *_SCENARIO,
        *arm_columns(agg.summary, shown, "strict accuracy"),
        Column("gap", numeric=True, signed=True, help="mandated − incentivized, this scenario"),
    )
    cells = tuple(
        (
            Cell(r.model),
            Cell(r.scenario_id),
            Cell(r.category),
            *(rate_cell(r.rates.get(a), a) for a in shown),
            _difference(r.gap, GAP),
        )
        for r in rows
    )
    return Table("scenario", "By scenario", columns, cells, "Largest gap first.", omitted=omitted)


def ordered_table(
    agg: Aggregates,
    *,
    models: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
) -> Table:
    """The constraints honored more often under orders (mandated) than as project memory
    (incentivized), largest difference first (:func:`cvb_engine.queries.only_when_ordered`)."""
    rows, _, omitted = fit(only_when_ordered(agg, models=models, categories=categories), _SEED, 5)
    columns = (
        *_CONSTRAINT,
        *arm_columns(agg.summary, _SEED, "honored share"),
        Column(
            "mandated − incentivized",
            numeric=True,
            help="honored share when ordered − honored share as memory",
        ),
    )
    cells = tuple(
        (
            *_constraint_lead(r),
            *(rate_cell(r.rates.get(a), a) for a in _SEED),
            _difference(r.gap, GAP),
        )
        for r in rows
    )
    return Table(
        "only-when-ordered",
        "Honored only when ordered",
        columns,
        cells,
        "Constraints honored more often under orders (mandated) than as project memory "
        "(incentivized), largest difference first.",
        omitted=omitted,
    )


def every_constraint_table(
    agg: Aggregates,
    *,
    models: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
    arms: Sequence[str] | None = None,
) -> Table:
    """The honored share of every (model, scenario, constraint) per arm (its small print:
    honored / all), filtered by model, category and arm (None or empty: all)."""
    rows, shown, omitted = fit(
        constraint_rows(agg, models=models, categories=categories), _chosen(agg, arms), 4
    )
    columns = (*_CONSTRAINT, *arm_columns(agg.summary, shown, "honored share"))
    cells = tuple(
        (
            *_constraint_lead(r),
            *(rate_cell(r.rates.get(a), a) for a in shown),
        )
        for r in rows
    )
    return Table("every-constraint", "Every constraint, per arm", columns, cells, omitted=omitted)


def _gap_cell(gap: Interval | None) -> Cell:
    value = gap.value if gap is not None else None
    return Cell(fmt_signed(value), value, fmt_gap(gap) if value is not None else "", GAP)


def compare_table(comparison: Comparison) -> Table:
    """Run B against run A: strict accuracy per model and arm in each run and B − A (every
    arm both runs ran), then each model's gap in each run (its small print: the gap's 95%
    CI) and B − A."""
    cells = [
        (
            Cell(d.model),
            Cell(d.arm),
            rate_cell(d.a, d.arm),
            rate_cell(d.b, d.arm),
            _difference(d.delta),
        )
        for d in comparison.arm_deltas
    ]
    cells += [
        (Cell(g.model), Cell("gap"), _gap_cell(g.a), _gap_cell(g.b), _difference(g.delta, GAP))
        for g in comparison.gap_deltas
    ]
    rows, _, omitted = fit(cells, ("A", "B", "Δ"), 2)
    columns = (
        Column("model", outside=True),
        Column("arm", outside=True, help="an arm both runs ran, or gap: mandated − incentivized"),
        Column(
            f"A: {comparison.run_a}",
            key="A",
            outside_name=True,
            numeric=True,
            help="run A (baseline): strict accuracy, or the gap",
        ),
        Column(
            f"B: {comparison.run_b}",
            key="B",
            outside_name=True,
            numeric=True,
            help="run B: strict accuracy, or the gap",
        ),
        Column("Δ (B − A)", key="Δ", numeric=True, signed=True, help="run B − run A"),
    )
    return Table(
        "compare",
        "Run B against run A",
        columns,
        tuple(rows),
        "Gap rows: the small print is each run's gap with its 95% CI.",
        omitted=omitted,
    )


def episode_read_table(record: CellRecord) -> Table:
    """Per constraint of an agent record's cell: did the agent read its text (opened the file
    holding it, or a search showed one of its lines), was it in the system message
    (``preload``), did the file honor it, and where its text lives. No rows without a
    readable trace."""
    trace = record.agent
    cells = []
    omitted = ""
    if trace is not None:
        honored = {c.constraint_id: c.honored for c in record.constraints}
        places = {p.constraint_id: p for p in trace.constraints}
        ids, _, omitted = fit(list(dict.fromkeys([*honored, *places])), range(4))
        for cid in ids:
            place = places.get(cid)
            obeyed = honored.get(cid)
            cells.append(
                (
                    Cell(cid),
                    Cell("✓ read" if trace.read.get(cid, False) else "✗ not read"),
                    Cell("✓ preloaded" if cid in trace.preloaded else "–"),
                    Cell("–" if obeyed is None else "✓ honored" if obeyed else "✗ violated"),
                    Cell(f"{place.path}:{place.line}" if place is not None else "–"),
                )
            )
    columns = (
        Column("constraint", outside=True),
        Column("read", help="the agent saw the constraint's text"),
        Column("in the system message", help="preload put the root rules file there"),
        Column("obeyed", help="its checks passed on the file the agent left"),
        Column("its text", outside=True, help="the rules file and line holding it"),
    )
    return Table(
        f"agent-read:{record.id}", "Read versus obeyed", columns, tuple(cells), omitted=omitted
    )
