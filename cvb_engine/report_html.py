"""A self-contained static HTML report: one file, inline SVG charts, no script, no network.

A stakeholder opens it in any browser without Python. The charts are drawn
here by hand as SVG (the engine imports no UI or plotting package): strict
accuracy per model and arm, the gap with its 95% CI, per-category tables, the
published reference figures (always labelled as published and drawn hatched),
and the IVR section when the results have IVR problems.

Usage::

    from cvb_engine.report_html import html_report
    text = html_report(summary, title="CVB results: r1", meta={"run": "r1"},
                       ivr_results=ivr(rows))
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Literal

from cvb_engine.kinds import SeedArm
from cvb_engine.metrics import Interval, IVRSummary, Rate, Summary
from cvb_engine.queries import PublishedCVB, Reference, load_reference
from cvb_engine.report import (
    MEMORY_NOTE,
    OUTCOME_HEADER,
    OUTCOMES_NOTE,
    ReportNotes,
    arm_title,
    error_counts,
    fmt_gap,
    fmt_interval,
    fmt_signed,
    has_layer_arms,
    memory_curves,
    memory_tables,
    outcome_rows,
)
from cvb_engine.safe_text import terminal_text

# One colour per arm, shared with the studio's plotly charts.
ARM_COLORS: dict[str, str] = {
    SeedArm.COLD.value: "#8c959f",
    SeedArm.MANDATED.value: "#0969da",
    SeedArm.INCENTIVIZED.value: "#d1570a",
}
GAP_COLOR = "#8250df"
PUBLISHED_COLOR = "#1f2328"
INK, MUTED, GRID = "#1f2328", "#57606a", "#d8dee4"
FONT = "system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1f2328;margin:0;
  background:#f6f8fa}
main{max-width:1080px;margin:0 auto;padding:28px 32px 48px;background:#fff;min-height:100vh}
h1{font-size:26px;margin:0 0 4px} h2{font-size:19px;margin:34px 0 8px;padding-bottom:6px;
  border-bottom:1px solid #d8dee4} h3{font-size:15px;margin:20px 0 6px}
p,li{line-height:1.5;font-size:14px} .muted{color:#57606a;font-size:13px}
.meta{display:flex;flex-wrap:wrap;gap:6px 18px;margin:8px 0 0;padding:0;list-style:none}
.meta li{font-size:13px;color:#57606a} .meta b{color:#1f2328;font-weight:600}
table{border-collapse:collapse;font-size:13px;margin:6px 0 4px;font-variant-numeric:tabular-nums;
  display:block;max-width:100%;overflow-x:auto}
th,td{border:1px solid #d8dee4;padding:5px 9px;text-align:right;white-space:nowrap}
th{background:#f6f8fa;font-weight:600} td:first-child,th:first-child{text-align:left}
td .n{color:#57606a;font-size:11px;display:block}
.warning{border:1px solid #d4a72c;background:#fff8c5;border-radius:6px;padding:8px 12px}
.published{border:1px dashed #8c959f;border-radius:8px;padding:4px 18px 14px;margin-top:18px;
  background:repeating-linear-gradient(135deg,#fff,#fff 12px,#fafbfc 12px,#fafbfc 24px)}
.badge{display:inline-block;font-size:11px;font-weight:600;letter-spacing:.04em;color:#fff;
  background:#57606a;border-radius:10px;padding:1px 8px;vertical-align:middle;margin-left:6px}
svg{display:block;max-width:100%;height:auto;margin:6px 0}
footer{margin-top:40px;color:#57606a;font-size:12px}
"""


def _e(text: object) -> str:
    # Every name and figure goes through here, text and attributes alike. Control
    # characters are shown too: the file may be read with `cat` or `less`.
    return html.escape(terminal_text(text), quote=True)


def _heat(value: float | None, color: str) -> str:
    """A background for a table cell: the arm colour at an opacity that grows with ``value``."""
    if value is None:
        return ""
    alpha = max(0.0, min(1.0, abs(value))) * 0.55
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f' style="background:rgba({r},{g},{b},{alpha:.2f})"'


