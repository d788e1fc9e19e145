"""One run on the live panel: its progress, runners, accuracy so far, errors and the end of
its log; Cancel, Resume and Retry ask the engine's run lifecycle."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import streamlit as st
from sqlmodel import Session

from cvb_engine import (
    CancelAsked,
    FinishedRow,
    Launch,
    LaunchError,
    RunDetail,
    cancel_run,
    counted,
    endpoint_label,
    error_table,
    forget_launch,
    format_duration,
    launch_of,
    live_accuracy_table,
    log_tail,
    resume_run,
    retry_errors,
    run_progress,
)
from studio import state
from studio.components.runners import runners_table
from studio.components.tables import draw_static_table
from studio.components.text import plain
from studio.views.run.context import RunContext

BadgeColor = Literal["blue", "green", "orange", "red", "gray"]
STATE_BADGES: dict[str, tuple[str, BadgeColor, str]] = {
    "running": ("running", "blue", ":material/autorenew:"),
    "finished": ("finished", "green", ":material/check_circle:"),
    "incomplete": ("incomplete", "orange", ":material/pending:"),
    "cancelled": ("cancelled", "orange", ":material/pause_circle:"),
    "failed": ("failed", "red", ":material/error:"),
    "died": ("died", "red", ":material/heart_broken:"),
    "created": ("not started", "gray", ":material/schedule:"),
}
ss = st.session_state


def control(ctx: RunContext, action: str, run_id: str) -> None:
    with Session(state.engine()) as session:
        progress = run_progress(session, run_id)
    pending = launch_of(ctx.logs, run_id)
    try:
        if action == "cancel":
            pid = cancel_run(progress, pending)
            ss.setdefault("run_stopping", {})[run_id] = pid
            text = (
                f"Asked run **{plain(run_id)}** to stop (SIGTERM to process {pid}); "
                "finished cells stay."
            )
        elif progress is None:
            raise LaunchError(f"run {run_id} is not in the store")
        elif action == "resume":
            resume_run(progress, db_url=ctx.db_url, logs=ctx.logs, scenarios_fallback=ctx.root)
            text = (
                f"Resuming run **{plain(run_id)}**: only its {progress.missing} missing cells "
                "are sent."
            )
        else:
            retry_errors(progress, db_url=ctx.db_url, logs=ctx.logs, scenarios_fallback=ctx.root)
            text = f"Retrying the {progress.errors} errored cells of run **{plain(run_id)}**."
    except CancelAsked as exc:  # its runners elsewhere stop at their next cell
        ss.run_live_flash = ("success", plain(exc, multiline=True))
        return
    except LaunchError as exc:
        ss.run_live_flash = ("error", plain(exc, multiline=True))
        return
    ss.run_live_flash = ("success", text)


def dismiss(ctx: RunContext, run_id: str) -> None:
    forget_launch(ctx.logs, run_id)


def latest_line(row: FinishedRow) -> str:
    where = f"{plain(row.model)} · {plain(row.scenario_id)} · {plain(row.arm)} · rep {row.rep}"
    if row.status != "ok":
        what = "memory failure" if row.error_kind == "memory" else "API error"
        return f"{where} → :orange[{what}]: {plain(row.error)}"
    if row.strict:
        verdict = ":green[every constraint honored]"
    else:
        verdict = ":red[violated] " + ", ".join(plain(c) for c in row.violated)
    latency = f" · {row.latency_s:.1f} s" if row.latency_s is not None else ""
    return f"{where} → {verdict}{latency}"


def run_card(ctx: RunContext, detail: RunDetail, launch: Launch | None, is_starting: bool) -> None:
    p = detail.progress
    label, color, icon = STATE_BADGES[p.state]
    with st.container(border=True, key=f"run_card_{p.run_id}"):
        head, badge = st.columns([5, 1], vertical_alignment="center")
        endpoint_name = endpoint_label(p.params, ctx.presets)
        head.markdown(
            f"**{plain(p.run_id)}** · {plain(endpoint_name)} · "
            + ", ".join(plain(m) for m in p.models)
        )
        badge.badge(label, color=color, icon=icon)
        where = f" · on {plain(p.host)}" + (f" (pid {p.pid})" if p.pid else "") if p.host else ""
        st.caption(
            f"started {p.created:%Y-%m-%d %H:%M} UTC · {counted(p.n_scenarios, 'scenario')} × "
            f"{counted(len(p.arms), 'arm')} × {plain(counted(p.params.get('runs', '?'), 'repetition'))}"
            f" × {counted(len(p.models), 'model')} · temperature "
            f"{plain(p.params.get('temperature', '?'))}{where}"
            + (f" · note: {plain(p.note)}" if p.note else "")
        )
        st.progress(
            p.fraction,
            text=f"{p.done} / {p.total} cells ({p.fraction:.0%}) · {p.ok} ok · {p.errors} errors",
        )
        m1, m2, m3, m4 = st.columns(4)
        m1.metric("Done", f"{p.done} / {p.total}")
        m2.metric("Errors", p.errors)
        m3.metric("Calls/s (last min)", "–" if p.calls_per_s is None else f"{p.calls_per_s:.1f}")
        m4.metric(
            "ETA", format_duration(p.eta_s) if p.active else ("done" if p.missing == 0 else "–")
        )
        if p.active:
            runners_table(state.engine(), p.run_id)  # each runner's pace (cvb run --join)
        if p.state == "died":
            st.warning(
                f"The run's process died ({plain(p.died_reason)}). Everything it finished is stored; "
                f"resume it to send the {p.missing} missing cells.",
                icon=":material/heart_broken:",
            )
        elif p.state == "incomplete":
            st.info(
                f"The sending ended with {p.missing} cells without a successful record; "
                "resume the run to send them.",
                icon=":material/pending:",
            )
        elif p.state == "failed":
            where = "its log below" if launch is not None else "the terminal that started it"
            st.error(f"The run stopped with an error; {where} says why.")
        if launch is not None and is_starting:
            st.info(
                f"Starting ({launch.action}, process {launch.pid})…",
                icon=":material/hourglass_top:",
            )
        buttons = st.container(horizontal=True)
        busy = launch is not None and is_starting  # a process on its way to this run
        stopping = ss.get("run_stopping", {})
        if not (p.active or busy):
            stopping.pop(p.run_id, None)
        if p.run_id in stopping:
            buttons.caption(f"Stopping… (SIGTERM sent to process {stopping[p.run_id]})")
        elif p.active or busy:
            buttons.button(
                "Cancel",
                key=f"run_cancel_{p.run_id}",
                icon=":material/stop_circle:",
                on_click=control,
                args=(ctx, "cancel", p.run_id),
                help="Stops the process (SIGTERM); every finished cell stays stored.",
            )
        if p.resumable and not busy:
            buttons.button(
                f"Resume ({p.missing} missing)",
                key=f"run_resume_{p.run_id}",
                icon=":material/play_arrow:",
                on_click=control,
                args=(ctx, "resume", p.run_id),
                help="Runs the same matrix again under this id: only cells without a "
                "successful answer are sent.",
            )
        if p.retryable and not busy:
            buttons.button(
                f"Retry {p.errors} errors",
                key=f"run_retry_{p.run_id}",
                icon=":material/replay:",
                on_click=control,
                args=(ctx, "retry", p.run_id),
                help="Sends again only the cells stored as API errors.",
            )
        if detail.accuracy:
            so_far = live_accuracy_table(detail.accuracy)
            st.markdown(f"**{so_far.title}** · share of answers honoring every constraint")
            draw_static_table(so_far)
        if detail.latest is not None:
            st.markdown("**Latest answer:** " + latest_line(detail.latest))
        if detail.errors:
            latest = error_table(detail.errors)
            st.markdown(f"**{latest.title}**")
            draw_static_table(latest)
        if launch is not None and Path(launch.log).exists():
            with st.expander("Log (last lines)", expanded=p.state == "failed"):
                st.code(log_tail(launch.log) or "(empty)", language="text", wrap_lines=True)
