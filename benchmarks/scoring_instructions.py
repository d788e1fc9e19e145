"""Scoring cost in CPU instructions: the phases of scoring_throughput.py, counted.

    python benchmarks/scoring_instructions.py [--records 300] [--seed 1] [--against DIR]

Needs valgrind (``apt-get install valgrind``). Wall-clock ratios on a shared
machine move by 10-20 % between runs, because the two phases run one after
the other and the load shifts between them; an instruction count does not
move. Each phase (baseline: ``ast.parse`` plus one regex search per regex
check; scoring: ``score_code``) runs under ``valgrind --tool=callgrind``
twice, once with a warm-up pass only and once with the warm-up and a measured
pass, on the records of scoring_throughput.py; the difference divided by the
records is the cost of one record, interpreter start-up and imports excluded.

``--against DIR`` compares two versions in one run: DIR is another checkout
(``git worktree add /tmp/base HEAD``); every phase is counted in both, each
with its own engine and benchmark scripts, and so are two stages of
scoring_breakdown.py, the python-ast checks and the regex checks of each
record on a parsed subject (``ast-checks``, ``regex-checks``).

Instructions are not time: the parser is C with a high instruction rate per
cycle, the analysis is Python with a lower one, so the wall-clock ratio sits
above the instruction ratio. Use this to compare two versions of the code, and
scoring_throughput.py for the goal.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PHASES = ("baseline", "scoring")
STAGES = {
    "ast-checks": "parse + python-ast checks",
    "regex-checks": "parse + regex checks",
}


def _benchmark(tree: Path, name: str) -> Any:
    """A benchmark module of ``tree`` (its engine is on the child's PYTHONPATH)."""
    sys.path.insert(0, str(tree / "benchmarks"))
    return importlib.import_module(name)


def run_phase(name: str, records: int, seed: int, measured: bool, tree: Path) -> None:
    """One pass to warm up (imports, caches), then, if ``measured``, the pass counted."""
    throughput = _benchmark(tree, "scoring_throughput")
    inputs, compiled = throughput.make_inputs(records, seed)
    if name in STAGES:
        stage = _benchmark(tree, "scoring_breakdown").stages(inputs, compiled)[STAGES[name]]
        stage()
        if measured:
            stage()
        return
    throughput.run(name, inputs, compiled)
    if measured:
        throughput.run(name, inputs, compiled)


def count(name: str, records: int, seed: int, measured: bool, tree: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/callgrind.out",
                sys.executable,
                __file__,
                "--phase",
                name,
                "--records",
                str(records),
                "--seed",
                str(seed),
                "--tree",
                str(tree),
                *(["--measured"] if measured else []),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)},
            check=True,
        )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def per_record(name: str, records: int, seed: int, tree: Path) -> float:
    warm = count(name, records, seed, False, tree)
    full = count(name, records, seed, True, tree)
    return (full - warm) / records


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    parser.add_argument("--phase", choices=[*PHASES, *STAGES], help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, default=HERE.parent, help=argparse.SUPPRESS)
    parser.add_argument("--measured", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        run_phase(args.phase, args.records, args.seed, args.measured, args.tree.resolve())
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    print(f"records: {args.records} (those of scoring_throughput.py, seed {args.seed})")
    if args.against is None:
        counted = {name: per_record(name, args.records, args.seed, HERE.parent) for name in PHASES}
        b, s = counted["baseline"], counted["scoring"]
        print(f"baseline (ast.parse + regex search): {b:,.0f} instructions/record")
        print(f"scoring  (score_code, every check):  {s:,.0f} instructions/record")
        print(f"instruction ratio scoring/baseline: {s / b:.2f}x")
        return
    before_tree, after_tree = args.against.resolve(), HERE.parent
    print(f"before: {before_tree}\nafter:  {after_tree}")
    print(f"{'instructions/record':34} {'before':>12} {'after':>12} {'change':>8}")
    for name in (*PHASES, *STAGES):
        # The two versions one after the other for each phase: nothing else differs.
        before = per_record(name, args.records, args.seed, before_tree)
        after = per_record(name, args.records, args.seed, after_tree)
        label = STAGES.get(name, name)
        print(f"{label:34} {before:12,.0f} {after:12,.0f} {after / before - 1:+8.1%}")


if __name__ == "__main__":
    main()
