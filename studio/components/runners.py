"""The runners of a run (many runners, one run), as a table on the Run page.

What it shows comes from :func:`cvb_engine.claims.runners`: each runner's state
(live, lapsed: its lease ran out without a heartbeat, or how it left), its pace
over the last minute, its last heartbeat, what it stored and the cells it holds
now, where it runs and the *name* of the key variable it reads. Runner names,
hosts and variable names come from the store: shown as text.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlalchemy.engine import Engine
from sqlmodel import Session

from cvb_engine import RunnerState
from cvb_engine import run_runners as runners
from studio.components.text import plain


def runner_rows(states: list[RunnerState]) -> pd.DataFrame:
    """One row per runner, live ones first."""
    return pd.DataFrame(
        [
            {
                "runner": plain(s.worker),
                "state": s.state,
                "cells/min": "–" if s.per_min is None else f"{s.per_min:.1f}",
                "last heartbeat": f"{s.heartbeat_age_s:.0f} s ago",
                "stored": f"{s.cells_done} ({s.cells_failed} errors)",
                "holding": s.held,
                "where": plain(f"{s.host or '?'} · pid {s.pid}"),
                "key variable": plain(s.api_key_env) if s.api_key_env else "none",
            }
            for s in states
        ]
    ).set_index("runner")


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
    st.table(runner_rows(states))
