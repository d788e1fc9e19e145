"""The wire format of protocol ``cvb-memory/1``: requests built, replies read as untrusted.

Every transport (builtin, command, http) hands this module the JSON value its
layer answered; :func:`read_ingest_reply` and :func:`read_query_reply` accept it
or raise :class:`LayerFault` saying what is wrong with it. The transport's
caller (:class:`cvb_engine.memory_layers.base.MemoryLayer`) turns a fault into
a :class:`LayerError` naming the layer and the operation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from cvb_engine.endpoints import storable

PROTOCOL = "cvb-memory/1"
#: A command's stdout and an HTTP body are read up to this many bytes; more is a failure.
MAX_REPLY_BYTES = 4 * 1024 * 1024
#: A context (or all messages' contents together) longer than this is a failure.
MAX_CONTEXT_CHARS = 200_000
#: A reply with more messages than this is a failure.
MAX_MESSAGES = 64
#: A reply naming more entries than this is a failure (they are ids of ingested entries).
MAX_REPLY_ENTRIES = 1_000
#: A layer's self-reported name or version is cut to this.
MAX_NAME_CHARS = 80
#: Server text (stderr, an error body) quoted in an error message is cut to this.
MAX_QUOTED_CHARS = 2_000
#: Roles a layer may give its messages.
ROLES: tuple[str, ...] = ("system", "user", "assistant")

Op = Literal["ingest", "query"]
Transport = Literal["builtin", "command", "http"]


class LayerError(Exception):
    """A memory layer failed; the message names the layer, the operation and what went wrong.

    It is the layer's failure, never the model's: callers store it as an error
    record of kind "memory".
    """


class LayerFault(Exception):
    """What went wrong in one exchange, worded to follow "memory layer 'x': query ..."."""


@dataclass(frozen=True)
class MemoryEntry:
    """One piece of project memory offered to a layer at ingest."""

    id: str
    text: str
    kind: str


@dataclass(frozen=True)
class LayerSpec:
    """Which layer to ask and how: what ``memory@command=...`` and friends parse into.

    Build one with :func:`cvb_engine.memory_layers.layer_spec`, which checks it.
    """

    transport: Transport
    target: str  # builtin name ("bm25") | command line | base URL
    key_env: str | None = None
    timeout_s: float = 30.0

    @property
    def label(self) -> str:
        """A short human name: ``bm25``, ``command ./my_layer.py``, ``http http://127.0.0.1:8000``."""
        if self.transport == "builtin":
            return self.target
        return f"{self.transport} {self.target}"


@dataclass(frozen=True)
class IngestResult:
    """What an ingest did."""

    name: str  # the layer's own name, else the spec's label
    version: str | None
    latency_s: float
    count: int  # entries sent


@dataclass(frozen=True)
class QueryResult:
    """What a layer answered for one cell: exactly one of ``context`` and ``messages``."""

    context: str | None
    messages: list[dict[str, str]] | None
    entries: list[str]  # ids of entries ingested into the namespace that the layer used
    latency_s: float
    name: str
    version: str | None

    def as_dict(self) -> dict[str, Any]:
        """The result as plain JSON data (for a record)."""
        return asdict(self)


# --------------------------------------------------------------------------- requests


def ingest_request(namespace: str, entries: Sequence[MemoryEntry]) -> dict[str, Any]:
    return {
        "protocol": PROTOCOL,
        "op": "ingest",
        "namespace": namespace,
        "entries": [{"id": e.id, "text": e.text, "kind": e.kind} for e in entries],
    }


def query_request(namespace: str, task: str, category: str, k: int) -> dict[str, Any]:
    return {
        "protocol": PROTOCOL,
        "op": "query",
        "namespace": namespace,
        "task": task,
        "category": category,
        "k": k,
    }


def encode(request: dict[str, Any]) -> bytes:
    """The request as JSON bytes; ASCII-only, so any reader decodes it (lone surrogates too)."""
    return json.dumps(request, ensure_ascii=True).encode("ascii")


# --------------------------------------------------------------------------- replies


