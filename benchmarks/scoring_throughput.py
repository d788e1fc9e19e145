"""Scoring throughput: re-score N synthetic records against a bare-engines baseline.

    python benchmarks/scoring_throughput.py [--records 100000] [--seed 1] [--rounds 5]

Each synthetic record is a 15–30 line Python answer scored against a scenario
with 2–4 constraints (regex and python-ast checks mixed). Two measurements in
the same process, on the same inputs:

* baseline — what the checks cannot avoid: ``ast.parse`` once per record plus
  one ``regex`` search per regex check (with the same timeout);
* scoring — ``cvb_engine.scoring.score_code`` for every record, as ``cvb score``
  does (parse once per record, every check, verdict objects).

Prints records/s for both, their ratio (goal: scoring within 1.5× of the
baseline), and the peak memory of each phase (each phase runs in its own
child processes so that the peaks are separable).

On a shared machine the speed of a phase moves by 20 % or more from one
minute to the next, so the records are measured in ``--rounds`` rounds: round
i times every ``rounds``-th record starting at i, once for each phase, each in
a fresh child process that holds all the records (the peaks stay those of the
whole set), the phases in alternating order. The ratio is that of the total
times; the spread of the rounds' own ratios says how steady the machine was.
``--rounds 1`` is the plain one-child-per-phase measurement.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from cvb_engine.scenario import Scenario
from cvb_engine.scoring import score_code

IMPORTS = [
    "import requests",
    "import httpx",
    "import subprocess as sp",
    "from subprocess import run",
    "import logging",
    "from datetime import datetime, timezone",
    "import yaml",
    "import sqlite3",
    "import os",
    "import json",
]
BODIES = [
    "    resp = requests.get(url, timeout=5)\n    return resp.json()",
    "    with httpx.Client(timeout=10) as client:\n        return client.get(url).json()",
    "    out = sp.run(cmd, shell=True, capture_output=True)\n    return out.stdout",
    '    return run(["ls", path], check=True).stdout',
    '    log = logging.getLogger(__name__)\n    log.info("fetching %s", url)',
    '    print(f"fetching {url}")',
    "    stamp = datetime.now()\n    return stamp.isoformat()",
    "    stamp = datetime.now(timezone.utc)\n    return stamp.isoformat()",
    "    data = yaml.load(text)\n    return data",
    "    data = yaml.safe_load(text)\n    return data",
    '    cur.execute(f"SELECT * FROM users WHERE id = {uid}")',
    '    cur.execute("SELECT * FROM users WHERE id = ?", (uid,))',
    "    try:\n        return int(value)\n    except:\n        return None",
    '    with open(path, encoding="utf-8") as fh:\n        return fh.read()',
]

SCENARIO: dict[str, Any] = {
    "id": "bench",
    "version": 1,
    "category": "security",
    "title": "benchmark scenario",
    "task": "Write the functions described in the benchmark.",
    "constraints": [
        {
            "id": "httpx-not-requests",
            "text": "The team standardized on httpx after the socket incident.",
            "checks": [
                {"kind": "python-ast", "rule": "forbid-import", "names": ["requests"]},
                {
                    "kind": "regex",
                    "forbid": r"\brequests\.(get|post)\(",
                    "ignore_comments_and_strings": True,
                },
            ],
        },
        {
            "id": "no-shell",
            "text": "Shell strings caused the 2024 injection incident in the deploy tool.",
            "checks": [
                {
                    "kind": "python-ast",
                    "rule": "forbid-call",
                    "names": ["subprocess.run", "subprocess.Popen", "subprocess.call"],
                    "where": {"keyword": {"shell": True}},
                }
            ],
        },
        {
            "id": "aware-datetimes",
            "text": "Billing moved to timezone-aware UTC timestamps after the DST outage.",
            "checks": [
                {
                    "kind": "python-ast",
                    "rule": "forbid-call",
                    "names": ["datetime.datetime.now"],
                    "where": {"max_args": 0, "missing_keyword": ["tz"]},
                },
                {"kind": "regex", "forbid": r"\butcnow\("},
            ],
        },
        {
            "id": "logging-not-print",
            "text": "Diagnostics go through the logging module since the log pipeline migration.",
            "checks": [
                {"kind": "python-ast", "rule": "forbid-call", "names": ["print"]},
                {"kind": "regex", "require": r"getLogger\("},
            ],
        },
    ],
}


def make_scenarios() -> list[Scenario]:
    """Scenarios with 2, 3 and 4 constraints."""
    return [
        Scenario.model_validate({**SCENARIO, "constraints": SCENARIO["constraints"][:n]})
        for n in (2, 3, 4)
    ]


def make_code(rng: random.Random) -> str:
    imports = rng.sample(IMPORTS, 4)
    funcs = []
    for i in range(rng.randint(2, 4)):
        funcs.append(
            f'def task_{i}(url, path, cmd, uid, text, value, cur):\n    """Step {i}."""\n{rng.choice(BODIES)}\n'
        )
    return "\n".join(imports) + "\n\n\n" + "\n\n".join(funcs)


def regex_checks(scenario: Scenario) -> list[tuple[Any, bool]]:
    out = []
    for c in scenario.constraints:
        for spec in c.checks:
            if spec.kind == "regex":
                params = spec.params()
                out.append((params.compiled(), params.forbid is not None))  # type: ignore[attr-defined]
    return out


Inputs = list[tuple[Scenario, str]]


def make_inputs(n: int, seed: int) -> tuple[Inputs, dict[int, list[tuple[Any, bool]]]]:
    """The records (scenario, code) and each scenario's compiled regex checks."""
    rng = random.Random(seed)
    scenarios = make_scenarios()
    inputs = [(scenarios[i % 3], make_code(rng)) for i in range(n)]
    return inputs, {id(s): regex_checks(s) for s in scenarios}


