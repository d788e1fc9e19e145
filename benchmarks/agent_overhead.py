"""Agent arm overhead: whole agent episodes through ``cvb run`` beside a bare loop of the
same requests.

    python benchmarks/agent_overhead.py [--episodes 200] [--concurrency 8]

The scripted tool-calling endpoint (``tests/scripted_agent.py``) runs in a process
of its own, with no delay, and logs every request body it answers. Then, each in
its own child process:

* pipeline: ``BenchmarkRun(...).execute()`` with the ``agent`` arm (a temporary
  SQLite store): per episode a workspace is built and written to a temporary
  folder, every tool call goes through the path check and the tools, the trace
  is built, stored and the written file scored (in the recorder process, whose
  CPU is counted with the phase's). Half the episodes are the ``reader`` agent
  (lists, reads the rules, writes, answers: 4 requests, 6+ tool calls), half the
  ``writer`` (writes at once: 2 requests).
* bare: an ``openai.AsyncOpenAI`` loop (``max_retries=0``) that sends exactly the
  request bodies the endpoint logged during the pipeline phase (same messages,
  same tools, same count, the same number in flight), checking only that each
  reply parses.

Printed: episodes per second of the pipeline, the bare loop's time for the same
requests and the ratio, and the harness's own CPU per tool round: (pipeline CPU
- bare CPU) / tool rounds, i.e. what the workspace, the tools, the trace, storing
and scoring cost beyond sending the requests. CPU is the figure least disturbed
by other load on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "scripted_agent.py"
KEY_VAR = "CVB_BENCH_API_KEY"
KEY = "sk-bench-not-a-secret"
MODELS = ["reader", "writer"]

SCENARIO = """\
id: agent-bench-{n}
version: 1
category: library-choice
title: Fetch JSON
task: |
  Write a Python function fetch_json(url) that downloads a URL and returns the parsed JSON.
constraints:
  - id: httpx-not-requests
    text: >-
      The team standardized on httpx after requests caused the March socket-exhaustion incident.
    checks:
      - kind: regex
        forbid: '(?m)^\\\\s*(import requests|from requests\\\\b)'
      - kind: regex
        require: '\\\\bhttpx\\\\.'
    samples:
      violating: ["import requests\\\\nrequests.get(url)"]
      compliant: ["import httpx\\\\nhttpx.get(url)"]
  - id: timeout-set
    text: The gateway team measured that calls without a timeout caused the 2025 stalls.
    checks:
      - kind: regex
        require: 'timeout\\\\s*='
    samples:
      violating: ["httpx.get(url)"]
      compliant: ["httpx.get(url, timeout=5)"]
