"""3 · Runs: the live panel. Every run in the store (the most recent few) and every
process the studio started lately, each as a card (:mod:`studio.views.run.run_card`),
refreshed while a run is active."""

from __future__ import annotations

import streamlit as st
from sqlmodel import Session

from cvb_engine import (
    Launch,
    RunProgress,
    ended_early,
    list_progress,
    log_tail,
    recent_launches,
    run_detail,
    starting_launches,
)
from studio import state
from studio.components.text import plain
from studio.views.run.context import RunContext, show_flash
from studio.views.run.run_card import control, dismiss, run_card

REFRESH_S = 2.0
MAX_RUNS = 6  # runs shown in the live panel; the Results page has them all
ss = st.session_state


def live_state(ctx: RunContext) -> tuple[list[RunProgress], dict[str, RunProgress], list[Launch]]:
    """The runs to show, every run the studio launched lately, and those launches."""
    recent = recent_launches(ctx.logs)
    with Session(state.engine()) as session:
        shown = list_progress(session, limit=MAX_RUNS)
        ids = {p.run_id for p in shown}
        launched = list_progress(
            session, run_ids=[item.run_id for item in recent if item.run_id not in ids]
        )
    return shown, {p.run_id: p for p in [*shown, *launched]}, recent


def active_ids(
    shown: list[RunProgress], known: dict[str, RunProgress], recent: list[Launch]
) -> list[str]:
    starting = starting_launches(recent, known)
    return sorted({p.run_id for p in shown if p.active} | {item.run_id for item in starting})


def live_runs(ctx: RunContext) -> None:
    show_flash("run_live_flash")
    shown, known, recent = live_state(ctx)
    if active_ids(shown, known, recent) != ss.run_active and ss.run_in_fragment:
        st.rerun()  # a run started or ended: the full page reruns and sets the refresh timer
    ss.run_in_fragment = True
    with Session(state.engine()) as session:
        details = [run_detail(session, p) for p in shown]
    starting = starting_launches(recent, known)
    ended = ended_early(recent, known)
    by_run = {item.run_id: item for item in recent}
    for item in starting:
        if item.run_id not in known:
            with st.container(border=True, key=f"run_starting_{item.run_id}"):
                st.markdown(f"**{plain(item.run_id)}** · starting (process {item.pid})…")
                st.caption("The run appears here with its progress once it has planned its matrix.")
                st.button(
                    "Cancel",
                    key=f"run_cancel_{item.run_id}",
                    icon=":material/stop_circle:",
                    on_click=control,
                    args=(ctx, "cancel", item.run_id),
                )
    for item in ended:
        with st.container(border=True, key=f"run_ended_{item.run_id}"):
            st.error(
                f"**{plain(item.run_id)}**: the {plain(item.action)} ended before the run started. "
                "The end of its log says why:",
                icon=":material/error:",
            )
            st.code(log_tail(item.log) or "(empty log)", language="text", wrap_lines=True)
            st.button(
                "Dismiss",
                key=f"run_dismiss_{item.run_id}",
                on_click=dismiss,
                args=(ctx, item.run_id),
            )
    if not details and not starting and not ended:
        st.info("No runs yet. Launch one above, or start one with `cvb run` in a terminal.")
    for detail in details:
        rid = detail.progress.run_id
        run_card(ctx, detail, by_run.get(rid), any(item.run_id == rid for item in starting))
    if len(details) == MAX_RUNS:
        st.caption(f"The {MAX_RUNS} most recent runs are shown; the Results page has every run.")


def active_now(ctx: RunContext) -> list[str]:
    """The runs in progress (running in the store, or started and on their way)."""
    return active_ids(*live_state(ctx))


def render(ctx: RunContext, live_now: list[str]) -> None:
    """The live panel, a fragment that refreshes itself while a run is active."""
    st.caption(
        f"Live from the store: refreshes every {REFRESH_S:.0f} s while a run is active, "
        "including runs started with `cvb run` in a terminal."
    )
    ss.run_active = live_now
    ss.run_in_fragment = False

    def panel() -> None:
        live_runs(ctx)

    st.fragment(panel, run_every=REFRESH_S if ss.run_active else None)()
