"""Plotly figures for the Results page (presentation only: every number comes from the engine).

Arm colours are the engine's (:data:`cvb_engine.report_html.ARM_COLORS`), so the
page and the static HTML report draw the same arm in the same colour.
Published reference figures are always drawn hatched or hollow and named
"published" in the legend and the hover text, never as one of the user's bars.

Plotly reads a subset of HTML (``<b>``, ``<br>``, ``<a href>``) in every label,
tick, legend entry, title and hover text, and model names, arms, categories and
run ids come from stored runs: each goes through :func:`_t` (``chart_text``)
before it reaches a figure. Lookups use the raw value; only what is drawn is
escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from cvb_engine import (
    ARM_COLORS,
    GAP_COLOR,
    PUBLISHED_COLOR,
    Comparison,
    CurvePoint,
    Interval,
    IVRSummary,
    PublishedCVB,
    PublishedIVR,
    Rate,
    Summary,
)
from studio.components.text import chart_text as _t

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
HEIGHT = 380


def _arm_color(arm: str) -> str:
    return ARM_COLORS.get(arm, "#57606a")


def _layout(fig: go.Figure, *, title: str, y_title: str, height: int = HEIGHT) -> go.Figure:
    fig.update_layout(
        template="plotly_white",
        title={"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}},
        font={"family": FONT, "size": 12, "color": "#1f2328"},
        height=height,
        margin={"l": 56, "r": 16, "t": 64, "b": 56},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
        bargap=0.25,
        bargroupgap=0.06,
        yaxis_title=y_title,
        hoverlabel={"font": {"family": FONT}},
    )
    fig.update_yaxes(gridcolor="#eaeef2", zerolinecolor="#8c959f")
    return fig


#: The most models (rows, groups) and arms or categories (columns) a chart draws: a store
#: may name thousands; the tables beside the charts say how many more there are.
CHART_ROWS = 200
CHART_COLUMNS = 100


def _picked(every: Sequence[str], wanted: Sequence[str] | None, limit: int) -> list[str]:
    """``every`` in its order, kept to ``wanted`` when given, at most ``limit``."""
    keep = set(wanted or ())
    return [x for x in every if not keep or x in keep][:limit]


def _rate_text(rate: Rate | None) -> str:
    return "–" if rate is None or rate.value is None else f"{rate.value:.3f}"


def arm_accuracy(
    summary: Summary,
    *,
    models: Sequence[str] | None = None,
    arms: Sequence[str] | None = None,
    published: PublishedCVB | None = None,
    title: str = "Strict accuracy per model and arm",
) -> go.Figure:
    """Grouped bars: strict accuracy per model × arm, counts in the hover.

    Where a model of the run is also in the published set, the published value
    is drawn over its bar as a hollow diamond named "published".
    """
    models = _picked(summary.models, models, CHART_ROWS)
    arms = _picked(summary.arms, arms, CHART_COLUMNS)
    fig = go.Figure()
    from cvb_engine import arm_title

    for arm in arms:
        rates = [summary.strict.get((m, arm)) for m in models]
        fig.add_bar(
            name=_t(arm_title(summary, arm)),
            x=[_t(m) for m in models],
            y=[r.value if r is not None else None for r in rates],
            marker_color=_arm_color(arm),
            text=[_rate_text(r) for r in rates],
            textposition="outside",
            cliponaxis=False,
            customdata=[[r.k, r.n, r.errors] if r else [0, 0, 0] for r in rates],
            hovertemplate=(
                f"<b>%{{x}}</b> · {_t(arm)}<br>strict accuracy %{{y:.3f}}"
                "<br>%{customdata[0]} of %{customdata[1]} scored · %{customdata[2]} errors"
                "<extra></extra>"
            ),
        )
    if published is not None:
        for arm in arms:
            xs = [m for m in models if arm in published.strict.get(m, {})]
            if not xs:
                continue
            fig.add_scatter(
                name=f"published · {_t(arm)}",
                x=[_t(m) for m in xs],
                y=[published.strict[m][arm] for m in xs],
                mode="markers",
                offsetgroup=arm,
                marker={
                    "symbol": "diamond-open",
                    "size": 12,
                    "color": PUBLISHED_COLOR,
                    "line": {"width": 2},
                },
                hovertemplate=(
                    f"<b>%{{x}}</b> · {_t(arm)}<br>published %{{y:.3f}}<br>{_t(published.label)}"
                    "<extra></extra>"
                ),
            )
        fig.update_layout(scattermode="group")
    _layout(fig, title=title, y_title="strict accuracy")
    fig.update_yaxes(range=[0, 1.12], tickformat=".1f")
    return fig


def published_accuracy(published: PublishedCVB) -> go.Figure:
    """The published strict accuracy per model and arm, hatched so it never reads as yours."""
    models = published.models
    fig = go.Figure()
    for arm in ("cold", "mandated", "incentivized"):
        values = [published.strict[m].get(arm) for m in models]
        fig.add_bar(
            name=f"published · {arm}",
            x=[_t(m) for m in models],
            y=values,
            marker={
                "color": "#ffffff",
                "line": {"color": _arm_color(arm), "width": 1.5},
                "pattern": {"shape": "/", "fgcolor": _arm_color(arm), "size": 6, "solidity": 0.35},
            },
            text=[f"{v:.3f}" if v is not None else "–" for v in values],
            textposition="outside",
            cliponaxis=False,
            hovertemplate=(
                f"<b>%{{x}}</b> · {arm}<br>published %{{y:.3f}}<extra>{_t(published.label)}</extra>"
            ),
        )
    labels = [wrapped_label(_t(m)) for m in models]
    lines = max((label.count("<br>") + 1 for label in labels), default=1)
    _layout(
        fig,
        title=f"{_t(published.label)}, {_t(published.dates)}",
        y_title="strict accuracy",
        height=HEIGHT + 14 * lines,
    )
    fig.update_yaxes(range=[0, 1.12], tickformat=".1f")
    # Model ids side by side in half the page overlapped: each is broken into short lines.
    fig.update_xaxes(
        tickangle=0,
        tickfont={"size": 10},
        tickmode="array",
        tickvals=[_t(m) for m in models],
        ticktext=labels,
        automargin=True,
    )
    fig.update_layout(
        legend={
            "orientation": "h",
            "y": -0.1 - 0.06 * lines,
            "yanchor": "top",
            "x": 0.5,
            "xanchor": "center",
        },
        margin={"b": 60 + 14 * lines},
    )
    return fig


def wrapped_label(label: str, width: int = 12) -> str:
    """``llama-3.3-70b-versatile`` as ``llama-3.3-<br>70b-<br>versatile``: broken after
    ``/``, ``-`` or ``_`` into lines of about ``width`` characters (a tick label's
    ``<br>`` is a line break; the text itself has been escaped by ``chart_text``)."""
    import re

    pieces = re.findall(r"[^/\-_]+[/\-_]*|[/\-_]+", label)
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1]) + len(piece) <= width:
            lines[-1] += piece
        else:
            lines.append(piece)
    return "<br>".join(lines) or label


def gap_with_ci(
    summary: Summary,
    *,
    models: Sequence[str] | None = None,
    published: PublishedCVB | None = None,
    title: str = "Gap (mandated − incentivized) with 95% CI",
) -> go.Figure:
    """One bar per model: the gap, with its paired-bootstrap 95% CI as error bars."""
    models = _picked(summary.models, models, CHART_ROWS)
    gaps = [summary.gap.get(m) for m in models]
    values = [g.value if g is not None else None for g in gaps]
    plus = [
        (g.high - g.value) if g and g.value is not None and g.high is not None else 0 for g in gaps
    ]
    minus = [
        (g.value - g.low) if g and g.value is not None and g.low is not None else 0 for g in gaps
    ]
    fig = go.Figure()
    shown = [_t(m) for m in models]
    fig.add_bar(
        name="gap (yours)",
        x=shown,
        y=values,
        marker_color=GAP_COLOR,
        error_y={
            "type": "data",
            "array": plus,
            "arrayminus": minus,
            "visible": True,
            "color": "#1f2328",
            "thickness": 1.5,
            "width": 6,
        },
        customdata=[
            [
                g.low if g and g.low is not None else float("nan"),
                g.high if g and g.high is not None else float("nan"),
                g.n_units if g else 0,
            ]
            for g in gaps
        ],
        hovertemplate=(
            "<b>%{x}</b><br>gap %{y:+.3f}<br>95% CI [%{customdata[0]:+.3f}, %{customdata[1]:+.3f}]"
            "<br>%{customdata[2]} scenarios resampled<extra></extra>"
        ),
    )
    fig.add_scatter(
        name="gap point",
        x=shown,
        y=values,
        mode="markers",
        marker={"symbol": "line-ew", "size": 22, "line": {"width": 3, "color": "#1f2328"}},
        hoverinfo="skip",
        showlegend=False,
    )
    if published is not None:
        xs = [m for m in models if m in published.gap]
        if xs:
            fig.add_scatter(
                name="published gap",
                x=[_t(m) for m in xs],
                y=[published.gap[m] for m in xs],
                mode="markers",
                marker={"symbol": "diamond-open", "size": 12, "color": PUBLISHED_COLOR},
                hovertemplate=(
                    f"<b>%{{x}}</b><br>published gap %{{y:+.3f}}<br>{_t(published.label)}"
                    "<extra></extra>"
                ),
            )
    for model, v in zip(shown, values, strict=True):
        # beside the bar, clear of the CI whisker drawn at its centre
        fig.add_annotation(
            x=model,
            y=v if v is not None else 0,
            text="–" if v is None else ("0.000" if abs(v) < 5e-4 else f"{v:+.3f}"),
            showarrow=False,
            xanchor="left",
            xshift=14,
            yshift=9,
            font={"size": 12, "color": "#1f2328"},
        )
    _layout(fig, title=title, y_title="mandated − incentivized")
    fig.add_hline(y=0, line_color="#57606a", line_width=1)
    fig.update_yaxes(range=[-1.05, 1.05], tickformat="+.1f")
    fig.update_layout(showlegend=published is not None and any(m in published.gap for m in models))
    return fig


def constraint_accuracy(
    summary: Summary,
    *,
    models: Sequence[str] | None = None,
    arms: Sequence[str] | None = None,
) -> go.Figure:
    """Grouped bars: per-constraint accuracy (honored pairs / all pairs) per model × arm."""
    models = _picked(summary.models, models, CHART_ROWS)
    arms = _picked(summary.arms, arms, CHART_COLUMNS)
    fig = go.Figure()
    for arm in arms:
        rates = [summary.constraint.get((m, arm)) for m in models]
        fig.add_bar(
            name=_t(arm),
            x=[_t(m) for m in models],
            y=[r.value if r is not None else None for r in rates],
            marker_color=_arm_color(arm),
            text=[_rate_text(r) for r in rates],
            textposition="outside",
            cliponaxis=False,
            customdata=[[r.k, r.n] if r else [0, 0] for r in rates],
            hovertemplate=(
                f"<b>%{{x}}</b> · {_t(arm)}<br>per-constraint accuracy %{{y:.3f}}"
                "<br>%{customdata[0]} of %{customdata[1]} (record, constraint) pairs honored"
                "<extra></extra>"
            ),
        )
    _layout(fig, title="Per-constraint accuracy per model and arm", y_title="honored share")
    fig.update_yaxes(range=[0, 1.12], tickformat=".1f")
    return fig


def category_heatmap(
    summary: Summary,
    which: str,
    *,
    models: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
) -> go.Figure:
    """Model × category: strict accuracy of one arm, or the gap when ``which == "gap"``."""
    models = _picked(summary.models, models, CHART_ROWS)
    cats = _picked(summary.categories, categories, CHART_COLUMNS)
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    hover: list[list[str]] = []
    for m in models:
        row_z: list[float | None] = []
        row_t: list[str] = []
        row_h: list[str] = []
        for c in cats:
            if which == "gap":
                g = summary.category_gap.get((m, c))
                v = g.value if g is not None else None
                row_z.append(v)
                row_t.append("–" if v is None else f"{v:+.2f}")
                row_h.append(
                    f"gap {v:+.3f}, 95% CI [{g.low:+.3f}, {g.high:+.3f}], {g.n_units} scenarios"
                    if g is not None and v is not None and g.low is not None and g.high is not None
                    else "no gap"
                )
            else:
                r = summary.by_category.get((m, which, c))
                v = r.value if r is not None else None
                row_z.append(v)
                row_t.append("–" if v is None or r is None else f"{v:.2f}<br>{r.k}/{r.n}")
                row_h.append(
                    "no scored record"
                    if v is None or r is None
                    else f"strict accuracy {v:.3f}: {r.k} of {r.n} scored, {r.errors} errors"
                )
        z.append(row_z)
        text.append(row_t)
        hover.append(row_h)
    if which == "gap":
        scale: list[list[float | str]] = [[0, "#0969da"], [0.5, "#f6f8fa"], [1, GAP_COLOR]]
        zmin, zmax, title, bar = -1.0, 1.0, "Gap (mandated − incentivized) by category", "gap"
    else:
        scale = [[0, "#ffffff"], [1, _arm_color(which)]]
        zmin, zmax, title, bar = 0.0, 1.0, f"Strict accuracy by category · {_t(which)}", "accuracy"
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[_t(c) for c in cats],
            y=[_t(m) for m in models],
            text=text,
            customdata=hover,
            texttemplate="%{text}",
            textfont={"size": 11},
            zmin=zmin,
            zmax=zmax,
            colorscale=scale,
            colorbar={"title": {"text": bar}, "thickness": 12},
            xgap=2,
            ygap=2,
            hovertemplate="<b>%{y}</b><br>%{customdata}<extra></extra>",
        )
    )
    height = max(200, 110 + 46 * len(models))
    _layout(fig, title=title, y_title="", height=height)
    fig.update_xaxes(side="bottom", tickangle=0, showgrid=False)
    fig.update_yaxes(autorange="reversed", showgrid=False)
    return fig


def comparison_deltas(comparison: Comparison) -> go.Figure:
    """Per model: B − A strict accuracy per arm, and B − A gap."""
    fig = go.Figure()
    models = comparison.models
    for arm in comparison.arms:
        deltas = [d for d in comparison.arm_deltas if d.arm == arm]
        fig.add_bar(
            name=f"Δ {_t(arm)}",
            x=[_t(d.model) for d in deltas],
            y=[d.delta for d in deltas],
            marker_color=_arm_color(arm),
            text=[f"{d.delta:+.3f}" if d.delta is not None else "–" for d in deltas],
            textposition="outside",
            cliponaxis=False,
            hovertemplate=f"<b>%{{x}}</b> · {_t(arm)}<br>B − A %{{y:+.3f}}<extra></extra>",
        )
    fig.add_bar(
        name="Δ gap",
        x=[_t(g.model) for g in comparison.gap_deltas],
        y=[g.delta for g in comparison.gap_deltas],
        marker={"color": GAP_COLOR, "pattern": {"shape": "."}},
        text=[f"{g.delta:+.3f}" if g.delta is not None else "–" for g in comparison.gap_deltas],
        textposition="outside",
        cliponaxis=False,
        hovertemplate="<b>%{x}</b><br>gap B − A %{y:+.3f}<extra></extra>",
    )
    _layout(
        fig,
        title=f"{_t(comparison.run_b)} − {_t(comparison.run_a)}, per model",
        y_title="difference (B − A)",
    )
    fig.add_hline(y=0, line_color="#57606a", line_width=1)
    fig.update_yaxes(range=[-1.1, 1.1], tickformat="+.1f")
    fig.update_xaxes(categoryorder="array", categoryarray=[_t(m) for m in models])
    return fig


def ivr_chart(
    results: Mapping[tuple[str, str], IVRSummary],
    *,
    published: Sequence[PublishedIVR] = (),
    published_label: str = "published",
) -> go.Figure:
    """IVR per model × arm with its 95% CI; published paper figures as hollow diamonds."""
    fig = go.Figure()
    arms = sorted({arm for _, arm in results}, key=lambda a: (a not in ARM_COLORS, a))
    for arm in arms:
        rows = [r for (m, a), r in results.items() if a == arm]
        fig.add_bar(
            name=f"IVR · {_t(arm)}",
            x=[_t(r.model) for r in rows],
            y=[r.ivr.value for r in rows],
            marker_color=_arm_color(arm),
            error_y={
                "type": "data",
                "array": [
                    (r.ivr.high - r.ivr.value)
                    if r.ivr.value is not None and r.ivr.high is not None
                    else 0
                    for r in rows
                ],
                "arrayminus": [
                    (r.ivr.value - r.ivr.low)
                    if r.ivr.value is not None and r.ivr.low is not None
                    else 0
                    for r in rows
                ],
                "color": "#1f2328",
            },
            customdata=[[r.stated_pass_rate or 0, r.n_qualifying, len(r.excluded)] for r in rows],
            hovertemplate=(
                f"<b>%{{x}}</b> · {_t(arm)}<br>IVR %{{y:.3f}}"
                "<br>stated-test pass %{customdata[0]:.1%}"
                "<br>%{customdata[1]} qualifying problems, %{customdata[2]} excluded<extra></extra>"
            ),
        )
    if published:
        fig.add_scatter(
            name=_t(published_label),
            x=[_t(p.model) for p in published],
            y=[p.ivr for p in published],
            mode="markers+text",
            text=[f"{p.ivr:.3f}" for p in published],
            textposition="top center",
            marker={"symbol": "diamond-open", "size": 13, "color": PUBLISHED_COLOR},
            hovertemplate=(
                f"<b>%{{x}}</b><br>published IVR %{{y:.3f}}<br>{_t(published_label)}<extra></extra>"
            ),
        )
    _layout(fig, title="Intent Violation Rate with 95% CI", y_title="IVR")
    fig.update_yaxes(range=[0, 1.1], tickformat=".1f")
    return fig


def memory_curve(summary: Summary) -> go.Figure:
    """Strict accuracy against memory load: one line per curve of
    :func:`cvb_engine.report.memory_curves` (the incentivized arm per model, channel and
    position; each memory-layer series per model, named with its layer), each with its 95%
    bootstrap CI as a band (README: Memory arms)."""
    from cvb_engine import memory_curves

    fig = go.Figure()
    palette = ("#0b6e99", "#d9730d", "#6940a5", "#0f7b6c", "#c4554d", "#64473a", "#ad1a72")
    curves = memory_curves(summary)
    for i, (name, by_load) in enumerate(curves):
        color = palette[i % len(palette)]
        loads = sorted(n for n in by_load if by_load[n].strict.value is not None)
        label = _t(name)
        lows = [by_load[n].strict_ci.low for n in loads]
        highs = [by_load[n].strict_ci.high for n in loads]
        if all(v is not None for v in lows + highs):
            fig.add_trace(
                go.Scatter(
                    x=[*loads, *reversed(loads)],
                    y=[*highs, *reversed(lows)],
                    fill="toself",
                    fillcolor=color,
                    opacity=0.15,
                    line={"width": 0},
                    hoverinfo="skip",
                    showlegend=False,
                    legendgroup=label,
                )
            )
        fig.add_trace(
            go.Scatter(
                x=loads,
                y=[by_load[n].strict.value for n in loads],
                mode="lines+markers",
                name=label,
                legendgroup=label,
                line={"color": color, "width": 2},
                customdata=[
                    [f"{by_load[n].strict.k}/{by_load[n].strict.n}", lows[j], highs[j]]
                    for j, n in enumerate(loads)
                ],
                hovertemplate="load %{x}: %{y:.3f} (%{customdata[0]}), 95% CI "
                "[%{customdata[1]:.3f}, %{customdata[2]:.3f}]<extra>%{fullData.name}</extra>",
            )
        )
    # one load axis for every curve, in order (a category axis would order loads as the
    # curves first name them)
    every_load = sorted({n for _, by_load in curves for n in by_load})
    fig.update_xaxes(
        title="distractor notes in memory (load)",
        type="category",
        categoryorder="array",
        categoryarray=every_load,
    )
    fig.update_yaxes(range=[0, 1.02])
    return _layout(
        fig,
        title="Adherence versus memory size (95% CI bands)",
        y_title="strict accuracy",
        height=420,
    )


def _whiskers(cis: Sequence[Interval]) -> dict[str, object]:
    """Plotly error bars from intervals (none where an end is unknown)."""
    plus = [(c.high - c.value) if c.value is not None and c.high is not None else 0 for c in cis]
    minus = [(c.value - c.low) if c.value is not None and c.low is not None else 0 for c in cis]
    return {
        "type": "data",
        "array": plus,
        "arrayminus": minus,
        "visible": True,
        "color": "#1f2328",
        "thickness": 1.5,
        "width": 6,
    }


def stale_drop(summary: Summary) -> go.Figure:
    """The drop in strict accuracy when the superseded decisions are in the memory: one bar
    per model × variant × stale setting, strict(without) − strict(with), with its paired
    bootstrap 95% CI (README: Memory realism)."""
    fig = go.Figure()
    for setting, color in (("with", "#d9730d"), ("only", "#c4554d")):
        stats = [s for s in summary.stale if s.stale == setting]
        if not stats:
            continue
        fig.add_bar(
            name=f"stale={setting}",
            x=[_t(f"{s.model} · {s.base}") for s in stats],
            y=[s.drop.value for s in stats],
            marker_color=color,
            error_y=_whiskers([s.drop for s in stats]),
            customdata=[
                [_rate_text(s.base_strict), _rate_text(s.strict), s.drop.n_units] for s in stats
            ],
            hovertemplate=(
                "<b>%{x}</b><br>drop %{y:+.3f}<br>without stale %{customdata[0]} · with "
                "%{customdata[1]}<br>%{customdata[2]} scenarios resampled<extra></extra>"
            ),
        )
    _layout(fig, title="Outdated notes: drop in strict accuracy (95% CI)", y_title="drop")
    fig.add_hline(y=0, line_color="#57606a", line_width=1)
    fig.update_yaxes(range=[-1.05, 1.05], tickformat="+.1f")
    fig.update_layout(barmode="group")
    return fig


def delivery_split(summary: Summary) -> go.Figure:
    """Per model × variant with delivery records: the share of constraints honored when the
    note was delivered whole and when it was not, each with its 95% CI; what is missing
    from 1 when delivered is *ignored* (README: Memory realism)."""
    fig = go.Figure()
    stats = summary.delivery
    labels = [_t(f"{d.model} · {d.arm}") for d in stats]
    for name, color, pick in (
        ("delivered", "#0f7b6c", lambda d: (d.delivered, d.delivered_ci)),
        ("not delivered", "#8c959f", lambda d: (d.not_delivered, d.not_delivered_ci)),
    ):
        pairs = [pick(d) for d in stats]
        fig.add_bar(
            name=f"honored: {name}",
            x=labels,
            y=[rate.value for rate, _ in pairs],
            marker_color=color,
            error_y=_whiskers([ci for _, ci in pairs]),
            customdata=[[f"{rate.k}/{rate.n}"] for rate, _ in pairs],
            hovertemplate=f"<b>%{{x}}</b><br>{name}: honored %{{y:.3f}} (%{{customdata[0]}})"
            "<extra></extra>",
        )
    _layout(
        fig,
        title="Delivered versus not delivered: constraints honored (95% CI)",
        y_title="honored",
    )
    fig.update_yaxes(range=[0, 1.05])
    fig.update_layout(barmode="group")
    return fig


def realism_curve(
    curves: Sequence[tuple[str, Mapping[int | None, CurvePoint]]], *, title: str, x_title: str
) -> go.Figure:
    """Strict accuracy against a delivery budget or a number of turns
    (:func:`cvb_engine.budget_curves`, :func:`cvb_engine.turns_curves`): one line per curve,
    the x values as evenly spaced categories in order ("none", no budget, last), each point
    with its 95% CI as error bars."""
    xs: list[int | None] = [*sorted({x for _, by in curves for x in by if x is not None})]
    if any(None in by for _, by in curves):
        xs.append(None)
    names = ["none" if x is None else f"{x:,}" for x in xs]
    palette = ("#0b6e99", "#d9730d", "#6940a5", "#0f7b6c", "#c4554d", "#64473a", "#ad1a72")
    fig = go.Figure()
    for i, (label, by) in enumerate(curves):
        shown = [x for x in xs if x in by and by[x].strict.value is not None]
        fig.add_scatter(
            x=[names[xs.index(x)] for x in shown],
            y=[by[x].strict.value for x in shown],
            mode="lines+markers",
            name=_t(label),
            line={"color": palette[i % len(palette)], "width": 2},
            error_y=_whiskers([by[x].strict_ci for x in shown]),
            customdata=[[f"{by[x].strict.k}/{by[x].strict.n}"] for x in shown],
            hovertemplate=f"<b>{_t(label)}</b><br>{x_title} %{{x}}: strict %{{y:.3f}} "
            "(%{customdata[0]})<extra></extra>",
        )
    _layout(fig, title=title, y_title="strict accuracy")
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=names, title=x_title)
    fig.update_yaxes(range=[0, 1.05])
    return fig


def delivery_outcomes(summary: Summary) -> go.Figure:
    """Where each (record, constraint) pair of a variant with delivery records went, as
    shares of its pairs: delivered and honored, delivered and **ignored**, not delivered
    but honored anyway, not delivered and violated (**lost in delivery**)."""
    fig = go.Figure()
    stats = summary.delivery
    labels = [_t(f"{d.model} · {d.arm}") for d in stats]
    parts = (
        ("delivered, honored", "#0f7b6c", lambda d: d.delivered.k),
        ("delivered, ignored", "#c4554d", lambda d: d.delivered.n - d.delivered.k),
        ("not delivered, honored anyway", "#8c959f", lambda d: d.not_delivered.k),
        ("not delivered, violated", "#d9730d", lambda d: d.not_delivered.n - d.not_delivered.k),
    )
    for name, color, count in parts:
        counts = [count(d) for d in stats]
        totals = [d.delivered.n + d.not_delivered.n for d in stats]
        fig.add_bar(
            name=name,
            x=labels,
            y=[c / t if t else None for c, t in zip(counts, totals, strict=True)],
            marker_color=color,
            customdata=[[c, t] for c, t in zip(counts, totals, strict=True)],
            hovertemplate=f"<b>%{{x}}</b><br>{name}: %{{y:.0%}} (%{{customdata[0]}} of "
            "%{customdata[1]} constraint notes)<extra></extra>",
        )
    _layout(fig, title="Delivered versus ignored: where each constraint went", y_title="share")
    fig.update_yaxes(range=[0, 1.0], tickformat=".0%")
    fig.update_layout(barmode="stack")
    return fig