"""


def own_and_children_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# --------------------------------------------------------------------------- phases


def phase_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    import sqlite3

    from cvb_engine.agent.trace import AgentTrace
    from cvb_engine.runner import BenchmarkRun, RunOptions
    from cvb_engine.store import dispose_engines

    db_file = Path(args.workdir) / "bench.db"
    os.environ[KEY_VAR] = KEY
    runs = max(1, args.episodes // (len(MODELS) * args.scenarios))
    options = RunOptions(
        scenarios=str(Path(args.workdir) / "scenarios"),
        models=MODELS,
        arms=["agent"],
        runs=runs,
        base_url=args.base_url,
        api_key_env=KEY_VAR,
        concurrency=args.concurrency,
        timeout_s=60.0,
        db=f"sqlite:///{db_file}",
        run_id="bench",
    )
    cpu0 = own_and_children_cpu()
    t0 = time.perf_counter()
    outcome = asyncio.run(BenchmarkRun(options).execute())
    seconds = time.perf_counter() - t0
    cpu = own_and_children_cpu() - cpu0
    dispose_engines()
    con = sqlite3.connect(db_file)
    try:
        rows = con.execute(
            "SELECT agent_json FROM record WHERE run_id = 'bench' AND status = 'ok' "
            "AND strict IS NOT NULL"
        ).fetchall()
    finally:
        con.close()
    traces = [AgentTrace.from_json(r[0]) for r in rows]
    if outcome.status != "finished" or None in traces:
        raise SystemExit(f"pipeline run incomplete: {outcome.status}, {len(rows)} records")
    return {
        "episodes": len(traces),
        "requests": sum(t.requests for t in traces if t),
        "rounds": sum(t.steps for t in traces if t),
        "tool_calls": sum(t.tool_calls for t in traces if t),
        "seconds": seconds,
        "cpu_s": cpu,
    }


async def _bare(bodies: list[dict[str, Any]], base_url: str, concurrency: int) -> int:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=60)
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    done = 0

    async def worker() -> None:
        nonlocal done
        while not queue.empty():
            body = queue.get_nowait()
            reply = await client.chat.completions.create(**body)
            assert reply.choices[0].message is not None
            done += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await client.close()
    return done


def phase_bare(args: argparse.Namespace) -> dict[str, Any]:
    import openai  # noqa: F401  (imported before the clock starts)

    bodies = [json.loads(line) for line in Path(args.log).read_text().splitlines()]
    cpu0 = own_and_children_cpu()
    t0 = time.perf_counter()
    done = asyncio.run(_bare(bodies, args.base_url, args.concurrency))
    return {
        "requests": done,
        "seconds": time.perf_counter() - t0,
        "cpu_s": own_and_children_cpu() - cpu0,
    }


# --------------------------------------------------------------------------- parent


def run_phase(
    name: str, args: argparse.Namespace, url: str, workdir: Path, log: Path
) -> dict[str, Any]:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    env.pop("CVB_DATABASE_URL", None)
    proc = subprocess.run(
        [
            *(sys.executable, __file__, "--phase", name, "--base-url", url),
            *("--concurrency", str(args.concurrency), "--episodes", str(args.episodes)),
            *("--scenarios", str(args.scenarios), "--workdir", str(workdir), "--log", str(log)),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"phase {name} failed (exit {proc.returncode})")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def parent(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="cvb-agent-bench-") as tmp:
        workdir = Path(tmp)
        folder = workdir / "scenarios" / "library-choice"
        folder.mkdir(parents=True)
        for n in range(args.scenarios):
            (folder / f"agent-bench-{n}.yaml").write_text(SCENARIO.format(n=n), encoding="utf-8")
        log = workdir / "requests.jsonl"
        server = subprocess.Popen(
            [sys.executable, str(SERVER), "--port", "0", "--log", str(log)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("READY "):
            server.kill()
            raise SystemExit(f"the scripted endpoint did not start: {line!r}")
        url = line.split()[1]
        try:
            pipe = run_phase("pipeline", args, url, workdir, log)
            bare = run_phase("bare", args, url, workdir, log)
        finally:
            server.terminate()
            server.wait(10)
    n = pipe["episodes"]
    print(
        f"agent overhead: {n} episodes ({', '.join(MODELS)}), {pipe['requests']} requests, "
        f"{pipe['rounds']} tool rounds, {pipe['tool_calls']} tool calls; concurrency "
        f"{args.concurrency}; scripted endpoint in its own process, no delay"
    )
    print()
    print(f"{'phase':<10}{'requests':>9}{'seconds':>9}{'episodes/s':>12}{'CPU':>9}")
    for name, r in (("pipeline", pipe), ("bare", bare)):
        print(
            f"{name:<10}{r['requests']:>9}{r['seconds']:>9.2f}{n / r['seconds']:>12.1f}"
            f"{r['cpu_s']:>7.2f} s"
        )
    print()
    print(
        f"throughput ratio pipeline / bare: {bare['seconds'] / pipe['seconds']:.2f} "
        f"(an episode takes {pipe['seconds'] / bare['seconds']:.2f}x the bare requests' time)"
    )
    extra = pipe["cpu_s"] - bare["cpu_s"]
    print(
        f"harness CPU beyond the bare requests: {extra:.2f} s = "
        f"{1000 * extra / max(1, pipe['rounds']):.2f} ms per tool round "
        f"({1000 * extra / max(1, pipe['tool_calls']):.2f} ms per tool call, "
        f"{1000 * extra / n:.2f} ms per episode: workspace, tools, trace, store, scoring)"
    )
    print(
        f"CPU per request: bare {1000 * bare['cpu_s'] / bare['requests']:.2f} ms, pipeline "
        f"{1000 * pipe['cpu_s'] / pipe['requests']:.2f} ms"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--scenarios", type=int, default=4, help="copies of the scenario")
    parser.add_argument("--phase", choices=["pipeline", "bare"])
    parser.add_argument("--base-url")
    parser.add_argument("--workdir")
    parser.add_argument("--log")
    args = parser.parse_args()
    if args.phase:
        phase = phase_pipeline if args.phase == "pipeline" else phase_bare
        print(json.dumps(phase(args)))
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
