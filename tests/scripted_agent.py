"""A scripted tool-calling endpoint for the agent arm's tests (standard library only).

An OpenAI-compatible server on 127.0.0.1 whose "models" are scripted agents. Each
request carries the whole conversation, so an agent decides its next move from it
(how many rounds it has had, what the tools answered); nothing is kept between
requests, and any number of episodes run at once.

Agents (the model name picks one):

``reader``     lists the repository, lists ``fernhollow/`` and ``docs/decisions/``,
               reads every Markdown file it found, then writes code that follows
               every rule it read.
``searcher``   searches the files for ``--query`` words, then writes code that follows
               the rules the search results showed.
``ignorer``    reads like ``reader``, then writes code that follows nothing.
``writer``     writes at once, following nothing.
``messages``   writes at once, following only the rules in its messages (the system
               message holds them with ``preload=true``).
``tester``     writes like ``messages``, runs the tests, reads the result, answers.
``hostile``    tries every refused thing (paths out, absolute, a link out, ``..``,
               huge write, unknown tool, bad JSON, missing fields, non-string fields),
               then writes code that follows nothing.
``endless``    calls ``list_files`` forever, ``tool_choice: "none"`` included.
``talker``     answers with a code block and never calls a tool.
``garbled``    sends malformed tool calls (no function, a name that is no string, arguments
               as an object or null) beside one good write, then a 300,000-character answer.
``broken``     writes, then answers every later request with a body that is not JSON.

What "follows a rule" writes is chosen from a solutions table by the module the
task names (``Write the solution in `pkg/mod.py`.``): the first variant whose
``needs`` (phrases of rule texts) all appear in what the agent saw. The default
table covers the tests' ``fetch_json`` and ``below_zero`` scenarios; ``--solutions
FILE`` adds others (``{"module": [{"needs": [...], "code": "..."}, ...]}``).

In-process::

    with ScriptedAgent() as server:
        server.base_url, server.requests

As a process::

    python tests/scripted_agent.py --port 0 [--delay 0.05] [--solutions FILE] [--log FILE]

prints ``READY http://127.0.0.1:PORT/v1`` and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

AGENTS = (
    "reader",
    "searcher",
    "ignorer",
    "writer",
    "messages",
    "tester",
    "hostile",
    "endless",
    "talker",
    "garbled",
    "broken",
)

HTTPX_RULE = "standardized on httpx"
TIMEOUT_RULE = "without a timeout"

FETCH_COMPLIANT = (
    "import httpx\n\n\ndef fetch_json(url):\n    return httpx.get(url, timeout=5).json()\n"
)
FETCH_HTTPX_ONLY = "import httpx\n\n\ndef fetch_json(url):\n    return httpx.get(url).json()\n"
FETCH_TIMEOUT_ONLY = (
    "import requests\n\n\ndef fetch_json(url):\n    return requests.get(url, timeout=5).json()\n"
)
FETCH_VIOLATING = "import requests\n\n\ndef fetch_json(url):\n    return requests.get(url).json()\n"
BELOW_ZERO_RULE = "dips below zero"
BELOW_ZERO_GOOD = (
    "def below_zero(operations):\n    balance = 0\n    for op in operations:\n"
    "        balance += op\n        if balance < 0:\n            return True\n    return False\n"
)
BELOW_ZERO_BAD = "def below_zero(operations):\n    return sum(operations) < 0\n"

SOLUTIONS: dict[str, list[dict[str, Any]]] = {
    "fetch_json": [
        {"needs": [HTTPX_RULE, TIMEOUT_RULE], "code": FETCH_COMPLIANT},
        {"needs": [HTTPX_RULE], "code": FETCH_HTTPX_ONLY},
        {"needs": [TIMEOUT_RULE], "code": FETCH_TIMEOUT_ONLY},
        {"needs": [], "code": FETCH_VIOLATING},
    ],
    "below_zero": [
        {"needs": [BELOW_ZERO_RULE], "code": BELOW_ZERO_GOOD},
        {"needs": [], "code": BELOW_ZERO_BAD},
    ],
}

#: What the hostile agent tries, one call each, in its first round.
HOSTILE_CALLS: list[tuple[str, Any]] = [
    ("read_file", {"path": "../../../../etc/passwd"}),
    ("read_file", {"path": "/etc/passwd"}),
    ("write_file", {"path": "../outside.txt", "content": "pwned"}),
    ("write_file", {"path": "/tmp/cvb-hostile-absolute.txt", "content": "pwned"}),
    ("write_file", {"path": "fernhollow/../../outside2.txt", "content": "pwned"}),
    ("list_files", {"path": ".."}),
    ("list_files", {"path": "~"}),
    ("write_file", {"path": "big.txt", "content": "x" * 200_000}),
    ("write_file", {"path": "medium.txt", "content": "y" * 17_000}),
    ("delete_everything", {"path": "."}),
    ("read_file", "{not json"),
    ("read_file", {}),
    ("write_file", {"path": "fernhollow/x.py"}),
    ("search_files", {"query": 12}),
    ("read_file", ["AGENTS.md"]),
    ("search_files", {"query": ""}),
    ("read_file", {"path": "fernhollow"}),
]

_TARGET = re.compile(r"Write the solution in `([^`]+)`")


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class Conversation:
    """What an agent can tell from a request."""

    def __init__(self, request: Mapping[str, Any]) -> None:
        self.messages: list[dict[str, Any]] = list(request.get("messages") or [])
        self.rounds = sum(1 for m in self.messages if m.get("role") == "assistant")
        self.final = request.get("tool_choice") == "none"
        self.own = " ".join(
            _text(m.get("content")) for m in self.messages if m.get("role") in ("system", "user")
        )
        self.results = [_text(m.get("content")) for m in self.messages if m.get("role") == "tool"]
        self.last_results = self.results[-self._last_round_calls() :] if self.rounds else []
        self.wrote = any(
            c.get("function", {}).get("name") == "write_file"
            for m in self.messages
            if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []
        )
        found = _TARGET.search(self.own)
        self.target = found.group(1) if found else "fernhollow/solution.py"

    def _last_round_calls(self) -> int:
        for m in reversed(self.messages):
            if m.get("role") == "assistant":
                return len(m.get("tool_calls") or []) or 1
        return 1

    def seen(self, tools: bool = True) -> str:
        return (self.own + "\n" + ("\n".join(self.results) if tools else "")).lower()


def solution(
    target: str, seen: str, table: Mapping[str, list[dict[str, Any]]], task: str = ""
) -> str:
    """The first variant for the task whose needs were all seen: by the module the task
    names, else by a name of the table the task mentions."""
    module = target.rsplit("/", 1)[-1].removesuffix(".py")
    key = module if module in table else next((k for k in table if k in task), "*")
    for variant in table.get(key, []):
        if all(need.lower() in seen for need in variant["needs"]):
            return str(variant["code"])
    return f"def {module}(*args):\n    return None\n"


def _listed(results: Sequence[str]) -> list[str]:
    return [line.strip() for text in results for line in text.splitlines() if line.strip()]


def plan(
    agent: str, talk: Conversation, table: Mapping[str, list[dict[str, Any]]], query: str
) -> list[tuple[str, Any]] | str:
    """The calls of this round, or the final text."""
    write = ("write_file", None)  # filled in below with what the agent saw
    n = talk.rounds
    if agent == "endless":
        return [("list_files", {"path": "."})]
    if talk.final:
        return "Done: I wrote the solution."
    calls: list[tuple[str, Any]] | str
    if agent in ("reader", "ignorer"):
        if n == 0:
            calls = [("list_files", {"path": "."})]
        elif n == 1:
            root = _listed(talk.last_results)
            calls = [("list_files", {"path": "fernhollow"})]
            if "docs/" in root:
                calls.append(("list_files", {"path": "docs/decisions"}))
            calls += [("read_file", {"path": p}) for p in root if p.endswith(".md")]
        elif n == 2:
            names = _listed(talk.last_results[:2])
            calls = []
            for name in names:
                if name == "AGENTS.md":
                    calls.append(("read_file", {"path": "fernhollow/AGENTS.md"}))
                elif name.endswith(".md") and re.match(r"^\d{4}-", name):
                    calls.append(("read_file", {"path": f"docs/decisions/{name}"}))
            calls = calls or [write]
        elif not talk.wrote:
            calls = [write]
        else:
            calls = "Done: I wrote the solution."
    elif agent == "searcher":
        if n == 0:
            calls = [("search_files", {"query": q}) for q in query.split("|") if q]
        elif n == 1:
            calls = [write]
        else:
            calls = "Done."
    elif agent in ("writer", "messages", "broken"):
        calls = [write] if n == 0 else "Done."
    elif agent == "tester":
        if n == 0:
            calls = [write, ("run_tests", {})]
        else:
            calls = "Tests: " + (talk.last_results[-1][:200] if talk.last_results else "")
    elif agent == "hostile":
        # two rounds: a reply's calls past 16 are dropped by the client (replies.MAX_TOOL_CALLS)
        half = len(HOSTILE_CALLS) // 2
        if n == 0:
            calls = list(HOSTILE_CALLS[:half])
        elif n == 1:
            calls = [*HOSTILE_CALLS[half:], write]
        else:
            calls = "Done."
    else:  # talker
        return "```python\n" + solution(talk.target, talk.seen(), table, talk.own) + "```"
    if isinstance(calls, str):
        return calls
    seen = talk.seen(tools=agent not in ("writer", "messages", "tester", "hostile"))
    if agent in ("ignorer", "writer", "hostile", "broken"):
        seen = ""
    return [
        (
            (
                "write_file",
                {"path": talk.target, "content": solution(talk.target, seen, table, talk.own)},
            )
            if c is write
            else c
        )
        for c in calls
    ]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            data = [{"id": a, "object": "model", "owned_by": "scripted"} for a in AGENTS]
            self._json(200, {"object": "list", "data": data})
            return
        if "/models/" in self.path:
            name = self.path.rsplit("/", 1)[-1]
            if name in AGENTS:
                self._json(200, {"id": name, "object": "model", "owned_by": "scripted"})
                return
        self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            request = json.loads(self.rfile.read(length))
        except ValueError:
            self._json(400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
            return
        owner = self.server.owner
        with owner.lock:
            owner.requests.append(request)
            if owner.log is not None:
                with owner.log.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(request) + "\n")
        if owner.delay:
            time.sleep(owner.delay)
        agent = str(request.get("model", ""))
        if agent not in AGENTS:
            self._json(404, {"error": {"message": f"no model {agent}", "type": "not_found"}})
            return
        talk = Conversation(request)
        if agent == "broken" and talk.rounds >= 1:
            data = b'{"choices": [{"message": {"content": "cut'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if agent == "garbled":
            self._garbled(talk)
            return
        step = plan(agent, talk, owner.table, owner.query)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(step, str):
            message["content"] = step
            finish = "stop"
        else:
            message["tool_calls"] = [
                {
                    "id": f"call_{talk.rounds}_{i}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for i, (name, args) in enumerate(step)
            ]
            finish = "tool_calls"
        prompt = len(json.dumps(request.get("messages"))) // 4
        self._json(
            200,
            {
                "id": f"chatcmpl-{talk.rounds}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": agent,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": 20,
                    "total_tokens": prompt + 20,
                },
            },
        )

    def _garbled(self, talk: Conversation) -> None:
        if talk.rounds == 0:
            code = solution(talk.target, "", self.server.owner.table, talk.own)
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"type": "function"},
                    {"id": "x", "function": {"name": 5, "arguments": "{}"}},
                    "not an object",
                    {
                        "id": "good",
                        "type": "function",
                        "function": {
                            "name": "write_file",
                            "arguments": {"path": talk.target, "content": code},
                        },
                    },
                    {
                        "id": "nul",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": None},
                    },
                ],
            }
        else:
            message = {"role": "assistant", "content": "A" * 300_000}
        self._json(
            200,
            {"id": "g", "object": "chat.completion", "model": "garbled",
             "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]},
        )  # fmt: skip


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedAgent


class ScriptedAgent:
    """The server, in this process (a context manager)."""

    def __init__(
        self,
        *,
        port: int = 0,
        delay: float = 0.0,
        solutions: Mapping[str, list[dict[str, Any]]] | None = None,
        query: str = "httpx|timeout",
        log: Path | None = None,
    ) -> None:
        self.log = log
        self.table = {**SOLUTIONS, **(solutions or {})}
        self.delay = delay
        self.query = query
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.httpd = _Server(("127.0.0.1", port), _Handler)
        self.httpd.owner = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--solutions", type=Path)
    parser.add_argument("--query", default="httpx|timeout")
    parser.add_argument("--log", type=Path, help="append every request body, one JSON a line")
    args = parser.parse_args(argv)
    table = json.loads(args.solutions.read_text()) if args.solutions else None
    server = ScriptedAgent(
        port=args.port, delay=args.delay, solutions=table, query=args.query, log=args.log
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with server:
        print(f"READY {server.base_url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