# --------------------------------------------------------------------------- SVG charts


def _pattern_defs(arms: Sequence[str]) -> str:
    out = ["<defs>"]
    for arm in arms:
        c = ARM_COLORS.get(arm, MUTED)
        out.append(
            f'<pattern id="hatch-{_e(arm)}" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff"/>'
            f'<line x1="0" y1="0" x2="0" y2="6" stroke="{c}" stroke-width="2.4"/></pattern>'
        )
    out.append("</defs>")
    return "".join(out)


def grouped_bars_svg(
    models: Sequence[str],
    arms: Sequence[str],
    values: Mapping[tuple[str, str], float | None],
    *,
    counts: Mapping[tuple[str, str], str] | None = None,
    hatched: bool = False,
    title: str = "",
    labels: Mapping[str, str] | None = None,
) -> str:
    """Grouped vertical bars on a 0–1 axis: one group per model, one bar per arm (named in
    the legend and tooltips by ``labels``, default the arm)."""
    names = labels or {}
    bar_w, inner_gap = 30, 4
    group_w = len(arms) * bar_w + (len(arms) - 1) * inner_gap
    # each model gets a slot wide enough for its bars and for its name under them
    longest = max((len(m) for m in models), default=0)
    group_gap = max(40, min(24, longest) * 7 + 14 - group_w)
    left, right, top, plot_h, bottom = 52, 16, 58, 220, 40
    width = max(560, left + right + len(models) * (group_w + group_gap))
    height = top + plot_h + bottom
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{_e(title)}" font-family="{FONT}">',
    ]
    if hatched:
        out.append(_pattern_defs(arms))
    out.append(
        f'<text x="0" y="16" font-size="14" font-weight="600" fill="{INK}">{_e(title)}</text>'
    )
    # legend
    lx = left
    for arm in arms:
        c = ARM_COLORS.get(arm, MUTED)
        fill = f"url(#hatch-{_e(arm)})" if hatched else c
        label = f"published · {arm}" if hatched else names.get(arm, arm)
        out.append(
            f'<rect x="{lx}" y="28" width="12" height="12" fill="{fill}" stroke="{c}"/>'
            f'<text x="{lx + 17}" y="38" font-size="12" fill="{INK}">{_e(label)}</text>'
        )
        lx += 30 + 7 * len(label)
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + plot_h * (1 - tick)
        out.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>'
            f'<text x="{left - 8}" y="{y + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="{MUTED}">{tick:.2f}</text>'
        )
    for gi, model in enumerate(models):
        slot = (width - left - right) / max(len(models), 1)  # groups spread over the width
        gx = left + gi * slot + (slot - group_w) / 2
        for ai, arm in enumerate(arms):
            value = values.get((model, arm))
            x = gx + ai * (bar_w + inner_gap)
            c = ARM_COLORS.get(arm, MUTED)
            if value is None:
                out.append(
                    f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h - 4}" font-size="10" '
                    f'text-anchor="middle" fill="{MUTED}">–</text>'
                )
                continue
            h = plot_h * max(0.0, min(1.0, value))
            y = top + plot_h - h
            fill = f"url(#hatch-{_e(arm)})" if hatched else c
            tip = f"{model} · {names.get(arm, arm)}: {value:.3f}"
            if counts and (model, arm) in counts:
                tip += f" ({counts[(model, arm)]})"
            out.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w}" height="{max(h, 0.5):.1f}" '
                f'fill="{fill}" stroke="{c}" data-model="{_e(model)}" data-arm="{_e(arm)}" '
                f'data-value="{value:.3f}"><title>{_e(tip)}</title></rect>'
                f'<text x="{x + bar_w / 2:.1f}" y="{y - 4:.1f}" font-size="10" text-anchor="middle" '
                f'fill="{INK}">{value:.2f}</text>'
            )
        label = model if len(model) <= 24 else model[:23] + "…"
        out.append(
            f'<text x="{gx + group_w / 2:.1f}" y="{top + plot_h + 18}" font-size="12" '
            f'text-anchor="middle" fill="{INK}">{_e(label)}<title>{_e(model)}</title></text>'
        )
    out.append(
        f'<line x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}" '
        f'stroke="{MUTED}"/></svg>'
    )
    return "".join(out)


