"""Run: choose an endpoint, preview the matrix, launch runs, watch them live, stop and resume.

The page lays things out; :mod:`studio.launcher` starts and signals the
``cvb run`` processes and :mod:`cvb_engine.monitor` reads their progress from
the store. Session keys start with ``run_``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pandas as pd
import streamlit as st
from sqlmodel import Session

from cvb_engine import ARMS, CVB_CATEGORIES, LoadedScenario, ScenarioError, load_library
from cvb_engine import monitor as mon
from cvb_engine.arms import arm_order
from cvb_engine.endpoints import (
    MODEL_PREFERENCE,
    Endpoint,
    EndpointError,
    delete_preset,
    key_is_set,
    key_variable_problem_or_error,
    load_presets,
    presets_path,
    save_preset,
)
from cvb_engine.scenario import discover
from cvb_engine.store import Run
from studio import launcher, state
from studio.components import layer_builder
from studio.components.runners import runners_table
from studio.components.text import block, plain
from studio.launcher import counted

REFRESH_S = 2.0
MAX_RUNS = 6  # runs shown in the live panel; the Results page has them all
NEW = "➕ New endpoint"
SWEEP_LOADS = [0, 10, 25, 50, 100, 200, 350]
SWEEP_POSITIONS = ["start", "middle", "end", "spread"]
SWEEP_CHANNELS = ["inline", "system", "file", "history"]
ARM_HELP = (
    "cold: the task alone · mandated: the task with the constraints as explicit orders · "
    "incentivized: the constraints as past decisions in project memory, never as orders"
)
BadgeColor = Literal["blue", "green", "orange", "red", "gray"]
STATE_BADGES: dict[str, tuple[str, BadgeColor, str]] = {
    "running": ("running", "blue", ":material/autorenew:"),
    "finished": ("finished", "green", ":material/check_circle:"),
    "cancelled": ("cancelled", "orange", ":material/pause_circle:"),
    "failed": ("failed", "red", ":material/error:"),
    "died": ("died", "red", ":material/heart_broken:"),
    "created": ("not started", "gray", ":material/schedule:"),
}

ss = st.session_state
root = state.scenarios_root()
db_url = state.db_url()
logs = launcher.logs_dir(db_url)


@st.cache_data(max_entries=4, ttl=300, show_spinner=False)
def scenario_library(folder: str, stamps: tuple[tuple[str, int, int], ...]) -> Any:
    """The loaded library, or the loader's message; ``stamps`` make a changed file a new entry."""
    try:
        return load_library(folder)
    except ScenarioError as exc:
        return str(exc)


