"""The memory-realism tables (README: Memory realism): stale notes, delivery, budget and turns.

Each function turns figures already computed by :mod:`cvb_engine.metrics`
(:class:`~cvb_engine.metrics.StaleStat`, :class:`~cvb_engine.metrics.DeliveryStat`,
:class:`~cvb_engine.metrics.MemoryStat`) into one table, ``(header, rows)`` of plain
text cells; the Markdown and HTML reports and the studio's Memory view draw them
(:func:`cvb_engine.report.memory_tables`). Nothing here computes a metric.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cvb_engine.kinds import SeedArm
from cvb_engine.metrics import DeliveryStat, Interval, MemoryStat, Rate, StaleStat, Summary

STALE_NOTE = (
    "stale=with: each constraint's superseded note (the decision it replaced, dated earlier) "
    "sits just before its current note; stale=only: the superseded note stands instead of it. "
    "Drop: strict accuracy without stale minus with it, 95% CI by paired bootstrap over "
    "scenarios; a positive drop means the outdated note cost accuracy."
)
DELIVERY_NOTE = (
    "A note is delivered when its whole text came before the budget's cut (and, under "
    "stale=only, the current note is never delivered). Honored when delivered measures what "
    "the model did with what it got (ignored = 1 − it); honored when not delivered, what it "
    "did without. Pairs are (record, constraint); 95% CIs by bootstrap over scenarios."
)
BUDGET_NOTE = (
    "The memory block or file cut to N bytes at a line boundary, a marker line saying what was "
    "cut. Each cell: strict accuracy [95% CI], and the share of constraint notes delivered."
)

DELIVERY_HEADER = [
    "model",
    "arm",
    "records",
    "records with a note not delivered",
    "notes delivered",
    "honored: delivered",
    "honored: not delivered",
    "ignored (delivered, not honored)",
    "strict: every note delivered",
    "strict: some note not delivered",
]


def _fmt(ci: Interval) -> str:
    from cvb_engine.report import fmt_interval

    return fmt_interval(ci)


def _rate_ci(rate: Rate, ci: Interval) -> str:
    from cvb_engine.report import fmt_rate_ci

    return fmt_rate_ci(rate, ci)


def _gap(ci: Interval) -> str:
    from cvb_engine.report import fmt_gap

    return fmt_gap(ci)


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def stale_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """Per model and base variant: strict accuracy without stale, with ``stale=with`` and
    with ``stale=only`` (each [95% CI]), and each drop [95% CI]."""
    header = ["model", "arm", "without stale", "stale=with", "drop", "stale=only", "drop"]
    cells: dict[tuple[str, str], dict[str, StaleStat]] = {}
    for stat in summary.stale:
        cells.setdefault((stat.model, stat.base), {})[stat.stale] = stat
    rows = []
    for (model, base), by in sorted(cells.items()):
        first = next(iter(by.values()))
        row = [model, base, _fmt(first.base_ci)]
        for setting in ("with", "only"):
            got = by.get(setting)
            row += [_fmt(got.strict_ci), _gap(got.drop)] if got else ["–", "–"]
        rows.append(row)
    return header, rows


def delivery_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """Per model × variant with delivery records: delivered versus not delivered."""
    return DELIVERY_HEADER, [_delivery_row(d) for d in summary.delivery]


def _delivery_row(d: DeliveryStat) -> list[str]:
    return [
        d.model,
        d.arm,
        f"{d.n}" + (f" (+{d.unavailable} unreadable)" if d.unavailable else ""),
        str(d.cut_records),
        _share(d.delivered_share),
        _rate_ci(d.delivered, d.delivered_ci),
        _rate_ci(d.not_delivered, d.not_delivered_ci),
        "–" if d.ignored is None else f"{d.ignored:.3f}",
        _rate_ci(d.strict_whole, d.strict_whole_ci),
        _rate_ci(d.strict_cut, d.strict_cut_ci),
    ]


def _incentivized(summary: Summary) -> list[MemoryStat]:
    return [m for m in summary.memory if m.kind == SeedArm.INCENTIVIZED]


def budget_groups(
    summary: Summary,
) -> dict[tuple[str, str, int, str, str], dict[int | None, MemoryStat]]:
    """The budget curves: (model, channel, load, position, stale) -> budget -> stat, for
    every group with a budgeted variant (``None``: the same variant without a budget)."""
    groups: dict[tuple[str, str, int, str, str], dict[int | None, MemoryStat]] = {}
    for m in _incentivized(summary):
        if m.channel == "history":
            continue
        key = (m.model, m.channel, m.load, m.position if m.load else "–", m.stale)
        groups.setdefault(key, {})[m.budget] = m
    return {k: v for k, v in groups.items() if any(b is not None for b in v)}


def budget_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """Strict accuracy against the delivery budget: one row per model, channel, load,
    position and stale setting, one column per budget (and one without)."""
    groups = budget_groups(summary)
    budgets = sorted({b for by in groups.values() for b in by if b is not None})
    unlimited = any(None in by for by in groups.values())
    header = [
        "model",
        "channel",
        "load",
        "position",
        "stale",
        *(f"{b:,} bytes" for b in budgets),
        *(["no budget"] if unlimited else []),
    ]
    delivered = {(d.model, d.arm): d for d in summary.delivery}
    rows = []
    for (model, channel, load, pos, stale), by in sorted(
        groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])
    ):
        rows.append(
            [
                model,
                channel,
                str(load),
                pos,
                stale or "–",
                *(_budget_cell(by.get(b), delivered) for b in budgets),
                *([_budget_cell(by.get(None), delivered)] if unlimited else []),
            ]
        )
    return header, rows


def _budget_cell(stat: MemoryStat | None, delivered: dict[tuple[str, str], DeliveryStat]) -> str:
    if stat is None:
        return "–"
    d = delivered.get((stat.model, stat.arm))
    share = f" · {_share(d.delivered_share)} delivered" if d is not None else ""
    return _fmt(stat.strict_ci) + share


def turns_groups(summary: Summary) -> dict[tuple[str, int, str, str], dict[int, MemoryStat]]:
    """The history channel's curves: (model, load, position, stale) -> turns -> stat, for
    groups of two turns values or more."""
    groups: dict[tuple[str, int, str, str], dict[int, MemoryStat]] = {}
    for m in _incentivized(summary):
        if m.channel != "history" or m.budget is not None:
            continue
        key = (m.model, m.load, m.position if m.load else "–", m.stale)
        groups.setdefault(key, {})[m.turns] = m
    return {k: v for k, v in groups.items() if len(v) > 1}


def turns_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """Strict accuracy against the unrelated exchanges between the memory and the task
    (history channel): one row per model, load, position and stale setting."""
    groups = turns_groups(summary)
    turns = sorted({t for by in groups.values() for t in by})
    header = ["model", "load", "position", "stale", *(f"{t} turns" for t in turns)]
    rows = [
        [
            model,
            str(load),
            pos,
            stale or "–",
            *(_fmt(by[t].strict_ci) if t in by else "–" for t in turns),
        ]
        for (model, load, pos, stale), by in sorted(
            groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])
        )
    ]
    return header, rows


def realism_dict(summary: Summary) -> dict[str, list[dict[str, Any]]]:
    """The memory-realism figures for the results file (``memory_realism``): the stale drops
    and the delivery split, numbers not text."""

    def interval(ci: Interval) -> dict[str, Any]:
        return {"value": ci.value, "low": ci.low, "high": ci.high, "units": ci.n_units}

    def rate(r: Rate, ci: Interval) -> dict[str, Any]:
        return {"k": r.k, "n": r.n, **interval(ci)}

    return {
        "stale": [
            {
                "model": s.model,
                "arm": s.arm,
                "base": s.base,
                "stale": s.stale,
                "strict": rate(s.strict, s.strict_ci),
                "base_strict": rate(s.base_strict, s.base_ci),
                "drop": interval(s.drop),
            }
            for s in summary.stale
        ],
        "delivery": [
            {
                "model": d.model,
                "arm": d.arm,
                "records": d.n,
                "unavailable": d.unavailable,
                "records_cut": d.cut_records,
                "honored_delivered": rate(d.delivered, d.delivered_ci),
                "honored_not_delivered": rate(d.not_delivered, d.not_delivered_ci),
                "strict_all_delivered": rate(d.strict_whole, d.strict_whole_ci),
                "strict_some_not_delivered": rate(d.strict_cut, d.strict_cut_ci),
            }
            for d in summary.delivery
        ],
    }


def has_realism(summary: Summary) -> bool:
    """Whether the run has any memory-realism figure."""
    return bool(
        summary.stale or summary.delivery or _any(budget_groups(summary), turns_groups(summary))
    )


def _any(*groups: Iterable[Any]) -> bool:
    return any(bool(list(g)) for g in groups)


Point = int | None  # a budget (None: no budget) or a number of turns


def curve_svg(curves: list[tuple[str, dict[Point, MemoryStat]]], *, title: str, x_name: str) -> str:
    """Strict accuracy against ``x_name`` as an SVG line chart, one line per curve with its
    95% CI as a band; the x values evenly spaced in order, None (no budget) last. Empty
    when fewer than two x values. Labels are text from outside: escaped."""
    from cvb_engine.report_html import FONT, GRID, INK, MUTED, _e

    xs: list[Point] = [*sorted({x for _, by in curves for x in by if x is not None})]
    if any(None in by for _, by in curves):
        xs.append(None)
    if len(xs) < 2 or not curves:
        return ""
    colors = ("#0b6e99", "#d9730d", "#6940a5", "#0f7b6c", "#c4554d", "#64473a", "#ad1a72")
    left, top, plot_w, plot_h, legend_h = 60, 40, 520, 260, 18
    width, height = left + plot_w + 30, top + plot_h + 50 + legend_h * len(curves)

    def sx(x: Point) -> float:
        return left + plot_w * xs.index(x) / (len(xs) - 1)

    def sy(v: float) -> float:
        return top + plot_h * (1 - max(0.0, min(1.0, v)))

    def name(x: Point) -> str:
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
        color = colors[i % len(colors)]
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
                f"{_e(_fmt(s.strict_ci))}</title></circle>"
            )
        ly = top + plot_h + 40 + legend_h * i
        out.append(
            f'<rect x="{left}" y="{ly - 9}" width="14" height="4" fill="{color}"/>'
            f'<text x="{left + 20}" y="{ly - 4}" font-size="12" fill="{INK}">{_e(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def budget_curves(summary: Summary) -> list[tuple[str, dict[Point, MemoryStat]]]:
    """The budget curves, labelled (model · channel · load, and the stale setting)."""
    return [
        (
            f"{model} · {channel} · load {load}" + (f" · stale={stale}" if stale else ""),
            dict(by),
        )
        for (model, channel, load, _pos, stale), by in sorted(
            budget_groups(summary).items(), key=lambda kv: tuple(str(x) for x in kv[0])
        )
        if len(by) > 1
    ]


def turns_curves(summary: Summary) -> list[tuple[str, dict[Point, MemoryStat]]]:
    """The turns curves of the history channel, labelled (model · load, stale setting)."""
    return [
        (
            f"{model} · load {load}" + (f" · stale={stale}" if stale else ""),
            {turns: stat for turns, stat in by.items()},
        )
        for (model, load, _pos, stale), by in sorted(
            turns_groups(summary).items(), key=lambda kv: tuple(str(x) for x in kv[0])
        )
    ]


def realism_svgs(summary: Summary) -> str:
    """The budget and turns curves as SVG, for the HTML report."""
    return curve_svg(
        budget_curves(summary),
        title="Strict accuracy against the delivery budget in bytes (95% CI bands)",
        x_name="budget",
    ) + curve_svg(
        turns_curves(summary),
        title="Strict accuracy against unrelated exchanges since the memory (95% CI bands)",
        x_name="turns",
    )
