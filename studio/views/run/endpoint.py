"""1 · Endpoint: pick a preset, probe its catalog, say whether its key variable is set;
add, edit and remove presets."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from cvb_engine import (
    MODEL_PREFERENCE,
    Endpoint,
    EndpointError,
    ProbeResult,
    delete_preset,
    endpoint_problems,
    is_local_endpoint,
    key_is_set,
    key_missing_message,
    key_variable_problem_or_error,
    load_presets,
    parse_models,
    presets_path,
    probe_advice,
    probe_endpoint,
    save_preset,
)
from studio.components.text import block, plain
from studio.views.run.context import NEW, RunContext, show_flash

ss = st.session_state


def endpoint_changed() -> None:
    chosen = load_presets().get(ss.run_endpoint)
    ss.run_models = list(chosen.models) if chosen else []
    ss.pop("run_probe", None)


def probe(presets: dict[str, Endpoint]) -> None:
    result = probe_endpoint(presets[ss.run_endpoint])
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
    problems = endpoint_problems(name, base_url, key_env)
    if problems:
        if any("looks like a key" in p for p in problems):
            ss.run_ep_key_env = ""  # a pasted key does not stay in the form
        ss.run_ep_flash = ("error", "Not saved. " + " ".join(problems))
        return
    try:
        save_preset(Endpoint(name, base_url, key_env, parse_models(ss.run_ep_models)))
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


def render(ctx: RunContext) -> tuple[ProbeResult | None, str | None, bool]:
    """Draw the panel; return the last probe of this endpoint, its key variable's problem
    and whether the key is set (the launch needs them)."""
    pick, probe_col = st.columns([3, 1], vertical_alignment="bottom")
    pick.selectbox(
        "Endpoint (any OpenAI-compatible API)",
        sorted(ctx.presets),
        key="run_endpoint",
        format_func=lambda n: f"{n} — {ctx.presets[n].base_url}",
        on_change=endpoint_changed,
    )
    probe_col.button(
        "Probe the catalog",
        key="run_probe_button",
        on_click=probe,
        args=(ctx.presets,),
        icon=":material/travel_explore:",
        help="Lists the endpoint's models (GET /models) and marks which default models it offers.",
        width="stretch",
    )
    key_problem = key_variable_problem_or_error(ctx.endpoint.api_key_env)
    key_ok = key_is_set(ctx.endpoint.api_key_env)
    if key_problem:
        st.error(
            "This endpoint's key variable cannot be used: " + plain(key_problem, multiline=True),
            icon=":material/key_off:",
        )
    elif not ctx.endpoint.api_key_env:
        st.info(
            "This endpoint needs no key (a local server)."
            + (
                " The bundled model answers only while `cvb serve-local` (or `cvb demo`) runs: "
                "**Probe** tells whether it does."
                if is_local_endpoint(ctx.endpoint)
                else ""
            ),
            icon=":material/key_off:",
        )
    elif key_ok:
        st.success(
            f"Key variable `{ctx.endpoint.api_key_env}` is set in the studio's environment. "
            "Its value is never shown, stored or logged.",
            icon=":material/key:",
        )
    else:
        st.warning(key_missing_message(ctx.endpoint.api_key_env), icon=":material/key_off:")

    probed = ss.get("run_probe")
    probed_result: ProbeResult | None = None
    if probed and probed[0] == ctx.endpoint.name and probed[1] == ctx.endpoint.base_url:
        probed_result = probed[2]
    if probed_result is not None and probed_result.error:
        st.error("Probe failed: " + plain(probed_result.error, limit=2000, multiline=True))
        if advice := probe_advice(ctx.endpoint, probed_result):
            st.info(advice, icon=":material/lightbulb:")
    elif probed_result is not None:
        offered = sum(ok for _, ok in probed_result.preferred)
        st.success(
            f"The catalog of {plain(ctx.endpoint.base_url)} lists {len(probed_result.catalog)} models. "
            f"Default models available: {offered} of {len(MODEL_PREFERENCE)}."
        )
        st.table(
            pd.DataFrame(
                [
                    {
                        "default model (in order of preference)": model,
                        "offered here": "yes" if ok else "no",
                        "chosen by default": "yes" if model in probed_result.default_models else "",
                    }
                    for model, ok in probed_result.preferred
                ]
            ).set_index("default model (in order of preference)")
        )
        with st.expander(f"Whole catalog ({len(probed_result.catalog)} models)"):
            # Model ids are the server's: shown as literal text.
            st.code(
                block(", ".join(probed_result.catalog)) or "(empty)", language=None, wrap_lines=True
            )

    with st.expander("Add, edit or remove endpoints", icon=":material/settings:"):
        st.caption(
            f"Endpoints are saved in `{presets_path()}`. An endpoint stores the **name** of the "
            "environment variable that holds its key (e.g. `GROQ_API_KEY`), never the key: export "
            "the variable before starting the studio."
        )
        st.selectbox(
            "Endpoint to edit",
            [NEW, *sorted(ctx.presets)],
            key="run_ep_edit",
            on_change=fill_editor,
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
        editing = ctx.presets.get(ss.run_ep_edit)
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
    return probed_result, key_problem, key_ok
