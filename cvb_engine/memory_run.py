"""Cells of the arms that ask a memory layer while the run sends (README: Bring your own memory layer).

For every live variant of a run (``memory``, ``memory-tool``) the runner opens
one :class:`LayerRun`: the layer ingests the project's memory once
(:func:`cvb_engine.arms.layered.layer_entries`), then answers per cell.

* ``memory``: one query with the task and the category, then one request
  with what the layer returned (:func:`answer_memory`).
* ``memory-tool``: the model is offered ``search_project_memory``; each call
  it makes is answered from the layer, for at most ``rounds`` rounds; then one
  last request without tools takes the answer (:func:`answer_tool`).

Everything the layer gave a cell is kept on its record as the *memory trace*
(``Record.memory_json``)::

    {"arm": "memory" | "memory-tool",
     "layer": {"label", "name", "version", "transport"},
     "ingest": {"entries", "latency_s"},
     "calls": [{"source": "prompt" | "tool", "round", "query", "latency_s",
                "context", "messages", "entries", "held", "call_id",
                "arguments", "error"}],
     "rounds": n, "held": [constraint ids], "error": null | text}

``held`` lists the constraints of the cell's scenario whose memory entry came
back (by the entry ids the layer named, else by the entry's text appearing in
what it returned). A layer that fails gives an error record of kind
``memory``: not an API failure, never a violation.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

from cvb_engine.arms import ArmContext, ArmVariant
from cvb_engine.arms.layered import (
    SEARCH_TOOL,
    TOOL_NAME,
    layer_entries,
    layer_spec,
    query_text,
)
from cvb_engine.cells import Finished
from cvb_engine.kinds import RecordStatus
from cvb_engine.prompts import Message, messages_sha256
from cvb_engine.replies import MAX_TOOL_CALLS
from cvb_engine.scenario import Scenario

#: A tool result longer than this is cut (a layer's context for one query).
MAX_TOOL_RESULT_CHARS = 20_000
NO_NOTES = "No notes matched the query."


class LayerRunError(RuntimeError):
    """A layer that could not ingest the run's memory: the run does not start."""


def _normal(text: str) -> str:
    return " ".join(text.split()).lower()


