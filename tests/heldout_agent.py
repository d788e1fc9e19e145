"""A held-out scripted tool-calling endpoint for the agent arm (issue 28), written from the README's
documented protocol alone: an OpenAI chat-completions server on 127.0.0.1 whose behaviour is chosen
by the model name. Every agent is stateless: it decides its next move from the messages it is sent,
so what it "read" is exactly what the harness showed it.

Agents (model names):

- ``reader``: lists the root, lists the folders that can hold rules (``docs/``, ``docs/decisions/``,
  the package), reads every rules-looking file it found (AGENTS.md, CLAUDE.md, README.md, decision
  records), then writes code honoring every constraint whose text it saw, and answers.
- ``at-once``: writes violating code at its first reply, reads nothing.
- ``messages-only``: never opens a file; honors only the constraints present in its messages.
- ``searcher``: ``search_files("decision")`` and honors the constraints shown in the result.
- ``multi``: writes a helper module, then the target violating, then the target compliant with what it
  read (reads like ``reader``): the final content counts.
- ``hostile``: one message with parallel hostile calls (paths out, absolute, NUL, unknown tool, bad
  JSON, missing and wrong-typed fields, a 50 MB write), then writes violating code.
- ``parallel``: twenty read_file calls in one message, then a violating write.
- ``endless``: lists the root forever, tool calls even when told ``tool_choice: "none"``.
- ``broken``: malformed ``tool_calls`` (no function, arguments as an object, null id).
- ``empty``: ``choices: []`` always.

The code written is chosen per scenario from hand-written pieces: ``SOLUTIONS[entry](honor)`` where
``honor`` is the set of constraint ids to honor; every other constraint of the scenario is violated.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import yaml

# ---------------------------------------------------------------- solutions, written by hand


def _http(honor: frozenset[str]) -> str:
    client = "httpx" if "httpx-not-requests" in honor else "requests"
    err = "httpx.TransportError" if client == "httpx" else "requests.ConnectionError"
    if "retries-via-tenacity" in honor:
        return (
            f"import {client}\nfrom tenacity import retry, stop_after_attempt, wait_exponential\n\n\n"
            "def fetch_json(url, retries=3):\n"
            "    @retry(stop=stop_after_attempt(retries), wait=wait_exponential(), reraise=True)\n"
            "    def once():\n"
            f"        resp = {client}.get(url, timeout=10)\n"
            "        resp.raise_for_status()\n"
            "        return resp.json()\n\n"
            "    return once()\n"
        )
    return (
        f"import time\nimport {client}\n\n\n"
        "def fetch_json(url, retries=3):\n"
        "    for attempt in range(retries):\n"
        "        try:\n"
        f"            resp = {client}.get(url, timeout=10)\n"
        "            if resp.status_code < 500:\n"
        "                return resp.json()\n"
        f"        except {err}:\n"
        "            pass\n"
        "        time.sleep(2 ** attempt)\n"
        "    raise RuntimeError(f'failed after {retries} attempts')\n"
    )


def _reports(honor: frozenset[str]) -> str:
    copy = "shutil.copy2" if "metadata-preserving-copy" in honor else "shutil.copyfile"
    if "pathlib-not-os-path" in honor:
        return (
            "import shutil\nfrom pathlib import Path\n\n\n"
            "def collect_reports(src_dir, dest_dir):\n"
            "    src, dest = Path(src_dir), Path(dest_dir)\n"
            "    out = []\n"
            "    for path in src.rglob('*.csv'):\n"
            "        target = dest / path.relative_to(src)\n"
            "        target.parent.mkdir(parents=True, exist_ok=True)\n"
            f"        {copy}(path, target)\n"
            "        out.append(target)\n"
            "    return sorted(out)\n"
        )
    return (
        "import os\nimport shutil\n\n\n"
        "def collect_reports(src_dir, dest_dir):\n"
        "    out = []\n"
        "    for root, _dirs, files in os.walk(src_dir):\n"
        "        for name in files:\n"
        "            if name.endswith('.csv'):\n"
        "                rel = os.path.relpath(os.path.join(root, name), src_dir)\n"
        "                target = os.path.join(dest_dir, rel)\n"
        "                os.makedirs(os.path.dirname(target), exist_ok=True)\n"
        f"                {copy}(os.path.join(root, name), target)\n"
        "                out.append(target)\n"
        "    return sorted(out)\n"
    )


def _tokens(honor: frozenset[str]) -> str:
    if "secrets-for-tokens" in honor:
        head = "import secrets\n"
        make = "    token = secrets.token_urlsafe(24)\n"
    else:
        head = "import random\nimport string\n"
        make = "    token = ''.join(random.choice(string.ascii_letters) for _ in range(32))\n"
    if "constant-time-compare" in honor:
        head += "import hmac\n"
        cmp = "hmac.compare_digest(stored[0], token)"
    else:
        cmp = "stored[0] == token"
    return (
        head + "import time\n\n_TOKENS = {}\n\n\n"
        "def create_reset_token(user_id):\n"
        + make
        + "    _TOKENS[user_id] = (token, time.time() + 1800)\n"
        "    return token\n\n\n"
        "def verify_reset_token(user_id, token):\n"
        "    stored = _TOKENS.get(user_id)\n"
        "    if stored is None or stored[1] < time.time():\n"
        "        return False\n"
        f"    if not {cmp}:\n"
        "        return False\n"
        "    del _TOKENS[user_id]\n"
        "    return True\n"
    )


SOLUTIONS: dict[str, Callable[[frozenset[str]], str]] = {
    "fetch_json": _http,
    "collect_reports": _reports,
    "create_reset_token": _tokens,
}
SCENARIO_FILES = {
    "fetch_json": "library-choice/http-client-choice.yaml",
    "collect_reports": "library-choice/report-copy-pathlib.yaml",
    "create_reset_token": "security/reset-token-generator.yaml",
}
SCENARIO_IDS = {
    "fetch_json": "http-client-choice",
    "collect_reports": "report-copy-pathlib",
    "create_reset_token": "reset-token-generator",
}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def markers(scenarios_dir: Path) -> dict[str, dict[str, str]]:
    """Per entry point, per constraint id: a phrase of the constraint's text (its first 70
    characters, whitespace-normalised) whose presence in a message means the agent saw the rule."""
    out: dict[str, dict[str, str]] = {}
    for entry, rel in SCENARIO_FILES.items():
        data = yaml.safe_load((scenarios_dir / rel).read_text())
        out[entry] = {c["id"]: _norm(c["text"])[:70] for c in data["constraints"]}
    return out


# ---------------------------------------------------------------- the agents

RULE_NAMES = ("agents.md", "claude.md", "readme.md")
_TARGET = re.compile(r"`([\w/]+\.py)`")


class Conversation:
    """What an agent can see in one request."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.messages: list[dict[str, Any]] = list(body.get("messages") or [])
        self.calls: list[dict[str, Any]] = []
        for m in self.messages:
            if m.get("role") == "assistant":
                self.calls.extend(m.get("tool_calls") or [])
        self.results = [
            str(m.get("content") or "") for m in self.messages if m.get("role") == "tool"
        ]
        self.own = "\n".join(
            str(m.get("content") or "")
            for m in self.messages
            if m.get("role") in ("system", "user")
        )
        user = [str(m.get("content") or "") for m in self.messages if m.get("role") == "user"]
        found = _TARGET.findall(user[0]) if user else []
        self.target = found[-1] if found else "fernhollow/unknown.py"
        self.entry = next((e for e in SOLUTIONS if f"{e}(" in (user[0] if user else "")), None)
        self.tool_none = body.get("tool_choice") == "none"

    def requested(self, name: str) -> set[str]:
        out = set()
        for c in self.calls:
            fn = c.get("function") or {}
            if fn.get("name") == name:
                with contextlib.suppress(ValueError, AttributeError):
                    out.add(str(json.loads(fn.get("arguments") or "{}").get("path")))
        return out

    def wrote(self) -> bool:
        return any((c.get("function") or {}).get("name") == "write_file" for c in self.calls)

    def seen(self, marks: dict[str, str], *, messages: bool, tools: bool) -> frozenset[str]:
        text = ""
        if messages:
            text += _norm(self.own)
        if tools:
            text += " " + _norm("\n".join(self.results))
        return frozenset(cid for cid, mark in marks.items() if mark in text)

    def listings(self) -> list[tuple[str, list[str]]]:
        """(folder, entries) of every list_files answered so far."""
        out = []
        results = {
            m.get("tool_call_id"): str(m.get("content") or "")
            for m in self.messages
            if m.get("role") == "tool"
        }
        for c in self.calls:
            fn = c.get("function") or {}
            if fn.get("name") != "list_files":
                continue
            try:
                folder = str(json.loads(fn.get("arguments") or "{}").get("path"))
            except ValueError:
                continue
            text = results.get(c.get("id"), "")
            if text.startswith("refused"):
                continue
            out.append((folder, [e.strip() for e in text.splitlines() if e.strip()]))
        return out


