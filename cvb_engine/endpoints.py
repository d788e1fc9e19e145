"""Endpoints: named presets, API keys read by variable name, model catalogs.

Built-in presets live here; a user's own presets (added from the studio's Run
page or by hand) live in ``data/endpoints.json``, or in the file named by
``CVB_ENDPOINTS``. A preset stores the *name* of the environment variable
that holds the key, never the key.

That name must be one declared for endpoints: it ends in
``_API_KEY``, ``_TOKEN`` or ``_KEY``, or the endpoints file lists it under
``"key_variables"``. Saving a preset, resolving an endpoint and reading a key
all refuse any other name, so neither a page nor a flag can make a run send,
say, ``$HOME`` or ``$DATABASE_URL`` to a server as its "key".
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Without --models, the first three of these that the catalog offers.
MODEL_PREFERENCE: tuple[str, ...] = (
    "llama-3.3-70b-versatile",
    "llama-3.1-8b-instant",
    "openai/gpt-oss-120b",
    "qwen/qwen3.6-27b",
    "openai/gpt-oss-20b",
)
DEFAULT_MODEL_COUNT = 3
LOCAL_PORT = 8765
#: ``--endpoint local`` runs' defaults: the bundled server generates one reply at a time on the
#: CPU, so requests queue behind each other and a minute is not enough (cvb_engine.cli.run).
LOCAL_CONCURRENCY = 1
LOCAL_TIMEOUT_S = 300.0
# Servers that need no key (llama.cpp, vLLM without --api-key) still need the
# client to send something.
NO_KEY_PLACEHOLDER = "not-needed"


@dataclass(frozen=True)
class Endpoint:
    name: str
    base_url: str
    api_key_env: str = ""  # empty: the server needs no key
    models: list[str] = field(default_factory=list)
    builtin: bool = False

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("builtin")
        return data


BUILTIN: dict[str, Endpoint] = {
    "groq": Endpoint("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY", builtin=True),
    "openai": Endpoint("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", builtin=True),
    "local": Endpoint(
        "local", f"http://127.0.0.1:{LOCAL_PORT}/v1", "", ["smollm2-135m"], builtin=True
    ),
}


class EndpointError(Exception):
    """A configuration problem with an endpoint, worded for the user."""


#: Names that are key variables without being listed.
KEY_SUFFIXES: tuple[str, ...] = ("_API_KEY", "_TOKEN", "_KEY")
#: The entry of the endpoints file that lists other key variables (not a preset).
DECLARED_KEYS_ENTRY = "key_variables"
#: The entry of the endpoints file that holds the per-model price table (cvb_engine.cost).
PRICES_ENTRY = "prices"
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def presets_path() -> Path:
    return Path(os.environ.get("CVB_ENDPOINTS", Path("data") / "endpoints.json"))


def declared_key_variables(path: Path | None = None) -> frozenset[str]:
    """The names listed under ``"key_variables"`` in the endpoints file (by hand only)."""
    p = path or presets_path()
    data = _read_file(p)
    listed = data.get(DECLARED_KEYS_ENTRY, [])
    if not isinstance(listed, list) or not all(
        isinstance(n, str) and _ENV_NAME_RE.match(n) for n in listed
    ):
        raise EndpointError(
            f"{p}: {DECLARED_KEYS_ENTRY}: expected a list of environment variable names"
        )
    return frozenset(listed)


def key_variable_problem(api_key_env: str, path: Path | None = None) -> str | None:
    """Why ``api_key_env`` may not hold an endpoint's key, or None when it may.

    Empty (no key) is allowed. The message names the variable, never a value,
    and does not repeat a string that is not a variable name (it may be a key).
    """
    if not api_key_env:
        return None
    if not _ENV_NAME_RE.match(api_key_env):
        return (
            "the key variable must be the NAME of an environment variable (letters, digits "
            "and '_', e.g. GROQ_API_KEY), not a key"
        )
    if any(api_key_env.endswith(s) and len(api_key_env) > len(s) for s in KEY_SUFFIXES):
        return None
    p = path or presets_path()
    if api_key_env in declared_key_variables(p):
        return None
    return (
        f"{api_key_env} is not declared as a key variable, so it is never sent to an "
        f"endpoint: a key variable's name ends in {', '.join(KEY_SUFFIXES)}, or is listed "
        f'by hand under "{DECLARED_KEYS_ENTRY}" in {p}'
    )


def check_key_variable(api_key_env: str, path: Path | None = None) -> None:
    """Raise :class:`EndpointError` when ``api_key_env`` is not a declared key variable."""
    problem = key_variable_problem(api_key_env, path)
    if problem:
        raise EndpointError(problem)


def _read_file(p: Path) -> dict[str, Any]:
    if not p.exists():
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EndpointError(f"{p}: cannot read endpoint presets: {exc}") from None
    if not isinstance(data, dict):
        raise EndpointError(f"{p}: expected an object of name → endpoint")
    return data


def load_presets(path: Path | None = None) -> dict[str, Endpoint]:
    """Built-in presets overlaid with the user's file (which may override a built-in)."""
    presets = dict(BUILTIN)
    p = path or presets_path()
    data = _read_file(p)
    declared_key_variables(p)  # a malformed list is reported here, once
    for name, entry in data.items():
        if name in (DECLARED_KEYS_ENTRY, PRICES_ENTRY):
            continue  # not presets: the declared key variables, the price table (cost.py)
        if not isinstance(entry, dict) or not isinstance(entry.get("base_url"), str):
            raise EndpointError(f"{p}: {name}.base_url: expected a URL string")
        models = entry.get("models") or []
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise EndpointError(f"{p}: {name}.models: expected a list of model names")
        presets[name] = Endpoint(
            name, entry["base_url"], str(entry.get("api_key_env") or ""), list(models)
        )
    return presets


