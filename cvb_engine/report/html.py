"""A self-contained static HTML report: one file, inline SVG charts, no script, no network.

A stakeholder opens it in any browser without Python. The page and its tables are the
Jinja2 templates under ``templates/`` (autoescaping on: every value is escaped, control
characters made visible); the tables are those of :mod:`cvb_engine.report.tables`, the
charts the SVG of :mod:`cvb_engine.report.svg` (geometry in Python). The published
reference figures are always labelled as published and drawn hatched.

Usage::

    from cvb_engine.report.html import html_report
    text = html_report(summary, title="CVB results: r1", meta={"run": "r1"},
                       ivr_results=ivr(rows))
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Literal

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from cvb_engine.metrics import IVRSummary, Summary
from cvb_engine.reference import Reference, load_reference
from cvb_engine.report import tables as t
from cvb_engine.report.fmt import arm_title, error_counts, has_layer_arms, resamples_text
from cvb_engine.report.notes import ReportNotes
from cvb_engine.report.svg import (
    ARM_COLORS,
    GAP_COLOR,
    MUTED,
    gap_svg,
    grouped_bars_svg,
    interval_svg,
    memory_curve_svg,
    realism_svg,
)
from cvb_engine.safe_text import terminal_text

#: A cell's tone -> its colour ("" for an arm without its own colour).
TONES: dict[str, str] = {**ARM_COLORS, t.GAP: GAP_COLOR, "": MUTED}


def _finalize(value: object) -> object:
    # Every {{ value }} passes here before autoescaping: the SVG charts are Markup and
    # stay; any other value is made visible (control characters) and escaped, quotes too,
    # the same escaping as the charts' (html.escape).
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(terminal_text("" if value is None else value), quote=True))


def _heat(value: float, color: str) -> str:
    """A cell's background: its tone's colour at an opacity that grows with ``value``."""
    alpha = max(0.0, min(1.0, abs(value))) * 0.55
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha:.2f})"


@cache
def environment() -> Environment:
    """The report's templates, read from the package (autoescaping on)."""
    env = Environment(
        loader=PackageLoader("cvb_engine.report", "templates"),
        autoescape=True,
        finalize=_finalize,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["heat"] = _heat
    return env


def _errors_text(layered: bool) -> str:
    if layered:
        return (
            "Error records are counted apart and excluded from every denominator: API failures, "
            "and memory failures (a memory layer failed; neither an API failure nor a "
            "violation)."
        )
    return "Error records (API failures) are counted apart and excluded from every denominator."


def _protocol(protocol: Mapping[str, object]) -> str:
    return ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in protocol.items())


