"""Runner overhead: the whole ``cvb run`` pipeline against a bare ``openai`` loop.

    python benchmarks/runner_overhead.py [--requests 2000] [--concurrency 16]
        [--scenarios scenarios] [--models 4]

One instant fake OpenAI-compatible server (``tests/fake_openai.py``) runs in a
process of its own, so that it does not share a GIL with the client. Then, each
in its own child process (so that their memory peaks are separable):

* bare — an ``openai.AsyncOpenAI`` loop (``max_retries=0``) sending the same
  requests the runner sends: the same models, the same messages (built by
  ``cvb_engine.prompts.build_messages`` for the scenarios), the same sampling
  parameters and seeds, the same number of requests in flight; it only checks
  that each reply has content;
* pipeline — ``BenchmarkRun(...).execute()`` in-process with a temporary
  SQLite store, its recorder started first as ``cvb run`` starts it: loading the scenarios, probing ``/models``, binding the run,
  building prompts, HTTP, retries bookkeeping, scoring every reply and
  committing every record (the last two in the runner's recorder process,
  whose CPU time and peak RSS are counted with the phase's).

The matrix is scenarios × 3 arms × ``--models`` models × as many repetitions
as it takes to reach ``--requests`` (rounded up to whole repetitions), so the
two phases send exactly the same number of requests. Prints requests/s of both,
their ratio, the CPU time of each phase's process (with its child processes)
and of the fake server meanwhile (when the server's is near the phase's wall time, the server, not the
client, sets the pace; CPU per request is the figure least disturbed by other
load on the machine), and the peak RSS of each phase (``ru_maxrss`` of its
process plus that of its largest child, an upper bound of what was resident at
once). "resent" counts requests sent again after a connection error (the
stdlib server's listen backlog is small); it should be 0.

Start-up: then, ``--startup-repeats`` times each, alternating, two fresh processes
that each send one request and exit, timed from the parent's ``Popen`` to the
child's exit: ``cvb run`` of one scenario (one that executes no code: the
sandbox is not what is measured), one arm, one model, one repetition, into a
fresh SQLite store; and a bare ``python -c`` that imports ``openai`` and sends the
same request. Prints the median of each and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import statistics
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

# A reply of realistic size and shape: about 25 lines of Python in one fenced block.
REPLY = '''Here is the implementation.

```python
import logging
import time

import httpx

log = logging.getLogger(__name__)


def fetch_json(url: str, retries: int = 3, backoff: float = 0.5) -> dict:
    """Download ``url`` and return the parsed JSON, retrying transient failures."""
    last: Exception | None = None
    for attempt in range(1, retries + 1):
        try:
            response = httpx.get(url, timeout=10.0)
            response.raise_for_status()
            return response.json()
        except (httpx.TransportError, httpx.HTTPStatusError) as exc:
            last = exc
            log.warning("attempt %d for %s failed: %s", attempt, url, exc)
            time.sleep(backoff * 2 ** (attempt - 1))
    raise RuntimeError(f"giving up on {url}") from last
```
'''

# Used when --scenarios does not load: 35 copies (7 categories x 5) of one small scenario.
FALLBACK_SCENARIO = """\
id: {sid}
version: 1
category: {category}
title: Fetch JSON with retries
task: |
  Write a Python function fetch_json(url) that downloads a URL and returns the parsed JSON
  (ticket {sid}).
constraints:
  - id: httpx-not-requests
    text: >-
      The team standardized on httpx after requests caused the March socket-exhaustion incident.
    checks:
      - kind: regex
        forbid: '(?m)^\\s*(import requests|from requests\\b)'
      - kind: regex
        require: '\\bhttpx\\.'
    samples:
      violating: ["import requests\\nrequests.get(url)"]
      compliant: ["import httpx\\nhttpx.get(url)"]
  - id: timeout-set
    text: The gateway team measured that calls without a timeout caused the 2025 stalls.
    checks:
      - kind: regex
        require: 'timeout\\s*='
    samples:
      violating: ["httpx.get(url)"]
      compliant: ["httpx.get(url, timeout=5)"]
