"""Endpoints: named presets, API keys read by variable name, model catalogs.

Built-in presets live here; a user's own presets (added from the studio's Run
page or by hand) live in ``data/endpoints.json``, or in the file named by
``CVB_ENDPOINTS``. A preset stores the *name* of the environment variable
that holds the key, never the key.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: DESIGN §6: without --models, the first three of these that the catalog offers.
MODEL_PREFERENCE: tuple[str, ...] = (
    "llama-3.3-70b-versatile",
    "llama-3.1-8b-instant",
    "openai/gpt-oss-120b",
    "qwen/qwen3.6-27b",
    "openai/gpt-oss-20b",
)
DEFAULT_MODEL_COUNT = 3
LOCAL_PORT = 8765
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


def presets_path() -> Path:
    return Path(os.environ.get("CVB_ENDPOINTS", Path("data") / "endpoints.json"))


def load_presets(path: Path | None = None) -> dict[str, Endpoint]:
    """Built-in presets overlaid with the user's file (which may override a built-in)."""
    presets = dict(BUILTIN)
    p = path or presets_path()
    if not p.exists():
        return presets
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EndpointError(f"{p}: cannot read endpoint presets: {exc}") from None
    if not isinstance(data, dict):
        raise EndpointError(f"{p}: expected an object of name → endpoint")
    for name, entry in data.items():
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
    """Add or replace a user preset (atomically)."""
    _write_user_presets({**_user_presets(path), endpoint.name: endpoint.as_dict()}, path)


def delete_preset(name: str, path: Path | None = None) -> None:
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
    return Endpoint(
        base.name,
        base_url or base.base_url,
        api_key_env if api_key_env is not None else base.api_key_env,
        base.models,
    )


def read_key(api_key_env: str) -> str:
    """The key from the environment variable named ``api_key_env``.

    Raises :class:`EndpointError` naming the variable (never a value) when it is unset.
    """
    if not api_key_env:
        return NO_KEY_PLACEHOLDER
    value = os.environ.get(api_key_env, "")
    if not value.strip():
        raise EndpointError(
            f"the environment variable {api_key_env} is not set; export it with your API key "
            f"(or pass --api-key-env NAME for another variable)"
        )
    return value.strip()


def key_is_set(api_key_env: str) -> bool:
    return not api_key_env or bool(os.environ.get(api_key_env, "").strip())


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


def scrub(text: str, secret: str) -> str:
    """``text`` with ``secret`` removed (error messages may echo request details)."""
    if secret and secret != NO_KEY_PLACEHOLDER and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text