def library_stamps(folder: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in discover([folder]):
        try:
            info = path.stat()
        except OSError:
            continue  # removed meanwhile
        out.append((str(path), info.st_mtime_ns, info.st_size))
    return tuple(out)


def show_flash(key: str) -> None:
    message = ss.pop(key, None)
    if message:
        getattr(st, message[0])(message[1])


# --------------------------------------------------------------------------- state

try:
    presets = load_presets()
except EndpointError as exc:
    st.error("The endpoint presets cannot be read:")
    st.code(block(exc), language=None, wrap_lines=True)
    st.stop()
user_presets = sorted(n for n, e in presets.items() if not e.builtin)
if "run_endpoint" not in ss:
    # Start where the user is: the endpoint of the newest stored run (after `cvb demo`,
    # the local model), else their own first preset, else groq.
    with Session(state.engine()) as session:
        latest = launcher.latest_run_endpoint(session, presets)
    ss.run_endpoint = latest or (user_presets[0] if user_presets else "groq")
if ss.run_endpoint not in presets:
    ss.run_endpoint = next(iter(sorted(presets)))
endpoint = presets[ss.run_endpoint]
ss.setdefault("run_models", list(endpoint.models))
ss.setdefault("run_pick_mode", "By category")
ss.setdefault("run_arms", list(ARMS))
ss.setdefault("run_sweep_loads", [])
ss.setdefault("run_sweep_positions", [])
ss.setdefault("run_sweep_channels", [])
ss.setdefault("run_runs", 3)
ss.setdefault("run_temperature", 0.0)
ss.setdefault("run_max_tokens", 1024)
ss.setdefault("run_concurrency", 8)
ss.setdefault("run_attempts", 5)
ss.setdefault("run_timeout", 60.0)
ss.setdefault("run_id_input", "")
ss.setdefault("run_note", "")
ss.setdefault("run_ep_edit", NEW)
if ss.run_ep_edit != NEW and ss.run_ep_edit not in presets:
    ss.run_ep_edit = NEW
for field in ("run_ep_name", "run_ep_url", "run_ep_key_env", "run_ep_models"):
    ss.setdefault(field, "")

library = scenario_library(str(root), library_stamps(root))
library_error = library if isinstance(library, str) else None
scenarios: dict[str, LoadedScenario] = {} if library_error else library
categories = sorted(
    {item.scenario.category for item in scenarios.values()},
    key=lambda c: (c not in CVB_CATEGORIES, c),
)
ss.setdefault("run_categories", [c for c in categories if c in CVB_CATEGORIES] or categories)
ss.setdefault("run_only", [])
# The library may have changed since the last rerun: keep only what still exists.
ss.run_categories = [c for c in ss.run_categories if c in categories]
ss.run_only = [sid for sid in ss.run_only if sid in scenarios]


# --------------------------------------------------------------------------- actions


def endpoint_changed() -> None:
    chosen = load_presets().get(ss.run_endpoint)
    ss.run_models = list(chosen.models) if chosen else []
    ss.pop("run_probe", None)


def probe_endpoint() -> None:
    result = launcher.probe(presets[ss.run_endpoint])
    ss.run_probe = (ss.run_endpoint, presets[ss.run_endpoint].base_url, result)
    if result.default_models and not presets[ss.run_endpoint].models:
        ss.run_models = list(result.default_models)


def fill_editor() -> None:
    chosen = load_presets().get(ss.run_ep_edit)
    ss.run_ep_name = chosen.name if chosen else ""
    ss.run_ep_url = chosen.base_url if chosen else ""
    ss.run_ep_key_env = chosen.api_key_env if chosen else ""
    ss.run_ep_models = ", ".join(chosen.models) if chosen else ""


def save_endpoint() -> None:
    name = ss.run_ep_name.strip()
    base_url = ss.run_ep_url.strip().rstrip("/")
    key_env = ss.run_ep_key_env.strip()
    problems = launcher.endpoint_problems(name, base_url, key_env)
    if problems:
        if any("looks like a key" in p for p in problems):
            ss.run_ep_key_env = ""  # a pasted key does not stay in the form
        ss.run_ep_flash = ("error", "Not saved. " + " ".join(problems))
        return
    try:
        save_preset(Endpoint(name, base_url, key_env, launcher.parse_models(ss.run_ep_models)))
    except EndpointError as exc:
        ss.run_ep_flash = ("error", "Not saved. " + plain(exc, multiline=True))
        return
    ss.run_endpoint = name
    ss.run_ep_edit = name
    fill_editor()  # the fields show what was saved (e.g. the URL without its trailing "/")
    endpoint_changed()
    where = presets_path()
    ss.run_ep_flash = (
        "success",
        f"Saved endpoint **{name}** in `{where}` (the key variable's name only) and selected it.",
    )


def remove_endpoint() -> None:
    name = ss.run_ep_edit
    delete_preset(name)
    ss.run_ep_edit = NEW
    fill_editor()
    if ss.run_endpoint == name and name not in load_presets():
        ss.run_endpoint = "groq"
    endpoint_changed()
    ss.run_ep_flash = ("success", f"Removed endpoint **{name}**.")


def current_spec(run_id: str) -> launcher.LaunchSpec:
    by_category = ss.run_pick_mode == "By category"
    return launcher.LaunchSpec(
        scenarios=str(root),
        base_url=endpoint.base_url,
        api_key_env=endpoint.api_key_env,
        run_id=run_id,
        endpoint=endpoint.name,
        models=tuple(ss.run_models),
        categories=tuple(ss.run_categories) if by_category else (),
        only=() if by_category else tuple(ss.run_only),
        arms=tuple(a for a in ARMS if a in ss.run_arms)
        + tuple(
            launcher.sweep_arms(ss.run_sweep_loads, ss.run_sweep_positions, ss.run_sweep_channels)
        )
        + tuple(layer_builder.arms()),
        runs=int(ss.run_runs),
        temperature=float(ss.run_temperature),
        max_tokens=int(ss.run_max_tokens),
        concurrency=int(ss.run_concurrency),
        timeout_s=float(ss.run_timeout),
        max_attempts=int(ss.run_attempts),
        note=ss.run_note.strip() or None,
    )


def launch_run(run_id: str) -> None:
    try:
        started = launcher.launch(current_spec(run_id), db_url=db_url, logs=logs)
    except launcher.LaunchError as exc:
        ss.run_launch_flash = ("error", "Not launched: " + plain(exc, multiline=True))
        return
    ss.run_id_input = ""
    ss.pop("run_auto_id", None)  # the next launch gets a fresh automatic id
    ss.run_launch_flash = (
        "success",
        f"Started run **{plain(started.run_id)}** in the background (process {started.pid}). It keeps "
        "going if you reload this page or close the browser; its progress shows below.",
    )


def control(action: str, run_id: str) -> None:
    with Session(state.engine()) as session:
        progress = mon.run_progress(session, run_id)
        recorded = mon.recorded_scenarios(session, run_id)
    pending = launcher.launch_of(logs, run_id)
    try:
        if action == "cancel":
            pid = launcher.cancel(progress, pending)
            ss.setdefault("run_stopping", {})[run_id] = pid
            text = (
                f"Asked run **{plain(run_id)}** to stop (SIGTERM to process {pid}); "
                "finished cells stay."
            )
        elif progress is None:
            raise launcher.LaunchError(f"run {run_id} is not in the store")
        elif action == "resume":
            launcher.resume(
                progress, db_url=db_url, logs=logs, scenarios_fallback=root, recorded=recorded
            )
            text = (
                f"Resuming run **{plain(run_id)}**: only its {progress.missing} missing cells "
                "are sent."
            )
        else:
            launcher.retry_errors(
                progress, db_url=db_url, logs=logs, scenarios_fallback=root, recorded=recorded
            )
            text = f"Retrying the {progress.errors} errored cells of run **{plain(run_id)}**."
    except launcher.CancelAsked as exc:  # its runners elsewhere stop at their next cell
        ss.run_live_flash = ("success", plain(exc, multiline=True))
        return
    except launcher.LaunchError as exc:
        ss.run_live_flash = ("error", plain(exc, multiline=True))
        return
    ss.run_live_flash = ("success", text)


def dismiss(run_id: str) -> None:
    launcher.forget(logs, run_id)


def live_state() -> tuple[list[mon.RunProgress], dict[str, mon.RunProgress], list[launcher.Launch]]:
    """The runs to show, every run the studio launched lately, and those launches."""
    recent = launcher.launches(logs)
    with Session(state.engine()) as session:
        shown = mon.list_progress(session, limit=MAX_RUNS)
        ids = {p.run_id for p in shown}
        launched = mon.list_progress(
            session, run_ids=[item.run_id for item in recent if item.run_id not in ids]
        )
    return shown, {p.run_id: p for p in [*shown, *launched]}, recent


def active_ids(
    shown: list[mon.RunProgress], known: dict[str, mon.RunProgress], recent: list[launcher.Launch]
) -> list[str]:
    starting = launcher.starting(recent, known)
    return sorted({p.run_id for p in shown if p.active} | {item.run_id for item in starting})


# --------------------------------------------------------------------------- page

st.title("Run the benchmark")
st.caption(
    "Send the scenarios to a model endpoint, watch the answers arrive and get scored, stop and "
    "resume. Every run is a background `cvb run` process that writes to the store: reloading "
    "this page or closing the browser does not stop it, and runs started from a terminal show "
    "up here too."
)
live_now = active_ids(*live_state())
if live_now:
    st.info(
        f"{len(live_now)} run{'s' if len(live_now) > 1 else ''} in progress: "
        + ", ".join(f"**{plain(rid)}**" for rid in live_now)
        + " · [watch below](#runs)",
        icon=":material/autorenew:",
    )

# 1 · Endpoint ----------------------------------------------------------------------------
st.subheader("1 · Endpoint")
pick, probe_col = st.columns([3, 1], vertical_alignment="bottom")
pick.selectbox(
    "Endpoint (any OpenAI-compatible API)",
    sorted(presets),
    key="run_endpoint",
    format_func=lambda n: f"{n} — {presets[n].base_url}",
    on_change=endpoint_changed,
)
probe_col.button(
    "Probe the catalog",
    key="run_probe_button",
    on_click=probe_endpoint,
    icon=":material/travel_explore:",
    help="Lists the endpoint's models (GET /models) and marks which default models it offers.",
    width="stretch",
)
key_problem = key_variable_problem_or_error(endpoint.api_key_env)
key_ok = key_is_set(endpoint.api_key_env)
if key_problem:
    st.error(
        "This endpoint's key variable cannot be used: " + plain(key_problem, multiline=True),
        icon=":material/key_off:",
    )
elif not endpoint.api_key_env:
    st.info(
        "This endpoint needs no key (a local server)."
        + (
            " The bundled model answers only while `cvb serve-local` (or `cvb demo`) runs: "
            "**Probe** tells whether it does."
            if launcher.is_local(endpoint)
            else ""
        ),
        icon=":material/key_off:",
    )
elif key_ok:
    st.success(
        f"Key variable `{endpoint.api_key_env}` is set in the studio's environment. "
        "Its value is never shown, stored or logged.",
        icon=":material/key:",
    )
else:
    st.warning(launcher.key_missing_message(endpoint.api_key_env), icon=":material/key_off:")

probed = ss.get("run_probe")
probe: launcher.ProbeResult | None = None
if probed and probed[0] == endpoint.name and probed[1] == endpoint.base_url:
    probe = probed[2]
if probe is not None and probe.error:
    st.error("Probe failed: " + plain(probe.error, limit=2000, multiline=True))
    if advice := launcher.probe_advice(endpoint, probe):
        st.info(advice, icon=":material/lightbulb:")
elif probe is not None:
    offered = sum(ok for _, ok in probe.preferred)
    st.success(
        f"The catalog of {plain(endpoint.base_url)} lists {len(probe.catalog)} models. "
        f"Default models available: {offered} of {len(MODEL_PREFERENCE)}."
    )
    st.table(
        pd.DataFrame(
            [
                {
                    "default model (in order of preference)": model,
                    "offered here": "yes" if ok else "no",
                    "chosen by default": "yes" if model in probe.default_models else "",
                }
                for model, ok in probe.preferred
            ]
        ).set_index("default model (in order of preference)")
    )
    with st.expander(f"Whole catalog ({len(probe.catalog)} models)"):
        # Model ids are the server's: shown as literal text.
        st.code(block(", ".join(probe.catalog)) or "(empty)", language=None, wrap_lines=True)

with st.expander("Add, edit or remove endpoints", icon=":material/settings:"):
    st.caption(
        f"Endpoints are saved in `{presets_path()}`. An endpoint stores the **name** of the "
        "environment variable that holds its key (e.g. `GROQ_API_KEY`), never the key: export "
        "the variable before starting the studio."
    )
    st.selectbox(
        "Endpoint to edit", [NEW, *sorted(presets)], key="run_ep_edit", on_change=fill_editor
    )
    a, b = st.columns(2)
    a.text_input("Name", key="run_ep_name", placeholder="lab-vllm")
    b.text_input(
        "Base URL", key="run_ep_url", placeholder="http://127.0.0.1:8000/v1 or https://…/v1"
    )
    a.text_input(
        "Key variable name",
        key="run_ep_key_env",
        placeholder="GROQ_API_KEY (empty: the server needs no key)",
        help="The NAME of the environment variable holding the key, not the key.",
    )
    b.text_input(
        "Models (optional, comma-separated)",
        key="run_ep_models",
        placeholder="empty: probe the catalog and take the default models",
    )
    save_col, remove_col = st.columns(2)
    save_col.button(
        "Save endpoint", key="run_ep_save", on_click=save_endpoint, icon=":material/save:"
    )
    editing = presets.get(ss.run_ep_edit)
    removable = editing is not None and not editing.builtin
    remove_col.button(
        "Remove endpoint",
        key="run_ep_remove",
        on_click=remove_endpoint,
        disabled=not removable,
        icon=":material/delete:",
        help=None
        if removable
        else "Built-in endpoints cannot be removed (edit one to override it).",
    )
    show_flash("run_ep_flash")

# 2 · What to run ------------------------------------------------------------------------
st.subheader("2 · What to run")
if library_error:
    st.error(
        f"The scenarios in {plain(root)} do not load, so nothing can run until they are fixed "
        "(the Author page shows each problem):"
    )
    st.code(block(library_error, limit=2000), language=None, wrap_lines=True)
model_options = list(
    dict.fromkeys(
        [*(probe.catalog if probe else []), *endpoint.models, *MODEL_PREFERENCE, *ss.run_models]
    )
)
st.multiselect(
    "Models",
    model_options,
    key="run_models",
    accept_new_options=True,
    placeholder="empty: probe the catalog at launch and take the first three default models",
    help="Type a model id to add one that is not listed. Probe the catalog to see what the "
    "endpoint offers.",
)
st.radio("Scenarios", ["By category", "One by one"], key="run_pick_mode", horizontal=True)
if ss.run_pick_mode == "By category":
    counts = {c: sum(i.scenario.category == c for i in scenarios.values()) for c in categories}
    st.multiselect(
        "Categories",
        categories,
        key="run_categories",
        format_func=lambda c: f"{c} ({counts.get(c, 0)} scenarios)",
    )
    chosen_any = bool(ss.run_categories)
else:
    st.multiselect(
        "Scenarios",
        sorted(scenarios),
        key="run_only",
        format_func=lambda s: f"{s} — {scenarios[s].scenario.category}",
        placeholder="pick scenarios by id",
    )
    chosen_any = bool(ss.run_only)
st.multiselect("Arms", list(ARMS), key="run_arms", help=ARM_HELP)
with st.expander("Memory sweep (incentivized variants)", expanded=bool(ss.run_sweep_loads)):
    st.caption(
        "Adds an incentivized variant for every combination: the constraints among `load` "
        "distractor notes from the project-memory pool, at a position, through a channel. "
        "No load chosen: no variant. The call count below follows."
    )
    w1, w2, w3 = st.columns(3)
    w1.multiselect("Loads", SWEEP_LOADS, key="run_sweep_loads", placeholder="no sweep")
    w2.multiselect("Positions", SWEEP_POSITIONS, key="run_sweep_positions", placeholder="spread")
    w3.multiselect("Channels", SWEEP_CHANNELS, key="run_sweep_channels", placeholder="inline")
layer_builder.render()
c1, c2, c3, c4 = st.columns(4)
c1.number_input("Repetitions", min_value=1, max_value=50, step=1, key="run_runs")
c2.number_input(
    "Temperature", min_value=0.0, max_value=2.0, step=0.1, format="%.1f", key="run_temperature"
)
c3.number_input("Max tokens", min_value=16, max_value=65536, step=256, key="run_max_tokens")
c4.number_input(
    "Concurrency",
    min_value=1,
    max_value=64,
    step=1,
    key="run_concurrency",
    help="Requests in flight at once.",
)
with st.expander("Run id, note and retries"):
    a, b = st.columns(2)
    a.text_input(
        "Run id",
        key="run_id_input",
        placeholder="automatic: run-YYYYMMDD-HHMMSS-xxxx",
        help="Names the run in the store and in reports.",
    )
    b.text_input("Note", key="run_note", placeholder="free text stored with the run")
    a.number_input(
        "Attempts per call",
        min_value=1,
        max_value=10,
        step=1,
        key="run_attempts",
        help="A call that still fails after these attempts is stored as an error record "
        "(excluded from accuracy; retry it later).",
    )
    b.number_input(
        "Timeout per call (s)", min_value=5.0, max_value=600.0, step=5.0, key="run_timeout"
    )

run_id = ss.run_id_input.strip() or ss.setdefault("run_auto_id", launcher.new_run_id())
spec = current_spec(run_id)
preview = launcher.preview(spec, scenarios)
problems = list(preview.problems)
if library_error:
    problems.append("the scenarios do not load")
if not chosen_any:
    problems.append("choose at least one category or scenario")
if probe is not None and probe.error:
    problems.append(
        "the last probe of this endpoint failed (see 1 · Endpoint): probe it again once it answers"
    )
if key_problem:
    problems.append(key_problem)
elif endpoint.api_key_env and not key_ok:
    problems.append(f"{endpoint.api_key_env} is not set in the studio's environment")
if problem := launcher.run_id_problem(run_id):
    problems.append(problem)
else:
    with Session(state.engine()) as session:
        if session.get(Run, run_id) is not None:
            problems.append(
                f"a run named {run_id} exists: resume it under 3 · Runs, or choose another id"
            )

with st.container(border=True, key="run_preview"):
    st.markdown("**Dry run** · nothing has been sent yet")
    if chosen_any and not library_error:
        st.markdown(f"#### {preview.calls} calls")
        st.markdown(preview.formula)
        st.caption(
            "Scenarios: "
            + ", ".join(f"{cat} {n}" for cat, n in preview.by_category.items())
            + " · arms: "
            + ", ".join(preview.arms)
            + " · models: "
            + (
                ", ".join(plain(m) for m in preview.models)
                if preview.models_known
                else "probed at launch (first three available of the default list)"
            )
        )
        with st.expander("The same run from a terminal"):
            st.code(launcher.shell_command(spec), language="bash", wrap_lines=True)
    for problem in problems:
        st.warning(
            plain(problem[:1].upper() + problem[1:], multiline=True), icon=":material/block:"
        )
st.button(
    f"Launch {preview.calls} calls" if not problems else "Launch",
    key="run_launch",
    type="primary",
    icon=":material/rocket_launch:",
    disabled=bool(problems) or preview.calls == 0,
    on_click=launch_run,
    args=(run_id,),
)
show_flash("run_launch_flash")


# 3 · Runs -------------------------------------------------------------------------------


def accuracy_table(rows: list[mon.ArmAccuracy]) -> pd.DataFrame:
    arms = arm_order({r.arm for r in rows})  # seed arms first, then memory variants
    table: dict[str, dict[str, str]] = {}
    for r in rows:
        cell = "–" if r.rate.value is None else f"{r.rate.value:.0%} ({r.rate.k}/{r.rate.n})"
        table.setdefault(plain(r.model), {a: "" for a in arms})[r.arm] = cell
    return pd.DataFrame.from_dict(table, orient="index", columns=arms).rename_axis("model")


def latest_line(row: mon.FinishedRow) -> str:
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


def run_card(detail: mon.RunDetail, launch: launcher.Launch | None, is_starting: bool) -> None:
    p = detail.progress
    label, color, icon = STATE_BADGES[p.state]
    with st.container(border=True, key=f"run_card_{p.run_id}"):
        head, badge = st.columns([5, 1], vertical_alignment="center")
        endpoint_name = launcher.endpoint_label(p.params, presets)
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
            "ETA", mon.format_duration(p.eta_s) if p.active else ("done" if p.missing == 0 else "–")
        )
        if p.active:
            runners_table(state.engine(), p.run_id)  # each runner's pace (cvb run --join)
        if p.state == "died":
            st.warning(
                f"The run's process died ({plain(p.died_reason)}). Everything it finished is stored; "
                f"resume it to send the {p.missing} missing cells.",
                icon=":material/heart_broken:",
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
                args=("cancel", p.run_id),
                help="Stops the process (SIGTERM); every finished cell stays stored.",
            )
        if p.resumable and not busy:
            buttons.button(
                f"Resume ({p.missing} missing)",
                key=f"run_resume_{p.run_id}",
                icon=":material/play_arrow:",
                on_click=control,
                args=("resume", p.run_id),
                help="Runs the same matrix again under this id: only cells without a "
                "successful answer are sent.",
            )
        if p.retryable and not busy:
            buttons.button(
                f"Retry {p.errors} errors",
                key=f"run_retry_{p.run_id}",
                icon=":material/replay:",
                on_click=control,
                args=("retry", p.run_id),
                help="Sends again only the cells stored as API errors.",
            )
        if detail.accuracy:
            st.markdown("**Strict accuracy so far** · share of answers honoring every constraint")
            st.table(accuracy_table(detail.accuracy))
        if detail.latest is not None:
            st.markdown("**Latest answer:** " + latest_line(detail.latest))
        if detail.errors:
            st.markdown("**Latest errors**")
            st.table(
                pd.DataFrame(
                    [
                        {
                            "at (UTC)": f"{e.created:%H:%M:%S}",
                            "model": plain(e.model),
                            "scenario": plain(e.scenario_id),
                            "arm": plain(e.arm),
                            "rep": e.rep,
                            "attempts": e.attempts,
                            "failed": "memory layer" if e.kind == "memory" else "endpoint",
                            "reason": plain(e.reason),
                        }
                        for e in detail.errors
                    ]
                ).set_index("at (UTC)")
            )
        if launch is not None and Path(launch.log).exists():
            with st.expander("Log (last lines)", expanded=p.state == "failed"):
                st.code(
                    launcher.log_tail(launch.log) or "(empty)", language="text", wrap_lines=True
                )


