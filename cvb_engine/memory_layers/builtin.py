"""Transport ``builtin``: a layer that runs in this process, behind the same protocol.

A built-in layer is one module with a handler registered by
:func:`register_layer`: ``handle(request, state_dir, memory) -> reply``. The
client builds the same request as for a remote layer, passes it through JSON
(so the handler gets plain data, never the caller's objects), runs the handler
in a worker thread (indexing must not hold up the event loop), passes its
reply through JSON and validates it like any other. ``memory`` is the layer's
in-process state, one dict per opened layer; ``state_dir`` is None.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cvb_engine.memory_layers.base import MemoryLayer, register_transport
from cvb_engine.memory_layers.protocol import (
    LayerError,
    LayerFault,
    LayerSpec,
    Op,
    quote,
)
from cvb_engine.plugin_registry import Registry, import_plugins, origin_of

Handler = Callable[[dict[str, Any], Path | None, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class BuiltinLayer:
    name: str
    description: str
    handle: Handler


# The built-in layers register when their modules are imported, on first use (cheap: a
# layer imports its libraries when it first handles a request).
_LAYERS: Registry[BuiltinLayer] = Registry(
    "built-in memory layer", load=import_plugins("cvb_engine.memory_layers", ("bm25",))
)


def register_layer(name: str, description: str) -> Callable[[Handler], Handler]:
    """Register the decorated handler as built-in layer ``name``."""

    def decorate(fn: Handler) -> Handler:
        _LAYERS.add(name, BuiltinLayer(name, description, fn), origin_of(fn))
        return fn

    return decorate


def builtin_layers() -> Mapping[str, BuiltinLayer]:
    """The built-in layers by name."""
    return _LAYERS.items()


@register_transport("builtin")
class InProcessLayer(MemoryLayer):
    def __init__(self, spec: LayerSpec, *, state_dir: Path) -> None:
        super().__init__(spec, state_dir=state_dir)
        self._layer = builtin_layers()[self.check_target(spec.target, spec.key_env)]
        self._memory: dict[str, Any] = {}

    @classmethod
    def check_target(cls, target: str, key_env: str | None) -> str:
        if key_env:
            raise LayerError("memory layer key_env= applies to url= layers only, not layer=")
        name = target.strip()
        known = builtin_layers()
        if name not in known:
            raise LayerError(
                f"unknown built-in memory layer {name!r}; known: {', '.join(sorted(known))}"
            )
        return name

    async def _exchange(self, op: Op, request: dict[str, Any]) -> object:
        plain = json.loads(json.dumps(request))
        reply = await asyncio.to_thread(self._layer.handle, plain, None, self._memory)
        try:
            return json.loads(json.dumps(reply, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise LayerFault(
                f"replied with a value that is not JSON: {quote(str(exc), 300)}"
            ) from None

    async def aclose(self) -> None:
        self._memory.clear()