def save_preset(endpoint: Endpoint, path: Path | None = None) -> None:
    """Add or replace a user preset (atomically); its key variable must be declared.

    Raises:
        EndpointError: the key variable is not declared, or the name is reserved.
    """
    if endpoint.name in (DECLARED_KEYS_ENTRY, PRICES_ENTRY):
        raise EndpointError(f"{endpoint.name!r} is reserved; choose another endpoint name")
    check_key_variable(endpoint.api_key_env, path)
    _write_user_presets({**_user_presets(path), endpoint.name: endpoint.as_dict()}, path)


def delete_preset(name: str, path: Path | None = None) -> None:
    if name in (DECLARED_KEYS_ENTRY, PRICES_ENTRY):
        return  # the declared list is edited by hand, never from a page
    presets = _user_presets(path)
    presets.pop(name, None)
    _write_user_presets(presets, path)


def _user_presets(path: Path | None) -> dict[str, Any]:
    p = path or presets_path()
    if not p.exists():
        return {}
    data = json.loads(p.read_text(encoding="utf-8"))
    return dict(data) if isinstance(data, dict) else {}


def _write_user_presets(data: dict[str, Any], path: Path | None) -> None:
    p = path or presets_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(p)


def resolve(endpoint: str | None, base_url: str | None, api_key_env: str | None) -> Endpoint:
    """The endpoint to use: a preset by name, overridden by explicit flags."""
    presets = load_presets()
    if endpoint:
        if endpoint not in presets:
            raise EndpointError(
                f"unknown endpoint preset {endpoint!r}; known: {', '.join(sorted(presets))}"
            )
        base = presets[endpoint]
    elif base_url:
        base = Endpoint("custom", base_url, api_key_env or "")
    else:
        base = presets["groq"]
    chosen = Endpoint(
        base.name,
        base_url or base.base_url,
        api_key_env if api_key_env is not None else base.api_key_env,
        base.models,
    )
    check_key_variable(chosen.api_key_env)
    return chosen