def gap_svg(
    models: Sequence[str],
    gaps: Mapping[str, Interval],
    *,
    published: Mapping[str, float] | None = None,
    title: str = "Gap (mandated − incentivized) with 95% CI",
) -> str:
    """One row per model on a −1…+1 axis: the gap as a bar, its 95% CI as a whisker."""
    left, right, top, row_h = 190, 70, 58, 34
    plot_w = 520
    width = left + plot_w + right
    height = top + row_h * len(models) + 40

    def sx(v: float) -> float:
        return left + plot_w * (max(-1.0, min(1.0, v)) + 1) / 2

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{_e(title)}" font-family="{FONT}">',
        f'<text x="0" y="16" font-size="14" font-weight="600" fill="{INK}">{_e(title)}</text>',
        f'<rect x="{left}" y="29" width="12" height="12" fill="{GAP_COLOR}"/>'
        f'<text x="{left + 17}" y="39" font-size="12" fill="{INK}">gap (yours), whisker = 95% CI'
        "</text>",
    ]
    if published:
        out.append(
            f'<path d="M{left + 300} 35 l6 -6 l6 6 l-6 6 z" fill="none" stroke="{PUBLISHED_COLOR}" '
            f'stroke-width="1.6"/><text x="{left + 317}" y="39" font-size="12" fill="{INK}">'
            "published gap (no CI published)</text>"
        )
    for tick in (-1.0, -0.5, 0.0, 0.5, 1.0):
        x = sx(tick)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 6}" y2="{top + row_h * len(models)}" '
            f'stroke="{MUTED if tick == 0 else GRID}"/>'
            f'<text x="{x:.1f}" y="{top + row_h * len(models) + 16}" font-size="11" '
            f'text-anchor="middle" fill="{MUTED}">{fmt_signed(tick)}</text>'
        )
    for i, model in enumerate(models):
        cy = top + row_h * i + row_h / 2
        out.append(
            f'<text x="{left - 10}" y="{cy + 4:.1f}" font-size="12" text-anchor="end" '
            f'fill="{INK}">{_e(model)}</text>'
        )
        g = gaps.get(model)
        if g is None or g.value is None:
            out.append(
                f'<text x="{sx(0) + 6:.1f}" y="{cy + 4:.1f}" font-size="11" fill="{MUTED}">'
                "no gap (an arm is missing)</text>"
            )
            continue
        x0, x1 = sorted((sx(0), sx(g.value)))
        out.append(
            f'<rect x="{x0:.1f}" y="{cy - 9:.1f}" width="{max(x1 - x0, 1):.1f}" height="18" '
            f'fill="{GAP_COLOR}" fill-opacity="0.85" data-model="{_e(model)}" '
            f'data-gap="{g.value:.3f}"><title>{_e(model)}: {_e(fmt_gap(g))}</title></rect>'
        )
        if g.low is not None and g.high is not None:
            lo, hi = sx(g.low), sx(g.high)
            out.append(
                f'<path d="M{lo:.1f} {cy:.1f} H{hi:.1f} M{lo:.1f} {cy - 6:.1f} V{cy + 6:.1f} '
                f'M{hi:.1f} {cy - 6:.1f} V{cy + 6:.1f}" stroke="{INK}" stroke-width="1.6" '
                'fill="none"/>'
            )
        out.append(
            f'<text x="{left + plot_w + 8}" y="{cy + 4:.1f}" font-size="12" fill="{INK}">'
            f"{_e(fmt_signed(g.value))}</text>"
        )
        if published and model in published:
            px = sx(published[model])
            out.append(
                f'<path d="M{px:.1f} {cy - 7:.1f} l7 7 l-7 7 l-7 -7 z" fill="#fff" '
                f'stroke="{PUBLISHED_COLOR}" stroke-width="1.6"><title>published: '
                f"{_e(fmt_signed(published[model]))}</title></path>"
            )
    out.append("</svg>")
    return "".join(out)