def _call(i: int, name: str, args: Any, raw: str | None = None) -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": raw if raw is not None else json.dumps(args)},
    }


def _join(folder: str, entry: str) -> str:
    return entry if folder in (".", "", "./") else folder.rstrip("/") + "/" + entry


def _explore(conv: Conversation) -> list[dict[str, Any]]:
    """The reader's next calls: list, descend into rules folders, read rules files; [] when done."""
    listed = conv.requested("list_files")
    read = conv.requested("read_file")
    n = len(conv.calls)
    if "." not in listed:
        return [_call(n, "list_files", {"path": "."})]
    todo: list[dict[str, Any]] = []
    for folder, entries in conv.listings():
        for entry in entries:
            path = _join(folder, entry.rstrip("/"))
            if entry.endswith("/"):
                if path in ("docs", "docs/decisions", "fernhollow") and path not in listed:
                    todo.append(_call(n + len(todo), "list_files", {"path": path}))
            elif (
                entry.lower() in RULE_NAMES or path.startswith("docs/decisions/")
            ) and path not in read:
                todo.append(_call(n + len(todo), "read_file", {"path": path}))
    return todo


def _write(
    conv: Conversation, marks: dict[str, dict[str, str]], honor: frozenset[str], k: int = 0
) -> dict[str, Any]:
    code = SOLUTIONS[conv.entry](honor) if conv.entry else "def nothing():\n    pass\n"
    return _call(len(conv.calls) + k, "write_file", {"path": conv.target, "content": code})


