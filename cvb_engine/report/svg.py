"""The HTML report's charts as inline SVG: the geometry stays in Python (no plotting
package in the engine); every name and label inside goes through :func:`escape`.

Strict accuracy per model and arm, the gap with its 95% CI, an interval chart (IVR) and
the adherence-versus-memory-size curves; the published figures drawn hatched.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from cvb_engine.kinds import SeedArm
from cvb_engine.metrics import Interval, Summary
from cvb_engine.report.fmt import fmt_gap, fmt_interval, fmt_signed
from cvb_engine.report.memory_realism import CurvePoint, budget_curves, turns_curves
from cvb_engine.report.tables import memory_curves
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


def escape(text: object) -> str:
    # Every name and figure goes through here, text and attributes alike. Control
    # characters are shown too: the file may be read with `cat` or `less`.
    return html.escape(terminal_text(text), quote=True)


_e = escape


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


CURVE_COLORS = ("#0b6e99", "#d9730d", "#6940a5", "#0f7b6c", "#c4554d", "#64473a", "#ad1a72")


#: The most curves one chart draws (each has its line in the legend).
MAX_CURVES = 40


def memory_curve_svg(summary: Summary) -> str:
    """Strict accuracy against memory load, one line per curve of
    :func:`cvb_engine.report.memory_curves` (the incentivized arm per model, channel and
    position; each memory-layer series per model), each with its 95% CI as a band (loads
    are evenly spaced, in order)."""
    groups = memory_curves(summary)[:MAX_CURVES]
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


def curve_svg(
    curves: Sequence[tuple[str, Mapping[int | None, CurvePoint]]], *, title: str, x_name: str
) -> str:
    """Strict accuracy against ``x_name`` (a delivery budget, a number of turns) as a line
    chart, one line per curve with its 95% CI as a band; the x values evenly spaced in
    order, None (no budget) last. Empty when there are fewer than two x values."""
    xs: list[int | None] = [*sorted({x for _, by in curves for x in by if x is not None})]
    if any(None in by for _, by in curves):
        xs.append(None)
    if len(xs) < 2 or not curves:
        return ""
    left, top, plot_w, plot_h, legend_h = 60, 40, 520, 260, 18
    width, height = left + plot_w + 30, top + plot_h + 50 + legend_h * len(curves)

    def sx(x: int | None) -> float:
        return left + plot_w * xs.index(x) / (len(xs) - 1)

    def sy(v: float) -> float:
        return top + plot_h * (1 - max(0.0, min(1.0, v)))

    def name(x: int | None) -> str:
        return "none" if x is None else f"{x:,}"

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{_e(title)}" font-family="{FONT}">',
        f'<text x="0" y="16" font-size="14" font-weight="600" fill="{INK}">{_e(title)}</text>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(tick):.1f}" y2="{sy(tick):.1f}" '
            f'stroke="{GRID}"/><text x="{left - 8}" y="{sy(tick) + 4:.1f}" font-size="11" '
            f'text-anchor="end" fill="{MUTED}">{tick:.2f}</text>'
        )
    for x in xs:
        out.append(
            f'<text x="{sx(x):.1f}" y="{top + plot_h + 18}" font-size="11" '
            f'text-anchor="middle" fill="{MUTED}">{_e(name(x))}</text>'
        )
    for i, (label, by) in enumerate(curves):
        color = CURVE_COLORS[i % len(CURVE_COLORS)]
        points = [(x, by[x]) for x in xs if x in by and by[x].strict.value is not None]
        band = [(x, s) for x, s in points if s.strict_ci.low is not None]
        if len(band) > 1:
            upper = " ".join(f"{sx(x):.1f},{sy(s.strict_ci.high or 0):.1f}" for x, s in band)
            lower = " ".join(
                f"{sx(x):.1f},{sy(s.strict_ci.low or 0):.1f}" for x, s in reversed(band)
            )
            out.append(f'<polygon points="{upper} {lower}" fill="{color}" fill-opacity="0.15"/>')
        line = " ".join(f"{sx(x):.1f},{sy(s.strict.value or 0):.1f}" for x, s in points)
        out.append(
            f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2" '
            f'data-curve="{_e(label)}"/>'
        )
        for x, s in points:
            out.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(s.strict.value or 0):.1f}" r="3.5" '
                f'fill="{color}"><title>{_e(label)}, {x_name} {_e(name(x))}: '
                f"{_e(fmt_interval(s.strict_ci))}</title></circle>"
            )
        ly = top + plot_h + 40 + legend_h * i
        out.append(
            f'<rect x="{left}" y="{ly - 9}" width="14" height="4" fill="{color}"/>'
            f'<text x="{left + 20}" y="{ly - 4}" font-size="12" fill="{INK}">{_e(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def realism_svg(summary: Summary) -> str:
    """The memory-realism curves (README: Memory realism): strict accuracy against the
    delivery budget and against the unrelated exchanges since the memory."""
    return curve_svg(
        budget_curves(summary),
        title="Strict accuracy against the delivery budget in bytes (95% CI bands)",
        x_name="budget",
    ) + curve_svg(
        turns_curves(summary),
        title="Strict accuracy against unrelated exchanges since the memory (95% CI bands)",
        x_name="turns",
    )