def interval_svg(
    rows: Sequence[tuple[str, Interval]],
    *,
    published: Sequence[tuple[str, float]] = (),
    title: str = "",
    color: str = GAP_COLOR,
) -> str:
    """One row per label on a 0–1 axis: a point with its 95% CI (the IVR chart)."""
    left, right, top, row_h, plot_w = 250, 70, 50, 30, 460
    n = len(rows) + len(published)
    width, height = left + plot_w + right, top + row_h * n + 40

    def sx(v: float) -> float:
        return left + plot_w * max(0.0, min(1.0, v))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{_e(title)}" font-family="{FONT}">',
        f'<text x="0" y="16" font-size="14" font-weight="600" fill="{INK}">{_e(title)}</text>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = sx(tick)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 6}" y2="{top + row_h * n}" '
            f'stroke="{GRID}"/><text x="{x:.1f}" y="{top + row_h * n + 16}" font-size="11" '
            f'text-anchor="middle" fill="{MUTED}">{tick:.2f}</text>'
        )
    for i, (label, iv) in enumerate(rows):
        cy = top + row_h * i + row_h / 2
        out.append(
            f'<text x="{left - 10}" y="{cy + 4:.1f}" font-size="12" text-anchor="end" '
            f'fill="{INK}">{_e(label)}</text>'
        )
        if iv.value is None:
            continue
        if iv.low is not None and iv.high is not None:
            out.append(
                f'<path d="M{sx(iv.low):.1f} {cy:.1f} H{sx(iv.high):.1f}" stroke="{INK}" '
                'stroke-width="1.6"/>'
            )
        out.append(
            f'<circle cx="{sx(iv.value):.1f}" cy="{cy:.1f}" r="6" fill="{color}"/>'
            f'<text x="{left + plot_w + 8}" y="{cy + 4:.1f}" font-size="12" fill="{INK}">'
            f"{iv.value:.3f}</text>"
        )
    for j, (label, value) in enumerate(published):
        cy = top + row_h * (len(rows) + j) + row_h / 2
        out.append(
            f'<text x="{left - 10}" y="{cy + 4:.1f}" font-size="12" text-anchor="end" '
            f'fill="{MUTED}">{_e(label)}</text>'
            f'<path d="M{sx(value):.1f} {cy - 7:.1f} l7 7 l-7 7 l-7 -7 z" fill="#fff" '
            f'stroke="{PUBLISHED_COLOR}" stroke-width="1.6"/>'
            f'<text x="{left + plot_w + 8}" y="{cy + 4:.1f}" font-size="12" fill="{MUTED}">'
            f"{value:.3f}</text>"
        )
    out.append("</svg>")
    return "".join(out)


# --------------------------------------------------------------------------- tables


def _rate_cell(rate: Rate | None, color: str) -> str:
    if rate is None or rate.value is None:
        return "<td>–</td>"
    errors = f" · {rate.errors} err" if rate.errors else ""
    if rate.memory_errors:
        errors += f" · {rate.memory_errors} memory failure{'s' * (rate.memory_errors != 1)}"
    return (
        f"<td{_heat(rate.value, color)}>{rate.value:.3f}"
        f'<span class="n">{rate.k}/{rate.n}{errors}</span></td>'
    )


def _arm_heads(summary: Summary) -> str:
    return "".join(f"<th>{_e(arm_title(summary, a))}</th>" for a in summary.arms)


