"""What every transport shares: the client side of one layer, and the transport registry.

A transport is one module with one class, registered with
:func:`register_transport`. It implements a single exchange (request dict in,
decoded JSON value out) and checks its own target; :class:`MemoryLayer` does
the rest the same way for all of them: the timeout, the latency, the reply's
validation, the ids remembered per namespace and the conversion of every
failure into a :class:`LayerError` that names the layer and the operation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from cvb_engine.endpoints import scrub
from cvb_engine.memory_layers.protocol import (
    MAX_QUOTED_CHARS,
    IngestResult,
    LayerError,
    LayerFault,
    LayerSpec,
    MemoryEntry,
    Op,
    QueryResult,
    ingest_request,
    query_request,
    quote,
    read_ingest_reply,
    read_query_reply,
)
from cvb_engine.plugin_registry import Registry, import_plugins, origin_of

_T = TypeVar("_T")

#: A label longer than this is cut in error messages (a long command line).
_MAX_LABEL_CHARS = 200


class MemoryLayer:
    """The client of one memory layer; a subclass per transport supplies :meth:`_exchange`.

    Calls may run concurrently. Ingest a namespace in this process before
    querying it: the ids a query reply names are kept only if they were
    ingested here (a resumed run ingests again).
    """

    transport: ClassVar[str]

    def __init__(self, spec: LayerSpec, *, state_dir: Path) -> None:
        self.spec = spec
        self.state_dir = state_dir
        self._ingested: dict[str, frozenset[str]] = {}
        # What the layer last called itself: a layer may name itself at ingest only.
        self._name: str | None = None
        self._version: str | None = None

    # -- what a transport provides

    @classmethod
    def check_target(cls, target: str, key_env: str | None) -> str:
        """The target in canonical form; raise :class:`LayerError` when it cannot work."""
        raise NotImplementedError

    async def _exchange(self, op: Op, request: dict[str, Any]) -> object:
        """Send ``request``; the JSON value the layer answered. Raise :class:`LayerFault`."""
        raise NotImplementedError

    def _secret(self) -> str:
        """A key to scrub from every string of this layer's ("" when there is none)."""
        return ""

    async def aclose(self) -> None:
        """Release what the layer holds (connections); the layer is not used after."""

    # -- the protocol

    async def ingest(self, namespace: str, entries: Sequence[MemoryEntry]) -> IngestResult:
        """Offer ``entries`` to the layer under ``namespace`` (replacing what it held there).

        Raises:
            LayerError: the layer failed or answered something that is not an ingest reply.
        """
        reply, latency = await self._call("ingest", ingest_request(namespace, entries))
        name, version = self._read("ingest", read_ingest_reply, reply)
        self._ingested[namespace] = frozenset(e.id for e in entries)
        self._name, self._version = name or self._name, version or self._version
        return IngestResult(name or self.spec.label, version, latency, len(entries))

    async def query(self, namespace: str, task: str, category: str, k: int) -> QueryResult:
        """The layer's context (or messages) for one cell.

        Its ``name`` and ``version`` are the reply's, else those the layer gave at
        ingest, else the spec's label and None.

        Raises:
            LayerError: the layer failed or answered something that is not a query reply.
            ValueError: ``k`` is below 1 (the caller's mistake).
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        request = query_request(namespace, task, category, k)
        reply, latency = await self._call("query", request)
        got = self._read("query", read_query_reply, reply)
        known = self._ingested.get(namespace, frozenset())
        return QueryResult(
            context=got.context,
            messages=got.messages,
            entries=[i for i in got.entries if i in known],
            latency_s=latency,
            name=got.name or self._name or self.spec.label,
            version=got.version or self._version,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the boundary: nothing but LayerError leaves

    def _clean(self, text: str) -> str:
        return scrub(text, self._secret())

    def _error(self, op: Op, detail: str) -> LayerError:
        label = self.spec.label
        if len(label) > _MAX_LABEL_CHARS:
            label = label[:_MAX_LABEL_CHARS] + "…"
        return LayerError(self._clean(f"memory layer '{label}': {op} {detail}"))

    async def _call(self, op: Op, request: dict[str, Any]) -> tuple[object, float]:
        start = time.monotonic()
        try:
            async with asyncio.timeout(self.spec.timeout_s):
                reply = await self._exchange(op, request)
        except TimeoutError:
            raise self._error(op, f"timed out after {float(self.spec.timeout_s)} s") from None
        except LayerFault as exc:
            raise self._error(op, str(exc)) from None
        except LayerError:
            raise
        except Exception as exc:  # whatever broke, it is the layer's failure
            raise self._error(op, _unexpected(exc)) from None
        return reply, time.monotonic() - start

    def _read(
        self, op: Op, reader: Callable[[object, Callable[[str], str]], _T], reply: object
    ) -> _T:
        try:
            return reader(reply, self._clean)
        except LayerFault as exc:
            raise self._error(op, str(exc)) from None
        except Exception as exc:
            raise self._error(op, _unexpected(exc)) from None


def _unexpected(exc: BaseException) -> str:
    return f"failed: {type(exc).__name__}: {quote(str(exc), MAX_QUOTED_CHARS)}"


# Each transport module registers its class when it is imported, on first use.
_TRANSPORTS: Registry[type[MemoryLayer]] = Registry(
    "memory layer transport",
    load=import_plugins("cvb_engine.memory_layers", ("builtin", "command", "http_layer")),
)


def register_transport(name: str) -> Callable[[type[MemoryLayer]], type[MemoryLayer]]:
    """Register the decorated class as the client of transport ``name``."""

    def decorate(cls: type[MemoryLayer]) -> type[MemoryLayer]:
        cls.transport = name
        _TRANSPORTS.add(name, cls, origin_of(cls))
        return cls

    return decorate


def transports() -> Mapping[str, type[MemoryLayer]]:
    """Every registered transport by name."""
    return _TRANSPORTS.items()
