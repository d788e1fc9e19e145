"""Scoring cost in CPU instructions: the same two phases as scoring_throughput.py, counted.

    python benchmarks/scoring_instructions.py [--records 300] [--seed 1]

Needs valgrind (``apt-get install valgrind``). Wall-clock ratios on a shared
machine move by 10-20 % between runs, because the two phases run one after
the other and the load shifts between them; an instruction count does not
move. Each phase (baseline: ``ast.parse`` plus one regex search per regex
check; scoring: ``score_code``) runs under ``valgrind --tool=callgrind``
twice, once with a warm-up pass only and once with the warm-up and a measured
pass, on the records of scoring_throughput.py; the difference divided by the
records is the cost of one record, interpreter start-up and imports excluded.

Instructions are not time: the parser is C with a high instruction rate per
cycle, the analysis is Python with a lower one, so the wall-clock ratio sits
above the instruction ratio. Use this to compare two versions of the code, and
scoring_throughput.py for the goal.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scoring_throughput  # the benchmark's records and phases


def run_phase(name: str, records: int, seed: int, measured: bool) -> None:
    """One pass to warm up (imports, caches), then, if ``measured``, the pass counted."""
    inputs, compiled = scoring_throughput.make_inputs(records, seed)
    scoring_throughput.run(name, inputs, compiled)
    if measured:
        scoring_throughput.run(name, inputs, compiled)


def count(name: str, records: int, seed: int, measured: bool) -> int:
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
                *(["--measured"] if measured else []),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            check=True,
        )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--phase", choices=["baseline", "scoring"], help=argparse.SUPPRESS)
    parser.add_argument("--measured", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        run_phase(args.phase, args.records, args.seed, args.measured)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    per_record = {}
    for name in ("baseline", "scoring"):
        warm = count(name, args.records, args.seed, measured=False)
        full = count(name, args.records, args.seed, measured=True)
        per_record[name] = (full - warm) / args.records
    b, s = per_record["baseline"], per_record["scoring"]
    print(f"records: {args.records} (those of scoring_throughput.py, seed {args.seed})")
    print(f"baseline (ast.parse + regex search): {b:,.0f} instructions/record")
    print(f"scoring  (score_code, every check):  {s:,.0f} instructions/record")
    print(f"instruction ratio scoring/baseline: {s / b:.2f}x")


if __name__ == "__main__":
    main()
