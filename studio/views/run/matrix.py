"""2 · What to run: models, scenarios, arms, a memory sweep, layers, agent variants and
sampling; the dry run of what a launch would send, and the launch itself."""

from __future__ import annotations

import streamlit as st
from sqlmodel import Session

from cvb_engine import (
    ARMS,
    MODEL_PREFERENCE,
    LaunchError,
    ProbeResult,
    RunEstimate,
    RunOptions,
    agent_forms,
    format_cost,
    launch_run,
    new_run_id,
    preview_launch,
    run_exists,
    run_id_problem,
    shell_command,
    sweep_arms,
)
from studio import cache, state
from studio.components import agent_builder, layer_builder
from studio.components.text import block, plain
from studio.views.run.context import RunContext, show_flash

SWEEP_LOADS = [0, 10, 25, 50, 100, 200, 350]
SWEEP_POSITIONS = ["start", "middle", "end", "spread"]
SWEEP_CHANNELS = ["inline", "system", "file", "history"]
SWEEP_STALE = ["none", "with", "only"]
SWEEP_BUDGETS = [500, 1000, 2000, 4000, 8000, 16000, 32000]
SWEEP_TURNS = [0, 1, 2, 4, 8]
ARM_HELP = (
    "cold: the task alone · mandated: the task with the constraints as explicit orders · "
    "incentivized: the constraints as past decisions in project memory, never as orders"
)
ss = st.session_state


COST_HELP = (
    "Prompts: characters / 4; completions: max tokens on every call, so the bound is high. "
    "Prices: the endpoint preset's or data/endpoints.json's (README: Cost); an unknown price "
    "is never $0. An agent episode's later requests carry its history and an agent "
    "program's requests are its own: such arms are named, not bounded."
)


def cost_line(estimate: RunEstimate) -> str:
    """The dry run's cost, a clause per model (names from outside drawn as text)."""
    parts = []
    for model in estimate.models:
        most = estimate.cost_max(model)
        if most is None:
            parts.append(f"{plain(model)} unknown (no price)")
        else:
            prompts = format_cost(estimate.prompts_cost(model))
            parts.append(f"{plain(model)} at most {format_cost(most)} (prompts ~{prompts})")
    line = "Cost: " + " · ".join(parts)
    if not estimate.bounded:
        left = [a.arm for a in estimate.arms if not a.bounded]
        line += " · not included: " + ", ".join(plain(a) for a in left)
    return line


def current_spec(ctx: RunContext, run_id: str) -> RunOptions:
    by_category = ss.run_pick_mode == "By category"
    return RunOptions(
        scenarios=str(ctx.root),
        base_url=ctx.endpoint.base_url,
        api_key_env=ctx.endpoint.api_key_env,
        run_id=run_id,
        endpoint=ctx.endpoint.name,
        models=tuple(ss.run_models),
        categories=tuple(ss.run_categories) if by_category else (),
        only=() if by_category else tuple(ss.run_only),
        arms=tuple(a for a in ARMS if a in ss.run_arms)
        + tuple(
            sweep_arms(
                ss.run_sweep_loads,
                ss.run_sweep_positions,
                ss.run_sweep_channels,
                stale=ss.run_sweep_stale,
                budgets=ss.run_sweep_budgets,
                turns=ss.run_sweep_turns,
            )
        )
        + tuple(layer_builder.arms())
        + tuple(agent_builder.arms()),
        runs=int(ss.run_runs),
        temperature=float(ss.run_temperature),
        max_tokens=int(ss.run_max_tokens),
        concurrency=int(ss.run_concurrency),
        timeout_s=float(ss.run_timeout),
        max_attempts=int(ss.run_attempts),
        note=ss.run_note.strip() or None,
    )


def launch(ctx: RunContext, run_id: str) -> None:
    try:
        started = launch_run(current_spec(ctx, run_id), db_url=ctx.db_url, logs=ctx.logs)
    except LaunchError as exc:
        ss.run_launch_flash = ("error", "Not launched: " + plain(exc, multiline=True))
        return
    ss.run_id_input = ""
    ss.pop("run_auto_id", None)  # the next launch gets a fresh automatic id
    ss.run_launch_flash = (
        "success",
        f"Started run **{plain(started.run_id)}** in the background (process {started.pid}). It keeps "
        "going if you reload this page or close the browser; its progress shows below.",
    )


