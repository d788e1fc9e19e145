"""Memory: accuracy against memory load, the drop outdated notes cause, delivered versus
ignored notes, and the memory tables."""

from __future__ import annotations

import streamlit as st

from cvb_engine import MEMORY_NOTE, budget_curves, memory_tables, turns_curves
from studio.components import charts
from studio.components.tables import draw_table
from studio.views.results.context import ResultsContext
from studio.views.results.style import chart


def render(ctx: ResultsContext) -> None:
    summary = ctx.summary
    st.caption(MEMORY_NOTE)
    if summary.memory:
        chart(charts.memory_curve(summary), "results_fig_memory")
    if summary.stale:
        chart(charts.stale_drop(summary), "results_fig_stale")
    if summary.delivery:
        chart(charts.delivery_outcomes(summary), "results_fig_delivery_outcomes")
        chart(charts.delivery_split(summary), "results_fig_delivery")
    if budgets := budget_curves(summary):
        title = "Strict accuracy against the delivery budget (bytes; 95% CI)"
        chart(charts.realism_curve(budgets, title=title, x_title="budget"), "results_fig_budget")
    if turns := turns_curves(summary):
        title = "Strict accuracy against unrelated exchanges since the memory (95% CI)"
        chart(charts.realism_curve(turns, title=title, x_title="turns"), "results_fig_turns")
    for table in memory_tables(summary):
        st.markdown(f"##### {table.title}")  # cvb's own title, no stored text
        draw_table(table)
        if table.note:
            st.caption(table.note)
