"""The cost table of the reports and the studio (a table model), from the cost rows of
:mod:`cvb_engine.cost`.

Apart from the prices: the runner stores a run's prices when it binds the run and must
not import the report's table machinery to do so.
"""

from __future__ import annotations

from collections.abc import Sequence

from cvb_engine.cost import COST_NOTE, CostRow, format_cost, total_cost
from cvb_engine.report.tables import Cell, Column, Table

_COST_COLUMNS = (
    Column("model", outside=True),
    Column("arm", outside=True),
    Column("records", help="all records, error records included"),
    Column("prompt tokens"),
    Column("completion tokens"),
    Column("price in / out", help="USD per million tokens, and where the price came from"),
    Column("cost", help="USD; unknown, never $0, when a price or a token count is missing"),
    Column("cost per strictly accurate record"),
)
COST_HEADER = tuple(c.name for c in _COST_COLUMNS)


def cost_table(rows: Sequence[CostRow]) -> Table:
    """The report's cost table (a :class:`~cvb_engine.report.tables.Table`): one row per
    model × arm, then the total, unknown when any cell's cost is."""
    out: list[tuple[Cell, ...]] = []
    for r in rows:
        price = (
            f"{r.price.input_per_m:g} / {r.price.output_per_m:g} ({r.price.source})"
            if r.price
            else "unknown"
        )
        per = format_cost(r.cost_per_strict)
        if r.cost_per_strict is None and r.why_unknown:
            per += f" ({r.why_unknown})"
        out.append(
            (
                Cell(r.model),
                Cell(r.arm),
                Cell(f"{r.records:,}", r.records),
                Cell(f"{r.prompt_tokens:,}", r.prompt_tokens),
                Cell(f"{r.completion_tokens:,}", r.completion_tokens),
                Cell(price),
                Cell(format_cost(r.cost), r.cost),
                Cell(per, r.cost_per_strict),
            )
        )
    total = total_cost(rows)
    records = sum(r.records for r in rows)
    blank = Cell("")
    out.append(
        (
            Cell("total"),
            blank,
            Cell(f"{records:,}", records),
            blank,
            blank,
            blank,
            Cell(format_cost(total), total),
            blank,
        )
    )
    return Table(key="cost", title="Cost", columns=_COST_COLUMNS, rows=tuple(out), note=COST_NOTE)


def cost_markdown(rows: Sequence[CostRow]) -> str:
    """The cost section of the Markdown report."""
    from cvb_engine.report.markdown_report import table_lines

    table = cost_table(rows)
    return "\n".join([f"## {table.title}", "", table.note, "", *table_lines(table)])


__all__ = ["COST_HEADER", "cost_markdown", "cost_table"]
