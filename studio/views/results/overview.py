"""Overview: strict accuracy per arm, the gap with its CI, answer outcomes, per-constraint
accuracy, and the published reference figures beside them."""

from __future__ import annotations

import html
from typing import Any

import streamlit as st

from cvb_engine import BOOTSTRAP_RESAMPLES, OUTCOMES_NOTE, fmt_gap
from studio.components import charts
from studio.components.text import plain
from studio.views.results.context import ResultsContext
from studio.views.results.style import chart, counts, rate_columns, value


def render(ctx: ResultsContext) -> None:
    summary, agg, ref, layered = ctx.summary, ctx.agg, ctx.ref, ctx.layered
    arms = summary.arms
    published = ref.cvb if ref is not None else None
    left, right = st.columns([3, 2], gap="medium")
    with left:
        chart(charts.arm_accuracy(summary, published=published), "results_fig_arms")
    with right:
        chart(charts.gap_with_ci(summary, published=published), "results_fig_gap")
    if published is not None and set(published.models) & set(summary.models):
        st.caption(
            "◇ Hollow diamonds: the published figure for the same model "
            f"({published.label}, {published.dates})."
        )

    st.subheader("Strict accuracy, gap and counts")
    rows = []
    for m in summary.models:
        row: dict[str, Any] = {"model": m}
        for a in arms:
            row[a] = value(summary.strict.get((m, a)))
        gap = summary.gap.get(m)
        row["gap [95% CI]"] = fmt_gap(gap)
        row["scenarios"] = gap.n_units if gap is not None else 0
        for a in arms:
            row[f"{a} n"] = counts(summary.strict.get((m, a)))
        rows.append(row)
    st.dataframe(
        rows,
        hide_index=True,
        width="stretch",
        column_config={
            **rate_columns(summary, arms),
            "gap [95% CI]": st.column_config.TextColumn(
                help="mandated − incentivized strict accuracy; paired bootstrap over "
                f"scenarios, {BOOTSTRAP_RESAMPLES:,} resamples, fixed seed"
            ),
            "scenarios": st.column_config.NumberColumn(
                help="scenarios resampled by the gap's bootstrap"
            ),
        },
    )
    st.caption(
        "Strict accuracy: share of scored records with every constraint honored. "
        "`k/n scored · e err`: strictly accurate / scored records, and error records "
        "(API failures) that are left out of the rate"
        + (
            "; memory failures (a memory layer failed) are left out too and counted apart."
            if layered
            else "."
        )
    )

    outcome_table = agg.outcome_table()
    if outcome_table:
        st.subheader("Answer outcomes")
        st.dataframe(
            outcome_table,
            hide_index=True,
            width="stretch",
            column_config={
                "truncated": st.column_config.TextColumn(
                    help="share stopped at max_tokens (any outcome)"
                ),
                "strict among answered": st.column_config.TextColumn(
                    help="strictly accurate / answered records"
                ),
                "per-constraint among answered": st.column_config.TextColumn(
                    help="honored (record, constraint) pairs of answered records"
                ),
            },
        )
        st.caption(OUTCOMES_NOTE)

    st.subheader("Per-constraint accuracy")
    cl, cr = st.columns([1, 1], gap="medium")
    with cl:
        chart(charts.constraint_accuracy(summary), "results_fig_constraint")
    with cr:
        crow = []
        for m in summary.models:
            r: dict[str, Any] = {"model": m}
            for a in arms:
                r[f"{a} per-constraint"] = value(summary.constraint.get((m, a)))
            r["pairs honored"] = " · ".join(
                f"{x.k}/{x.n}" if (x := summary.constraint.get((m, a))) else "–" for a in arms
            )
            crow.append(r)
        st.dataframe(
            crow,
            hide_index=True,
            width="stretch",
            column_config={
                f"{a} per-constraint": st.column_config.NumberColumn(a, format="%.3f") for a in arms
            },
        )
        st.caption(
            "Honored (record, constraint) pairs / all pairs, IFEval-style; "
            f"pairs honored per arm in the order {', '.join(arms)}."
        )

    if published is not None:
        st.subheader("Published reference figures")
        st.html(
            '<div style="font-family:system-ui,sans-serif;font-size:14px;color:#57606a">'
            f'<span class="cvb-pub">PUBLISHED</span>{html.escape(published.label)}, '
            f"{html.escape(published.dates)}: not produced by this studio; shown for "
            "comparison only.</div>"
        )
        pl, pr = st.columns([1, 1], gap="medium")
        with pl:
            chart(charts.published_accuracy(published), "results_fig_published")
        with pr:
            overlap = set(published.models) & set(summary.models)
            st.dataframe(
                [
                    {
                        "model (published)": m,
                        **{
                            a: published.strict[m].get(a)
                            for a in ("cold", "mandated", "incentivized")
                        },
                        "gap": published.gap.get(m),
                        **(
                            {"your gap": fmt_gap(summary.gap.get(m)) if m in overlap else "–"}
                            if overlap
                            else {}
                        ),
                    }
                    for m in published.models
                ],
                hide_index=True,
                width="stretch",
                column_config={
                    **rate_columns(summary, ("cold", "mandated", "incentivized")),
                    "gap": st.column_config.NumberColumn(format="%+.3f"),
                },
            )
            protocol = published.protocol
            st.caption(
                f"Source: {plain(published.source)}. {plain(protocol.get('endpoint', ''))}, "
                f"temperature {plain(protocol.get('temperature'))}, "
                f"{plain(protocol.get('runs_per_arm'))} runs per arm, "
                f"{plain(protocol.get('scenarios'))} scenarios, prompt version "
                f"{plain(protocol.get('prompt_version'))}, {plain(protocol.get('records'))} "
                "records. Published without confidence intervals."
            )