def _accuracy_table(summary: Summary) -> str:
    arms = summary.arms
    has_gap = SeedArm.MANDATED in arms and SeedArm.INCENTIVIZED in arms
    head = _arm_heads(summary)
    head += "<th>gap (mandated − incentivized) [95% CI]</th>" if has_gap else ""
    rows = []
    for m in summary.models:
        cells = "".join(
            _rate_cell(summary.strict.get((m, a)), ARM_COLORS.get(a, MUTED)) for a in arms
        )
        if has_gap:
            cells += f"<td>{_e(fmt_gap(summary.gap.get(m)))}</td>"
        rows.append(f"<tr><td>{_e(m)}</td>{cells}</tr>")
    return f"<table><tr><th>model</th>{head}</tr>{''.join(rows)}</table>"


def _outcome_table(summary: Summary) -> str:
    rows = outcome_rows(summary)
    if not rows:
        return ""
    head = "".join(f"<th>{_e(h)}</th>" for h in OUTCOME_HEADER)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _plain_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


CURVE_COLORS = ("#0b6e99", "#d9730d", "#6940a5", "#0f7b6c", "#c4554d", "#64473a", "#ad1a72")


def memory_curve_svg(summary: Summary) -> str:
    """Strict accuracy against memory load, one line per curve of
    :func:`cvb_engine.report.memory_curves` (the incentivized arm per model, channel and
    position; each memory-layer series per model), each with its 95% CI as a band (loads
    are evenly spaced, in order)."""
    groups = memory_curves(summary)
    loads = sorted({n for _, by_load in groups for n in by_load})
    if len(loads) < 2 or not groups:
        return ""
    left, top, plot_w, plot_h, legend_h = 60, 40, 520, 260, 18
    width, height = left + plot_w + 30, top + plot_h + 50 + legend_h * len(groups)

    def sx(load: int) -> float:
        return left + plot_w * loads.index(load) / (len(loads) - 1)

    def sy(v: float) -> float:
        return top + plot_h * (1 - max(0.0, min(1.0, v)))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="adherence versus memory size" '
        f'font-family="{FONT}">',
        f'<text x="0" y="16" font-size="14" font-weight="600" fill="{INK}">Strict accuracy '
        "against memory load (95% CI bands)</text>",
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(tick):.1f}" y2="{sy(tick):.1f}" '
            f'stroke="{GRID}"/><text x="{left - 8}" y="{sy(tick) + 4:.1f}" font-size="11" '
            f'text-anchor="end" fill="{MUTED}">{tick:.2f}</text>'
        )
    for load in loads:
        out.append(
            f'<text x="{sx(load):.1f}" y="{top + plot_h + 18}" font-size="11" '
            f'text-anchor="middle" fill="{MUTED}">{load}</text>'
        )
    for i, (label, by_load) in enumerate(groups):
        color = CURVE_COLORS[i % len(CURVE_COLORS)]
        points = [
            (n, by_load[n]) for n in loads if n in by_load and by_load[n].strict.value is not None
        ]
        band = [
            (n, st)
            for n, st in points
            if st.strict_ci.low is not None and st.strict_ci.high is not None
        ]
        if len(band) > 1:
            upper = " ".join(f"{sx(n):.1f},{sy(st.strict_ci.high or 0):.1f}" for n, st in band)
            lower = " ".join(
                f"{sx(n):.1f},{sy(st.strict_ci.low or 0):.1f}" for n, st in reversed(band)
            )
            out.append(f'<polygon points="{upper} {lower}" fill="{color}" fill-opacity="0.15"/>')
        line = " ".join(f"{sx(n):.1f},{sy(st.strict.value or 0):.1f}" for n, st in points)
        out.append(
            f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2" '
            f'data-curve="{_e(label)}"/>'
        )
        for n, st in points:
            out.append(
                f'<circle cx="{sx(n):.1f}" cy="{sy(st.strict.value or 0):.1f}" r="3.5" '
                f'fill="{color}"><title>{_e(label)}, load {n}: {_e(fmt_interval(st.strict_ci))}'
                "</title></circle>"
            )
        ly = top + plot_h + 40 + legend_h * i
        out.append(
            f'<rect x="{left}" y="{ly - 9}" width="14" height="4" fill="{color}"/>'
            f'<text x="{left + 20}" y="{ly - 4}" font-size="12" fill="{INK}">{_e(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _memory_section(summary: Summary) -> str:
    if not summary.memory and not summary.tool_use:
        return ""
    parts = [
        "<h2>Memory arms</h2>",
        f'<p class="muted">{_e(MEMORY_NOTE)}</p>',
        memory_curve_svg(summary),
    ]
    for table in memory_tables(summary):
        parts += [f"<h3>{_e(table.title)}</h3>", _plain_table(table.header, table.rows)]
        if table.note:
            parts.append(f'<p class="muted">{_e(table.note)}</p>')
    return "".join(parts)


def _agent_section(summary: Summary) -> str:
    """Read versus obeyed, per model × agent variant (:mod:`cvb_engine.report.agent`)."""
    from cvb_engine.report.agent import AGENT_NOTE, agent_tables

    tables = agent_tables(summary)
    if not tables:
        return ""
    parts = ["<h2>Agent arm: read versus obeyed</h2>", f'<p class="muted">{_e(AGENT_NOTE)}</p>']
    for table in tables:
        parts += [f"<h3>{_e(table.title)}</h3>", _plain_table(table.header, table.rows)]
        if table.note:
            parts.append(f'<p class="muted">{_e(table.note)}</p>')
    return "".join(parts)


def _constraint_table(summary: Summary) -> str:
    arms = summary.arms
    head = _arm_heads(summary)
    rows = [
        f"<tr><td>{_e(m)}</td>"
        + "".join(
            _rate_cell(summary.constraint.get((m, a)), ARM_COLORS.get(a, MUTED)) for a in arms
        )
        + "</tr>"
        for m in summary.models
    ]
    return f"<table><tr><th>model</th>{head}</tr>{''.join(rows)}</table>"


def _category_tables(summary: Summary) -> str:
    cats = summary.categories
    head = "".join(f"<th>{_e(c)}</th>" for c in cats)
    out = []
    for arm in summary.arms:
        color = ARM_COLORS.get(arm, MUTED)
        rows = [
            f"<tr><td>{_e(m)}</td>"
            + "".join(_rate_cell(summary.by_category.get((m, arm, c)), color) for c in cats)
            + "</tr>"
            for m in summary.models
        ]
        out.append(
            f"<h3>{_e(arm_title(summary, arm))}</h3>"
            f"<table><tr><th>model</th>{head}</tr>{''.join(rows)}</table>"
        )
    if SeedArm.MANDATED in summary.arms and SeedArm.INCENTIVIZED in summary.arms:
        rows = []
        for m in summary.models:
            cells = []
            for c in cats:
                g = summary.category_gap.get((m, c))
                v = g.value if g is not None else None
                ci = (
                    f'<span class="n">[{_e(fmt_signed(g.low))}, {_e(fmt_signed(g.high))}]</span>'
                    if g is not None and g.low is not None and g.high is not None
                    else ""
                )
                cells.append(f"<td{_heat(v, GAP_COLOR)}>{_e(fmt_signed(v))}{ci}</td>")
            rows.append(f"<tr><td>{_e(m)}</td>{''.join(cells)}</tr>")
        out.append(
            "<h3>gap (mandated − incentivized) [95% CI]</h3>"
            f"<table><tr><th>model</th>{head}</tr>{''.join(rows)}</table>"
        )
    return "".join(out)


def _published_section(published: PublishedCVB, summary: Summary) -> str:
    models = published.models
    arms = [a.value for a in SeedArm]
    values = {(m, a): published.strict[m].get(a) for m in models for a in arms}
    chart = grouped_bars_svg(
        models, arms, values, hatched=True, title=f"{published.label} · strict accuracy"
    )
    rows = []
    for m in models:
        cells = "".join(
            f"<td>{published.strict[m][a]:.3f}</td>" if a in published.strict[m] else "<td>–</td>"
            for a in arms
        )
        yours = ""
        if m in summary.models:
            g = summary.gap.get(m)
            yours = f" (yours: {_e(fmt_gap(g))})"
        rows.append(
            f"<tr><td>{_e(m)}</td>{cells}<td>{_e(fmt_signed(published.gap.get(m)))}{yours}</td></tr>"
        )
    protocol = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in published.protocol.items())
    overlap = [m for m in models if m in summary.models]
    note = (
        f"Models in both: {', '.join(overlap)}."
        if overlap
        else "None of these models is in your results: compare shapes, not bars."
    )
    return (
        '<section class="published"><h2>Published reference figures <span class="badge">'
        f'PUBLISHED</span></h2><p class="muted">{_e(published.label)} · {_e(published.dates)}. '
        f"Source: {_e(published.source)}. Protocol: {_e(protocol)}. These figures were not "
        f"produced by this run. {_e(note)}</p>{chart}"
        "<table><tr><th>model (published)</th><th>cold</th><th>mandated</th><th>incentivized</th>"
        f"<th>gap</th></tr>{''.join(rows)}</table></section>"
    )