@dataclass
class LayerRun:
    """One live variant's layer for one run: ingested once, queried per cell."""

    variant: ArmVariant
    scenarios: dict[str, Scenario]
    arm_context: ArmContext
    run_id: str
    state_root: Path
    layer: Any = None
    ingest: dict[str, Any] = field(default_factory=dict)
    owner: dict[str, tuple[str, str]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    identity: dict[str, Any] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        digest = hashlib.sha256(f"{self.run_id}\0{self.variant.name}".encode()).hexdigest()
        return f"{self.run_id}-{digest[:10]}"

    async def open(self) -> None:
        """Ingest the project's memory.

        Raises:
            LayerRunError: the layer failed to ingest (nothing is sent then).
        """
        from cvb_engine.memory_layers import LayerError, open_layer

        params: Any = self.variant.params
        pool = self.arm_context.pool if params.load else ()
        entries, self.owner = layer_entries(
            self.scenarios.values(), params.load, pool, getattr(params, "stale", None)
        )
        self.texts = {e.id: _normal(e.text) for e in entries if e.id in self.owner}
        spec = layer_spec(params)
        state = self.state_root / self.namespace
        state.mkdir(parents=True, exist_ok=True)
        self.layer = open_layer(spec, state_dir=state)
        try:
            result = await self.layer.ingest(self.namespace, entries)
        except LayerError as exc:
            await self.close()
            raise LayerRunError(f"arm {self.variant.name}: {exc}") from None
        self.ingest = {"entries": result.count, "latency_s": round(result.latency_s, 4)}
        self.identity = {
            "label": spec.label,
            "name": result.name,
            "version": result.version,
            "transport": spec.transport,
        }

    async def close(self) -> None:
        if self.layer is not None:
            await self.layer.aclose()
            self.layer = None

    def held(self, sid: str, entries: list[str], returned: str) -> list[str]:
        """Constraints of scenario ``sid`` whose entry came back."""
        ids = {self.owner[e][1] for e in entries if e in self.owner and self.owner[e][0] == sid}
        if not entries and returned:
            text = _normal(returned)
            ids |= {
                cid
                for eid, (owner_sid, cid) in self.owner.items()
                if owner_sid == sid and self.texts[eid] in text
            }
        order = [c.id for c in self.scenarios[sid].constraints]
        return [c for c in order if c in ids]

    async def query(self, sid: str, query: str, source: str, round_: int) -> tuple[Any, dict]:
        """Ask the layer; return its result (None when it failed) and the call's trace."""
        from cvb_engine.memory_layers import LayerError

        scenario = self.scenarios[sid]
        call: dict[str, Any] = {
            "source": source,
            "round": round_,
            "query": query,
            "latency_s": None,
            "context": None,
            "messages": None,
            "entries": [],
            "held": [],
            "call_id": None,
            "arguments": None,
            "error": None,
        }
        started = time.monotonic()
        k = getattr(self.variant.params, "k", 5)
        try:
            result = await self.layer.query(self.namespace, query, scenario.category, k)
        except LayerError as exc:
            call["latency_s"] = round(time.monotonic() - started, 4)
            call["error"] = str(exc)
            return None, call
        returned = result.context or "\n".join(m["content"] for m in result.messages or [])
        call.update(
            latency_s=round(result.latency_s, 4),
            context=result.context,
            messages=result.messages,
            entries=list(result.entries),
            held=self.held(sid, list(result.entries), returned),
        )
        return result, call

    def trace(self, calls: list[dict], rounds: int, error: str | None) -> str:
        held: list[str] = []
        for call in calls:
            held += [c for c in call["held"] if c not in held]
        return json.dumps(
            {
                "arm": self.variant.kind.name,
                "layer": self.identity,
                "ingest": self.ingest,
                "calls": calls,
                "rounds": rounds,
                "held": held,
                "error": error,
            },
            ensure_ascii=False,
        )


def memory_failure(message: str, digest: str = "") -> Finished:
    """The error record of a cell whose layer failed."""
    return Finished(
        cell=("", "", "", 0),
        status="error",
        response=None,
        error=message,
        latency_s=None,
        prompt_tokens=None,
        completion_tokens=None,
        finish_reason=None,
        attempts=1,
        messages_sha256=digest,
        error_kind="memory",
    )


async def answer_memory(layers: LayerRun, sid: str, send: Any) -> Finished:
    """A ``memory`` cell: one query, then one request with what the layer returned.

    ``send(messages)`` makes the request (with retries) and returns a Finished.
    """
    scenario = layers.scenarios[sid]
    result, call = await layers.query(sid, query_text(scenario), "prompt", 0)
    if result is None:
        failed = memory_failure(call["error"])
        failed.memory_json = layers.trace([call], 0, call["error"])
        return failed
    messages = layers.variant.build(scenario, layers.arm_context, result)
    finished: Finished = await send(messages)
    finished.messages_sha256 = messages_sha256(messages)  # type: ignore[arg-type]
    finished.memory_json = layers.trace([call], 0, None)
    return finished


def _query_of(arguments: str) -> str | None:
    try:
        value = json.loads(arguments) if arguments.strip() else None
    except ValueError:
        return None
    query = value.get("query") if isinstance(value, dict) else None
    return query.strip()[:2000] if isinstance(query, str) and query.strip() else None


def _tool_result(result: Any) -> str:
    if result.messages:
        text = "\n\n".join(m["content"] for m in result.messages)
    else:
        text = result.context or ""
    return (text.strip() or NO_NOTES)[:MAX_TOOL_RESULT_CHARS]


async def answer_tool(layers: LayerRun, sid: str, send: Any) -> Finished:
    """A ``memory-tool`` cell: tool rounds answered by the layer, then the answer.

    ``send(messages, tools, tool_choice)`` makes one request (with retries)
    and returns a Finished whose ``tool_calls`` holds the calls the reply made.
    """
    scenario = layers.scenarios[sid]
    messages: list[Any] = list(layers.variant.build(scenario, layers.arm_context))
    first_digest = messages_sha256(messages)
    rounds: int = getattr(layers.variant.params, "rounds", 1)
    calls: list[dict] = []
    totals = {"latency_s": 0.0, "prompt_tokens": 0, "completion_tokens": 0, "attempts": 0}
    used = 0
    for round_ in range(1, rounds + 2):
        last = round_ > rounds  # every round used: the answer, without tools
        finished: Finished = await send(messages, [SEARCH_TOOL], "none" if last else "auto")
        _add(totals, finished)
        if finished.status != "ok":
            finished.memory_json = layers.trace(calls, used, None)
            return _with_totals(finished, totals, first_digest)
        well_formed = [c for c in finished.tool_calls if c.problem is None]
        tool_calls = [] if last else well_formed[:MAX_TOOL_CALLS]
        if not tool_calls:
            finished.memory_json = layers.trace(calls, used, None)
            return _with_totals(finished, totals, first_digest)
        used = round_
        messages.append(
            {
                "role": "assistant",
                "content": finished.response or None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in tool_calls
                ],
            }
        )
        for c in tool_calls:
            query = _query_of(c.arguments) if c.name == TOOL_NAME else None
            if query is None:
                reason = (
                    f"unknown tool {c.name!r}; the only tool is {TOOL_NAME}"
                    if c.name != TOOL_NAME
                    else 'the arguments must be a JSON object like {"query": "..."}'
                )
                calls.append(_refused_call(round_, c, reason))
                messages.append({"role": "tool", "tool_call_id": c.id, "content": reason})
                continue
            result, call = await layers.query(sid, query, "tool", round_)
            call.update(call_id=c.id, arguments=c.arguments)
            calls.append(call)
            if result is None:
                failed = memory_failure(call["error"], first_digest)
                failed.memory_json = layers.trace(calls, used, call["error"])
                return failed
            messages.append({"role": "tool", "tool_call_id": c.id, "content": _tool_result(result)})
    raise AssertionError("unreachable: the last round has no tools")  # pragma: no cover


