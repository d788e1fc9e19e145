"""Choosing, opening and probing a memory layer."""

from __future__ import annotations

import math
from pathlib import Path

# The transports register themselves on import.
from cvb_engine.memory_layers import builtin as _builtin  # noqa: F401
from cvb_engine.memory_layers import command as _command  # noqa: F401
from cvb_engine.memory_layers import http_layer as _http_layer  # noqa: F401
from cvb_engine.memory_layers.base import MemoryLayer, transports
from cvb_engine.memory_layers.protocol import LayerError, LayerSpec, MemoryEntry, Transport

DEFAULT_LAYER = "bm25"
PROBE_NAMESPACE = "cvb-probe"
PROBE_ENTRIES: tuple[MemoryEntry, ...] = (
    MemoryEntry(
        "probe-http",
        "Every requests.get call passes timeout= since a hung request stalled the importer.",
        "decision",
    ),
    MemoryEntry("probe-logs", "Logs go through structlog, never print().", "convention"),
)
PROBE_TASK = "Write a function that fetches a URL with requests and returns its JSON."


def layer_spec(
    command: str | None,
    url: str | None,
    layer: str | None,
    key_env: str | None,
    timeout_s: float,
) -> LayerSpec:
    """The layer named by one of ``command``, ``url`` or ``layer`` (``bm25`` when none is).

    ``layer`` equal to the default (``bm25``) beside ``command`` or ``url`` is taken
    for an unset default, so a caller may always pass its ``layer`` parameter.

    Only the form is checked here (a command line that splits, an http(s) URL,
    a known built-in, a declared key variable); whether the command exists or
    the server answers is for :func:`probe_layer` and the requests themselves.

    Raises:
        LayerError: more than one is given, or the one given cannot work.
    """
    if (command is not None or url is not None) and layer == DEFAULT_LAYER:
        layer = None
    forms: tuple[tuple[Transport, str | None], ...] = (
        ("command", command),
        ("http", url),
        ("builtin", layer),
    )
    given = [(transport, value) for transport, value in forms if value is not None]
    if len(given) > 1:
        raise LayerError("give one of command=, url= and layer= for a memory layer, not several")
    transport, target = given[0] if given else ("builtin", DEFAULT_LAYER)
    spec = LayerSpec(transport, target, key_env or None, timeout_s)
    return _checked(spec)


def _checked(spec: LayerSpec) -> LayerSpec:
    if not (isinstance(spec.timeout_s, int | float) and math.isfinite(spec.timeout_s)):
        raise LayerError("memory layer timeout: expected a number of seconds")
    if spec.timeout_s <= 0:
        raise LayerError(f"memory layer timeout must be above 0 s, not {spec.timeout_s}")
    cls = transports().get(spec.transport)
    if cls is None:
        raise LayerError(
            f"unknown memory layer transport {spec.transport!r}; "
            f"known: {', '.join(sorted(transports()))}"
        )
    target = cls.check_target(spec.target, spec.key_env)
    return LayerSpec(spec.transport, target, spec.key_env, float(spec.timeout_s))


def open_layer(spec: LayerSpec, *, state_dir: Path) -> MemoryLayer:
    """A client for ``spec``; ``state_dir`` is where a command layer keeps its index.

    Opening sends nothing and starts nothing (the command layer creates
    ``state_dir`` at its first request). Close it with ``await layer.aclose()``
    or ``async with``.

    Raises:
        LayerError: ``spec`` cannot work (the checks of :func:`layer_spec`).
    """
    spec = _checked(spec)
    return transports()[spec.transport](spec, state_dir=state_dir)


async def probe_layer(spec: LayerSpec, *, state_dir: Path) -> str:
    """Ingest two sample entries into namespace ``cvb-probe`` and ask one query.

    Returns:
        One line: ``bm25 0.3.16+cvb.1 (builtin): ingest 3 ms, query 2 ms``.

    Raises:
        LayerError: the layer failed either request.
    """
    async with open_layer(spec, state_dir=state_dir) as layer:
        ingested = await layer.ingest(PROBE_NAMESPACE, PROBE_ENTRIES)
        answer = await layer.query(PROBE_NAMESPACE, PROBE_TASK, "probe", 1)
    version = f" {answer.version}" if answer.version else ""
    if answer.messages is not None:
        what = f"{len(answer.messages)} messages"
    else:
        what = f"{len(answer.context or '')} characters of context"
    return (
        f"{answer.name}{version} ({spec.transport}): ingest {ingested.latency_s * 1000:.0f} ms, "
        f"query {answer.latency_s * 1000:.0f} ms, {what}"
    )
