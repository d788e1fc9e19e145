"""Reports: one read path from the store to every renderer.

store → tallies (SQL aggregates, :mod:`cvb_engine.results` / :mod:`cvb_engine.queries`)
→ metrics (pure, :mod:`cvb_engine.metrics`) → table models (:mod:`.tables`, one builder
per report table, each a typed :class:`~cvb_engine.report.tables.Table`) → renderers:
Markdown (:mod:`.markdown_report`), HTML (:mod:`.html`: Jinja2 templates under ``templates/``,
charts as SVG from :mod:`.svg`), the results file's summaries and the CSV of records
(:mod:`.export`), and the studio's Results views. How figures are written as text is
:mod:`.fmt`; what a report says besides its figures is :mod:`.notes`.

Names are loaded from their module when first used (a ``results`` import stays light).
``python -m cvb_engine.report`` is ``cvb report`` (``__main__.py`` hands over to
:mod:`cvb_engine.cli.report`; this package never imports the CLI).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE: dict[str, str] = {
    "CSV_FIELDS": "export",
    "records_csv": "export",
    "ivr_dict": "export",
    "tool_use_dict": "export",
    "agent_dict": "export",
    "realism_dict": "export",
    "arm_title": "fmt",
    "error_counts": "fmt",
    "fmt_gap": "fmt",
    "fmt_interval": "fmt",
    "fmt_rate": "fmt",
    "fmt_signed": "fmt",
    "has_layer_arms": "fmt",
    "html_report": "html",
    "ivr_markdown": "markdown_report",
    "markdown": "markdown_report",
    "ReportNotes": "notes",
    "limitations_of": "notes",
    "sandbox_backends": "notes",
    "sandbox_label": "notes",
    "weaker_backends": "notes",
    "MEMORY_NOTE": "tables",
    "AGENT_NOTE": "tables",
    "agent_tables": "tables",
    "OUTCOMES_NOTE": "tables",
    "OUTCOME_HEADER": "tables",
    "Cell": "tables",
    "Column": "tables",
    "Table": "tables",
    "memory_channel_table": "tables",
    "memory_curve_table": "tables",
    "memory_curves": "tables",
    "memory_position_table": "tables",
    "memory_tables": "tables",
    "tool_use_table": "tables",
    "realism_tables": "tables",
    "stale_table": "tables",
    "delivery_table": "tables",
    "budget_table": "tables",
    "turns_table": "tables",
    "budget_curves": "memory_realism",
    "turns_curves": "memory_realism",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