def _ivr_section(results: Mapping[tuple[str, str], IVRSummary], reference: Reference | None) -> str:
    rows = []
    for r in results.values():
        stated = (
            f"{r.stated_pass_rate:.1%} ({r.n_stated_passed}/{r.n_solutions})"
            if r.stated_pass_rate is not None
            else "–"
        )
        iv = r.ivr
        ci = f" [{iv.low:.3f}, {iv.high:.3f}]" if iv.low is not None and iv.high is not None else ""
        value = f"{iv.value:.3f}{ci}" if iv.value is not None else "–"
        extreme = (
            f"{r.extreme_share:.1%} ({r.n_extreme}/{r.n_qualifying})"
            if r.extreme_share is not None
            else "–"
        )
        rows.append(
            f"<tr><td>{_e(r.model)}</td><td>{_e(r.arm)}</td><td>{stated}</td><td>{value}</td>"
            f"<td>{r.n_qualifying} / {len(r.excluded)}</td><td>{extreme}</td></tr>"
        )
    published = [(f"published · {p.model}", p.ivr) for p in reference.ivr] if reference else []
    chart = interval_svg(
        [(f"{r.model} · {r.arm}", r.ivr) for r in results.values()],
        published=published,
        title="IVR with 95% CI (bootstrap over problems)",
    )
    pub = ""
    if reference is not None and reference.ivr:
        prow = "".join(
            f"<tr><td>{_e(p.model)}</td><td>{p.stated_pass_rate:.1%}</td><td>{p.ivr:.1%}</td></tr>"
            for p in reference.ivr
        )
        protocol = ", ".join(
            f"{k.replace('_', ' ')}: {v}" for k, v in reference.ivr_protocol.items()
        )
        pub = (
            '<div class="published"><h3>Published IVR figures <span class="badge">PUBLISHED'
            f'</span></h3><p class="muted">{_e(reference.ivr_label)}. Source: '
            f"{_e(reference.ivr_source)}. Protocol: {_e(protocol)}.</p>"
            "<table><tr><th>model (published)</th><th>stated-test pass rate</th><th>IVR</th></tr>"
            f"{prow}</table></div>"
        )
    return (
        '<h2>Intent Violation Rate (IVR)</h2><p class="muted">Of the solutions that pass the '
        "stated tests, the share that fails at least one hidden constraint test; mean of the "
        "per-problem IVR over problems with at least one stated-passing solution.</p>"
        f"{chart}<table><tr><th>model</th><th>arm</th><th>stated-test pass rate</th>"
        "<th>IVR [95% CI]</th><th>problems (qualifying / excluded)</th><th>at IVR 0 or 1</th>"
        f"</tr>{''.join(rows)}</table>{pub}"
    )


