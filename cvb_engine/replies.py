"""Endpoint replies read as untrusted bytes: bounded, parsed, validated.

Every byte an endpoint sends is untrusted. This module is where they come in:

* :class:`BoundedClient` reads every response body with a bound: at most
  :func:`body_limit` bytes are kept (after content decoding), the connection
  is closed on the rest, and a JSON body cut that way is closed up
  (:func:`close_cut_json`) so that what arrived can still be used; the
  response then carries :data:`CUT` in its extensions (a server cannot set
  that, unlike a header).
* :func:`parse_completion` turns a chat completion body into a
  :class:`Reply`, or raises :class:`BadReply` saying what is wrong with it.
  It reads the JSON itself rather than the ``openai`` client's objects, which
  are built without validation (``content`` may come back as a number, an
  object or a list of parts).
* :func:`parse_catalog` does the same for ``GET /models``.

Every string taken from a reply goes through :func:`cvb_engine.endpoints.scrub`
(storable text, the key removed) before it leaves this module.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from typing import Any

import httpx2

from cvb_engine.endpoints import scrub

#: Default for ``--max-response-chars``: longer replies are stored cut there, and flagged.
MAX_RESPONSE_CHARS = 200_000
#: Extension set on a response whose body was cut at :func:`body_limit` (value: bytes kept).
CUT = "cvb_body_cut"
#: finish_reason is a short word; anything longer is cut to this.
MAX_FINISH_REASON_CHARS = 64
#: Error messages built from server text are cut to this.
MAX_ERROR_CHARS = 2_000
#: A token count above this is not a count (and PostgreSQL's INTEGER would refuse it).
MAX_TOKENS_COUNT = 2**31 - 1
#: Deeper than this, a cut body is not closed up (json would refuse it anyway).
_MAX_DEPTH = 512


def body_limit(max_response_chars: int) -> int:
    """Bytes of a response body kept for replies of ``max_response_chars``.

    Room for the content and the reasoning at the limit, as plain text, plus
    the envelope; a reply escaped heavily (``\\uXXXX``) is cut earlier, and
    flagged as cut all the same.
    """
    return 4 * max_response_chars + 64 * 1024


class BadReply(ValueError):
    """A reply that is not a usable answer; the message says why (already scrubbed)."""


@dataclass(frozen=True)
class Reply:
    """What a chat completion said, as it will be stored."""

    content: str
    reasoning: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cut: bool  # cut at the body limit or at max_response_chars
    # The tools the reply asked for (only read when the request offered tools).
    tool_calls: tuple[ToolCall, ...] = ()


#: At most this many tool calls of one reply are answered; the agent arm refuses the rest on
#: its trace (the memory-tool arm drops them).
MAX_TOOL_CALLS = 16
#: At most this many tool calls of one reply are read at all: the ones past ``MAX_TOOL_CALLS``
#: are kept only so that a refusal can name them; beyond this a reply is not worth reading.
MAX_TOOL_CALLS_READ = 64
#: A tool call's arguments longer than this are cut (they are a short JSON object).
MAX_TOOL_ARGUMENT_CHARS = 20_000


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a reply, as the endpoint sent it (scrubbed, bounded)."""

    id: str
    name: str
    arguments: str  # the raw JSON text; the caller decides what it means
    #: Why this entry of ``tool_calls`` is not a function call (not an object, no
    #: function, a name that is not text); None for a well-formed one. Kept, not
    #: skipped: the agent arm records it as refused on its trace.
    problem: str | None = None


# --------------------------------------------------------------------------- bounded reading