def html_report(
    summary: Summary,
    *,
    title: str = "CVB results",
    meta: Mapping[str, object] | None = None,
    ivr_results: Mapping[tuple[str, str], IVRSummary] | None = None,
    reference: Reference | Literal["shipped"] | None = "shipped",
    generated: datetime | None = None,
    notes: ReportNotes | None = None,
    sections: Sequence[t.Table] = (),
) -> str:
    """The whole report as one HTML document (UTF-8 text; no script, no external resource).

    Args:
        summary: the metrics (:func:`cvb_engine.metrics.summarize`).
        title: the page title and heading.
        meta: facts listed under the title (run id, prompt version, …).
        ivr_results: :func:`cvb_engine.metrics.ivr` output; the IVR section is
            written only when it is non-empty.
        reference: the published figures to show beside yours; ``"shipped"``
            (default) reads ``data/reference/cvb-2.0-groq.json`` when present,
            ``None`` leaves the published section out.
        generated: the time stamp printed in the footer (default: now, UTC).
        notes: the scoring rules that judged the records (a banner when older
            than this cvb's) and the checks' stated limitations.
        sections: further tables, each a section after the memory arms (the run's cost,
            its flakiness: :mod:`cvb_engine.cost`, :mod:`cvb_engine.compare`).
    """
    ref = load_reference() if reference == "shipped" else reference
    assert not isinstance(ref, str)
    scored = sum(r.n for r in summary.strict.values())
    errors, memory_errors = error_counts(summary)
    layered = has_layer_arms(summary)
    facts = [(str(k), str(v)) for k, v in (meta or {}).items()]
    facts.append(("scored records", f"{scored:,}"))
    if layered:
        facts += [("API error records", f"{errors:,}"), ("memory failures", f"{memory_errors:,}")]
    else:
        facts.append(("error records", f"{errors:,}"))
    charts = dict.fromkeys(("arms", "gap", "memory", "ivr", "published"), Markup(""))
    accuracy = t.accuracy_table(summary)
    # the charts draw what the tables show (their budget: a file may name thousands)
    models = summary.models[: len(accuracy.rows)]
    arms = summary.arms[: t.MAX_COLUMNS]
    if summary.models:
        counts = {
            k: f"{r.k}/{r.n}, {r.errors} errors"
            + (f", {r.memory_errors} memory failures" if r.memory_errors else "")
            for k, r in summary.strict.items()
        }
        charts["arms"] = Markup(
            grouped_bars_svg(
                models,
                arms,
                {k: r.value for k, r in summary.strict.items()},
                counts=counts,
                title="Your results",
                labels={a: arm_title(summary, a) for a in arms},
            )
        )
        if t.has_gap(summary):
            published_gap = (
                {m: v for m, v in ref.cvb.gap.items() if m in summary.models} if ref else None
            )
            charts["gap"] = Markup(gap_svg(models, summary.gap, published=published_gap))
    if t.has_memory(summary):
        charts["memory"] = Markup(memory_curve_svg(summary) + realism_svg(summary))
    ivr_table = t.ivr_table(ivr_results) if ivr_results else None
    if ivr_results and ivr_table is not None:
        published_ivr = [(f"published · {p.model}", p.ivr) for p in ref.ivr] if ref else []
        charts["ivr"] = Markup(
            interval_svg(
                [
                    (f"{r.model} · {r.arm}", r.ivr)
                    for r in list(ivr_results.values())[: len(ivr_table.rows)]
                ],
                published=published_ivr,
                title="IVR with 95% CI (bootstrap over problems)",
            )
        )
    overlap_note = ""
    if ref is not None:
        cvb = ref.cvb
        seed_arms = ["cold", "mandated", "incentivized"]
        charts["published"] = Markup(
            grouped_bars_svg(
                cvb.models,
                seed_arms,
                {(m, a): cvb.strict[m].get(a) for m in cvb.models for a in seed_arms},
                hatched=True,
                title=f"{cvb.label} · strict accuracy",
            )
        )
        overlap = [m for m in cvb.models if m in summary.models]
        overlap_note = (
            f"Models in both: {', '.join(overlap)}."
            if overlap
            else "None of these models is in your results: compare shapes, not bars."
        )
    template = environment().get_template("report.html.j2")
    return template.render(
        title=title,
        facts=facts,
        older=notes.older_rules_text() if notes else None,
        errors_text=_errors_text(layered),
        resamples=resamples_text(summary.resamples),
        charts=charts,
        colors=TONES,
        accuracy=accuracy,
        outcomes=t.outcome_table(summary),
        constraint=t.constraint_table(summary),
        categories=t.category_tables(summary),
        category_gap=t.category_gap_table(summary),
        memory_section=t.has_memory(summary),
        memory=t.memory_tables(summary),
        memory_note=t.MEMORY_NOTE,
        agent=t.agent_tables(summary),
        agent_note=t.AGENT_NOTE,
        ivr=ivr_table,
        ivr_constraints=t.ivr_constraint_table(ivr_results) if ivr_results else None,
        reference=ref,
        published=t.published_table(ref.cvb, summary) if ref else None,
        published_ivr=t.published_ivr_table(ref) if ref is not None and ref.ivr else None,
        protocol=_protocol(ref.cvb.protocol) if ref else "",
        ivr_protocol=_protocol(ref.ivr_protocol) if ref else "",
        overlap_note=overlap_note,
        limitations=notes.limitations if notes else (),
        sections=list(sections),
        stamp=(generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
    )
