"""The Run page's state: what every part of it reads, and the session's defaults.

Session keys start with ``run_``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from sqlmodel import Session

from cvb_engine import (
    CVB_CATEGORIES,
    DEFAULT_OPTIONS,
    Endpoint,
    EndpointError,
    LoadedScenario,
    latest_run_endpoint,
    load_presets,
    logs_dir,
)
from studio import cache, state
from studio.components.text import block

NEW = "➕ New endpoint"
ss = st.session_state


@dataclass(frozen=True)
class RunContext:
    """What one rerun of the page knows: where things are, the presets, the library."""

    root: Path
    db_url: str
    logs: Path
    presets: dict[str, Endpoint]
    endpoint: Endpoint
    scenarios: dict[str, LoadedScenario]
    categories: list[str]
    library_error: str | None


def show_flash(key: str) -> None:
    message = ss.pop(key, None)
    if message:
        getattr(st, message[0])(message[1])


def load() -> RunContext:
    """Read the presets and the library and set the session's defaults (stops the page
    when the presets cannot be read)."""
    root = state.scenarios_root()
    db_url = state.db_url()
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
            latest = latest_run_endpoint(session, presets)
        ss.run_endpoint = latest or (user_presets[0] if user_presets else "groq")
    if ss.run_endpoint not in presets:
        ss.run_endpoint = next(iter(sorted(presets)))
    endpoint = presets[ss.run_endpoint]
    ss.setdefault("run_models", list(endpoint.models))
    ss.setdefault("run_pick_mode", "By category")
    ss.setdefault("run_arms", list(DEFAULT_OPTIONS.arms))
    ss.setdefault("run_sweep_loads", [])
    ss.setdefault("run_sweep_positions", [])
    ss.setdefault("run_sweep_channels", [])
    ss.setdefault("run_sweep_stale", [])
    ss.setdefault("run_sweep_budgets", [])
    ss.setdefault("run_sweep_turns", [])
    ss.setdefault("run_runs", DEFAULT_OPTIONS.runs)
    ss.setdefault("run_temperature", DEFAULT_OPTIONS.temperature)
    ss.setdefault("run_max_tokens", DEFAULT_OPTIONS.max_tokens)
    ss.setdefault("run_concurrency", DEFAULT_OPTIONS.concurrency)
    ss.setdefault("run_attempts", DEFAULT_OPTIONS.max_attempts)
    ss.setdefault("run_timeout", DEFAULT_OPTIONS.timeout_s)
    ss.setdefault("run_id_input", "")
    ss.setdefault("run_note", "")
    ss.setdefault("run_ep_edit", NEW)
    if ss.run_ep_edit != NEW and ss.run_ep_edit not in presets:
        ss.run_ep_edit = NEW
    for field in ("run_ep_name", "run_ep_url", "run_ep_key_env", "run_ep_models"):
        ss.setdefault(field, "")

    library = cache.scenario_library(str(root), cache.library_stamps(root))
    library_error = library if isinstance(library, str) else None
    scenarios: dict[str, LoadedScenario] = {} if library_error else library
    categories: list[str] = sorted(
        {item.scenario.category for item in scenarios.values()},
        key=lambda c: (c not in CVB_CATEGORIES, c),
    )
    ss.setdefault("run_categories", [c for c in categories if c in CVB_CATEGORIES] or categories)
    ss.setdefault("run_only", [])
    # The library may have changed since the last rerun: keep only what still exists.
    ss.run_categories = [c for c in ss.run_categories if c in categories]
    ss.run_only = [sid for sid in ss.run_only if sid in scenarios]
    return RunContext(
        root=root,
        db_url=db_url,
        logs=logs_dir(db_url),
        presets=presets,
        endpoint=endpoint,
        scenarios=scenarios,
        categories=categories,
        library_error=library_error,
    )
