"""cvb_engine.replies: replies read as untrusted bytes."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cvb_engine.replies import (
    BadReply,
    BoundedClient,
    body_limit,
    close_cut_json,
    is_cut,
    parse_catalog,
    parse_completion,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_openai import HUGE_CHARS, HostileOpenAI

KEY = "sk-test-ReplyCanary-0123456789abcdef"


def body(content: Any = "hello", **over: Any) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    message.update(over.pop("message_extra", {}))
    data: dict[str, Any] = {
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
    }
    for name, value in over.items():
        if name == "finish_reason":
            data["choices"][0]["finish_reason"] = value
        else:
            data[name] = value
    return json.dumps(data).encode()


# --------------------------------------------------------------------------- close_cut_json

SAMPLES = [
    {"id": "x", "choices": [{"message": {"content": 'a "q" \\ é 😀 \u0001 end'}}], "n": None},
    {"a": [1, -2.5e3, True, False, None, {"b": []}], "c": {"d": "e"}},
    [[], {}, "s", 0],
]


@pytest.mark.parametrize("sample", SAMPLES, ids=["completion", "scalars", "array"])
@pytest.mark.parametrize("ascii_only", [True, False], ids=["escaped", "utf8"])
def test_every_prefix_closes_into_valid_json(sample: Any, ascii_only: bool) -> None:
    full = json.dumps(sample, ensure_ascii=ascii_only).encode()
    for k in range(1, len(full) + 1):
        closed = close_cut_json(full[:k])
        assert closed is not None, full[:k]
        json.loads(closed)  # raises if not JSON


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        (
            b'{"choices": [{"message": {"content": "abc',
            {"choices": [{"message": {"content": "abc"}}]},
        ),
        (b'{"a": "x\\', {"a": "x"}),  # a dangling backslash
        (b'{"a": "x\\u00', {"a": "x"}),  # half a \\u escape
        (b'{"a": "x\\\\', {"a": "x\\"}),  # an escaped backslash is complete
        (b'{"a": 1, "b": tr', {"a": 1}),  # a literal the cut shortened
        (b'{"a": 1, "b": 12', {"a": 1}),  # a number that may be longer
        (b'{"a": 1, "ke', {"a": 1}),  # half a key
        (b'{"a": 1, "key": ', {"a": 1}),
        (b"[1, 2, ", [1, 2]),
        ('{"a": "é'.encode()[:-1], {"a": ""}),  # half a UTF-8 character
    ],
)
def test_cut_json_keeps_what_arrived(prefix: bytes, expected: Any) -> None:
    closed = close_cut_json(prefix)
    assert closed is not None and json.loads(closed) == expected


@pytest.mark.parametrize("prefix", [b"<html>", b"[" * 10_000, b"}", b'{"a": 1]', b"   "])
def test_what_cannot_be_closed_is_none(prefix: bytes) -> None:
    assert close_cut_json(prefix) is None


# --------------------------------------------------------------------------- parse_completion


@pytest.mark.parametrize(
    ("raw", "content"),
    [
        (body("hello"), "hello"),
        (body([{"type": "text", "text": "a"}, {"type": "thinking"}, {"text": "b"}]), "ab"),
        (body("x\x00y"), "xy"),
        (body("x\ud800y"), "x\ufffdy"),
        (body("oZk").replace(b"oZk", b"o\xffk"), "o\ufffdk"),
        (b"\xef\xbb\xbf" + body("bom"), "bom"),
        (body(f"leak {KEY.upper()} and {KEY[4:20]}"), "leak *** and ***"),
    ],
    ids=["text", "parts", "nul", "surrogate", "bad-utf8", "bom", "key"],
)
def test_good_replies(raw: bytes, content: str) -> None:
    reply = parse_completion(raw, secret=KEY)
    assert reply.content == content
    assert (reply.finish_reason, reply.prompt_tokens, reply.completion_tokens) == ("stop", 3, 4)
    assert not reply.cut


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "malformed response body"),
        (b"<html>oops</html>", "malformed response body"),
        (b'{"choices": [', "malformed response body"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"[1]", "the reply is a list, not an object"),
        (b"{}", "the reply has no choices"),
        (body(choices=[]), "the reply has no choices"),
        (body(choices={"0": {}}), "choices is an object, not a list"),
        (body(choices=["x"]), "choices[0] is a string, not an object"),
        (body(choices=[{"message": 5}]), "the message is a number, not an object"),
        (body(42), "content is a number, not text"),
        (body(True), "content is a boolean, not text"),
        (body({"text": "x"}), "content is an object, not text"),
        (body(["x"]), "content part 0 is a string, not an object"),
        (body(""), "the reply has empty content"),
        (body(None), "the reply has empty content"),
        (body("x", finish_reason=3), "finish_reason is a number, not text"),
        (body("x", finish_reason=["stop"]), "finish_reason is a list, not text"),
    ],
)
def test_bad_replies_say_why(raw: bytes, reason: str) -> None:
    with pytest.raises(BadReply, match=reason.replace("[", r"\[").replace("]", r"\]")):
        parse_completion(raw, secret=KEY)


def test_a_key_in_a_malformed_body_is_scrubbed_from_the_reason() -> None:
    with pytest.raises(BadReply) as caught:
        parse_completion(f"<p>{KEY}</p>".encode(), secret=KEY)
    assert KEY not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.parametrize(
    ("usage", "counts"),
    [
        ({"prompt_tokens": 1, "completion_tokens": 2}, (1, 2)),
        ({"prompt_tokens": -1, "completion_tokens": 2**40}, (None, None)),
        ({"prompt_tokens": "1", "completion_tokens": 1.0}, (None, None)),
        ({"prompt_tokens": True, "completion_tokens": None}, (None, None)),
        ([1, 2], (None, None)),
        (None, (None, None)),
    ],
)
def test_usage_that_is_not_a_count_is_null_and_the_answer_stays(
    usage: Any, counts: tuple[int | None, int | None]
) -> None:
    reply = parse_completion(body("x", usage=usage), secret=KEY)
    assert reply.content == "x"
    assert (reply.prompt_tokens, reply.completion_tokens) == counts


def test_long_content_and_reasoning_are_cut_and_flagged() -> None:
    raw = body("c" * 50, message_extra={"reasoning_content": "r" * 30})
    reply = parse_completion(raw, secret=KEY, max_chars=40)
    assert (reply.content, reply.reasoning, reply.cut) == ("c" * 40, "r" * 30, True)
    reply = parse_completion(body("c" * 10), secret=KEY, max_chars=40, body_cut=True)
    assert reply.cut
    assert not parse_completion(body("c" * 40), secret=KEY, max_chars=40).cut


def test_finish_reason_is_scrubbed_and_short() -> None:
    assert parse_completion(body("x", finish_reason=KEY), secret=KEY).finish_reason == "***"
    long = parse_completion(body("x", finish_reason="s" * 500), secret=KEY).finish_reason
    assert long == "s" * 64


def test_a_reasoning_field_that_is_not_text_is_left_out() -> None:
    reply = parse_completion(body("x", message_extra={"reasoning": {"a": 1}}), secret=KEY)
    assert reply.reasoning is None


@pytest.mark.parametrize(
    ("raw", "ids"),
    [
        (b'{"data": [{"id": "b"}, {"id": "a"}, {"id": 3}, "x", {"id": "a"}]}', ["a", "b"]),
        (json.dumps({"data": [{"id": f"m-{KEY}"}]}).encode(), ["m-***"]),
    ],
)
def test_catalog(raw: bytes, ids: list[str]) -> None:
    assert parse_catalog(raw, secret=KEY) == ids


@pytest.mark.parametrize("raw", [b"[]", b'{"data": {}}', b"nope"])
def test_bad_catalog(raw: bytes) -> None:
    with pytest.raises(BadReply):
        parse_catalog(raw, secret=KEY)


# --------------------------------------------------------------------------- BoundedClient


@pytest.mark.parametrize("case", ["huge", "gzip-huge"])
def test_bounded_client_keeps_at_most_its_limit(case: str) -> None:
    async def fetch(base_url: str) -> tuple[int, bool, bytes]:
        limit = body_limit(1_000)
        async with BoundedClient(max_body_bytes=limit, timeout=30) as client:
            response = await client.post(f"{base_url}/chat/completions", json={"model": case})
            return limit, is_cut(response), response.content

    with HostileOpenAI(key=KEY, answer="hello") as server:
        limit, cut, content = asyncio.run(fetch(server.base_url))
    assert cut and len(content) <= limit + 16 < HUGE_CHARS
    reply = parse_completion(content, secret=KEY, max_chars=1_000, body_cut=cut)
    assert reply.cut and reply.content.startswith("hello\n###") and len(reply.content) == 1_000


def test_bounded_client_leaves_small_bodies_whole() -> None:
    async def fetch(base_url: str) -> tuple[bool, bytes]:
        async with BoundedClient(max_body_bytes=body_limit(1_000), timeout=30) as client:
            response = await client.post(f"{base_url}/chat/completions", json={"model": "ok"})
            return is_cut(response), response.content

    with HostileOpenAI(key=KEY, answer="hello") as server:
        cut, content = asyncio.run(fetch(server.base_url))
    assert not cut and parse_completion(content, secret=KEY).content == "hello"


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("call me", "the tool call is a string"),
        (["a", "list"], "the tool call is a list"),
        ({"id": "a"}, "the tool call has no function object (its function is null)"),
        (
            {"id": "b", "function": "read"},
            "the tool call has no function object (its function is a string)",
        ),
        ({"id": "c", "function": {"name": 7}}, "the function name is not a tool name (a number)"),
        ({"id": "d", "function": {"name": "  "}}, "the function name is not a tool name (empty)"),
        (
            {"id": "e", "function": {"arguments": "{}"}},
            "the function name is not a tool name (null)",
        ),
    ],
)
def test_a_malformed_tool_call_is_kept_with_its_problem(entry: Any, problem: str) -> None:
    """Entries of ``tool_calls`` that are no function call are kept, in order, with why:
    the agent arm refuses each on its trace instead of dropping it unseen."""
    good = {"id": "ok", "type": "function", "function": {"name": "list_files", "arguments": {}}}
    body = {
        "choices": [
            {"message": {"role": "assistant", "content": None, "tool_calls": [entry, good]}}
        ]
    }
    reply = parse_completion(json.dumps(body).encode(), secret="sk-x", tools=True)
    bad, ok = reply.tool_calls
    assert bad.problem == problem and bad.name == ""
    assert ok.problem is None and ok.name == "list_files" and ok.arguments == "{}"