def read_key(api_key_env: str) -> str:
    """The key from the environment variable named ``api_key_env``.

    Raises :class:`EndpointError` naming the variable (never a value) when it is
    unset, or is not a declared key variable (:func:`key_variable_problem`).
    """
    if not api_key_env:
        return NO_KEY_PLACEHOLDER
    check_key_variable(api_key_env)
    value = os.environ.get(api_key_env, "")
    if not value.strip():
        raise EndpointError(
            f"the environment variable {api_key_env} is not set; export it with your API key "
            f"(or pass --api-key-env NAME for another variable)"
        )
    return value.strip()


def key_is_set(api_key_env: str) -> bool:
    """Whether :func:`read_key` would succeed (an undeclared variable is never looked at)."""
    if not api_key_env:
        return True
    if key_variable_problem_or_error(api_key_env):
        return False
    return bool(os.environ.get(api_key_env, "").strip())


def key_variable_problem_or_error(api_key_env: str) -> str | None:
    """:func:`key_variable_problem`, with an unreadable endpoints file as the problem."""
    try:
        return key_variable_problem(api_key_env)
    except EndpointError as exc:
        return str(exc)


def choose_models(catalog: list[str], preference: tuple[str, ...] = MODEL_PREFERENCE) -> list[str]:
    """The first three preferred models the catalog offers."""
    available = set(catalog)
    chosen = [m for m in preference if m in available][:DEFAULT_MODEL_COUNT]
    if not chosen:
        offered = ", ".join(sorted(catalog)[:30]) or "nothing"
        raise EndpointError(
            f"none of the default models ({', '.join(preference)}) is offered by this endpoint; "
            f"its catalog has: {offered}. Pass --models."
        )
    return chosen


#: A copy of this many consecutive characters of the key counts as the key (a server
#: that echoes a shortened key, "sk-abc…", still leaks most of it).
SCRUB_MIN_RUN = 12
SCRUB_MARK = "***"
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` as every store accepts it: NUL bytes (PostgreSQL refuses them in text)
    are removed, so a key split by one comes back whole for :func:`scrub`; lone
    surrogates (no encoder accepts them) become U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    return _SURROGATE.sub("\ufffd", text)


@functools.lru_cache(maxsize=8)
def _key_windows(secret: str) -> tuple[re.Pattern[str], str, int]:
    low = secret.lower()
    width = min(SCRUB_MIN_RUN, len(low))
    windows = sorted({low[i : i + width] for i in range(len(low) - width + 1)})
    pattern = re.compile("|".join(re.escape(w) for w in windows), re.IGNORECASE)
    return pattern, low, width


def scrub(text: str, secret: str) -> str:
    """``text`` from a server, made safe to store, log and show.

    The one function every server-supplied string passes through (content,
    reasoning, finish reasons, error messages, catalog model ids): it makes
    the text :func:`storable`, then replaces with ``***`` every copy of the key
    in any casing, and every run of :data:`SCRUB_MIN_RUN` or more consecutive
    characters of it (a shortened echo). A key shorter than that is removed
    when it appears whole. What it cannot catch: a key the server re-encodes
    (base64, reversed, spaced out) — the server holds the key anyway; this
    keeps echoes out of stored results and shared files.
    """
    text = storable(text)
    if not secret or secret == NO_KEY_PLACEHOLDER or len(secret) < 4:
        return text
    pattern, low, width = _key_windows(secret)
    out: list[str] = []
    pos = 0
    while (found := pattern.search(text, pos)) is not None:
        start = found.start()
        # The longest run of the key that starts here: a window may occur more than
        # once in the key, so try every place it does.
        end = found.end()
        window = found.group().lower()
        k = low.find(window)
        while k >= 0:
            j = width
            while (
                start + j < len(text) and k + j < len(low) and text[start + j].lower() == low[k + j]
            ):
                j += 1
            end = max(end, start + j)
            k = low.find(window, k + 1)
        out.append(text[pos:start])
        out.append(SCRUB_MARK)
        pos = end
    out.append(text[pos:])
    return "".join(out)
