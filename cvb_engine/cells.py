"""A run's unit of work and what its request brought back.

A :data:`Cell` is one request of a run; a :class:`Finished` is its answer on the way to the
store. The runner makes them, its recorder stores them, the claims hand cells out, and the
agent and memory-layer arms answer through them: kept here, low in the package, so that
none of those imports the runner for a type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: One request of a run: model, scenario id, arm, repetition. Unique in the store.
Cell = tuple[str, str, str, int]


@dataclass
class Finished:
    """One finished request, on its way to the store."""

    cell: Cell
    status: str
    response: str | None
    error: str | None
    latency_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    attempts: int
    messages_sha256: str
    reasoning: str | None = None
    # The reply was longer than --max-response-chars (or the body limit): stored cut.
    response_cut: bool = False
    # An error's kind: "api" (the endpoint) or "memory" (a memory layer); None when ok.
    error_kind: str | None = None
    # What a memory layer gave the cell (the memory trace, cvb_engine.memory_run), if any.
    memory_json: str | None = None
    # The agent episode's trace (the agent arm, cvb_engine.agent.trace), JSON; its files
    # are what is scored, not the reply.
    agent_json: str | None = None
    # The tool calls the reply asked for (memory-tool; read by the runner, not stored).
    tool_calls: tuple[Any, ...] = ()


__all__ = ["Cell", "Finished"]