def render(
    ctx: RunContext, probe: ProbeResult | None, key_problem: str | None, key_ok: bool
) -> None:
    """Draw the choices, the dry run and the Launch button (disabled while a problem stands)."""
    if ctx.library_error:
        st.error(
            f"The scenarios in {plain(ctx.root)} do not load, so nothing can run until they are fixed "
            "(the Author page shows each problem):"
        )
        st.code(block(ctx.library_error, limit=2000), language=None, wrap_lines=True)
    model_options = list(
        dict.fromkeys(
            [
                *(probe.catalog if probe else []),
                *ctx.endpoint.models,
                *MODEL_PREFERENCE,
                *ss.run_models,
            ]
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
        counts = {
            c: sum(i.scenario.category == c for i in ctx.scenarios.values()) for c in ctx.categories
        }
        st.multiselect(
            "Categories",
            ctx.categories,
            key="run_categories",
            format_func=lambda c: f"{c} ({counts.get(c, 0)} scenarios)",
        )
        chosen_any = bool(ss.run_categories)
    else:
        st.multiselect(
            "Scenarios",
            sorted(ctx.scenarios),
            key="run_only",
            format_func=lambda s: f"{s} — {ctx.scenarios[s].scenario.category}",
            placeholder="pick scenarios by id",
        )
        chosen_any = bool(ss.run_only)
    st.multiselect("Arms", list(ARMS), key="run_arms", help=ARM_HELP)
    swept = ss.run_sweep_loads or ss.run_sweep_stale or ss.run_sweep_budgets or ss.run_sweep_turns
    with st.expander("Memory sweep (incentivized variants)", expanded=bool(swept)):
        st.caption(
            "Adds an incentivized variant for every combination: the constraints among `load` "
            "distractor notes from the project-memory pool, at a position, through a channel. "
            "Nothing chosen: no variant. The call count below follows."
        )
        w1, w2, w3 = st.columns(3)
        w1.multiselect("Loads", SWEEP_LOADS, key="run_sweep_loads", placeholder="no sweep")
        w2.multiselect(
            "Positions", SWEEP_POSITIONS, key="run_sweep_positions", placeholder="spread"
        )
        w3.multiselect("Channels", SWEEP_CHANNELS, key="run_sweep_channels", placeholder="inline")
        st.caption(
            "Memory as it really is: the decisions the constraints replaced beside them (`with`) "
            "or instead of them (`only`); the memory cut to a byte budget the way agent tools "
            "cut a rules file (inline, system and file channels); unrelated exchanges between "
            "the memory and the task (history channel)."
        )
        w4, w5, w6 = st.columns(3)
        w4.multiselect("Superseded notes", SWEEP_STALE, key="run_sweep_stale", placeholder="none")
        w5.multiselect(
            "Budgets (bytes)",
            SWEEP_BUDGETS,
            key="run_sweep_budgets",
            placeholder="no budget",
            format_func=lambda b: f"{b:,}",
        )
        w6.multiselect("Turns (history)", SWEEP_TURNS, key="run_sweep_turns", placeholder="2")
    layer_builder.render()
    agent_builder.render()
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

    run_id = ss.run_id_input.strip() or ss.setdefault("run_auto_id", new_run_id())
    spec = current_spec(ctx, run_id)
    preview = preview_launch(spec, ctx.scenarios)
    problems = list(preview.problems)
    if ctx.library_error:
        problems.append("the scenarios do not load")
    if not chosen_any:
        problems.append("choose at least one category or scenario")
    if probe is not None and probe.error:
        problems.append(
            "the last probe of this endpoint failed (see 1 · Endpoint): probe it again once it answers"
        )
    if key_problem:
        problems.append(key_problem)
    elif ctx.endpoint.api_key_env and not key_ok:
        problems.append(f"{ctx.endpoint.api_key_env} is not set in the studio's environment")
    if problem := run_id_problem(run_id):
        problems.append(problem)
    else:
        with Session(state.engine()) as session:
            if run_exists(session, run_id):
                problems.append(
                    f"a run named {run_id} exists: resume it under 3 · Runs, or choose another id"
                )

    with st.container(border=True, key="run_preview"):
        st.markdown("**Dry run** · nothing has been sent yet")
        if chosen_any and not ctx.library_error:
            st.markdown(f"#### {preview.calls} calls")
            st.markdown(preview.formula)
            cost = agent_forms.episode_cost(preview.arms)
            if cost.episodes:
                cells = len(preview.scenarios) * preview.runs * len(preview.models)
                own = (
                    f"; {cost.commands * cells} run by your agent program, whose requests "
                    "are its own"
                    if cost.commands
                    else ""
                )
                st.caption(
                    f"Of these, {cost.episodes * cells} are agent episodes (one cell each): the "
                    f"tool loop sends at most {cost.max_requests * cells} requests for them "
                    f"(steps + 1 per episode){own}.",
                    help="An episode ends when the model answers without a tool call, or "
                    "after its steps.",
                )
            estimate = cache.run_estimate(
                str(ctx.root), cache.library_stamps(ctx.root), spec.model_dump_json()
            )
            if estimate is not None:
                st.caption(cost_line(estimate), help=COST_HELP)
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
                st.code(shell_command(spec), language="bash", wrap_lines=True)
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
        on_click=launch,
        args=(ctx, run_id),
    )
    show_flash("run_launch_flash")
