"""The stored agent trace: round trip, and malformed stored JSON never crashes a reader."""

from __future__ import annotations

import json

import pytest

from cvb_engine.agent.trace import (
    AgentTrace,
    ToolCall,
    WrittenFile,
    explain,
    read_any,
    read_flags,
    trace_value,
)


def _trace(**over: object) -> AgentTrace:
    base: dict = {
        "transport": "tools",
        "variant": "agent",
        "targets": ("app/fetch.py",),
        "calls": (
            ToolCall(
                round=1,
                name="read_file",
                arguments='{"path": "AGENTS.md"}',
                parsed={"path": "AGENTS.md"},
                result="...",
                shown=("no-requests",),
            ),
        ),
        "files": (WrittenFile(path="app/fetch.py", content="import httpx\n", size=13),),
        "read": {"no-requests": True, "timeout": False},
    }
    base.update(over)
    return AgentTrace(**base)


def test_round_trip() -> None:
    trace = _trace()
    back = AgentTrace.from_json(trace.to_json())
    assert back == trace
    assert read_flags(back) == {"no-requests": True, "timeout": False}
    assert read_any(back) is True
    assert back.code() == "import httpx\n"
    assert back.wrote and back.tool_calls == 1 and back.refused == 0


def test_several_files_join_under_their_paths() -> None:
    trace = _trace(
        targets=("a.py", "b.py"),
        files=(WrittenFile(path="b.py", content="B"), WrittenFile(path="a.py", content="A")),
    )
    assert trace.code() == "# file: a.py\nA\n\n# file: b.py\nB"


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "   ",
        "{not json",
        "[]",
        "3",
        json.dumps({"transport": "tools"}),
        json.dumps({"transport": "ftp", "variant": "agent"}),
        json.dumps({"transport": "tools", "variant": "agent", "steps": "3"}),
        json.dumps({"transport": "tools", "variant": "agent", "latency_s": float("inf")}),
        json.dumps({"transport": "tools", "variant": "agent", "read": {"a": "yes"}}),
        json.dumps({"transport": "tools", "variant": "agent", "calls": [{"round": 1}]}),
        "[" * 50_000,
    ],
    ids=[
        "none",
        "empty",
        "blank",
        "bad-json",
        "list",
        "number",
        "no-variant",
        "bad-transport",
        "string-steps",
        "inf",
        "bad-read",
        "bad-call",
        "deep",
    ],
)
def test_malformed_is_none_with_a_reason(text: str | None) -> None:
    assert AgentTrace.from_json(text) is None
    assert read_flags(AgentTrace.from_json(text)) == {}
    assert read_any(AgentTrace.from_json(text)) is False
    reason = explain(text)
    assert reason


def test_explain_names_the_field() -> None:
    reason = explain(json.dumps({"transport": "tools", "variant": "agent", "steps": "3"}))
    assert reason is not None and "steps" in reason
    assert explain(_trace().to_json()) is None


def test_trace_value() -> None:
    assert trace_value(_trace().to_json())["variant"] == "agent"
    assert trace_value("[1]") is None and trace_value("{x") is None and trace_value(None) is None
