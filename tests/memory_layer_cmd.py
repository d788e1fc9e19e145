#!/usr/bin/env python3
"""A ``cvb-memory/1`` command layer for tests (standard library only).

One request on stdin, one reply on stdout, driven by flags::

    python tests/memory_layer_cmd.py [--context TEXT | --messages | --echo-entries]
        [--entries ID,ID] [--name N] [--version V] [--log FILE] [--pid-file FILE]
        [--fail-on ingest|query] [--sleep S] [--exit N] [--bad-json] [--not-object]
        [--huge] [--reply JSON] [--long-context CHARS] [--spawn-sleeper]

* ``--context TEXT`` (default ``remember the house rules``): the query's context.
* ``--messages``: answer a system and a user message instead.
* ``--echo-entries``: ingest stores the entries in ``state_dir``; a query answers the
  first ``k`` of them (``- text`` lines) and their ids.
* ``--entries ID,ID``: the query reply names these ids (known or not).
* ``--log FILE``: append each request, as it came, as one JSON line (to count calls).
* ``--pid-file FILE``: append ``layer PID`` (and ``sleeper PID``) lines.
* Faults, for the op named by ``--fail-on`` (both when not given): ``--sleep S`` first,
  ``--exit N`` (a line on stderr, then exit status N; ``--noise LINES`` before it), ``--bad-json``, ``--not-object``,
  ``--huge`` (5 MiB on stdout), ``--reply JSON`` (exactly this on stdout),
  ``--long-context CHARS`` (a context that long). ``--spawn-sleeper`` starts a child
  ``sleep`` first and writes its pid to ``--pid-file`` (to see that a timeout kills the
  process group).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--context", default="remember the house rules")
    p.add_argument("--messages", action="store_true")
    p.add_argument("--echo-entries", action="store_true")
    p.add_argument("--entries", default=None)
    p.add_argument("--name", default=None)
    p.add_argument("--version", default=None)
    p.add_argument("--log", default=None)
    p.add_argument("--pid-file", default=None)
    p.add_argument("--fail-on", choices=("ingest", "query"), default=None)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--exit", type=int, default=None)
    p.add_argument("--noise", type=int, default=0, help="lines written to stderr before --exit")
    p.add_argument("--bad-json", action="store_true")
    p.add_argument("--not-object", action="store_true")
    p.add_argument("--huge", action="store_true")
    p.add_argument("--reply", default=None)
    p.add_argument("--long-context", type=int, default=None)
    p.add_argument("--spawn-sleeper", action="store_true")
    return p.parse_args(argv)


def _store(state_dir: str, namespace: str) -> Path:
    digest = hashlib.sha256(namespace.encode()).hexdigest()[:16]
    return Path(state_dir) / f"echo-{digest}.json"


def _answer(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    named: dict[str, Any] = {}
    if args.name is not None:
        named["name"] = args.name
    if args.version is not None:
        named["version"] = args.version
    if request["op"] == "ingest":
        if args.echo_entries:
            _store(request["state_dir"], request["namespace"]).write_text(
                json.dumps(request["entries"]), encoding="utf-8"
            )
        return {"ok": True, **named}
    reply: dict[str, Any]
    if args.echo_entries:
        entries = json.loads(_store(request["state_dir"], request["namespace"]).read_text())
        chosen = entries[: request["k"]]
        reply = {
            "context": "\n".join(f"- {e['text']}" for e in chosen),
            "entries": [e["id"] for e in chosen],
        }
    elif args.messages:
        reply = {
            "messages": [
                {"role": "system", "content": "Project memory follows."},
                {"role": "user", "content": args.context},
            ]
        }
    else:
        reply = {"context": args.context}
    if args.entries is not None:
        reply["entries"] = args.entries.split(",")
    return {**reply, **named}


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    request = json.loads(sys.stdin.read())
    if args.log:
        with open(args.log, "a", encoding="utf-8") as log:
            log.write(json.dumps(request) + "\n")
    if args.pid_file:
        with open(args.pid_file, "a", encoding="utf-8") as pids:
            pids.write(f"layer {os.getpid()}\n")
    if args.fail_on in (None, request.get("op")):
        if args.spawn_sleeper:
            child = subprocess.Popen(["sleep", "60"])
            if args.pid_file:
                with open(args.pid_file, "a", encoding="utf-8") as pids:
                    pids.write(f"sleeper {child.pid}\n")
        if args.sleep:
            time.sleep(args.sleep)
        if args.exit is not None:
            for i in range(args.noise):
                print(f"noise line {i} " + "." * 60, file=sys.stderr)
            print(f"memory_layer_cmd: failing {request.get('op')} on purpose", file=sys.stderr)
            return args.exit
        if args.bad_json:
            sys.stdout.write("{this is not json")
            return 0
        if args.not_object:
            sys.stdout.write("[1, 2, 3]")
            return 0
        if args.huge:
            filler = "x" * (1024 * 1024)
            sys.stdout.write('{"context": "')
            for _ in range(5):
                sys.stdout.write(filler)
            sys.stdout.write('"}')
            return 0
        if args.reply is not None:
            sys.stdout.write(args.reply)
            return 0
        if args.long_context is not None and request.get("op") == "query":
            sys.stdout.write(json.dumps({"context": "y" * args.long_context}))
            return 0
    sys.stdout.write(json.dumps(_answer(args, request)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