def live_runs() -> None:
    show_flash("run_live_flash")
    shown, known, recent = live_state()
    if active_ids(shown, known, recent) != ss.run_active and ss.run_in_fragment:
        st.rerun()  # a run started or ended: the full page reruns and sets the refresh timer
    ss.run_in_fragment = True
    with Session(state.engine()) as session:
        details = [mon.run_detail(session, p) for p in shown]
    starting = launcher.starting(recent, known)
    ended = launcher.ended_early(recent, known)
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
                    args=("cancel", item.run_id),
                )
    for item in ended:
        with st.container(border=True, key=f"run_ended_{item.run_id}"):
            st.error(
                f"**{plain(item.run_id)}**: the {plain(item.action)} ended before the run started. "
                "The end of its log says why:",
                icon=":material/error:",
            )
            st.code(launcher.log_tail(item.log) or "(empty log)", language="text", wrap_lines=True)
            st.button(
                "Dismiss",
                key=f"run_dismiss_{item.run_id}",
                on_click=dismiss,
                args=(item.run_id,),
            )
    if not details and not starting and not ended:
        st.info("No runs yet. Launch one above, or start one with `cvb run` in a terminal.")
    for detail in details:
        rid = detail.progress.run_id
        run_card(detail, by_run.get(rid), any(item.run_id == rid for item in starting))
    if len(details) == MAX_RUNS:
        st.caption(f"The {MAX_RUNS} most recent runs are shown; the Results page has every run.")


st.subheader("3 · Runs", anchor="runs")
st.caption(
    f"Live from the store: refreshes every {REFRESH_S:.0f} s while a run is active, "
    "including runs started with `cvb run` in a terminal."
)
ss.run_active = live_now
ss.run_in_fragment = False
live_runs_panel = st.fragment(live_runs, run_every=REFRESH_S if ss.run_active else None)
live_runs_panel()
