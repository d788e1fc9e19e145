"""A reply with more tool calls than the agent arm runs: the ones past the cap are refused on the
trace and answered to the model, never dropped unseen (found by the held-out parallel agent)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from cvb_engine.agent.episode import TOO_MANY, run_episode
from cvb_engine.agent.tools import ToolBox
from cvb_engine.cells import Finished
from cvb_engine.kinds import RecordStatus
from cvb_engine.replies import MAX_TOOL_CALLS, ToolCall


def _reply(calls: tuple[ToolCall, ...], text: str | None = None) -> Finished:
    return Finished(
        cell=("", "", "", 0),
        status=RecordStatus.OK,
        response=text,
        error=None,
        latency_s=0.0,
        prompt_tokens=1,
        completion_tokens=1,
        finish_reason="tool_calls" if calls else "stop",
        attempts=1,
        messages_sha256="",
        tool_calls=calls,
    )


@pytest.mark.parametrize("n", [MAX_TOOL_CALLS - 1, MAX_TOOL_CALLS, MAX_TOOL_CALLS + 1, 40])
def test_calls_past_the_cap_are_refused_on_the_trace(tmp_path: Path, n: int) -> None:
    (tmp_path / "README.md").write_text("hello\n")
    sent: list[list[Any]] = []
    calls = tuple(
        ToolCall(id=f"c{i}", name="read_file", arguments=json.dumps({"path": "README.md"}))
        for i in range(n)
    )

    async def send(history: list[Any], tools: Any, choice: str | None) -> Finished:
        sent.append([dict(m) for m in history])
        return _reply(calls) if len(sent) == 1 else _reply((), "done")

    box = ToolBox(tmp_path, ())
    episode = asyncio.run(run_episode([{"role": "user", "content": "go"}], tmp_path, box, send, 3))
    assert [c.call_id for c in episode.calls] == [f"c{i}" for i in range(n)]
    ran = [c for c in episode.calls if not c.refused]
    refused = [c for c in episode.calls if c.refused]
    assert len(ran) == min(n, MAX_TOOL_CALLS)
    assert len(refused) == max(0, n - MAX_TOOL_CALLS)
    assert all(c.reason == TOO_MANY for c in refused)
    # The second request answers every call of the first reply, each by its id.
    answered = [m["tool_call_id"] for m in sent[1] if m.get("role") == "tool"]
    assert answered == [f"c{i}" for i in range(n)]
