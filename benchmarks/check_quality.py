"""Precision, recall and F1 of every shipped constraint's checks on the labelled corpus.

    python benchmarks/check_quality.py                 # table per constraint, then overall
    python benchmarks/check_quality.py --misses        # also list each missed / falsely flagged sample
    python benchmarks/check_quality.py --record        # write tests/corpus/quality.json (the floors
                                                       # tests/test_check_quality.py holds)

The positive class is a violation. The corpus (``tests/corpus/``) is written apart
from the scenarios' own ``samples``; see ``cvb_engine/quality.py`` for its format.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cvb_engine.quality import load_corpus, measure, overall  # noqa: E402
from cvb_engine.scenario import load_library  # noqa: E402

CORPUS = ROOT / "tests" / "corpus" / "checks"
FLOORS = CORPUS / "quality.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--scenarios", type=Path, default=ROOT / "scenarios")
    ap.add_argument("--misses", action="store_true")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args(argv)

    library = load_library(args.scenarios)
    results = measure(load_corpus(args.corpus), library)
    print(
        f"{'scenario / constraint':<66} {'n':>4} {'tp':>3} {'fp':>3} {'fn':>3} "
        f"{'prec':>6} {'rec':>6} {'f1':>6}"
    )
    for (sid, cid), c in sorted(results.items()):
        print(
            f"{sid + ' / ' + cid:<66} {c.n:>4} {c.tp:>3} {c.fp:>3} {c.fn:>3} "
            f"{c.precision:>6.3f} {c.recall:>6.3f} {c.f1:>6.3f}"
        )
        if args.misses:
            for label in c.missed:
                print(f"    missed       {label}")
            for label in c.false_alarms:
                print(f"    false alarm  {label}")
    total = overall(results)
    print(
        f"{'overall':<66} {total.n:>4} {total.tp:>3} {total.fp:>3} {total.fn:>3} "
        f"{total.precision:>6.3f} {total.recall:>6.3f} {total.f1:>6.3f}"
    )
    shipped = {
        (sid, c.id)
        for sid, item in library.items()
        if item.scenario.category != "ivr"
        for c in item.scenario.constraints
    }
    uncovered = sorted(shipped - set(results))
    thin = sorted(k for k, c in results.items() if c.n < 8)
    print(
        f"constraints: {len(results)} measured, {len(uncovered)} CVB constraints without "
        f"samples, {len(thin)} with fewer than 8"
    )
    if args.record:
        # Floors are rounded down, so that the figure just measured always meets its own floor.
        def floor(x: float) -> float:
            return math.floor(x * 1000) / 1000

        floors = {
            f"{sid}/{cid}": {
                "precision": floor(c.precision),
                "recall": floor(c.recall),
                "n": c.n,
            }
            for (sid, cid), c in sorted(results.items())
        }
        floors["overall"] = {
            "precision": floor(total.precision),
            "recall": floor(total.recall),
            "n": total.n,
        }
        FLOORS.write_text(json.dumps(floors, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {FLOORS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
