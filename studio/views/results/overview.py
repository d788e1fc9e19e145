"""Overview: strict accuracy per arm, the gap with its CI, answer outcomes, per-constraint
accuracy, and the published reference figures beside them."""

from __future__ import annotations

import html

import streamlit as st

from cvb_engine import accuracy_table, constraint_table, outcome_table, published_table
from studio.components import charts
from studio.components.tables import draw_table
from studio.components.text import plain
from studio.views.results import paired
from studio.views.results.context import ResultsContext
from studio.views.results.style import chart


def render(ctx: ResultsContext) -> None:
    summary, ref, layered = ctx.summary, ctx.ref, ctx.layered
    published = ref.cvb if ref is not None else None
    left, right = st.columns([3, 2], gap="medium")
    with left:
        chart(charts.arm_accuracy(summary, published=published), "results_fig_arms")
    with right:
        chart(charts.gap_with_ci(summary, published=published), "results_fig_gap")
    if published is not None and set(published.models) & set(summary.models):
        st.caption(
            "◇ Hollow diamonds: the published figure for the same model "
            f"({plain(published.label)}, {plain(published.dates)})."
        )

    st.subheader("Strict accuracy, gap and counts")
    draw_table(accuracy_table(summary))
    st.caption(
        "Strict accuracy: share of scored records with every constraint honored. "
        "`k/n · e err` under each rate: strictly accurate / scored records, and error records "
        "(API failures) that are left out of the rate"
        + (
            "; memory failures (a memory layer failed) are left out too and counted apart."
            if layered
            else "."
        )
    )

    outcomes = outcome_table(summary)
    if outcomes.rows:
        st.subheader(outcomes.title)
        draw_table(outcomes)
        st.caption(outcomes.note)

    st.subheader("Per-constraint accuracy")
    cl, cr = st.columns([1, 1], gap="medium")
    with cl:
        chart(charts.constraint_accuracy(summary), "results_fig_constraint")
    with cr:
        draw_table(constraint_table(summary))
        st.caption(
            "Honored (record, constraint) pairs / all pairs, IFEval-style; "
            "the small print: honored / all pairs."
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
            draw_table(published_table(published, summary))
            protocol = published.protocol
            st.caption(
                f"Source: {plain(published.source)}. {plain(protocol.get('endpoint', ''))}, "
                f"temperature {plain(protocol.get('temperature'))}, "
                f"{plain(protocol.get('runs_per_arm'))} runs per arm, "
                f"{plain(protocol.get('scenarios'))} scenarios, prompt version "
                f"{plain(protocol.get('prompt_version'))}, {plain(protocol.get('records'))} "
                "records. Published without confidence intervals."
            )

    paired.render_costs(ctx)
