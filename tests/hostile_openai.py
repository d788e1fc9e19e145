"""An OpenAI-compatible server that answers as a hostile or broken one would (tests only).

Each *model* is a case: a chat completion for model ``number-content`` gets a
reply whose ``content`` is a number, and so on (:data:`CASES`). ``GET
/v1/models`` lists every case, plus :attr:`HostileOpenAI.extra_models`.
With :attr:`HostileOpenAI.healthy` set, every model answers a well-formed
reply (a resume then completes).

Standard library only; a real ``ThreadingHTTPServer`` on 127.0.0.1, reusing
the plumbing of :mod:`fake_openai`::

    with HostileOpenAI(key=KEY, answer=COMPLIANT) as server:
        ... server.base_url, server.served (model → requests answered)
"""

from __future__ import annotations

import gzip
import json
import socketserver
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, cast

#: The size of the ``huge`` case's content: far past any body limit.
HUGE_CHARS = 20 * 1024 * 1024


def _completion(message: Any, *, finish: Any = "stop", usage: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-hostile",
        "object": "chat.completion",
        "created": 0,
        "model": "hostile",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    body["usage"] = usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 20}
    return body


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _assistant(content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, **extra}


#: What a case sends: (HTTP status, content type, body).
Served = tuple[int, str, bytes]


def cases(key: str, answer: str) -> dict[str, Callable[[], Served]]:
    """Every hostile case, by model name; ``key`` is the key the client sends,
    ``answer`` a well-formed reply's content."""
    j = "application/json"
    shortened = key[3:20]  # 17 characters of the key, without its prefix
    echoes = f"{key} {key.upper()} {key.lower()} {key.swapcase()} [{shortened}] {key[:-1]}"
    return {
        # content as a list of parts: joined, an ok record
        "list-content": lambda: (
            200,
            j,
            _json(
                _completion(
                    _assistant(
                        [
                            {"type": "text", "text": answer[:20]},
                            {"type": "image_url", "image_url": {"url": "x"}},
                            {"type": "text", "text": answer[20:]},
                        ]
                    )
                )
            ),
        ),
        "number-content": lambda: (200, j, _json(_completion(_assistant(42)))),
        "object-content": lambda: (200, j, _json(_completion(_assistant({"text": answer})))),
        "part-not-object": lambda: (200, j, _json(_completion(_assistant(["text"])))),
        "choices-object": lambda: (
            200,
            j,
            _json({**_completion(_assistant(answer)), "choices": {}}),
        ),
        "choices-string": lambda: (
            200,
            j,
            _json({**_completion(_assistant(answer)), "choices": "x"}),
        ),
        "empty-choices": lambda: (
            200,
            j,
            _json({**_completion(_assistant(answer)), "choices": []}),
        ),
        "choice-number": lambda: (
            200,
            j,
            _json({**_completion(_assistant(answer)), "choices": [3]}),
        ),
        "null-message": lambda: (200, j, _json(_completion(None))),
        "not-an-object": lambda: (200, j, b"[1, 2, 3]"),
        "deep-nesting": lambda: (
            200,
            j,
            b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        ),
        "deep-content": lambda: (
            200,
            j,
            b'{"choices": [{"message": {"content": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}]}",
        ),
        # \ud800 alone: a lone surrogate, which no encoder accepts
        "lone-surrogate": lambda: (
            200,
            j,
            _json(_completion(_assistant(answer + "\n# \ud800 end"))),
        ),
        "nul-byte": lambda: (200, j, _json(_completion(_assistant(answer + "\n# a\u0000b")))),
        "nul-in-finish": lambda: (
            200,
            j,
            _json(_completion(_assistant(answer), finish="st\u0000op")),
        ),
        "invalid-utf8": lambda: (
            200,
            j,
            _json(_completion(_assistant(answer + "\n# ZZ"))).replace(b"ZZ", b"\xff\xfe"),
        ),
        "usage-negative": lambda: (
            200,
            j,
            _json(
                _completion(
                    _assistant(answer), usage={"prompt_tokens": -5, "completion_tokens": 10**30}
                )
            ),
        ),
        "usage-wrong-type": lambda: (
            200,
            j,
            _json(
                _completion(
                    _assistant(answer), usage={"prompt_tokens": "12", "completion_tokens": 1.5}
                )
            ),
        ),
        "usage-not-object": lambda: (200, j, _json(_completion(_assistant(answer), usage=[1]))),
        "finish-number": lambda: (200, j, _json(_completion(_assistant(answer), finish=7))),
        "finish-object": lambda: (
            200,
            j,
            _json(_completion(_assistant(answer), finish={"r": "stop"})),
        ),
        "key-in-finish": lambda: (
            200,
            j,
            _json(_completion(_assistant(answer), finish=key.upper()[:40])),
        ),
        "key-in-content": lambda: (
            200,
            j,
            _json(_completion(_assistant(answer + "\n# " + echoes))),
        ),
        "key-in-reasoning": lambda: (
            200,
            j,
            _json(_completion(_assistant(answer, reasoning_content="I saw " + echoes))),
        ),
        "key-split-by-nul": lambda: (
            200,
            j,
            _json(_completion(_assistant(answer + f"\n# {key[:8]}\u0000{key[8:]}"))),
        ),
        "key-in-400": lambda: (
            400,
            j,
            _json({"error": {"message": f"bad request for key {echoes}", "type": "x"}}),
        ),
        "key-in-500": lambda: (
            500,
            j,
            _json({"error": {"message": f"upstream saw {echoes}", "type": "x"}}),
        ),
        # a refused key, echoed back: ends the run (tests that use it run it alone)
        "key-in-401": lambda: (
            401,
            j,
            _json({"error": {"message": f"Incorrect API key provided: {echoes}", "type": "x"}}),
        ),
        "key-in-html-502": lambda: (502, "text/html", f"<html>{echoes}</html>".encode()),
        "huge": lambda: (
            200,
            j,
            _json(_completion(_assistant(answer + "\n" + "#" * HUGE_CHARS))),
        ),
        # 20 MB of reply in 20 kB of gzip: the bound holds after decoding
        "gzip-huge": lambda: (
            200,
            j,
            gzip.compress(_json(_completion(_assistant(answer + "\n" + "#" * HUGE_CHARS)))),
        ),
        "huge-error": lambda: (500, j, b'{"error": {"message": "' + b"e" * HUGE_CHARS + b'"}}'),
        "malformed-json": lambda: (200, j, b'{"id": "x", "choices": [{"message": {"content": "'),
        "html-200": lambda: (200, "text/html", b"<html><body>Bad gateway</body></html>"),
        "empty-body": lambda: (200, j, b""),
    }