def _refused_call(round_: int, call: Any, reason: str) -> dict[str, Any]:
    return {
        "source": "tool",
        "round": round_,
        "query": None,
        "latency_s": 0.0,
        "context": None,
        "messages": None,
        "entries": [],
        "held": [],
        "call_id": call.id,
        "arguments": call.arguments,
        "error": reason,
    }


def _add(totals: dict[str, Any], f: Finished) -> None:
    totals["latency_s"] += f.latency_s or 0.0
    totals["prompt_tokens"] += f.prompt_tokens or 0
    totals["completion_tokens"] += f.completion_tokens or 0
    totals["attempts"] += f.attempts


def _with_totals(f: Finished, totals: dict[str, Any], digest: str) -> Finished:
    """The last request's record, with the cell's latency, tokens and attempts summed."""
    f.messages_sha256 = digest
    f.attempts = totals["attempts"]
    if f.status == RecordStatus.OK:
        f.latency_s = round(totals["latency_s"], 4)
        f.prompt_tokens = totals["prompt_tokens"] or f.prompt_tokens
        f.completion_tokens = totals["completion_tokens"] or f.completion_tokens
    return f


async def probe_tools(client: openai.AsyncOpenAI, model: str, secret: str) -> str | None:
    """None when ``model`` makes a tool call it is required to make; else why not.

    One request, with ``tool_choice`` naming the tool: a server that refuses
    tools answers 4xx, one that ignores them answers without the call.
    """
    from cvb_engine.replies import BadReply, parse_completion

    messages: list[Message] = [
        Message(role="user", content="Search the project's notes for how logging is set up.")
    ]
    request: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "tools": [SEARCH_TOOL],
        "tool_choice": {"type": "function", "function": {"name": TOOL_NAME}},
        "max_tokens": 64,
        "temperature": 0.0,
    }
    try:
        raw = await client.chat.completions.with_raw_response.create(**request)
        reply = parse_completion(raw.http_response.content, secret=secret, tools=True)
    except openai.APIStatusError as exc:
        return f"it refused a request with tools (HTTP {exc.status_code}): {exc.message}"
    except (openai.OpenAIError, BadReply) as exc:
        return f"its reply to a request with tools was not usable: {exc}"
    if not any(c.name == TOOL_NAME for c in reply.tool_calls):
        return "it answered without the tool call it was required to make (no tool support)"
    return None
