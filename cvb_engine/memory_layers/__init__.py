"""Memory layers: the external services the ``memory`` and ``memory-tool`` arms ask for context.

Protocol ``cvb-memory/1``, JSON both ways:

* ``ingest``, once per run and variant: ``{"protocol", "op": "ingest", "namespace",
  "entries": [{"id", "text", "kind"}, ...]}``, answered ``{"ok": true}`` (optional
  ``name`` and ``version``).
* ``query``, per cell: ``{"protocol", "op": "query", "namespace", "task", "category",
  "k"}``, answered ``{"context": text}`` or ``{"messages": [{"role", "content"}, ...]}``,
  optional ``entries`` (ids of ingested entries used), ``name``, ``version``.

Transports: ``command`` (one process per request, stdin/stdout, plus ``state_dir``
in the request), ``http`` (``POST <base>/ingest``, ``POST <base>/query``) and
``builtin`` (in process, today ``bm25``), all validated alike. Every failure
of a layer is a :class:`LayerError` naming the layer and the operation.

Use::

    spec = layer_spec(command=None, url=None, layer=None, key_env=None, timeout_s=30)
    async with open_layer(spec, state_dir=run_dir / "memory") as layer:
        await layer.ingest(namespace, entries)
        result = await layer.query(namespace, task, category, k=5)
"""

from __future__ import annotations

from cvb_engine.memory_layers.base import MemoryLayer, register_transport
from cvb_engine.memory_layers.builtin import builtin_layers, register_layer
from cvb_engine.memory_layers.client import (
    DEFAULT_LAYER,
    layer_spec,
    open_layer,
    probe_layer,
)
from cvb_engine.memory_layers.protocol import (
    MAX_CONTEXT_CHARS,
    MAX_MESSAGES,
    MAX_REPLY_BYTES,
    PROTOCOL,
    IngestResult,
    LayerError,
    LayerSpec,
    MemoryEntry,
    QueryResult,
)

__all__ = [
    "DEFAULT_LAYER",
    "MAX_CONTEXT_CHARS",
    "MAX_MESSAGES",
    "MAX_REPLY_BYTES",
    "PROTOCOL",
    "IngestResult",
    "LayerError",
    "LayerSpec",
    "MemoryEntry",
    "MemoryLayer",
    "QueryResult",
    "builtin_layers",
    "layer_spec",
    "open_layer",
    "probe_layer",
    "register_layer",
    "register_transport",
]
