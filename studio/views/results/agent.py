"""Agent: read versus obeyed per model × agent variant, and how the episodes went."""

from __future__ import annotations

import streamlit as st

from cvb_engine import AGENT_NOTE, agent_tables
from studio.components.tables import draw_table
from studio.views.results.context import ResultsContext


def render(ctx: ResultsContext) -> None:
    st.caption(AGENT_NOTE)
    for table in agent_tables(ctx.summary):
        st.markdown(f"##### {table.title}")  # cvb's own title, no stored text
        draw_table(table)  # names (models, variants, a user's command) drawn as text
        if table.note:
            st.caption(table.note)
    st.caption(
        "One episode's transcript, the rules file it read and the file it wrote: Side by side."
    )
