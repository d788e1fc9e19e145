"""Verdicts on labelled chat replies: the project's extraction and scoring against a human's.

    python benchmarks/reply_verdicts.py [--corpus tests/corpus/replies] [--all]

Prints, per reply shape, how many replies agree (outcome and every constraint's
verdict), then every reply that disagrees in any way (also the solution's
``code_has`` / ``code_lacks`` substrings), and whether any reply without code
was counted as honoring a constraint (it must never be).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cvb_engine.quality import judge_replies, load_replies  # noqa: E402
from cvb_engine.scenario import load_library  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests" / "corpus" / "replies")
    ap.add_argument("--scenarios", type=Path, default=ROOT / "scenarios")
    args = ap.parse_args(argv)
    judged = judge_replies(load_replies(args.corpus), load_library(args.scenarios))
    by_shape: dict[str, list[bool]] = defaultdict(list)
    for j in judged:
        by_shape[j.reply.shape].append(j.agrees)
    for shape, marks in sorted(by_shape.items()):
        print(f"{shape:<44} {sum(marks):>3}/{len(marks):<3}")
    print()
    for j in judged:
        if j.problems:
            print(f"{j.reply.id} ({j.reply.scenario}): {'; '.join(j.problems)}")
    credited = [
        j.reply.id
        for j in judged
        if j.reply.expect.outcome != "answered" and any(j.honored.values())
    ]
    agree = sum(j.agrees for j in judged)
    print()
    print(f"verdicts agree on {agree}/{len(judged)} replies ({agree / max(1, len(judged)):.1%})")
    print(f"replies without code credited with a constraint: {len(credited)} {credited or ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
