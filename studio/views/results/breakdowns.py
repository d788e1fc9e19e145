"""Breakdowns: by category (heatmaps), by scenario, the constraints honored only when
ordered, and every constraint per arm; filtered by model, category and arm."""

from __future__ import annotations

from typing import Any

import streamlit as st

from cvb_engine import constraint_rows, only_when_ordered, scenario_rows
from studio.components import charts
from studio.views.results.context import ResultsContext
from studio.views.results.style import chart, counts, rate_columns, value


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
    has_gap = "mandated" in summary.arms and "incentivized" in summary.arms

    st.subheader("By category")
    st.caption(
        "Strict accuracy per model × category for each arm (cells: rate and strictly "
        "accurate / scored), then the gap per category (hover for its 95% CI)."
    )
    for which in [*arms] + (["gap"] if has_gap else []):
        chart(
            charts.category_heatmap(summary, which, models=f_models, categories=f_cats),
            f"results_fig_heat_{which}",
        )

    st.subheader("By scenario")
    srows = []
    for r_ in scenario_rows(agg, models=f_models, categories=f_cats):
        row: dict[str, Any] = {
            "model": r_.model,
            "scenario": r_.scenario_id,
            "category": r_.category,
        }
        row.update({a: value(r_.rates.get(a)) for a in arms})
        row["gap"] = r_.gap
        row.update({f"{a} n": counts(r_.rates.get(a)) for a in arms})
        srows.append(row)
    st.dataframe(
        srows,
        hide_index=True,
        width="stretch",
        height=min(420, 38 + 35 * max(len(srows), 1)),
        column_config={
            **rate_columns(summary, arms),
            "gap": st.column_config.NumberColumn(
                format="%+.3f", help="mandated − incentivized, this scenario"
            ),
        },
    )
    st.caption("Largest gap first. Open a scenario in **Side by side** to read the outputs.")

    st.subheader("Honored only when ordered")
    st.caption(
        "Constraints honored more often under orders (mandated) than as project memory "
        "(incentivized), largest difference first."
    )
    orows = [
        {
            "model": r_.model,
            "scenario": r_.scenario_id,
            "constraint": r_.constraint_id,
            "category": r_.category,
            "mandated": value(r_.rates.get("mandated")),
            "incentivized": value(r_.rates.get("incentivized")),
            "mandated − incentivized": r_.gap,
            "mandated n": counts(r_.rates.get("mandated")).split(" scored")[0],
            "incentivized n": counts(r_.rates.get("incentivized")).split(" scored")[0],
        }
        for r_ in only_when_ordered(agg, models=f_models, categories=f_cats)
    ]
    if orows:
        st.dataframe(
            orows,
            hide_index=True,
            width="stretch",
            column_config={
                "mandated": st.column_config.NumberColumn(format="%.3f"),
                "incentivized": st.column_config.NumberColumn(format="%.3f"),
                "mandated − incentivized": st.column_config.ProgressColumn(
                    format="%.3f", min_value=0.0, max_value=1.0
                ),
            },
        )
    else:
        st.success("No constraint is honored more often as an order than as memory here.")

    with st.expander("Every constraint, per arm"):
        crows = []
        for c_ in constraint_rows(agg, models=f_models, categories=f_cats):
            crow: dict[str, Any] = {
                "model": c_.model,
                "scenario": c_.scenario_id,
                "constraint": c_.constraint_id,
                "category": c_.category,
            }
            crow.update({a: value(c_.rates.get(a)) for a in arms})
            crow.update(
                {f"{a} honored": f"{x.k}/{x.n}" if (x := c_.rates.get(a)) else "–" for a in arms}
            )
            crows.append(crow)
        st.dataframe(
            crows, hide_index=True, width="stretch", column_config=rate_columns(summary, arms)
        )
