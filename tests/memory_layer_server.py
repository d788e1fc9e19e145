"""A ``cvb-memory/1`` HTTP layer for tests (standard library only).

Two ways to use it:

* In-process::

      with MemoryLayerServer(context="use httpx", fault=None, api_key="sk-...") as server:
          spec = LayerSpec("http", server.base_url)
          ...
          server.requests   # [ServedRequest(path, body, authorized, outcome), ...]

* As a process::

      python tests/memory_layer_server.py --port 0 [--context TEXT] [--messages]
          [--entries ID,ID] [--name N] [--version V] [--api-key KEY]
          [--fault 500|hang|bad_json|echo_key|huge] [--fail-on ingest|query] [--hang 30]
          [--fail-query-status N] [--log served.jsonl]

  prints ``READY http://127.0.0.1:PORT`` once listening and serves until SIGTERM/SIGINT.

Endpoints: ``POST /ingest`` (answers ``{"ok": true}``) and ``POST /query`` (the
context, or a system and a user message). A fault applies to the op named by
``fail_on`` (both when None), and only to requests that passed authentication;
``fail_query_status=N`` answers every query HTTP N (with a short JSON error body)
while ingest succeeds. ``echo_key`` answers HTTP 500 with the
``Authorization`` header in the body (a server that leaks the key back).
"""

from __future__ import annotations

import argparse
import json
import signal
import socketserver
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Literal, Self, cast, get_args

__all__ = ["FAULTS", "Fault", "MemoryLayerServer", "ServedRequest", "main"]

Fault = Literal["500", "hang", "bad_json", "echo_key", "huge"]
FAULTS: tuple[str, ...] = get_args(Fault)


@dataclass(frozen=True)
class ServedRequest:
    path: str
    body: Any  # the decoded JSON request (None when it was not JSON)
    authorized: bool
    outcome: str  # "ok", "unauthorized", "not_found", "bad_request" or the fault


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], layer: MemoryLayerServer) -> None:
        self.layer = layer
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a (possibly slow) reverse DNS lookup: skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # the client went away (a timeout), or the server is stopping
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "MemoryLayerServer/1.0"
    sys_version = ""

    @property
    def layer(self) -> MemoryLayerServer:
        return cast(_HTTPServer, self.server).layer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def do_POST(self) -> None:
        layer = self.layer
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        path = self.path.split("?", 1)[0]
        authorization = self.headers.get("Authorization") or ""
        authorized = layer.api_key is None or authorization == f"Bearer {layer.api_key}"
        op = path.rsplit("/", 1)[-1]
        if op not in ("ingest", "query"):
            layer._record(path, body, authorized, "not_found")
            self._send(404, b'{"error": "no such endpoint"}')
            return
        if not authorized:
            layer._record(path, body, authorized, "unauthorized")
            self._send(401, b'{"error": "missing or wrong bearer key"}')
            return
        if not isinstance(body, dict) or body.get("op") != op:
            layer._record(path, body, authorized, "bad_request")
            self._send(400, b'{"error": "expected a cvb-memory/1 request for this path"}')
            return
        fault = layer.fault if layer.fail_on in (None, op) else None
        if op == "query" and layer.fail_query_status is not None:
            layer._record(path, body, authorized, f"status_{layer.fail_query_status}")
            self._send(layer.fail_query_status, b'{"error": "the query failed on purpose"}')
            return
        layer._record(path, body, authorized, fault or "ok")
        if fault == "500":
            self._send(500, b'{"error": "the layer broke"}')
        elif fault == "hang":
            layer._stopping.wait(layer.hang_s)
            self.close_connection = True
        elif fault == "bad_json":
            self._send(200, b"{this is not json")
        elif fault == "echo_key":
            self._send(500, json.dumps({"error": f"bad key {authorization}"}).encode())
        elif fault == "huge":
            self._send(200, b'{"context": "' + b"x" * (5 * 1024 * 1024) + b'"}')
        else:
            self._send(200, json.dumps(layer.answer(op, body)).encode("utf-8"))


class MemoryLayerServer:
    """An HTTP memory layer on ``host:port`` (port 0 = a random free port)."""

    def __init__(
        self,
        *,
        context: str = "remember the house rules",
        messages: bool = False,
        entries: Sequence[str] | None = None,
        name: str | None = None,
        version: str | None = None,
        api_key: str | None = None,
        fault: Fault | None = None,
        fail_on: Literal["ingest", "query"] | None = None,
        fail_query_status: int | None = None,
        hang_s: float = 30.0,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | Path | None = None,
    ) -> None:
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        self.context = context
        self.messages = messages
        self.entries = list(entries) if entries is not None else None
        self.name = name
        self.version = version
        self.api_key = api_key
        self.fault = fault
        self.fail_on = fail_on
        self.fail_query_status = fail_query_status
        self.hang_s = hang_s
        self.host = host
        self.log_path = Path(log_path) if log_path is not None else None
        self._requested_port = port
        self._lock = threading.Lock()
        self._log: list[ServedRequest] = []
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def answer(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        named = {k: v for k, v in (("name", self.name), ("version", self.version)) if v}
        if op == "ingest":
            return {"ok": True, **named}
        reply: dict[str, Any]
        if self.messages:
            reply = {
                "messages": [
                    {"role": "system", "content": "Project memory follows."},
                    {"role": "user", "content": self.context},
                ]
            }
        else:
            reply = {"context": self.context}
        if self.entries is not None:
            reply["entries"] = self.entries
        return {**reply, **named}

    # -- lifecycle

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError("already started")
        self._stopping.clear()
        self._httpd = _HTTPServer((self.host, self._requested_port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes hanging handlers
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
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
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def requests(self) -> list[ServedRequest]:
        with self._lock:
            return list(self._log)

    def _record(self, path: str, body: Any, authorized: bool, outcome: str) -> None:
        served = ServedRequest(path, body, authorized, outcome)
        with self._lock:
            self._log.append(served)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(asdict(served)) + "\n")


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="A cvb-memory/1 HTTP layer for tests.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--context", default="remember the house rules")
    p.add_argument("--messages", action="store_true")
    p.add_argument("--entries", default=None, help="ids the query reply names, comma-separated")
    p.add_argument("--name", default=None)
    p.add_argument("--version", default=None)
    p.add_argument("--api-key", default=None)
    p.add_argument("--fault", choices=FAULTS, default=None)
    p.add_argument("--fail-on", choices=("ingest", "query"), default=None)
    p.add_argument("--fail-query-status", type=int, default=None)
    p.add_argument("--hang", type=float, default=30.0)
    p.add_argument("--log", type=Path, default=None)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    server = MemoryLayerServer(
        context=args.context,
        messages=args.messages,
        entries=args.entries.split(",") if args.entries is not None else None,
        name=args.name,
        version=args.version,
        api_key=args.api_key,
        fault=args.fault,
        fail_on=args.fail_on,
        fail_query_status=args.fail_query_status,
        hang_s=args.hang,
        host=args.host,
        port=args.port,
        log_path=args.log,
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