def decide(model: str, conv: Conversation, marks: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The assistant message (content, tool_calls) the agent ``model`` sends next."""
    mk = marks.get(conv.entry or "", {})
    done: dict[str, Any] = {"role": "assistant", "content": "Done."}
    if model == "endless":
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call(len(conv.calls), "list_files", {"path": "."})],
        }
    if model == "hostile":
        return _hostile(conv, marks)
    if model == "parallel":
        if not conv.calls:
            calls = [_call(100 + i, "read_file", {"path": "README.md"}) for i in range(20)]
            return {"role": "assistant", "content": None, "tool_calls": calls}
        if conv.wrote():
            return done
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [_write(conv, marks, frozenset())],
        }
    if conv.tool_none or conv.wrote():
        return done
    if model in ("reader", "multi"):
        todo = _explore(conv)
        if todo:
            return {"role": "assistant", "content": None, "tool_calls": todo}
        honor = conv.seen(mk, messages=True, tools=True)
        calls = [_write(conv, marks, honor)]
        if model == "multi":
            calls = [
                _call(
                    len(conv.calls),
                    "write_file",
                    {"path": "fernhollow/_util.py", "content": "X = 1\n"},
                ),
                _write(conv, marks, frozenset(), 1),
                _write(conv, marks, honor, 2),
            ]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    if model == "searcher":
        if not conv.requested("search_files") and not any(
            (c.get("function") or {}).get("name") == "search_files" for c in conv.calls
        ):
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [_call(0, "search_files", {"query": "decision"})],
            }
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [_write(conv, marks, conv.seen(mk, messages=False, tools=True))],
        }
    if model == "messages-only":
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [_write(conv, marks, conv.seen(mk, messages=True, tools=False))],
        }
    # at-once and anything unknown: write violating code at once.
    return {"role": "assistant", "content": None, "tool_calls": [_write(conv, marks, frozenset())]}


def _hostile(conv: Conversation, marks: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Round 1: sixteen parallel hostile calls; round 2: the rest of them; round 3: a plain
    violating write; then it answers, and keeps calling tools when told not to."""
    ids = {c.get("id") for c in conv.calls}
    if conv.tool_none:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call(99, "write_file", {"path": "x.py", "content": "late"})],
        }
    if "call_50" in ids:
        return {"role": "assistant", "content": "Done."}
    big = "x" * (50 * 1024 * 1024)
    first = [
        _call(1, "read_file", {"path": "../../../../etc/passwd"}),
        _call(2, "read_file", {"path": "/etc/passwd"}),
        _call(3, "write_file", {"path": "../escaped.py", "content": "pwned"}),
        _call(4, "write_file", {"path": HOSTILE_SENTINEL + "/evil.txt", "content": "pwned"}),
        _call(5, "list_files", {"path": ".."}),
        _call(6, "list_files", {"path": "/"}),
        _call(7, "read_file", {"path": "fernhollow/\u0000x"}),
        _call(8, "exec_shell", {"cmd": "touch /tmp/pwned"}),
        _call(9, "write_file", None, raw="{not json"),
        _call(10, "write_file", {"path": "fernhollow/a.py"}),
        _call(11, "write_file", {"path": 5, "content": ["a"]}),
        _call(12, "write_file", None, raw="[1, 2]"),
        _call(14, "search_files", {"query": ""}),
        _call(15, "read_file", {"path": "fernhollow/../../x"}),
        _call(16, "write_file", {"path": "a\\..\\..\\b.py", "content": "x"}),
        # last: a body this size is cut by the runner, and calls after it would go with it
        _call(13, "write_file", {"path": "fernhollow/big.py", "content": big}),
    ]
    second = [
        _call(17, "run_tests", {}),
        _call(18, "read_file", {"path": "./" + "a/" * 200 + "x"}),
        _call(19, "write_file", {"path": "fernhollow/" + "n" * 5000 + ".py", "content": "x"}),
        _call(20, "list_files", {}),
    ]
    if "call_1" not in ids:
        return {"role": "assistant", "content": None, "tool_calls": first}
    if "call_17" not in ids:
        return {"role": "assistant", "content": None, "tool_calls": second}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [_write(conv, marks, frozenset(), 50 - len(conv.calls))],
    }


