"""Where scoring's time above the baseline goes, and what a tree visit costs at least.

    python benchmarks/scoring_breakdown.py [--records 3000] [--seed 1] [--repeats 7]

On the records of scoring_throughput.py, in one process, each stage below runs
over every record, ``ast.parse`` included (so that allocation and garbage
collection weigh the same in each); the stages take turns, ``--repeats``
times, and each keeps its fastest pass, which is what the machine's load
disturbs least. Printed per stage: microseconds per record and the ratio to the
baseline.

* baseline — ``ast.parse`` plus one regex search per regex check, as in
  scoring_throughput.py;
* parse + visit statements — a visit of every statement, nested bodies too,
  doing nothing: what any analysis that must see every import and binding pays;
* parse + visit every node — a visit of every node (an explicit stack over the
  fields, the fastest pure-Python traversal measured; ``ast.walk`` is slower);
* parse + python-ast statement pass — the analysis python-ast checks share,
  made without string kinds, as scoring makes it for these checks;
* parse + python-ast checks — every python-ast check of the record on one
  subject (statement pass, the expression walks rules ask for, the rules);
* parse + regex checks — every regex check of the record through the check kind;
* scoring — ``score_code``: every check, the verdict objects.

The goal of scoring_throughput.py (scoring within 1.5× of the baseline) leaves
0.5× of the baseline for everything beyond parsing and searching; the two
visit stages show what share of that a traversal alone would take.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scoring_throughput  # the benchmark's records and phases

from cvb_engine.checks.base import Subject
from cvb_engine.checks.python_ast.analysis import Analysis
from cvb_engine.scoring import plan, score_code

_NESTED_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def visit_statements(tree: ast.Module) -> int:
    seen = 0
    stack: list[Any] = list(tree.body)
    while stack:
        node = stack.pop()
        seen += 1
        for name in _NESTED_BODIES:
            block = getattr(node, name, None)
            if block:
                stack.extend(block)
    return seen


def visit_nodes(tree: ast.Module) -> int:
    seen = 0
    stack: list[Any] = [tree]
    node_type = ast.AST
    while stack:
        node = stack.pop()
        seen += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, node_type))
            elif isinstance(value, node_type):
                stack.append(value)
    return seen


def stages(
    inputs: scoring_throughput.Inputs, compiled: dict[int, list[tuple[Any, bool]]]
) -> dict[str, Callable[[], None]]:
    def subject(code: str) -> Subject:
        s = Subject(code, code)
        s.tree  # noqa: B018 - parse now, as scoring does
        return s

    def baseline() -> None:
        scoring_throughput.run("baseline", inputs, compiled)

    def statements() -> None:
        for _, code in inputs:
            visit_statements(ast.parse(code))

    def nodes() -> None:
        for _, code in inputs:
            visit_nodes(ast.parse(code))

    def statement_pass() -> None:
        for _, code in inputs:
            Analysis(code, ast.parse(code), False)

    def kind_checks(kind: str) -> Callable[[], None]:
        def run() -> None:
            for scenario, code in inputs:
                s = subject(code)
                # The checks as scoring prepares them (once per scenario).
                for _, checks in plan(scenario).constraints:
                    for check in checks:
                        if check.kind == kind:
                            check.prepared.run(s)

        return run

    def scoring() -> None:
        for scenario, code in inputs:
            score_code(scenario, code)

    return {
        "baseline (parse + regex search)": baseline,
        "parse + visit statements": statements,
        "parse + visit every node": nodes,
        "parse + python-ast statement pass": statement_pass,
        "parse + python-ast checks": kind_checks("python-ast"),
        "parse + regex checks": kind_checks("regex"),
        "scoring (score_code)": scoring,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    inputs, compiled = scoring_throughput.make_inputs(args.records, args.seed)
    timed = stages(inputs, compiled)
    best = dict.fromkeys(timed, float("inf"))
    for fn in timed.values():  # warm up: imports, caches, the interpreter's specialisation
        fn()
    for _ in range(args.repeats):
        for name, fn in timed.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    base = next(iter(best.values()))
    print(
        f"records: {args.records}, fastest of {args.repeats} passes per stage, stages alternating"
    )
    for name, seconds in best.items():
        per_record = seconds / args.records * 1e6
        print(f"{name:36} {per_record:7.1f} us/record  {seconds / base:5.2f}x baseline")
    print("goal 1.5x: 0.50x of the baseline for everything beyond parsing and searching")


if __name__ == "__main__":
    main()