class BoundedClient(httpx2.AsyncClient):
    """An ``httpx2.AsyncClient`` that keeps at most ``max_body_bytes`` of any body.

    ``send`` is where the ``openai`` client hands every request over, so this
    bounds completions, error bodies and the model catalog alike, while the
    client keeps its own configuration (proxies from the environment, limits,
    TLS), which a custom transport would lose.
    """

    def __init__(self, *, max_body_bytes: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_body_bytes = max_body_bytes

    async def send(
        self, request: httpx2.Request, *, stream: bool = False, **kwargs: Any
    ) -> httpx2.Response:
        # Always streamed underneath: the body is read here, with the bound.
        response = await super().send(request, stream=True, **kwargs)
        chunks: list[bytes] = []
        size = 0
        cut = False
        try:
            async for chunk in response.aiter_bytes():
                room = self.max_body_bytes - size
                if len(chunk) > room:
                    chunks.append(chunk[:room])
                    size += room
                    cut = True
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            await response.aclose()
        body = b"".join(chunks)
        del chunks
        extensions = dict(response.extensions)
        if cut:
            closed = close_cut_json(body)
            body = closed if closed is not None else body
            extensions[CUT] = size
        else:
            extensions.pop(CUT, None)
        headers = [
            (name, value)
            for name, value in response.headers.raw
            # the body is decoded and complete now
            if name.lower() not in (b"content-encoding", b"content-length", b"transfer-encoding")
        ]
        return httpx2.Response(
            response.status_code,
            headers=headers,
            content=body,
            request=request,
            extensions=extensions,
            history=response.history,
        )


_STRING_BODY = re.compile(r'[^"\\]*')
# Longest first: a literal the cut shortened ("tr") must match whole, up to the end.
_SCALAR = re.compile(r"-?[0-9][0-9.eE+-]*|-|true|false|null|tru|tr|t|fals|fal|fa|f|nul|nu|n")
_CUT_ESCAPE = re.compile(r"(\\+)(u[0-9a-fA-F]{0,3})?$")


def close_cut_json(prefix: bytes) -> bytes | None:
    """The JSON text ``prefix`` (a body cut short) closed up into valid JSON, or None.

    A string cut in the middle is ended where it was cut, a half-read key or
    number is dropped, and the open objects and arrays are closed: a reply cut
    inside its ``content`` keeps the content that arrived. Returns None for a
    prefix that is not JSON or nests deeper than a few hundred levels.
    """
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(prefix, final=False)
    closers: list[str] = []
    clean = 0  # text[:clean] + closers is valid JSON
    expect_key = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            is_key = expect_key and closers[-1:] == ["}"]
            j = i + 1
            while True:
                j = _STRING_BODY.match(text, j).end()  # type: ignore[union-attr]
                if j >= n:
                    if is_key:
                        return _closed(text[:clean], closers)
                    value = text[i:]
                    m = _CUT_ESCAPE.search(value)
                    if m and len(m.group(1)) % 2 == 1:  # the last backslash began an escape
                        value = value[: m.end(1) - 1]
                    return _closed(text[:i] + value + '"', closers)
                if text[j] == '"':
                    j += 1
                    break
                j += 2  # an escape (\uXXXX: the hex digits are read as string body)
            i = j
            if is_key:
                expect_key = False
            else:
                clean = i
        elif c in "{[":
            closers.append("}" if c == "{" else "]")
            if len(closers) > _MAX_DEPTH:
                return None
            expect_key = c == "{"
            i += 1
            clean = i
        elif c in "}]":
            if not closers or closers[-1] != c:
                return None
            closers.pop()
            expect_key = False
            i += 1
            clean = i
        elif c == ",":
            expect_key = closers[-1:] == ["}"]
            i += 1
        elif c == ":":
            expect_key = False
            i += 1
        elif c in " \t\r\n":
            i += 1
        else:
            m = _SCALAR.match(text, i)
            if m is None:
                return None
            if m.end() >= n:  # a number or literal the cut may have shortened
                break
            i = m.end()
            clean = i
    # Cut between tokens: whatever follows the last complete value (a comma, a
    # key, a colon) is dropped; none of it opens or closes anything.
    return _closed(text[:clean], closers)


def _closed(text: str, closers: list[str]) -> bytes | None:
    out = text + "".join(reversed(closers))
    return out.encode("utf-8") if out.strip() else None


# --------------------------------------------------------------------------- parsing


def _load(body: bytes, secret: str) -> Any:
    # Decoded leniently: a stray invalid byte costs one U+FFFD, not the answer.
    text = body.decode("utf-8", "replace").removeprefix("\ufeff")
    try:
        return json.loads(text)
    except RecursionError:
        raise BadReply("malformed response body: JSON nested too deeply") from None
    except ValueError as exc:
        snippet = scrub(text[:120], secret)
        raise BadReply(f"malformed response body ({exc}): {snippet!r}") from None


def _count(value: object) -> int | None:
    """A token count, or None for anything that is not one (usage is bookkeeping:
    a bad count costs the count, not the answer)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS_COUNT:
        return value
    return None


def _content(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        # Content parts, as some gateways send them: the text parts, in order.
        texts = []
        for k, part in enumerate(value):
            if not isinstance(part, dict):
                raise BadReply(f"content part {k} is {_kind(part)}, not an object")
            text = part.get("text")
            if part.get("type", "text") == "text" and isinstance(text, str):
                texts.append(text)
        return "".join(texts)
    raise BadReply(f"content is {_kind(value)}, not text")


def _kind(value: object) -> str:
    """``an object``, ``a number``...: what a JSON value is, for a message."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    names = {dict: "an object", list: "a list", str: "a string", type(None): "null"}
    return names.get(type(value), f"a {type(value).__name__}")


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return (text[:limit], True) if len(text) > limit else (text, False)


def _tool_calls(value: object, secret: str) -> tuple[ToolCall, ...]:
    """A message's ``tool_calls``, in order: each well-formed function call, and each
    malformed entry with its :attr:`ToolCall.problem` (the caller refuses it)."""
    if not isinstance(value, list):
        return ()
    calls: list[ToolCall] = []
    for n, item in enumerate(value[:MAX_TOOL_CALLS_READ]):
        if not isinstance(item, dict):
            calls.append(ToolCall(f"call_{n}", "", "", f"the tool call is {_kind(item)}"))
            continue
        raw_id = item.get("id")
        call_id = (scrub(raw_id, secret)[:128] if isinstance(raw_id, str) else "") or f"call_{n}"
        function = item.get("function")
        if not isinstance(function, dict):
            problem = f"the tool call has no function object (its function is {_kind(function)})"
            calls.append(ToolCall(call_id, "", "", problem))
            continue
        name = function.get("name")
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some servers send the object itself
            arguments = json.dumps(arguments)
        if not isinstance(arguments, str):
            arguments = ""
        arguments = scrub(arguments, secret)[:MAX_TOOL_ARGUMENT_CHARS]
        if not isinstance(name, str) or not name.strip():
            what = "empty" if isinstance(name, str) else _kind(name)
            problem = f"the function name is not a tool name ({what})"
            calls.append(ToolCall(call_id, "", arguments, problem))
            continue
        calls.append(ToolCall(call_id, scrub(name, secret)[:128], arguments))
    return tuple(calls)


def parse_completion(
    body: bytes,
    *,
    secret: str,
    max_chars: int = MAX_RESPONSE_CHARS,
    body_cut: bool = False,
    tools: bool = False,
) -> Reply:
    """The answer in a chat completion ``body``, made safe to store.

    With ``tools`` (the request offered tools), the message's tool calls are
    read too, and a reply that has only tool calls is not empty.

    Raises:
        BadReply: the body is not JSON, has no usable choice, or its content
            or finish reason is not text; the reply has no content and no
            reasoning.
    """
    data = _load(body, secret)
    if not isinstance(data, dict):
        raise BadReply(f"the reply is {_kind(data)}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list):
        raise BadReply(
            "the reply has no choices"
            if choices is None
            else f"choices is {_kind(choices)}, not a list"
        )
    if not choices:
        raise BadReply("the reply has no choices")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise BadReply(f"choices[0] is {_kind(choice)}, not an object")
    message = choice.get("message")
    if message is None:
        message = {}
    if not isinstance(message, dict):
        raise BadReply(f"the message is {_kind(message)}, not an object")
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise BadReply(f"finish_reason is {_kind(finish)}, not text")
    finish = scrub(finish, secret)[:MAX_FINISH_REASON_CHARS] if finish is not None else None
    content, cut = _cut(scrub(_content(message.get("content")) or "", secret), max_chars)
    reasoning: str | None = None
    for name in ("reasoning_content", "reasoning"):
        value = message.get(name)
        # Not part of the answer: a reasoning field that is not text is left out.
        if isinstance(value, str) and value.strip():
            reasoning, reasoning_cut = _cut(scrub(value, secret), max_chars)
            cut = cut or reasoning_cut
            break
    calls = _tool_calls(message.get("tool_calls"), secret) if tools else ()
    if not content.strip() and not reasoning and not calls:
        raise BadReply(f"the reply has empty content (finish_reason={finish})")
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    return Reply(
        content=content,
        reasoning=reasoning,
        finish_reason=finish,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        cut=cut or body_cut,
        tool_calls=calls,
    )


def parse_catalog(body: bytes, *, secret: str) -> list[str]:
    """Model ids from a ``GET /models`` body (scrubbed; entries without a text id skipped).

    Raises:
        BadReply: the body is not JSON or has no ``data`` list.
    """
    data = _load(body, secret)
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise BadReply("the catalog has no data list")
    ids = {
        scrub(item["id"], secret)
        for item in items
        if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"].strip()
    }
    return sorted(ids)


def is_cut(response: httpx2.Response) -> bool:
    """Whether :class:`BoundedClient` cut this response's body."""
    return CUT in response.extensions


__all__ = [
    "CUT",
    "MAX_RESPONSE_CHARS",
    "MAX_TOOL_CALLS",
    "MAX_TOOL_CALLS_READ",
    "BadReply",
    "BoundedClient",
    "Reply",
    "body_limit",
    "close_cut_json",
    "is_cut",
    "parse_catalog",
    "parse_completion",
]