"""


def rss_kb() -> int:
    """Current resident set size in KB (Linux), or 0 where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_kb(who: int = resource.RUSAGE_SELF) -> int:
    """Peak RSS in KB of this process, or (``RUSAGE_CHILDREN``) of its largest reaped child."""
    peak = resource.getrusage(who).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS, KB on Linux


def own_and_children_cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its reaped children.

    The runner stores and scores in a child process (cvb_engine.recorder):
    its CPU is part of the pipeline's cost and is counted here.
    """
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux), or NaN."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def steady_rate(stamps: list[float]) -> float:
    """Answers per second between the 10th and the 90th percentile answer: the steady
    state, without the start (scenarios, probe, binding, the first connections) and
    without the end (the last requests in flight, the recorder's last scores)."""
    if len(stamps) < 20:
        return float("nan")
    stamps = sorted(stamps)
    lo, hi = len(stamps) // 10, len(stamps) * 9 // 10
    return (hi - lo) / (stamps[hi] - stamps[lo]) if stamps[hi] > stamps[lo] else float("nan")


# --------------------------------------------------------------------------- phases (children)


async def _bare(
    plan: dict[str, Any], base_url: str, concurrency: int, stamps: list[float]
) -> tuple[int, int]:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=60.0)
    messages = plan["messages"]
    pending = iter(plan["requests"])
    done = resent = 0

    async def worker() -> None:
        nonlocal done, resent
        for model, key, seed in pending:
            for attempt in range(3):
                try:
                    resp = await client.chat.completions.create(
                        model=model,
                        messages=messages[key],
                        temperature=plan["temperature"],
                        max_tokens=plan["max_tokens"],
                        seed=seed,
                    )
                    break
                except openai.APIConnectionError:
                    # the stdlib fake server's listen backlog is small: a burst of new
                    # connections can be refused. Count it and send again, as the runner would.
                    if attempt == 2:
                        raise
                    resent += 1
            if not resp.choices or not resp.choices[0].message.content:
                raise RuntimeError(f"unusable reply for {model} {key}")
            done += 1
            stamps.append(time.perf_counter())

    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        await client.close()
    return done, resent


def phase_bare(args: argparse.Namespace) -> dict[str, Any]:
    import openai  # noqa: F401  (imported before the baseline RSS is taken)

    plan = json.loads(Path(args.plan).read_text(encoding="utf-8"))
    rss_ready = rss_kb()
    own0, children0 = own_and_children_cpu()
    stamps: list[float] = []
    t0 = time.perf_counter()
    done, resent = asyncio.run(_bare(plan, args.base_url, args.concurrency, stamps))
    seconds = time.perf_counter() - t0
    own1, children1 = own_and_children_cpu()
    return {
        "requests": done,
        "resent": resent,
        "seconds": seconds,
        "steady_rps": steady_rate(stamps),
        "cpu_s": own1 - own0 + children1 - children0,
        "child_cpu_s": children1 - children0,
        "rss_ready_kb": rss_ready,
    }


def phase_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    import sqlite3

    from cvb_engine.run.recording import Recorder
    from cvb_engine.runner import BenchmarkRun, RunOptions
    from cvb_engine.store import dispose_engines

    plan = json.loads(Path(args.plan).read_text(encoding="utf-8"))
    db_file = Path(args.workdir) / "bench.db"
    os.environ[KEY_VAR] = KEY
    options = RunOptions(
        scenarios=plan["scenarios"],
        models=plan["models"],
        runs=plan["runs"],
        base_url=args.base_url,
        api_key_env=KEY_VAR,
        temperature=plan["temperature"],
        max_tokens=plan["max_tokens"],
        seed=plan["seed"],
        concurrency=args.concurrency,
        timeout_s=60.0,
        db=f"sqlite:///{db_file}",
        run_id="bench",
    )
    stamps: list[float] = []

    def answered(progress: Any, final: bool) -> None:
        if not final:
            stamps.append(time.perf_counter())  # this answer is committed

    async def run() -> Any:
        # As ``cvb run`` does it: the recorder first, then the run (which loads the
        # scenarios, probes and binds while the recorder imports).
        recorder = await Recorder.spawn(hide=[KEY_VAR])
        return await BenchmarkRun(options, on_progress=answered).execute(recorder=recorder)

    rss_ready = rss_kb()
    own0, children0 = own_and_children_cpu()
    t0 = time.perf_counter()
    outcome = asyncio.run(run())
    seconds = time.perf_counter() - t0
    own1, children1 = own_and_children_cpu()
    dispose_engines()
    con = sqlite3.connect(db_file)
    try:
        (stored, attempts) = con.execute(
            "SELECT count(*), sum(attempts) FROM record WHERE run_id = 'bench' "
            "AND status = 'ok' AND strict IS NOT NULL"
        ).fetchone()
    finally:
        con.close()
    if outcome.status != "finished" or stored != len(plan["requests"]):
        raise SystemExit(
            f"pipeline run incomplete: status {outcome.status}, {stored} scored records "
            f"of {len(plan['requests'])}"
        )
    return {
        "requests": outcome.progress.ok,
        "resent": int(attempts) - int(stored),
        "seconds": seconds,
        "steady_rps": steady_rate(stamps),
        "cpu_s": own1 - own0 + children1 - children0,
        "child_cpu_s": children1 - children0,
        "rss_ready_kb": rss_ready,
    }


