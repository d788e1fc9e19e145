"""A small OpenAI-compatible HTTP server for tests (standard library only).

Two ways to use it:

* In-process::

      with FakeOpenAI(models=["m-a", "m-b"], faults=FaultPlan(script=["429", "ok"])) as server:
          client = openai.OpenAI(base_url=server.base_url, api_key="sk-anything")
          ...
          server.log       # [ServedRequest(path, model, messages_sha256, outcome, t, seed), ...]
          server.counts()  # {("m-a", "429"): 1, ("m-a", "ok"): 1}

* As a process (for tests that kill or launch things)::

      python tests/fake_openai.py --port 0 --models m-a,m-b [--delay 0.05]
          [--fault-rate 0.3 --fault-seed 7 --faults 429,500,timeout,drop,malformed,empty,no_choices]
          [--script 429,ok,500] [--fail-first 429,500] [--retry-after 0.2] [--hang 30]
          [--api-key sk-test] [--replies replies.json] [--log served.jsonl] [--verbose]
          [--tools call|ignore|refuse] [--tool-rounds N] [--hold-file PATH]

  prints ``READY http://127.0.0.1:PORT/v1`` on stdout once listening and serves until
  SIGTERM/SIGINT.

Endpoints: ``GET /v1/models``, ``GET /v1/models/{id}`` and ``POST /v1/chat/completions``
(no streaming).  Faults only ever apply to chat completions, and only to requests that passed
authentication and name a known model.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import signal
import socket
import socketserver
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Final, Literal, Self, TypeAlias, cast, get_args

__all__ = [
    "ALL_FAULT_KINDS",
    "CHAT_PATH",
    "DEFAULT_RANDOM_KINDS",
    "FakeOpenAI",
    "FaultKind",
    "FaultPlan",
    "Outcome",
    "ReplyFn",
    "ServedRequest",
    "Step",
    "ToolMode",
    "default_reply",
    "main",
    "messages_sha256",
    "replies_from_mapping",
]

FaultKind: TypeAlias = Literal[
    "429", "500", "503", "timeout", "drop", "malformed", "empty", "no_choices", "length"
]
"""What a chat completion request can be made to suffer."""

Step: TypeAlias = Literal[
    "ok", "429", "500", "503", "timeout", "drop", "malformed", "empty", "no_choices", "length"
]
"""One entry of a fault script: a fault kind, or ``"ok"`` for a normal answer."""

Outcome: TypeAlias = str
"""A :data:`Step`, or one of ``unauthorized``, ``model_not_found``, ``bad_request``,
``not_found``, ``reply_error`` (the reply callable raised), ``tool_call`` (a tool call
was sent)."""

ReplyFn: TypeAlias = Callable[[dict[str, Any]], str | dict[str, Any]]

ToolMode: TypeAlias = Literal["call", "ignore", "refuse"]
"""What the server does with a request that offers ``tools``: ``call`` makes a tool
call (when ``tool_choice`` names a tool, or for the first ``tool_rounds`` rounds of
``auto``), ``ignore`` answers as if no tool were offered, ``refuse`` answers 400."""
"""``reply(request_json)`` → assistant content, or a dict used verbatim as the JSON body."""

ALL_FAULT_KINDS: Final[tuple[FaultKind, ...]] = get_args(FaultKind)
ALL_STEPS: Final[tuple[Step, ...]] = get_args(Step)
DEFAULT_RANDOM_KINDS: Final[tuple[FaultKind, ...]] = tuple(
    k for k in ALL_FAULT_KINDS if k != "timeout"
)
"""Kinds drawn by random faults unless told otherwise (``timeout`` must be opted into)."""

CHAT_PATH: Final = "/v1/chat/completions"
MODELS_PATH: Final = "/v1/models"


def messages_sha256(messages: object) -> str:
    """Stable hash of a ``messages`` list (the key used by per-request fault scripts)."""
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _text_of(content: object) -> str:
    """Text of a message ``content``: a string, or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


