"""The runners of a run (many runners, one run), as a table on the Run page.

What it shows comes from :func:`cvb_engine.claims.runners`, as the table model
:func:`cvb_engine.report.live.runner_table`: each runner's state
(live, lapsed: its lease ran out without a heartbeat, or how it left), its pace
over the last minute, its last heartbeat, what it stored and the cells it holds
now, where it runs and the *name* of the key variable it reads. Runner names,
hosts and variable names come from the store: shown as text.
"""

from __future__ import annotations

import streamlit as st
from sqlalchemy.engine import Engine
from sqlmodel import Session

from cvb_engine import run_runners as runners
from cvb_engine import runner_table
from studio.components.tables import draw_static_table


def runners_table(engine: Engine, run_id: str) -> None:
    """The table of ``run_id``'s runners, when any runner took part in it."""
    with Session(engine) as session:
        states = runners(session, run_id)
    if not states:
        return
    live = sum(1 for s in states if s.live)
    lapsed = sum(1 for s in states if s.state == "lapsed")
    st.markdown(
        f"**Runners** · {live} live"
        + (f" · {lapsed} whose lease lapsed (their cells go to the others)" if lapsed else "")
    )
    draw_static_table(runner_table(states))
