"""Memory: accuracy against memory load, and the memory layers' tables."""

from __future__ import annotations

import streamlit as st

from cvb_engine import MEMORY_NOTE, memory_tables
from studio.components import charts
from studio.views.results.context import ResultsContext
from studio.views.results.style import chart, draw_table


def render(ctx: ResultsContext) -> None:
    summary = ctx.summary
    st.caption(MEMORY_NOTE)
    if summary.memory:
        chart(charts.memory_curve(summary), "results_fig_memory")
    for table in memory_tables(summary):
        st.markdown(f"##### {table.title}")  # cvb's own title, no stored text
        draw_table(table)
        if table.note:
            st.caption(table.note)