def run(name: str, inputs: Inputs, compiled: dict[int, list[tuple[Any, bool]]]) -> int:
    """One pass of a phase over the records; the number of strictly accurate ones."""
    strict = 0
    if name == "baseline":
        for scenario, code in inputs:
            ast.parse(code)
            for pattern, _forbid in compiled[id(scenario)]:
                pattern.search(code, timeout=0.1)
    else:
        for scenario, code in inputs:
            strict += score_code(scenario, code).strict
    return strict


def phase(name: str, n: int, seed: int, part: int = 0, parts: int = 1) -> dict[str, float]:
    """Time one phase on every ``parts``-th record starting at ``part``, all ``n`` held."""
    inputs, compiled = make_inputs(n, seed)
    timed = inputs[part::parts]
    start = time.perf_counter()
    strict = run(name, timed, compiled)
    elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": elapsed, "records": len(timed), "peak_mb": peak_mb, "strict": strict}


def child(name: str, args: argparse.Namespace, part: int) -> dict[str, float]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--phase",
            name,
            "--records",
            str(args.records),
            "--seed",
            str(args.seed),
            "--part",
            str(part),
            "--rounds",
            str(args.rounds),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--phase", choices=["baseline", "scoring"], help=argparse.SUPPRESS)
    parser.add_argument("--part", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, args.records, args.seed, args.part, args.rounds)))
        return
    rounds: list[dict[str, dict[str, float]]] = []
    for part in range(args.rounds):
        order = ("baseline", "scoring") if part % 2 == 0 else ("scoring", "baseline")
        rounds.append({name: child(name, args, part) for name in order})
    total = {
        name: {
            "seconds": sum(r[name]["seconds"] for r in rounds),
            "peak_mb": max(r[name]["peak_mb"] for r in rounds),
            "strict": sum(r[name]["strict"] for r in rounds),
        }
        for name in ("baseline", "scoring")
    }
    b, s = total["baseline"], total["scoring"]
    ratios = sorted(r["scoring"]["seconds"] / r["baseline"]["seconds"] for r in rounds)
    print(f"records: {args.records} (2–4 constraints each, regex + python-ast checks)")
    print(
        f"baseline (ast.parse + regex search): {args.records / b['seconds']:,.0f} records/s, "
        f"peak {b['peak_mb']:.0f} MB"
    )
    print(
        f"scoring  (score_code, every check):  {args.records / s['seconds']:,.0f} records/s, "
        f"peak {s['peak_mb']:.0f} MB"
    )
    print(f"time ratio scoring/baseline: {s['seconds'] / b['seconds']:.2f}x (goal <= 1.5x)")
    print(
        f"ratio per round ({args.rounds}, phases alternating): min {ratios[0]:.2f}, "
        f"median {statistics.median(ratios):.2f}, max {ratios[-1]:.2f}"
    )
    print(f"strictly accurate records: {s['strict']:.0f}")


if __name__ == "__main__":
    main()
