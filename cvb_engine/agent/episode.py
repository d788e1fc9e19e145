"""One agent episode over the OpenAI tools API (README: Agent arm).

The model gets the system message (with the root rules file when
``preload=true``), the task, and the five tools of :mod:`cvb_engine.agent.tools`.
Each reply that makes tool calls is one *round*; its calls are answered in
order, each with a tool message. The episode ends when a reply makes no tool
call (``ended_by="answer"``) or after ``steps`` rounds, when one last request
with ``tool_choice: "none"`` takes the final reply (``ended_by="steps"``; tool
calls that reply makes anyway are recorded as refused and never run). A
request that fails for good ends it with ``ended_by="error"`` and an error
record (the episode re-runs from the start on ``--retry-errors``).

Every reply is untrusted: requests go through the runner's
``call_with_retries`` (bounded bodies, malformed JSON and server errors become
errors, never exceptions), the tool calls it parsed are answered by the
tools, which refuse whatever they will not do.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cvb_engine.agent.tools import TOOLS, TestRunner, ToolBox
from cvb_engine.agent.trace import EndedBy, ToolCall
from cvb_engine.cells import Finished
from cvb_engine.kinds import RecordStatus
from cvb_engine.prompts import Message
from cvb_engine.replies import MAX_TOOL_CALLS
from cvb_engine.replies import ToolCall as AskedCall

__all__ = ["SYSTEM", "Episode", "run_episode", "system_message"]

SYSTEM = (
    "You are a coding agent working in a repository. Use the tools to explore it, read "
    "files, write files and run the tests. Write your solution into the repository with "
    "write_file; when you are done, reply with a short summary and no tool call."
)
PRELOAD = "{system}\n\nThe repository's `{path}`, as the team keeps it:\n\n{text}"
#: The model's last reply is kept on the record this long (it is not scored).
MAX_FINAL_CHARS = 8_000
STEPS_USED = "not run: the episode's tool rounds are used up"
#: A reply's tool calls past ``MAX_TOOL_CALLS`` are refused on the trace, never dropped unseen.
TOO_MANY = f"not run: at most {MAX_TOOL_CALLS} tool calls of one reply are run"

#: ``send(messages, tools, tool_choice)``: one request with retries (the runner's).
Send = Callable[[list[Any], list[dict[str, Any]] | None, str | None], Awaitable[Finished]]


def system_message(root_rules: str | None, text: str | None) -> str:
    """The system message; with ``preload`` the root rules file's text follows."""
    if root_rules is None or text is None:
        return SYSTEM
    return PRELOAD.format(system=SYSTEM, path=root_rules, text=text.rstrip())


@dataclass
class Episode:
    """What an episode did, for its record and its trace."""

    finished: Finished
    calls: list[ToolCall]
    steps: int
    requests: int
    replies_cut: int  # replies cut at the body limit: their later tool calls were not read
    ended_by: EndedBy
    final_text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float | None


def _refused(round_: int, call: AskedCall, reason: str) -> ToolCall:
    """The trace entry of a call the reply asked for and that is not run, with why."""
    return ToolCall(
        round=round_,
        call_id=call.id,
        name=call.name,
        arguments=call.arguments[:4_000],
        arguments_cut=len(call.arguments) > 4_000,
        refused=True,
        reason=reason,
        result=f"refused: {reason}",
    )


async def run_episode(
    messages: list[Message],
    root: Path,
    box: ToolBox,
    send: Send,
    steps: int,
) -> Episode:
    """Run the tool loop from ``messages`` (system, task) over the workspace at ``root``."""
    history: list[Any] = [dict(m) for m in messages]
    calls: list[ToolCall] = []
    prompt = completion = 0
    reported = False
    latency = 0.0
    attempts = 0
    used = 0
    requests = cut = 0
    started = time.monotonic()
    ended: EndedBy = "answer"
    final: Finished | None = None
    for round_ in range(1, steps + 2):
        last = round_ > steps
        finished = await send(history, TOOLS, "none" if last else "auto")
        requests += 1
        cut += finished.response_cut
        attempts += finished.attempts
        if finished.prompt_tokens is not None or finished.completion_tokens is not None:
            reported = True
            prompt += finished.prompt_tokens or 0
            completion += finished.completion_tokens or 0
        latency += finished.latency_s or 0.0
        final = finished
        if finished.status != RecordStatus.OK:
            ended = "error"
            break
        # Entries of tool_calls that are no function call are refused on the trace; they
        # are not echoed back (a server may refuse a call without a name in the history).
        malformed = [c for c in finished.tool_calls if c.problem is not None]
        calls += [_refused(round_, c, f"not run: {c.problem}") for c in malformed]
        wanted = [c for c in finished.tool_calls if c.problem is None]
        # Calls past the cap are answered with a refusal the model reads and the trace keeps.
        over = [] if last else wanted[MAX_TOOL_CALLS:]
        wanted = wanted if last else wanted[:MAX_TOOL_CALLS]
        if last:
            # A server that ignores tool_choice "none" gets its calls recorded, not run.
            calls += [_refused(round_, c, STEPS_USED) for c in wanted]
            ended = "steps"
            break
        if not wanted:
            ended = "answer"
            break
        used = round_
        history.append(
            {
                "role": "assistant",
                "content": finished.response or None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in wanted + over
                ],
            }
        )
        for c in wanted:
            entry, text = await box.call(round_, c.id, c.name, c.arguments)
            calls.append(entry)
            history.append({"role": "tool", "tool_call_id": c.id, "content": text})
        for c in over:
            calls.append(_refused(round_, c, TOO_MANY))
            history.append(
                {"role": "tool", "tool_call_id": c.id, "content": f"refused: {TOO_MANY}"}
            )
    assert final is not None  # the loop ran at least once
    final.attempts = attempts
    final.tool_calls = ()
    reply = final.response if final.status == RecordStatus.OK else None
    if final.status == RecordStatus.OK:
        final.latency_s = round(latency, 4)
        final.prompt_tokens = prompt if reported else None
        final.completion_tokens = completion if reported else None
        final.response = (final.response or "")[:MAX_FINAL_CHARS]
    return Episode(
        finished=final,
        calls=calls,
        steps=used,
        requests=requests,
        replies_cut=cut,
        ended_by=ended,
        final_text=reply[:MAX_FINAL_CHARS] if reply else None,
        prompt_tokens=prompt if reported else None,
        completion_tokens=completion if reported else None,
        latency_s=round(time.monotonic() - started, 4),
    )


__all__ += ["Send", "TestRunner"]
