"""What every tab of the Results page shares: the page's CSS, the chart frame, and how a
rate is written in a table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from cvb_engine import Rate, Summary, Table, arm_title
from studio.components.text import plain

CELL_CACHE: dict[str, Any] = {"max_entries": 64, "ttl": 3600, "show_spinner": False}
PLOTLY_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}
CSS = """<style>
.cvb-badges{display:flex;flex-wrap:wrap;gap:6px;margin:2px 0 6px;font-family:system-ui,sans-serif}
.cvb-badge{font-size:12px;border-radius:12px;padding:2px 10px;border:1px solid;max-width:100%;
  overflow-wrap:anywhere}
.cvb-badge.ok{color:#1a7f37;background:#dafbe1;border-color:#aceebb}
.cvb-badge.bad{color:#cf222e;background:#ffebe9;border-color:#ffcecb}
.cvb-badge.err{color:#9a6700;background:#fff8c5;border-color:#eac54f}
.cvb-badge.out{color:#57606a;background:#f6f8fa;border-color:#d0d7de}
.cvb-why{font-family:system-ui,sans-serif;font-size:12px;color:#57606a;margin:0 0 6px;padding:0;
  list-style:none}
.cvb-why li{margin:2px 0} .cvb-why code{font-size:11.5px;color:#cf222e;background:#fff5f5;
  border-radius:3px;padding:0 4px}
.cvb-pub{display:inline-block;font-size:11px;font-weight:700;letter-spacing:.05em;color:#fff;
  background:#57606a;border-radius:10px;padding:1px 9px;margin-right:6px;vertical-align:middle}
.cvb-arm{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
.cvb-code{font-size:12px !important}
</style>"""


def counts(rate: Rate | None) -> str:
    if rate is None:
        return "–"
    memory = f" · {rate.memory_errors} memory failures" if rate.memory_errors else ""
    return f"{rate.k}/{rate.n} scored · {rate.errors} err{memory}"


def value(rate: Rate | None) -> float | None:
    return None if rate is None else rate.value


def rate_columns(summary: Summary, arms: Sequence[str], fmt: str = "%.3f") -> dict[str, Any]:
    # a memory-layer arm is headed with its layer ("memory (bm25)"); data keys stay the arm
    return {
        a: st.column_config.NumberColumn(
            arm_title(summary, a),
            format=fmt,
            help=f"strict accuracy, {plain(arm_title(summary, a))}",
        )
        for a in arms
    }


def table_frame(table: Table) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A report table (:mod:`cvb_engine.report.tables`) as dataframe rows and their column
    configuration: a numeric column shows its figures as numbers, the small print of a
    column that has some goes to a column of its own beside it (``<heading> n``).

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
            config[key] = st.column_config.NumberColumn(label, format="%.3f", help=help_text)
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


def draw_table(table: Table) -> None:
    """Draw a report table as a dataframe (its cells as text, never as Markdown)."""
    rows, config = table_frame(table)
    st.dataframe(rows, hide_index=True, width="stretch", column_config=config)
    if table.omitted:
        st.caption(plain(table.omitted))


def downloaded(file_name: str) -> None:
    """Say that the export went to the browser (a download button shows nothing else)."""
    st.toast(
        f"{plain(file_name)} was built and handed to your browser: see its downloads.",
        icon=":material/download_done:",
    )


def chart(fig: Any, key: str) -> None:
    st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, width="stretch")