#: The cases, in the order the server lists them.
CASES: tuple[str, ...] = tuple(cases("k" * 20, "x"))
#: Cases that stop a run (the endpoint refuses the key).
FATAL: tuple[str, ...] = ("key-in-401",)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: HostileOpenAI) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # no reverse DNS lookup
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up on a huge reply: expected


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def owner(self) -> HostileOpenAI:
        return cast(_Server, self.server).owner

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if body[:2] == b"\x1f\x8b":  # the gzip magic: say so
                self.send_header("Content-Encoding", "gzip")
            self.end_headers()
            view = memoryview(body)
            for start in range(0, len(body), 1 << 20):
                self.wfile.write(view[start : start + (1 << 20)])
        except OSError:
            self.close_connection = True

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            self._send(404, "application/json", b'{"error": {"message": "no such path"}}')
            return
        models = [*CASES, *self.owner.extra_models]
        data = [{"id": m, "object": "model", "owned_by": "hostile"} for m in models]
        self._send(200, "application/json", _json({"object": "list", "data": data}))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        model = str(request.get("model"))
        owner = self.owner
        with owner.lock:
            owner.served[model] += 1
            owner.order.append(model)
        if owner.healthy or model not in owner.cases:
            body = _completion(_assistant(owner.answer))
            self._send(200, "application/json", _json(body))
            return
        self._send(*owner.cases[model]())


class HostileOpenAI:
    """The hostile server, on a free port of 127.0.0.1 (a thread of this process)."""

    def __init__(self, *, key: str, answer: str, extra_models: tuple[str, ...] = ()) -> None:
        self.key = key
        self.answer = answer
        self.extra_models = extra_models
        self.cases = cases(key, answer)
        self.healthy = False
        self.lock = threading.Lock()
        self.served: Counter[str] = Counter()
        self.order: list[str] = []  # models, in the order their requests came
        self._httpd: _Server | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self._httpd = _Server(self)
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd = None
