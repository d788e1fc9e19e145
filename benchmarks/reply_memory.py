"""Peak memory of ``cvb run`` (runner + recorder) for huge replies against small ones.

    python benchmarks/reply_memory.py [--replies 6] [--huge-mb 20] [--concurrency 6]
        [--max-response-chars 200000]

A reply is capped (``--max-response-chars``) and bodies are read
with a bound, so memory must not grow with what a server sends. Two phases,
each in a child process of its own (so that their peaks are separable), each
sending ``--replies`` requests to ``tests/fake_openai.py`` (a process of its
own: its memory is not counted):

* small — every reply is about 1 kB of Python;
* huge — every reply is the same, followed by ``--huge-mb`` MB of comment.

Each phase runs ``BenchmarkRun(...).execute()`` with a temporary SQLite store;
the runner's recorder process (which stores and scores) is its child.
Printed per phase: the peak RSS of the runner process and of the recorder
(``ru_maxrss`` of the process and of its largest child), and the ratio of the
huge phase's to the small phase's, measured in the same invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FAKE_SERVER = REPO / "tests" / "fake_openai.py"
KEY_VAR = "CVB_BENCH_KEY"
KEY = "sk-bench-not-a-secret"
MODEL = "bench-model"

SMALL = (
    "```python\nimport httpx\n\n\ndef fetch_json(url: str) -> dict:\n"
    '    """Download ``url`` and return the parsed JSON."""\n'
    "    response = httpx.get(url, timeout=10.0)\n"
    "    response.raise_for_status()\n"
    "    return response.json()\n```\n" * 4
)


def phase(base_url: str, replies: int, concurrency: int, max_chars: int) -> dict[str, Any]:
    """One run in this process; returns its peaks (kB) and what was stored."""
    from sqlalchemy import text

    from cvb_engine.runner import BenchmarkRun, RunOptions
    from cvb_engine.scenario import load_library
    from cvb_engine.store import get_engine

    first = sorted(load_library(REPO / "scenarios"))[0]
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/cvb.db"
        options = RunOptions(
            scenarios=str(REPO / "scenarios"),
            only=[first],
            models=[MODEL],
            arms=["cold"],
            runs=replies,
            base_url=base_url,
            api_key_env=KEY_VAR,
            db=db,
            run_id="mem",
            concurrency=concurrency,
            timeout_s=120.0,
            max_response_chars=max_chars,
            # the fake server cuts replies at max_tokens (about 4 characters each)
            max_tokens=100_000_000,
        )
        started = time.perf_counter()
        outcome = asyncio.run(BenchmarkRun(options).execute())
        wall = time.perf_counter() - started
        with get_engine(db).connect() as conn:
            stored = conn.execute(
                text("SELECT count(*), max(length(response)), sum(response_cut) FROM record")
            ).one()
    return {
        "status": outcome.status,
        "ok": outcome.progress.ok,
        "records": stored[0],
        "longest": stored[1],
        "cut": stored[2],
        "wall_s": round(wall, 2),
        "runner_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "recorder_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    }


def start_server(reply: str, tmp: Path) -> tuple[subprocess.Popen[str], str]:
    table = tmp / "replies.json"
    table.write_text(json.dumps({"": reply}), encoding="utf-8")  # "" is in every prompt
    server = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--models", MODEL, "--replies", str(table)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline().strip()
    if not line.startswith("READY "):
        server.kill()
        raise SystemExit(f"fake server did not start: {line!r}")
    return server, line.removeprefix("READY ")


def run_phase(name: str, reply: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        server, base_url = start_server(reply, Path(tmp))
        try:
            env = {
                **os.environ,
                KEY_VAR: KEY,
                "CVB_ENDPOINTS": str(Path(tmp) / "none.json"),
                "NO_PROXY": "127.0.0.1,localhost",
            }
            child = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--phase",
                    base_url,
                    "--replies",
                    str(args.replies),
                    "--concurrency",
                    str(args.concurrency),
                    "--max-response-chars",
                    str(args.max_response_chars),
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
                check=False,
            )
        finally:
            server.terminate()
            server.wait(timeout=30)
    if child.returncode:
        raise SystemExit(f"{name} phase failed:\n{child.stderr[-2000:]}")
    return dict(json.loads(child.stdout.strip().splitlines()[-1]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--replies", type=int, default=6)
    p.add_argument("--huge-mb", type=float, default=20.0)
    p.add_argument("--concurrency", type=int, default=6)
    p.add_argument("--max-response-chars", type=int, default=200_000)
    p.add_argument("--phase", metavar="BASE_URL", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.phase:
        print(
            json.dumps(phase(args.phase, args.replies, args.concurrency, args.max_response_chars))
        )
        return 0
    huge = SMALL + "#" * int(args.huge_mb * 1024 * 1024)
    print(
        f"{args.replies} replies, concurrency {args.concurrency}, "
        f"--max-response-chars {args.max_response_chars}, huge = {args.huge_mb:g} MB each"
    )
    results = {
        name: run_phase(name, reply, args) for name, reply in (("small", SMALL), ("huge", huge))
    }
    for name, r in results.items():
        print(
            f"{name:<6} {r['status']}, {r['records']} records ({r['ok']} ok, {r['cut'] or 0} cut, "
            f"longest {r['longest']} chars) in {r['wall_s']} s; peak RSS runner "
            f"{r['runner_kb'] / 1024:.0f} MB, recorder {r['recorder_kb'] / 1024:.0f} MB"
        )
    small, big = results["small"], results["huge"]
    print(
        f"huge/small peak RSS: runner {big['runner_kb'] / small['runner_kb']:.2f}x, "
        f"recorder {big['recorder_kb'] / small['recorder_kb']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
