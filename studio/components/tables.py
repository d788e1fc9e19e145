"""How the studio draws a table model (:mod:`cvb_engine.report.tables` and its siblings):
the one path for every table the engine builds, on the Results page and the Run page.

A table's cells are text: names from outside (models, arms, categories, run and scenario
ids, runner names, trace paths) are drawn as literal text, never as Markdown.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from cvb_engine import Table
from studio.components.text import plain


def table_frame(table: Table) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A table as dataframe rows and their column configuration: a numeric column shows its
    figures as numbers (a signed one with its sign), the small print of a column that has
    some goes to a column of its own beside it (``<heading> n``).

    A heading may be a stored name (a category, an arm): a dataframe draws its headings
    and cells as text; only a column's help is Markdown, so it goes through :func:`plain`.
    """
    config: dict[str, Any] = {}
    keys: list[tuple[str, str | None]] = []  # (figure column, its small print's column)
    taken: set[str] = set()
    for i, col in enumerate(table.columns):
        key = col.key or col.name
        key = key if key not in taken else f"{key} ({i + 1})"
        taken.add(key)
        label = col.name if col.name != key else None
        help_text = plain(col.help) if col.help else None
        if col.numeric:
            fmt = "%+.3f" if col.signed else "%.3f"
            config[key] = st.column_config.NumberColumn(label, format=fmt, help=help_text)
        elif help_text or label:
            config[key] = st.column_config.TextColumn(label, help=help_text)
        detail = None
        if any(row[i].detail for row in table.rows):
            detail = f"{key} n"
            taken.add(detail)
        keys.append((key, detail))
    rows = []
    for row in table.rows:
        out: dict[str, Any] = {}
        for (key, _), col, cell in zip(keys, table.columns, row, strict=True):
            out[key] = cell.value if col.numeric else cell.text
        for (_, detail), cell in zip(keys, row, strict=True):
            if detail is not None:
                out[detail] = cell.detail or "–"
        rows.append(out)
    return rows, config


def draw_table(table: Table, *, key: str | None = None, height: int | None = None) -> None:
    """Draw a table as a dataframe (its cells as text, never as Markdown), and what it leaves
    out past its budget. ``key``: for a table drawn more than once on a page (one per record);
    ``height``: in pixels, default Streamlit's."""
    rows, config = table_frame(table)
    size: dict[str, Any] = {} if height is None else {"height": height}
    st.dataframe(rows, hide_index=True, width="stretch", column_config=config, key=key, **size)
    if table.omitted:
        st.caption(plain(table.omitted))


def static_frame(table: Table) -> pd.DataFrame:
    """A small table for ``st.table``, indexed by its first column. ``st.table`` renders its
    headings and cells as Markdown: text from outside (the columns and headings the table
    says are) goes through :func:`plain`, as the Markdown report writes it; cvb's own
    figures and labels are written as they are."""
    frame = pd.DataFrame(
        [
            [
                plain(cell.text) if col.outside else cell.text
                for col, cell in zip(table.columns, row, strict=True)
            ]
            for row in table.rows
        ],
        columns=[plain(c.name) if c.outside_name else c.name for c in table.columns],
    )
    return frame.set_index(frame.columns[0])


def draw_static_table(table: Table) -> None:
    """Draw a small table whole, without scrolling (the Run page's live panel), and what it
    leaves out past its budget."""
    st.table(static_frame(table))
    if table.omitted:
        st.caption(plain(table.omitted))
