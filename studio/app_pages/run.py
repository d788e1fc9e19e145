"""Run: choose an endpoint, preview the matrix, launch runs, watch them live, stop and resume.

The page routes to its parts in :mod:`studio.views.run`; the engine's run lifecycle
(:mod:`cvb_engine.lifecycle`) starts and signals the ``cvb run`` processes and
:mod:`cvb_engine.monitor` reads their progress from the store. Session keys start
with ``run_``.
"""

from __future__ import annotations

import streamlit as st

from studio.components.text import plain
from studio.views.run import context, endpoint, matrix, runs

ctx = context.load()

st.title("Run the benchmark")
st.caption(
    "Send the scenarios to a model endpoint, watch the answers arrive and get scored, stop and "
    "resume. Every run is a background `cvb run` process that writes to the store: reloading "
    "this page or closing the browser does not stop it, and runs started from a terminal show "
    "up here too."
)
live_now = runs.active_now(ctx)
if live_now:
    st.info(
        f"{len(live_now)} run{'s' if len(live_now) > 1 else ''} in progress: "
        + ", ".join(f"**{plain(rid)}**" for rid in live_now)
        + " · [watch below](#runs)",
        icon=":material/autorenew:",
    )

st.subheader("1 · Endpoint")
probe, key_problem, key_ok = endpoint.render(ctx)

st.subheader("2 · What to run")
matrix.render(ctx, probe, key_problem, key_ok)

st.subheader("3 · Runs", anchor="runs")
runs.render(ctx, live_now)