# --------------------------------------------------------------------------- parent


def scenario_dir(requested: str, workdir: Path) -> Path:
    """``requested`` if it loads; otherwise a generated set of 35 small scenarios."""
    from cvb_engine.scenario import CVB_CATEGORIES, ScenarioError, load_library

    path = Path(requested)
    if not path.is_absolute():
        path = (Path.cwd() / path) if (Path.cwd() / path).exists() else REPO / path
    try:
        if path.exists() and load_library(path):
            return path
        why = "no scenario files"
    except ScenarioError as exc:
        why = f"it does not load ({len(exc.problems)} problem(s))"
    generated = workdir / "scenarios"
    for category in CVB_CATEGORIES:
        (generated / category).mkdir(parents=True, exist_ok=True)
        for i in range(1, 6):
            sid = f"{category}-{i}"
            text = FALLBACK_SCENARIO.format(sid=sid, category=category)
            (generated / category / f"{sid}.yaml").write_text(text, encoding="utf-8")
    print(f"note: {path}: {why}; using 35 generated scenarios instead", file=sys.stderr)
    return generated


def build_plan(scenarios: Path, n_models: int, requests: int) -> dict[str, Any]:
    """The exact request list the runner sends for the chosen matrix."""
    from cvb_engine.arms import build_messages
    from cvb_engine.run_options import DEFAULT_OPTIONS
    from cvb_engine.runner import BenchmarkRun, RunOptions

    models = [f"bench-model-{i}" for i in range(n_models)]
    probe = BenchmarkRun(RunOptions(scenarios=str(scenarios), models=models, runs=1))
    per_rep = len(probe.library) * 3 * len(models)
    runs = max(1, math.ceil(requests / per_rep))
    bench = BenchmarkRun(RunOptions(scenarios=str(scenarios), models=models, runs=runs))
    matrix = bench.matrix(models)
    messages = {
        f"{sid}/{arm}": build_messages(bench.library[sid].scenario, arm)
        for sid in matrix.scenarios
        for arm in matrix.arms
    }
    seed = DEFAULT_OPTIONS.seed
    return {
        "scenarios": str(scenarios),
        "models": models,
        "runs": runs,
        "n_scenarios": len(matrix.scenarios),
        "temperature": DEFAULT_OPTIONS.temperature,
        "max_tokens": DEFAULT_OPTIONS.max_tokens,
        "seed": seed,
        "messages": messages,
        "requests": [[m, f"{s}/{a}", seed + rep] for m, s, a, rep in matrix.cells()],
    }


