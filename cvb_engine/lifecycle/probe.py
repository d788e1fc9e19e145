"""Endpoints as the Run page meets them: probing a catalog, checking a preset before it
is saved, and naming the preset a stored run was sent to."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlmodel import Session, col, select

from cvb_engine.endpoints import (
    BUILTIN,
    MODEL_PREFERENCE,
    Endpoint,
    EndpointError,
    choose_models,
    key_variable_problem_or_error,
    read_key,
)
from cvb_engine.run.client import probe_catalog
from cvb_engine.run.errors import RunError
from cvb_engine.store import Run

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
ENDPOINT_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,39}$")


# --------------------------------------------------------------------------- probing


@dataclass(frozen=True)
class ProbeResult:
    """An endpoint's ``/models`` catalog, against the models a run prefers."""

    endpoint: str
    catalog: list[str]
    preferred: list[tuple[str, bool]]  # (model, offered?) in preference order
    default_models: list[str]  # what the runner would pick without --models
    error: str | None = None


def probe_endpoint(endpoint: Endpoint, timeout_s: float = 15.0) -> ProbeResult:
    """List the catalog; errors (unset key, refused key, unreachable) come back as text."""
    empty = ProbeResult(endpoint.name, [], [(m, False) for m in MODEL_PREFERENCE], [])
    if problem := key_variable_problem_or_error(endpoint.api_key_env):
        return _with_error(empty, problem)
    try:
        key = read_key(endpoint.api_key_env)
    except EndpointError:
        return _with_error(empty, key_missing_message(endpoint.api_key_env))
    try:
        catalog = asyncio.run(probe_catalog(endpoint, key, timeout_s))
    except RunError as exc:
        return _with_error(empty, str(exc))
    try:
        defaults = choose_models(catalog)
    except EndpointError:
        defaults = []
    offered = set(catalog)
    return ProbeResult(
        endpoint.name, catalog, [(m, m in offered) for m in MODEL_PREFERENCE], defaults
    )


def _with_error(result: ProbeResult, error: str) -> ProbeResult:
    return ProbeResult(result.endpoint, [], result.preferred, [], error)


def is_local_endpoint(endpoint: Endpoint) -> bool:
    """Whether ``endpoint`` is the bundled model's server (``cvb serve-local``)."""
    return endpoint.name == "local" or endpoint.base_url == BUILTIN["local"].base_url


def probe_advice(endpoint: Endpoint, result: ProbeResult) -> str | None:
    """What to do about a failed probe, when there is something to do."""
    if result.error and is_local_endpoint(endpoint) and "cannot reach" in result.error:
        return (
            "The local model server is not running. Start it in a terminal with "
            "`cvb serve-local` (or run `cvb demo`, which starts it), then probe again."
        )
    return None


# --------------------------------------------------------------------------- defaults


def endpoint_of(params: dict[str, Any], presets: dict[str, Endpoint]) -> str | None:
    """The preset a stored run was sent to: by its stored name while that preset still
    has the run's URL, else the preset at the run's URL and key variable (a run sent
    with ``--base-url``, as older demos were, is stored as ``custom``); None if none."""
    base_url = str(params.get("base_url") or "")
    key_env = str(params.get("api_key_env") or "")
    named = presets.get(str(params.get("endpoint") or ""))
    if named is not None and (not base_url or named.base_url == base_url):
        return named.name
    for name in sorted(presets, key=lambda n: (presets[n].builtin, n)):
        if presets[name].base_url == base_url and presets[name].api_key_env == key_env:
            return name
    return None


def endpoint_label(params: dict[str, Any], presets: dict[str, Endpoint]) -> str:
    """How a stored run's endpoint is named on the page."""
    return endpoint_of(params, presets) or str(
        params.get("endpoint") or params.get("base_url") or "?"
    )


def latest_run_endpoint(session: Session, presets: dict[str, Endpoint]) -> str | None:
    """The preset the newest stored run used (the Run page opens on it), or None."""
    run = session.exec(select(Run).order_by(col(Run.created).desc())).first()
    return None if run is None else endpoint_of(run.params, presets)


def run_exists(session: Session, run_id: str) -> bool:
    """Whether a run of that id is in the store (a new launch must choose another id)."""
    return session.get(Run, run_id) is not None


def key_missing_message(api_key_env: str) -> str:
    return (
        f"The variable {api_key_env} is not set in the studio's environment, so nothing can be "
        f"sent to this endpoint. Stop the studio, run `export {api_key_env}=<your key>` in its "
        "terminal and start it again. The studio stores only the variable's name."
    )


# --------------------------------------------------------------------------- endpoints


def parse_models(text: str) -> list[str]:
    """Model ids from a comma- or newline-separated text, duplicates dropped."""
    out: list[str] = []
    for part in re.split(r"[,\n]", text):
        item = part.strip()
        if item and item not in out:
            out.append(item)
    return out


def endpoint_problems(name: str, base_url: str, api_key_env: str) -> list[str]:
    """What is wrong with an endpoint before it is saved (never echoing a pasted key)."""
    problems = []
    if not ENDPOINT_NAME_RE.match(name):
        problems.append(
            "Name: 1–40 lowercase letters, digits, '.', '_' or '-', e.g. `groq-eu` or `lab-vllm`."
        )
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or " " in base_url:
        problems.append("Base URL: an http(s) URL such as `https://api.groq.com/openai/v1`.")
    elif parts.username or parts.password:
        problems.append(
            "Base URL: leave credentials out of the URL; the key belongs in an environment variable."
        )
    if api_key_env and not ENV_NAME_RE.match(api_key_env):
        if len(api_key_env) >= 16 and " " not in api_key_env:
            problems.append(
                "Key variable: this looks like a key itself. Enter the NAME of the environment "
                "variable that holds the key (e.g. `GROQ_API_KEY`); keys are never stored."
            )
        else:
            problems.append(
                "Key variable: the name of an environment variable, e.g. `GROQ_API_KEY` "
                "(letters, digits and '_'), or empty when the server needs no key."
            )
    elif problem := key_variable_problem_or_error(api_key_env):
        problems.append(f"Key variable: {problem}.")
    return problems