# --------------------------------------------------------------------------- the report


def html_report(
    summary: Summary,
    *,
    title: str = "CVB results",
    meta: Mapping[str, object] | None = None,
    ivr_results: Mapping[tuple[str, str], IVRSummary] | None = None,
    reference: Reference | Literal["shipped"] | None = "shipped",
    generated: datetime | None = None,
    notes: ReportNotes | None = None,
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
    """
    ref = load_reference() if reference == "shipped" else reference
    assert not isinstance(ref, str)
    stamp = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    arms = summary.arms
    scored = sum(r.n for r in summary.strict.values())
    errors, memory_errors = error_counts(summary)
    layered = has_layer_arms(summary)
    facts = [*((str(k), str(v)) for k, v in (meta or {}).items())]
    facts.append(("scored records", f"{scored:,}"))
    if layered:
        facts += [("API error records", f"{errors:,}"), ("memory failures", f"{memory_errors:,}")]
    else:
        facts.append(("error records", f"{errors:,}"))
    meta_html = "".join(f"<li>{_e(k)}: <b>{_e(v)}</b></li>" for k, v in facts)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>",
        f'<h1>{_e(title)}</h1><ul class="meta">{meta_html}</ul>',
    ]
    older = notes.older_rules_text() if notes else None
    if older:
        parts.append(f'<p class="warning"><b>Judged by older rules.</b> {_e(older)}</p>')
    if not summary.models:
        parts.append("<p>No scored records.</p>")
    else:
        values = {k: r.value for k, r in summary.strict.items()}
        counts = {
            k: f"{r.k}/{r.n}, {r.errors} errors"
            + (f", {r.memory_errors} memory failures" if r.memory_errors else "")
            for k, r in summary.strict.items()
        }
        errors_text = (
            "Error records are counted apart and excluded from every denominator: API failures, "
            "and memory failures (a memory layer failed; neither an API failure nor a "
            "violation)."
            if layered
            else "Error records (API failures) are counted apart and excluded from every "
            "denominator."
        )
        parts += [
            "<h2>Strict accuracy per model and arm</h2>",
            '<p class="muted">Strict accuracy: share of scored records with every constraint '
            f"honored. {errors_text} Small grey numbers: strictly accurate / scored.</p>",
            grouped_bars_svg(
                summary.models,
                arms,
                values,
                counts=counts,
                title="Your results",
                labels={a: arm_title(summary, a) for a in arms},
            ),
            _accuracy_table(summary),
        ]
        if SeedArm.MANDATED in arms and SeedArm.INCENTIVIZED in arms:
            parts += [
                "<h2>Gap: mandated − incentivized</h2>",
                '<p class="muted">How much adherence is lost when the constraints arrive as '
                "project memory instead of orders. 95% CI: paired bootstrap over scenarios, "
                "10,000 resamples, fixed seed.</p>",
                gap_svg(
                    summary.models,
                    summary.gap,
                    published={m: v for m, v in ref.cvb.gap.items() if m in summary.models}
                    if ref
                    else None,
                ),
            ]
        outcome_table = _outcome_table(summary)
        if outcome_table:
            parts += [
                "<h2>Answer outcomes</h2>",
                f'<p class="muted">{_e(OUTCOMES_NOTE)}</p>',
                outcome_table,
            ]
        parts += [
            "<h2>Per-constraint accuracy</h2>",
            '<p class="muted">Honored (record, constraint) pairs / all pairs.</p>',
            _constraint_table(summary),
            "<h2>By category</h2>",
            _category_tables(summary),
        ]
    parts.append(_memory_section(summary))
    parts.append(_agent_section(summary))
    if ivr_results:
        parts.append(_ivr_section(ivr_results, ref))
    if ref is not None:
        parts.append(_published_section(ref.cvb, summary))
    if notes and notes.limitations:
        items = "".join(
            f"<li><code>{_e(sid)}</code> / <code>{_e(cid)}</code>: {_e(text)}</li>"
            for sid, cid, text in notes.limitations
        )
        parts.append(
            '<h2>Limitations of the checks</h2><p class="muted">These constraints say what '
            f"their checks cannot judge precisely.</p><ul>{items}</ul>"
        )
    parts += [
        f"<footer>Generated by CVB Studio on {stamp}. Checks are deterministic (no LLM judge): "
        "a pass means that no violation was detected. “–” marks a cell without scored "
        "records.</footer>",
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"