def start_server(workdir: Path, models: list[str]) -> tuple[subprocess.Popen[str], str]:
    replies = workdir / "replies.json"
    replies.write_text(json.dumps({"": REPLY}), encoding="utf-8")  # "" matches every prompt
    proc = subprocess.Popen(
        [
            *(sys.executable, str(FAKE_SERVER), "--port", "0"),
            *("--models", ",".join(models), "--replies", str(replies)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"the fake server did not start: {line!r}")
    return proc, line.split()[1]


BARE_ONE = """
import asyncio, json, sys
import openai

async def main():
    plan = json.loads(sys.argv[1])
    client = openai.AsyncOpenAI(base_url=plan["url"], api_key=plan["key"], max_retries=0, timeout=60.0)
    try:
        resp = await client.chat.completions.create(
            model=plan["model"], messages=plan["messages"], temperature=plan["temperature"],
            max_tokens=plan["max_tokens"], seed=plan["seed"],
        )
    finally:
        await client.close()
    assert resp.choices[0].message.content

asyncio.run(main())
"""


def one_request_scenario(scenarios: Path) -> str:
    """A scenario whose checks execute nothing (so no sandbox is set up for it)."""
    from cvb_engine.scenario import executes_code, load_library

    library = load_library(scenarios)
    return next(sid for sid, item in sorted(library.items()) if not executes_code(item.scenario))


def startup(
    args: argparse.Namespace, plan: dict[str, Any], url: str, workdir: Path
) -> dict[str, float]:
    """Median wall seconds, process start to exit, of a one-request ``cvb run`` and bare loop."""
    scenarios = Path(plan["scenarios"])
    sid = one_request_scenario(scenarios)
    model = plan["models"][0]
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    env.pop("CVB_DATABASE_URL", None)
    env[KEY_VAR] = KEY
    bare_plan = json.dumps(
        {
            "url": url,
            "key": KEY,
            "model": model,
            "messages": plan["messages"][f"{sid}/cold"],
            "temperature": plan["temperature"],
            "max_tokens": plan["max_tokens"],
            "seed": plan["seed"],
        }
    )
    times: dict[str, list[float]] = {"bare": [], "cvb run": []}
    for i in range(args.startup_repeats):
        db = workdir / f"startup-{i}.db"
        commands = {
            "bare": [sys.executable, "-c", BARE_ONE, bare_plan],
            "cvb run": [
                *(sys.executable, "-m", "cvb_engine.cli", "run", "--base-url", url),
                *("--api-key-env", KEY_VAR, "--models", model, "--only", sid),
                *("--arms", "cold", "--runs", "1", "--db", f"sqlite:///{db}", "--quiet"),
                *("--scenarios", str(scenarios), "--run-id", f"startup-{i}"),
            ],
        }
        for name, argv in commands.items():
            t0 = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=workdir)
            times[name].append(time.perf_counter() - t0)
            if proc.returncode != 0:
                sys.stderr.write(proc.stdout + proc.stderr)
                raise SystemExit(f"start-up: {name} failed (exit {proc.returncode})")
    return {name: statistics.median(values) for name, values in times.items()}


def run_phase(
    name: str, args: argparse.Namespace, plan_file: Path, url: str, workdir: Path, server_pid: int
) -> dict[str, Any]:
    cpu0 = cpu_seconds(server_pid)
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    env.pop("CVB_DATABASE_URL", None)
    proc = subprocess.run(
        [
            *(sys.executable, __file__, "--phase", name, "--plan", str(plan_file)),
            *("--base-url", url, "--concurrency", str(args.concurrency)),
            *("--workdir", str(workdir)),
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
    result["server_cpu_s"] = cpu_seconds(server_pid) - cpu0
    return result


def parent(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="cvb-runner-bench-") as tmp:
        workdir = Path(tmp)
        scenarios = scenario_dir(args.scenarios, workdir)
        plan = build_plan(scenarios, args.models, args.requests)
        plan_file = workdir / "plan.json"
        plan_file.write_text(json.dumps(plan), encoding="utf-8")
        n = len(plan["requests"])
        server, url = start_server(workdir, plan["models"])
        try:
            print(
                f"runner overhead: {n} requests per phase, concurrency {args.concurrency}; "
                f"{plan['n_scenarios']} scenarios × 3 arms × {len(plan['models'])} models × "
                f"{plan['runs']} runs ({scenarios})"
            )
            print(f"fake server: {url} (pid {server.pid}, own process, no delay)")
            results = {
                name: run_phase(name, args, plan_file, url, workdir, server.pid)
                for name in ("bare", "pipeline")
            }
            started = startup(args, plan, url, workdir) if args.startup_repeats else {}
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()

    print()
    print(
        f"{'phase':<10}{'requests':>9}{'resent':>8}{'seconds':>9}{'req/s':>9}"
        f"{'client CPU':>12}{'(children)':>12}{'server CPU':>12}"
        f"{'peak RSS':>11}{'(child)':>10}{'RSS ready':>11}"
    )
    for name, r in results.items():
        rps = r["requests"] / r["seconds"]
        print(
            f"{name:<10}{r['requests']:>9}{r['resent']:>8}{r['seconds']:>9.2f}{rps:>9.1f}"
            f"{r['cpu_s']:>10.2f} s{r['child_cpu_s']:>10.2f} s{r['server_cpu_s']:>10.2f} s"
            f"{(r['peak_kb'] + r['child_peak_kb']) / 1024:>8.1f} MB"
            f"{r['child_peak_kb'] / 1024:>7.1f} MB{r['rss_ready_kb'] / 1024:>8.1f} MB"
        )
    bare = results["bare"]["requests"] / results["bare"]["seconds"]
    pipe = results["pipeline"]["requests"] / results["pipeline"]["seconds"]
    print()
    cpu = {name: 1000 * r["cpu_s"] / r["requests"] for name, r in results.items()}
    print(
        f"throughput ratio pipeline / bare: {pipe / bare:.2f} "
        f"(the pipeline takes {bare / pipe:.2f}× the bare loop's time per request)"
    )
    steady = {name: r["steady_rps"] for name, r in results.items()}
    print(
        f"steady throughput (10th to 90th percentile answer): bare {steady['bare']:.1f}/s, "
        f"pipeline {steady['pipeline']:.1f}/s (ratio {steady['pipeline'] / steady['bare']:.2f})"
    )
    runner_cpu = {
        name: 1000 * (r["cpu_s"] - r["child_cpu_s"]) / r["requests"] for name, r in results.items()
    }
    print(
        f"CPU per request of the sending process alone (the recorder's storing and scoring "
        f"left out): bare {runner_cpu['bare']:.2f} ms, pipeline {runner_cpu['pipeline']:.2f} ms "
        f"(ratio {runner_cpu['pipeline'] / runner_cpu['bare']:.2f})"
    )
    print(
        f"client CPU per request: bare {cpu['bare']:.2f} ms, pipeline {cpu['pipeline']:.2f} ms "
        f"(ratio {cpu['pipeline'] / cpu['bare']:.2f}; less sensitive to other load on the machine)"
    )
    if started:
        print(
            f"start-up, one request, process start to exit (median of {args.startup_repeats}): "
            f"bare {started['bare']:.2f} s, cvb run {started['cvb run']:.2f} s "
            f"(ratio {started['cvb run'] / started['bare']:.2f})"
        )
    print(
        "client CPU: the phase's process (all threads) and its child processes (the runner's "
        "recorder) during the phase;\nserver CPU: the fake server's process meanwhile.\n"
        "peak RSS: ru_maxrss of each phase's own process plus that of its largest child "
        "(shown apart); 'RSS ready' is after imports and before the first request."
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--requests", type=int, default=2000, help="at least this many per phase")
    p.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    p.add_argument("--scenarios", default="scenarios", help="scenario directory")
    p.add_argument("--models", type=int, default=4, help="how many (fake) models")
    p.add_argument(
        "--startup-repeats",
        type=int,
        default=7,
        help="one-request processes of each kind (0: none)",
    )
    p.add_argument("--phase", choices=("bare", "pipeline"), help=argparse.SUPPRESS)
    p.add_argument("--plan", help=argparse.SUPPRESS)
    p.add_argument("--base-url", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.requests < 1 or args.concurrency < 1 or args.models < 1:
        p.error("--requests, --concurrency and --models must be at least 1")
    if args.phase is None:
        return parent(args)
    result = phase_bare(args) if args.phase == "bare" else phase_pipeline(args)
    result["peak_kb"] = peak_kb()
    result["child_peak_kb"] = peak_kb(resource.RUSAGE_CHILDREN)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
