"""Results: pick runs; read arm accuracy, the gap with its CI, answer outcomes, breakdowns,
one cell side by side, and for agent variants read versus obeyed.

The page routes to its tabs in :mod:`studio.views.results`. Figures come from
:mod:`cvb_engine.queries` (aggregated in SQL, the engine's own metric functions) through
the bounded caches of :mod:`studio.cache`, keyed by the store, the run ids and a data
version (record count, highest id, latest scoring time), so a live run or a re-score is
picked up and nothing is served stale. No chart reads a response text; only the
side-by-side view reads the records of the one cell it shows. Session keys start with
``results_``.
"""

from __future__ import annotations

import streamlit as st

from cvb_engine import has_memory
from studio.views.results import (
    agent,
    breakdowns,
    compare,
    context,
    exports,
    ivr,
    memory,
    overview,
    side_by_side,
)
from studio.views.results.style import CSS

OVERVIEW, BREAKDOWNS, SIDE, COMPARE, MEMORY, AGENT, IVR, EXPORTS = (
    "Overview",
    "Breakdowns",
    "Side by side",
    "Compare runs",
    "Memory",
    "Agent",
    "IVR",
    "Exports",
)
TABS = {
    OVERVIEW: overview.render,
    BREAKDOWNS: breakdowns.render,
    SIDE: side_by_side.render,
    COMPARE: compare.render,
    MEMORY: memory.render,
    AGENT: agent.render,
    IVR: ivr.render,
    EXPORTS: exports.render,
}
ss = st.session_state

st.html(CSS)
st.title("Results")
ctx = context.select_runs()

views = (
    [OVERVIEW, BREAKDOWNS, SIDE, COMPARE]
    + ([MEMORY] if has_memory(ctx.summary) else [])
    + ([AGENT] if ctx.summary.agent else [])
    + ([IVR] if ctx.version.has_ivr else [])
    + [EXPORTS]
)
if ss.get("results_view") not in views:
    ss["results_view"] = OVERVIEW
tabs = dict(
    zip(views, st.tabs(views, key="results_view", on_change="rerun", default=OVERVIEW), strict=True)
)
for view, tab in tabs.items():
    if tab.open:  # only the open tab computes and draws
        with tab:
            TABS[view](ctx)