def _last_user_text(request: Mapping[str, Any]) -> str:
    messages = request.get("messages")
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def default_reply(request: dict[str, Any]) -> str:
    """A python code block that is deterministic in the request."""
    model = request.get("model")
    digest = messages_sha256(request.get("messages", []))[:12]
    return f"```python\n# reply to {model}\n# request {digest}\nprint('hello')\n```"


def replies_from_mapping(replies: Mapping[str, str], fallback: ReplyFn = default_reply) -> ReplyFn:
    """Reply with the value of the first key (in mapping order) found in the last user message."""
    table = list(replies.items())

    def reply(request: dict[str, Any]) -> str | dict[str, Any]:
        text = _last_user_text(request)
        for needle, content in table:
            if needle in text:
                return content
        return fallback(request)

    return reply


def _approx_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _prompt_tokens(messages: Sequence[object]) -> int:
    total = 3
    for message in messages:
        if isinstance(message, dict):
            total += 4 + _approx_tokens(_text_of(message.get("content")))
    return total


def _truncate_code(content: str) -> str:
    """Cut ``content`` about two thirds of the way, leaving any code fence unclosed."""
    body = content.rstrip()
    if body.endswith("```") and body.count("```") >= 2:
        body = body[:-3].rstrip("\n")
    return body[: max(1, (len(body) * 2) // 3)]


def _error_body(message: str, type_: str, code: str | None, param: str | None = None) -> Any:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


@dataclass(frozen=True)
class ServedRequest:
    """One request the server answered (or deliberately did not answer)."""

    path: str
    model: str | None
    messages_sha256: str | None
    outcome: Outcome
    t: float  # time.time() when the outcome was decided (before any delay or hang)
    seed: int | None = None  # the request's seed, when it had an integer one


@dataclass(frozen=True)
class FaultPlan:
    """Which chat completion requests fail, and how.

    Sources are consulted in this order for every chat completion request; the first that
    applies decides:

    1. ``script``: a list consumed in order, one entry per request, whatever the request
       (``["429", "ok", "500"]``).  Once used up it no longer applies.
    2. ``per_request``: ``{(model, messages_sha256(messages)): ["429", "500"]}``: the first
       attempts of that exact request get these steps, later attempts fall through.
    3. ``first_attempts``: the same, for every distinct (model, messages) request
       (``["429", "429"]`` = each request fails twice, then succeeds).
    4. ``rate``/``seed``/``kinds``: with probability ``rate`` a kind drawn from ``kinds``
       (one ``random.Random(seed)`` shared by all requests, so the sequence of decisions is
       reproducible; which concurrent request gets which is not).
    5. otherwise ``"ok"``.

    ``retry_after`` is the ``Retry-After`` header sent with 429s (fractions allowed);
    ``hang_s`` is how long a ``timeout`` request hangs before answering normally.
    """

    script: Sequence[Step] = ()
    per_request: Mapping[tuple[str, str], Sequence[Step]] = field(default_factory=dict)
    first_attempts: Sequence[Step] = ()
    rate: float = 0.0
    seed: int = 0
    kinds: Sequence[FaultKind] = DEFAULT_RANDOM_KINDS
    retry_after: str = "1"
    hang_s: float = 30.0

    def __post_init__(self) -> None:
        steps = [*self.script, *self.first_attempts]
        for seq in self.per_request.values():
            steps.extend(seq)
        for step in steps:
            if step not in ALL_STEPS:
                raise ValueError(f"unknown fault step {step!r}; expected one of {ALL_STEPS}")
        for kind in self.kinds:
            if kind not in ALL_FAULT_KINDS:
                raise ValueError(f"unknown fault kind {kind!r}; expected one of {ALL_FAULT_KINDS}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError("rate must be within [0, 1]")
        if self.rate > 0 and not self.kinds:
            raise ValueError("a positive rate needs at least one kind")
        try:
            float(self.retry_after)
        except ValueError:
            raise ValueError(
                f"retry_after must be a number of seconds: {self.retry_after!r}"
            ) from None
        if self.hang_s < 0:
            raise ValueError("hang_s must be >= 0")


class _FaultState:
    """The mutable side of a :class:`FaultPlan` (guarded by the server's lock)."""

    def __init__(self, plan: FaultPlan) -> None:
        self.plan = plan
        self.script: deque[Step] = deque(plan.script)
        self.attempts: dict[tuple[str, str], int] = {}
        self.rng = random.Random(plan.seed)

    def decide(self, model: str, digest: str) -> Step:
        key = (model, digest)
        attempt = self.attempts.get(key, 0)
        self.attempts[key] = attempt + 1
        if self.script:
            return self.script.popleft()
        specific = self.plan.per_request.get(key)
        if specific is not None and attempt < len(specific):
            return specific[attempt]
        if attempt < len(self.plan.first_attempts):
            return self.plan.first_attempts[attempt]
        if self.plan.rate > 0 and self.rng.random() < self.plan.rate:
            return self.rng.choice(list(self.plan.kinds))
        return "ok"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], fake: FakeOpenAI) -> None:
        self.fake = fake
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a (possibly slow) reverse DNS lookup: skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # client went away, or the server is stopping: not interesting
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes
    server_version = "FakeOpenAI/1.0"
    sys_version = ""

    @property
    def fake(self) -> FakeOpenAI:
        return cast(_HTTPServer, self.server).fake

    # -- connection bookkeeping (so stop() can wake idle keep-alive connections) --

    def setup(self) -> None:
        super().setup()
        self.fake._register_connection(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.fake._unregister_connection(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        if self.fake.verbose:
            super().log_message(format, *args)

    # -- plumbing --

    def _path(self) -> str:
        path = self.path.split("?", 1)[0]
        return path.rstrip("/") or "/"

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-request-id", f"req_fake_{self.fake._next_id()}")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _send_json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), headers=headers)

    def _drop(self) -> None:
        """Close the connection without writing a single byte."""
        self.close_connection = True

    def _authorized(self) -> bool:
        key = self.fake.api_key
        return key is None or self.headers.get("Authorization", "") == f"Bearer {key}"

    def _unauthorized(self, path: str, model: str | None, digest: str | None) -> None:
        self.fake._record(path, model, digest, "unauthorized")
        given = self.headers.get("Authorization", "")
        shown = given.removeprefix("Bearer ")[:5] + "***" if given else "<none>"
        self._send_json(
            401,
            _error_body(
                f"Incorrect API key provided: {shown}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                "invalid_api_key",
            ),
        )

    def _unknown_url(self, path: str) -> None:
        self.fake._record(path, None, None, "not_found")
        self._send_json(
            404,
            _error_body(
                f"Unknown request URL: {self.command} {path}.",
                "invalid_request_error",
                "unknown_url",
            ),
        )

    def _model_not_found(self, path: str, model: str, digest: str | None) -> None:
        self.fake._record(path, model, digest, "model_not_found")
        self._send_json(
            404,
            _error_body(
                f"The model `{model}` does not exist",
                "invalid_request_error",
                "model_not_found",
            ),
        )

    def _bad_request(self, path: str, message: str, model: str | None = None) -> None:
        self.fake._record(path, model, None, "bad_request")
        self._send_json(400, _error_body(message, "invalid_request_error", None))

    # -- endpoints --

    def do_GET(self) -> None:
        path = self._path()
        if not (path == MODELS_PATH or path.startswith(MODELS_PATH + "/")):
            self._unknown_url(path)
            return
        if not self._authorized():
            self._unauthorized(path, None, None)
            return
        if path == MODELS_PATH:
            self.fake._record(path, None, None, "ok")
            data = [self.fake._model_obj(m) for m in self.fake.models]
            self._send_json(200, {"object": "list", "data": data})
            return
        model = path[len(MODELS_PATH) + 1 :]
        if model not in self.fake.models:
            self._model_not_found(path, model, None)
            return
        self.fake._record(path, model, None, "ok")
        self._send_json(200, self.fake._model_obj(model))

    def do_POST(self) -> None:
        path = self._path()
        raw = self._read_body()
        if path != CHAT_PATH:
            self._unknown_url(path)
            return
        try:
            request = json.loads(raw or b"null")
        except ValueError:
            request = None
        if not isinstance(request, dict):
            if not self._authorized():
                self._unauthorized(path, None, None)
            else:
                self._bad_request(path, "We could not parse the JSON body of your request.")
            return
        model = request.get("model")
        messages = request.get("messages")
        digest = messages_sha256(messages) if isinstance(messages, list) else None
        model_name = model if isinstance(model, str) else None
        if not self._authorized():
            self._unauthorized(path, model_name, digest)
            return
        if model_name is None:
            self._bad_request(path, "you must provide a model parameter")
            return
        if digest is None or not messages:
            self._bad_request(path, "'messages' must be a non-empty array", model_name)
            return
        if model_name not in self.fake.models:
            self._model_not_found(path, model_name, digest)
            return
        tools = request.get("tools")
        if tools and self.fake.tools == "refuse":
            self._bad_request(path, "tools are not supported by this model", model_name)
            return
        if tools and self.fake.tools == "call" and _wants_call(request, self.fake.tool_rounds):
            self._tool_call(path, request, model_name, cast(list[Any], messages), digest)
            return
        self._chat(path, request, model_name, cast(list[Any], messages), digest)

    def _tool_call(
        self, path: str, request: dict[str, Any], model: str, messages: list[Any], digest: str
    ) -> None:
        fake = self.fake
        fake._record(path, model, digest, "tool_call")
        fake._wait_while_held()
        if fake.delay_s > 0 and fake._stopping.wait(fake.delay_s):
            self._drop()
            return
        tool = request["tools"][0].get("function", {}).get("name", "tool")
        words = _last_user_text(request).split()[:8]
        arguments = fake.tool_arguments
        if arguments is None:
            arguments = json.dumps({"query": " ".join(words) or "project notes"})
        body = fake._completion(model, "", "tool_calls", _prompt_tokens(messages))
        body["choices"][0]["message"] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{fake._next_id()}",
                    "type": "function",
                    "function": {"name": tool, "arguments": arguments},
                }
            ],
        }
        self._send_json(200, body)

    def _chat(
        self, path: str, request: dict[str, Any], model: str, messages: list[Any], digest: str
    ) -> None:
        fake = self.fake
        step, plan = fake._decide(model, digest)

        reply: str | dict[str, Any] = ""
        if step in ("ok", "timeout", "length"):
            try:
                reply = fake.reply(request)
            except Exception as exc:
                fake._record(path, model, digest, "reply_error")
                self._send_json(
                    500,
                    _error_body(f"reply function failed: {exc!r}", "server_error", None),
                )
                return
        seed = request.get("seed")
        fake._record(path, model, digest, step, seed if isinstance(seed, int) else None)

        fake._wait_while_held()
        if fake.delay_s > 0 and fake._stopping.wait(fake.delay_s):
            self._drop()
            return

        if step == "timeout":
            if fake._stopping.wait(plan.hang_s):
                self._drop()
                return
            step = "ok"

        prompt_tokens = _prompt_tokens(messages)
        if step == "ok":
            if isinstance(reply, dict):
                self._send_json(200, reply)
                return
            content, finish = reply, "stop"
            limit = request.get("max_completion_tokens") or request.get("max_tokens")
            if isinstance(limit, int) and limit > 0 and _approx_tokens(content) > limit:
                content, finish = content[: limit * 4], "length"
            self._send_json(200, fake._completion(model, content, finish, prompt_tokens))
        elif step == "429":
            self._send_json(
                429,
                _error_body(
                    f"Rate limit reached for {model} (fake). Please try again in "
                    f"{plan.retry_after}s.",
                    "requests",
                    "rate_limit_exceeded",
                ),
                headers={"Retry-After": plan.retry_after},
            )
        elif step == "500":
            self._send_json(
                500,
                _error_body(
                    "The server had an error while processing your request. Sorry about that!",
                    "server_error",
                    None,
                ),
            )
        elif step == "503":
            self._send_json(
                503,
                _error_body(
                    "The engine is currently overloaded, please try again later.",
                    "server_error",
                    "service_unavailable",
                ),
            )
        elif step == "drop":
            self._drop()
        elif step == "malformed":
            self._send(200, b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [')
        elif step == "empty":
            self._send_json(200, fake._completion(model, "", "stop", prompt_tokens))
        elif step == "no_choices":
            body = fake._completion(model, "", "stop", prompt_tokens)
            body["choices"] = []
            body["usage"]["completion_tokens"] = 0
            body["usage"]["total_tokens"] = prompt_tokens
            self._send_json(200, body)
        elif step == "length":
            text = reply if isinstance(reply, str) else _content_of_body(reply)
            body = fake._completion(model, _truncate_code(text), "length", prompt_tokens)
            self._send_json(200, body)
        else:  # pragma: no cover - FaultPlan validates its steps
            raise AssertionError(step)


def _wants_call(request: Mapping[str, Any], rounds: int) -> bool:
    """Whether a request offering tools gets a tool call: always when ``tool_choice``
    names one, never for ``none``, and for ``auto`` while fewer than ``rounds`` of the
    conversation's assistant turns made calls."""
    choice = request.get("tool_choice", "auto")
    if isinstance(choice, dict) or choice == "required":
        return True
    if choice == "none":
        return False
    messages = request.get("messages") or []
    made = sum(1 for m in messages if isinstance(m, dict) and m.get("tool_calls"))
    return made < rounds


def _content_of_body(body: Mapping[str, Any]) -> str:
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return default_reply({})
    return content if isinstance(content, str) else default_reply({})


class FakeOpenAI:
    """An OpenAI-compatible server on ``host:port`` (port 0 = a random free port).

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        models: Sequence[str] = ("fake-model",),
        *,
        reply: ReplyFn | None = None,
        faults: FaultPlan | None = None,
        api_key: str | None = None,
        delay_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | Path | None = None,
        verbose: bool = False,
        tools: ToolMode = "call",
        tool_rounds: int = 1,
        tool_arguments: str | None = None,
        hold_file: str | Path | None = None,
    ) -> None:
        if isinstance(models, str):
            raise TypeError("models must be a sequence of model ids, not a string")
        self.models: tuple[str, ...] = tuple(models)
        self.reply: ReplyFn = reply or default_reply
        self.tools: ToolMode = tools
        self.tool_rounds = tool_rounds
        self.tool_arguments = tool_arguments
        # While this file exists, chat completions wait (a test lets them go at once).
        self.hold_file = Path(hold_file) if hold_file is not None else None
        self.api_key = api_key
        self.delay_s = delay_s
        self.host = host
        self.verbose = verbose
        self.log_path = Path(log_path) if log_path is not None else None
        self._requested_port = port
        self._lock = threading.Lock()
        self._faults = _FaultState(faults or FaultPlan())
        self._log: list[ServedRequest] = []
        self._ids = 0
        self._stopping = threading.Event()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError("FakeOpenAI already started")
        self._stopping.clear()
        self._httpd = _HTTPServer((self.host, self._requested_port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-openai:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, wake hung requests, close every connection and free the port."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout)
        with self._lock:
            connections = dict(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for handler in connections.values():
            handler.join(max(0.0, deadline - time.monotonic()))
        self._httpd = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeOpenAI is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, what ``openai.OpenAI(base_url=...)`` wants."""
        return f"http://{self.host}:{self.port}/v1"

    # -- what was served --

    @property
    def log(self) -> list[ServedRequest]:
        """A snapshot of every request served so far, in the order outcomes were decided."""
        with self._lock:
            return list(self._log)

    def counts(self) -> dict[tuple[str, str], int]:
        """How many chat completions were served per ``(model, outcome)``."""
        result: dict[tuple[str, str], int] = {}
        for entry in self.log:
            if entry.path == CHAT_PATH and entry.model is not None:
                key = (entry.model, entry.outcome)
                result[key] = result.get(key, 0) + 1
        return result

    def set_faults(self, faults: FaultPlan | None) -> None:
        """Replace the fault plan (its script, attempt counters and random state start afresh)."""
        with self._lock:
            self._faults = _FaultState(faults or FaultPlan())

    # -- internals used by the handler --

    def _decide(self, model: str, digest: str) -> tuple[Step, FaultPlan]:
        with self._lock:
            return self._faults.decide(model, digest), self._faults.plan

    def _wait_while_held(self) -> None:
        while self.hold_file is not None and self.hold_file.exists():
            if self._stopping.wait(0.02):
                return

    def _record(
        self,
        path: str,
        model: str | None,
        digest: str | None,
        outcome: Outcome,
        seed: int | None = None,
    ) -> None:
        entry = ServedRequest(path, model, digest, outcome, time.time(), seed)
        with self._lock:
            self._log.append(entry)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(asdict(entry)) + "\n")

    def _next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    def _register_connection(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections[conn] = threading.current_thread()
        if self._stopping.is_set():
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _unregister_connection(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.pop(conn, None)

    @staticmethod
    def _model_obj(model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": 0, "owned_by": "fake"}

    def _completion(
        self, model: str, content: str, finish_reason: str, prompt_tokens: int
    ) -> dict[str, Any]:
        completion_tokens = _approx_tokens(content)
        return {
            "id": f"chatcmpl-fake-{self._next_id()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


# -- process mode --


def _steps(text: str, allowed: Sequence[str]) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    for item in items:
        if item not in allowed:
            raise argparse.ArgumentTypeError(f"unknown fault {item!r}; choose from {allowed}")
    return items


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Fake OpenAI-compatible server for tests.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 = a random free port (default)")
    p.add_argument("--models", default="fake-model", help="comma-separated model ids")
    p.add_argument("--delay", type=float, default=0.0, help="seconds before each completion")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY'")
    p.add_argument("--replies", type=Path, default=None, help="JSON object: substring → reply")
    p.add_argument("--log", type=Path, default=None, help="append one JSON line per request")
    p.add_argument("--fault-rate", type=float, default=0.0)
    p.add_argument("--fault-seed", type=int, default=0)
    p.add_argument(
        "--faults",
        type=lambda s: _steps(s, ALL_FAULT_KINDS),
        default=list(DEFAULT_RANDOM_KINDS),
        help="comma-separated kinds for --fault-rate",
    )
    p.add_argument(
        "--script",
        type=lambda s: _steps(s, ALL_STEPS),
        default=[],
        help="comma-separated steps consumed one per request, e.g. 429,ok,500",
    )
    p.add_argument(
        "--fail-first",
        type=lambda s: _steps(s, ALL_STEPS),
        default=[],
        help="steps for the first attempts of every distinct request, e.g. 429,500",
    )
    p.add_argument("--retry-after", default="1", help="Retry-After sent with 429s")
    p.add_argument("--hang", type=float, default=30.0, help="seconds a 'timeout' fault hangs")
    p.add_argument("--verbose", action="store_true", help="log requests to stderr")
    p.add_argument(
        "--tools",
        choices=["call", "ignore", "refuse"],
        default="call",
        help="what a request offering tools gets (default: a tool call)",
    )
    p.add_argument("--tool-rounds", type=int, default=1, help="rounds of tool calls under auto")
    p.add_argument("--tool-arguments", default=None, help="raw arguments of every tool call")
    p.add_argument(
        "--hold-file", type=Path, default=None, help="chat completions wait while this file exists"
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    reply: ReplyFn = default_reply
    if args.replies is not None:
        table = json.loads(args.replies.read_text(encoding="utf-8"))
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise SystemExit("--replies must hold a JSON object of string → string")
        reply = replies_from_mapping(table)
    faults = FaultPlan(
        script=cast(list[Step], args.script),
        first_attempts=cast(list[Step], args.fail_first),
        rate=args.fault_rate,
        seed=args.fault_seed,
        kinds=cast(list[FaultKind], args.faults),
        retry_after=args.retry_after,
        hang_s=args.hang,
    )
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    server = FakeOpenAI(
        models,
        reply=reply,
        faults=faults,
        api_key=args.api_key,
        delay_s=args.delay,
        host=args.host,
        port=args.port,
        log_path=args.log,
        verbose=args.verbose,
        tools=args.tools,
        tool_rounds=args.tool_rounds,
        tool_arguments=args.tool_arguments,
        hold_file=args.hold_file,
    )

    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    try:
        print(f"READY {server.base_url}", flush=True)
        while not done.wait(0.2):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