#: Set by the test: a folder outside every workspace the hostile agent tries to write into.
HOSTILE_SENTINEL = "/tmp/cvb-heldout-sentinel"


class Handler(BaseHTTPRequestHandler):
    marks: ClassVar[dict[str, dict[str, str]]] = {}

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, code: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        names = [
            "parallel",
            "reader",
            "at-once",
            "messages-only",
            "searcher",
            "multi",
            "hostile",
            "endless",
            "broken",
            "empty",
        ]
        self._send(200, {"object": "list", "data": [{"id": n, "object": "model"} for n in names]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        model = str(body.get("model"))
        conv = Conversation(body)
        if model == "empty":
            return self._send(200, {"id": "x", "object": "chat.completion", "choices": []})
        if model == "broken":
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": None, "type": "function"},
                    {
                        "id": "b",
                        "type": "function",
                        "function": {"name": "write_file", "arguments": {"path": conv.target}},
                    },
                    {"id": "c", "type": "function", "function": "write_file"},
                    "junk",
                ],
            }
        else:
            message = decide(model, conv, self.marks)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        self._send(
            200,
            {
                "id": "chatcmpl-heldout",
                "object": "chat.completion",
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            },
        )


def serve(scenarios_dir: Path, port: int = 0) -> ThreadingHTTPServer:
    """Start the endpoint on 127.0.0.1 in a daemon thread."""
    Handler.marks = markers(scenarios_dir)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    srv = serve(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print(srv.server_address[1], flush=True)
    threading.Event().wait()