def quote(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """Server text for an error message: storable, stripped, at most ``limit`` characters."""
    text = storable(text).strip()
    return text if len(text) <= limit else text[:limit] + "…"


def decode_json(body: bytes, where: str = "") -> object:
    """The JSON value of a reply ``body``; ``where`` says where it came from (" on stdout")."""
    if not body.strip():
        raise LayerFault(f"replied with nothing{where}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LayerFault(
            f"replied with bytes that are not UTF-8{where} (at byte {exc.start})"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LayerFault(
            f"replied with text that is not JSON{where} (line {exc.lineno} column {exc.colno}): "
            + quote(text, 200)
        ) from None
    except RecursionError:
        raise LayerFault(f"replied with JSON nested too deeply{where}") from None


Clean = Callable[[str], str]


def _short(value: object, clean: Clean) -> str | None:
    """A self-reported name or version as a short printable string, or None when ill-typed."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    text = "".join(c for c in clean(str(value)) if c.isprintable()).strip()
    return text[:MAX_NAME_CHARS] or None


def _object(reply: object) -> dict[str, Any]:
    if not isinstance(reply, dict):
        kind = "an array" if isinstance(reply, list) else f"a JSON {type(reply).__name__}"
        raise LayerFault(f"replied with {kind}, not a JSON object")
    return reply


def read_ingest_reply(reply: object, clean: Clean) -> tuple[str | None, str | None]:
    """``(name, version)`` from an ingest reply, which must say ``"ok": true``."""
    obj = _object(reply)
    if obj.get("ok") is not True:
        why = obj.get("error")
        detail = f": {quote(clean(why), 500)}" if isinstance(why, str) and why.strip() else ""
        if "ok" not in obj:
            raise LayerFault(f'replied without "ok": true{detail}')
        raise LayerFault(f'replied "ok": {quote(json.dumps(obj["ok"]), 40)}, not true{detail}')
    return _short(obj.get("name"), clean), _short(obj.get("version"), clean)


@dataclass(frozen=True)
class QueryReply:
    context: str | None
    messages: list[dict[str, str]] | None
    entries: list[str]
    name: str | None
    version: str | None


def _messages(value: object, clean: Clean) -> list[dict[str, str]]:
    if not isinstance(value, list):
        raise LayerFault(f'replied with "messages" that is not a list ({type(value).__name__})')
    if len(value) > MAX_MESSAGES:
        raise LayerFault(f"replied with {len(value)} messages (at most {MAX_MESSAGES})")
    out: list[dict[str, str]] = []
    total = 0
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            raise LayerFault(f"replied with messages[{i}] that is not an object")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            shown = quote(json.dumps(role), 40)
            raise LayerFault(
                f"replied with messages[{i}].role {shown} (expected {', '.join(ROLES)})"
            )
        if not isinstance(content, str):
            raise LayerFault(f"replied with messages[{i}].content that is not a string")
        total += len(content)
        if total > MAX_CONTEXT_CHARS:
            raise LayerFault(
                f"replied with messages longer than {MAX_CONTEXT_CHARS:,} characters in all"
            )
        out.append({"role": role, "content": clean(content)})
    return out


def _entries(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        raise LayerFault('replied with "entries" that is not a list of ids (strings)')
    if len(value) > MAX_REPLY_ENTRIES:
        raise LayerFault(f"replied with {len(value)} entries (at most {MAX_REPLY_ENTRIES})")
    return list(dict.fromkeys(value))


def read_query_reply(reply: object, clean: Clean) -> QueryReply:
    """A query reply, checked: ``context`` (a string) or ``messages``, optional ``entries``.

    ``null`` counts as absent. Entry ids are returned as given (deduplicated);
    the caller keeps those it ingested.
    """
    obj = _object(reply)
    context, messages = obj.get("context"), obj.get("messages")
    if context is not None and messages is not None:
        raise LayerFault('replied with both "context" and "messages" (give one)')
    if context is None and messages is None:
        raise LayerFault('replied without "context" or "messages"')
    if context is not None:
        if not isinstance(context, str):
            raise LayerFault(
                f'replied with "context" that is not a string ({type(context).__name__})'
            )
        if len(context) > MAX_CONTEXT_CHARS:
            raise LayerFault(
                f"replied with a context of {len(context):,} characters "
                f"(at most {MAX_CONTEXT_CHARS:,})"
            )
        context = clean(context)
    return QueryReply(
        context=context,
        messages=None if messages is None else _messages(messages, clean),
        entries=_entries(obj.get("entries")),
        name=_short(obj.get("name"), clean),
        version=_short(obj.get("version"), clean),
    )
