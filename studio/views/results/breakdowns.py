"""Breakdowns: by category (heatmaps), by scenario, the constraints honored only when
ordered, and every constraint per arm; filtered by model, category and arm."""

from __future__ import annotations

import streamlit as st

from cvb_engine import every_constraint_table, has_gap, ordered_table, scenario_table
from studio.components import charts
from studio.components.tables import draw_table
from studio.views.results.context import ResultsContext
from studio.views.results.style import chart


def render(ctx: ResultsContext) -> None:
    summary, agg = ctx.summary, ctx.agg
    f1, f2, f3 = st.columns([2, 3, 2])
    f_models = f1.multiselect(
        "Models", summary.models, key="results_f_models", placeholder="all models"
    )
    f_cats = f2.multiselect(
        "Categories", summary.categories, key="results_f_cats", placeholder="all categories"
    )
    f_arms = f3.multiselect("Arms", summary.arms, key="results_f_arms", placeholder="all arms")
    arms = [a for a in summary.arms if not f_arms or a in f_arms]

    st.subheader("By category")
    st.caption(
        "Strict accuracy per model × category for each arm (cells: rate and strictly "
        "accurate / scored), then the gap per category (hover for its 95% CI)."
    )
    for which in [*arms] + (["gap"] if has_gap(summary) else []):
        chart(
            charts.category_heatmap(summary, which, models=f_models, categories=f_cats),
            f"results_fig_heat_{which}",
        )

    st.subheader("By scenario")
    by_scenario = scenario_table(agg, models=f_models, categories=f_cats, arms=f_arms)
    draw_table(by_scenario, height=min(420, 38 + 35 * max(len(by_scenario.rows), 1)))
    st.caption(
        f"{by_scenario.note} Open a scenario in **Side by side** to read the outputs; the "
        "small print (`n`): strictly accurate / scored."
    )

    ordered = ordered_table(agg, models=f_models, categories=f_cats)
    st.subheader(ordered.title)
    st.caption(ordered.note)
    if ordered.rows:
        draw_table(ordered)
    else:
        st.success("No constraint is honored more often as an order than as memory here.")

    with st.expander("Every constraint, per arm"):
        draw_table(every_constraint_table(agg, models=f_models, categories=f_cats, arms=f_arms))
        st.caption("The small print (`n`): honored / all (record, constraint) pairs.")
