"""Reading a record's memory trace (``Record.memory_json``) as untrusted data.

A record of an incentivized variant with ``stale=`` or ``budget=`` stores
another shape there instead, its :class:`Delivery` (read by
:func:`read_delivery`): which constraints' notes reached the model.

The memory trace is what a memory layer gave one cell of a ``memory`` or
``memory-tool`` arm (written by :mod:`cvb_engine.memory_run`)::

    {"arm": "memory" | "memory-tool",
     "layer": {"label", "name", "version", "transport"},
     "ingest": {"entries", "latency_s"},
     "calls": [{"source": "prompt" | "tool", "round", "query", "latency_s",
                "context", "messages", "entries", "held", "call_id",
                "arguments", "error"}],
     "rounds": n, "held": [constraint ids], "error": null | text}

It holds what an external layer and a model returned, and a store or a
results file may have been edited by hand: :func:`read_trace` validates it
strictly (types as above, no coercion, finite numbers, bounded nesting) and
gives ``None`` for anything else, so a reader shows "unavailable" and never
fails. The texts inside are still untrusted: they go through the safe-text
helpers of whatever output shows them.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = [
    "ConstraintDelivery",
    "Delivery",
    "LayerInfo",
    "Trace",
    "TraceCall",
    "TraceMessage",
    "read_delivery",
    "read_trace",
    "trace_value",
]

_STRICT = ConfigDict(strict=True, frozen=True, extra="ignore", allow_inf_nan=False)


class TraceMessage(BaseModel):
    """One chat message a layer returned."""

    model_config = _STRICT

    role: str
    content: str


class LayerInfo(BaseModel):
    """The layer that answered: ``label`` is cvb's name for it (``bm25``, ``command ./x.py``),
    ``name`` and ``version`` what the layer said of itself (``name`` is the label when it
    said nothing)."""

    model_config = _STRICT

    label: str | None = None
    name: str | None = None
    version: str | None = None
    transport: str | None = None

    @property
    def title(self) -> str | None:
        """How reports name the layer: its own name and version; the transport alone when
        its name is only cvb's label of a command or URL (the arm's name already says it)."""
        name = self.name or self.label
        if name is None:
            return None
        if name == self.label and self.transport in ("command", "http"):
            name = self.transport
        return f"{name} {self.version}" if self.version else name


class Ingest(BaseModel):
    model_config = _STRICT

    entries: int | None = None
    latency_s: float | None = None


class TraceCall(BaseModel):
    """One query to the layer: the cell's prompt (``memory``) or one tool call (``memory-tool``)."""

    model_config = _STRICT

    source: Literal["prompt", "tool"]
    round: int = 0
    query: str | None = None
    latency_s: float | None = None
    context: str | None = None
    messages: tuple[TraceMessage, ...] | None = None
    entries: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    call_id: str | None = None
    arguments: str | None = None
    error: str | None = None

    @property
    def result_text(self) -> str | None:
        """What the layer returned, as one text (messages joined), or None."""
        if self.messages is not None:
            return "\n\n".join(f"[{m.role}] {m.content}" for m in self.messages)
        return self.context


class Trace(BaseModel):
    """What a memory layer gave one cell."""

    model_config = _STRICT

    arm: Literal["memory", "memory-tool"]
    layer: LayerInfo = LayerInfo()
    ingest: Ingest | None = None
    calls: tuple[TraceCall, ...] = ()
    rounds: int = 0
    held: tuple[str, ...] = ()
    error: str | None = None

    @property
    def tool_calls(self) -> tuple[TraceCall, ...]:
        """The tool calls the model made (memory-tool), refused ones included."""
        return tuple(c for c in self.calls if c.source == "tool")

    @property
    def looked_up(self) -> bool:
        """Whether the model called the tool at least once."""
        return bool(self.tool_calls)


def read_trace(text: str | None) -> Trace | None:
    """The trace in ``text`` (a record's ``memory_json``), or None when there is none or it
    does not have the trace's shape (not JSON, a wrong type, a number that is not finite,
    JSON nested too deep)."""
    if text is None or not isinstance(text, str) or not text.strip():
        return None
    try:
        return Trace.model_validate_json(text)
    except (ValidationError, ValueError, RecursionError):
        return None


class ConstraintDelivery(BaseModel):
    """Whether one constraint's notes reached the model whole (README: Memory realism):
    ``delivered`` for its current note (False when the memory held only the superseded
    one, or when the budget cut it), ``superseded_delivered`` for the decision it replaced
    (None when that note was not in the memory)."""

    model_config = _STRICT

    delivered: bool
    superseded_delivered: bool | None = None


class Delivery(BaseModel):
    """What an incentivized or agent variant with ``stale=`` or ``budget=`` gave one cell
    (``Record.memory_json``, written by :func:`cvb_engine.arms.incentivized.memory_of` and
    :func:`cvb_engine.arms.agent.memory_of`; an agent's ``channel`` is its ``rules``)::

        {"arm": "incentivized", "channel": "file", "stale": "with" | "only" | null,
         "budget": 2000 | null, "bytes": 5120, "kept_bytes": 1987, "cut": true,
         "constraints": {"<constraint id>": {"delivered": false,
                                             "superseded_delivered": true | false | null}}}
    """

    model_config = _STRICT

    arm: Literal["incentivized", "agent"]
    channel: str | None = None
    stale: Literal["with", "only"] | None = None
    budget: int | None = None
    bytes: int | None = None
    kept_bytes: int | None = None
    cut: bool = False
    constraints: dict[str, ConstraintDelivery]

    def current_shown(self, constraint_id: str) -> bool:
        """Whether the memory held the constraint's current note (before any cut): not
        when ``stale=only`` put its superseded note there instead."""
        d = self.constraints.get(constraint_id)
        return d is not None and not (self.stale == "only" and d.superseded_delivered is not None)

    def cut_ids(self) -> list[str]:
        """The constraints with a note that the memory held and the budget cut."""
        return [
            cid
            for cid, d in self.constraints.items()
            if (self.current_shown(cid) and not d.delivered) or d.superseded_delivered is False
        ]


def read_delivery(text: str | None) -> Delivery | None:
    """The delivery record in ``text`` (a record's ``memory_json``), or None when there is
    none or it does not have that shape (a memory layer's trace, or anything else)."""
    if text is None or not isinstance(text, str) or not text.strip():
        return None
    try:
        return Delivery.model_validate_json(text)
    except (ValidationError, ValueError, RecursionError):
        return None


def trace_value(text: str | None) -> object:
    """A record's ``memory_json`` as the JSON value the results file carries: the parsed
    value when it is a JSON object, else None (nothing stored, or text that is not one)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
