"""The Markdown report: draws the tables of :mod:`cvb_engine.report.tables`.

Names and ids in the tables, the title and ``meta`` come from records, files and
servers: they are written as plain text (:func:`~cvb_engine.safe_text.markdown_text`,
which also breaks bare URLs and e-mail addresses so that no renderer links them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cvb_engine.metrics import IVRSummary, Summary
from cvb_engine.report import tables as t
from cvb_engine.report.notes import ReportNotes
from cvb_engine.safe_text import markdown_code
from cvb_engine.safe_text import markdown_text as _t


def table_lines(table: t.Table) -> list[str]:
    """A table as Markdown lines; text from outside written as plain text."""
    header = [_t(c.name) if c.outside_name else c.name for c in table.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in table.rows:
        cells = [
            _t(cell.text) if col.outside else cell.text
            for col, cell in zip(table.columns, row, strict=True)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if table.omitted:
        lines += ["", f"({table.omitted})"]
    return lines


def _title(table: t.Table) -> str:
    return _t(table.title) if table.title_outside else table.title


def markdown(
    summary: Summary,
    *,
    title: str = "CVB results",
    meta: Mapping[str, Any] | None = None,
    notes: ReportNotes | None = None,
) -> str:
    """The Markdown report: arm accuracy with the gap, answer outcomes with accuracy
    among answered records, per-constraint accuracy, counts, one table per arm by
    category and the gap by category, then the memory and agent sections and the
    limitations of the checks."""
    out = [f"# {_t(title)}", ""]
    for key, value in (meta or {}).items():
        out.append(f"- {_t(key)}: {_t(value)}")
    if meta:
        out.append("")
    older = notes.older_rules_text() if notes else None
    if older:
        out += [f"> **Judged by older rules.** {older}", ""]
    accuracy = t.accuracy_table(summary)
    out += [f"## {accuracy.title}", "", *table_lines(accuracy), "", accuracy.note, ""]
    outcomes = t.outcome_table(summary)
    if outcomes.rows:
        out += [f"## {outcomes.title}", "", *table_lines(outcomes), "", outcomes.note, ""]
    constraint = t.constraint_table(summary)
    out += [f"## {constraint.title}", "", *table_lines(constraint)]
    counts = t.counts_table(summary)
    out += ["", f"## {counts.title}", "", *table_lines(counts), "", counts.note, ""]
    out += ["## By category", ""]
    for table in t.category_tables(summary):
        out += [f"### {_title(table)}", "", *table_lines(table), ""]
    gap = t.category_gap_table(summary)
    if gap is not None:
        out += [f"### {gap.title}", "", *table_lines(gap), ""]
    out += memory_markdown(summary)
    out += agent_markdown(summary)
    out += limitations_markdown(notes.limitations if notes else ())
    return "\n".join(out)


def memory_markdown(summary: Summary) -> list[str]:
    """The "Memory arms" section, or nothing for a run without memory variants."""
    if not t.has_memory(summary):
        return []
    out = ["## Memory arms", "", t.MEMORY_NOTE, ""]
    for table in t.memory_tables(summary):
        out += [f"### {table.title}", "", *table_lines(table)]
        out += ["", table.note, ""] if table.note else [""]
    return out


def agent_markdown(summary: Summary) -> list[str]:
    """The "Agent arm" section (read versus obeyed), or nothing without agent variants."""
    if not t.has_agent(summary):
        return []
    out = ["## Agent arm: read versus obeyed", "", t.AGENT_NOTE, ""]
    for table in t.agent_tables(summary):
        out += [f"### {table.title}", "", *table_lines(table)]
        out += ["", table.note, ""] if table.note else [""]
    return out


def limitations_markdown(limitations: Iterable[tuple[str, str, str]]) -> list[str]:
    """The stated limitations of the checks, one item per constraint."""
    items = list(limitations)
    if not items:
        return []
    out = [
        "## Limitations of the checks",
        "",
        "Checks are deterministic (regex and syntax tree): a pass means that no violation was "
        "detected. These constraints say what their checks cannot judge precisely:",
        "",
    ]
    out += [
        f"- {markdown_code(sid)} / {markdown_code(cid)}: {_t(text)}" for sid, cid, text in items
    ]
    return [*out, ""]


def ivr_markdown(results: Mapping[tuple[str, str], IVRSummary]) -> str:
    """The IVR section: IVR with CI, stated pass rate, bimodality, per-constraint failures."""
    if not results:
        return ""
    table = t.ivr_table(results)
    out = [f"## {table.title}", "", *table_lines(table)]
    failures = t.ivr_constraint_table(results)
    out += ["", f"{failures.title}:", "", *table_lines(failures)]
    excluded = [
        f"{_t(model)} / {_t(arm)}: {', '.join(map(_t, problems))}"
        for model, arm, problems in t.ivr_excluded(results)
    ]
    if excluded:
        out += ["", "Excluded problems (no stated-passing solution):", ""]
        out += [f"- {line}" for line in excluded]
    out += ["", table.note, ""]
    return "\n".join(out)
