"""``cvb score``: a stored run's answers judged again by the current checks
(:func:`cvb_engine.rescore.rescore_run`)."""

from __future__ import annotations

import argparse

from cvb_engine.cli import command
from cvb_engine.cli.common import add_sandbox_argument, latest_run_id
from cvb_engine.run_ids import run_id_arg
from cvb_engine.safe_text import terminal_text


def _score_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_id", nargs="?", type=run_id_arg, help="run to re-score (default: the latest)"
    )
    p.add_argument(
        "--scenarios", help="scenario directory (default: $CVB_SCENARIOS, else the shipped library)"
    )
    p.add_argument("--db", help="database URL (default: $CVB_DATABASE_URL or data/cvb.db)")
    add_sandbox_argument(p)


@command("score", _score_args)
def cmd_score(args: argparse.Namespace) -> int:
    """Re-score stored outputs with the current checks (no API call)."""
    from cvb_engine.library import scenarios_root
    from cvb_engine.rescore import rescore_run
    from cvb_engine.scenario import load_library

    args.scenarios = str(scenarios_root(args.scenarios))
    library = load_library(args.scenarios)
    run_id = args.run_id or latest_run_id(args.db)
    done = rescore_run(run_id, library, db=args.db, sandbox_choice=args.sandbox)
    # A stored run id may predate the run-id rule: shown, like the paths, as text.
    print(
        terminal_text(
            f"re-scored {done.scored} record(s) of run {run_id} under scoring version "
            f"{done.scoring_version}: {done.verdicts_changed} changed verdict or outcome"
        )
    )
    if done.older_rules:
        print(f"  {done.older_rules} had been judged by older scoring rules")
    if done.scenario_changed:
        print(
            f"  {done.scenario_changed} with a scenario file that changed since generation "
            "(provenance kept)"
        )
    if done.scenario_missing:
        print(
            terminal_text(
                f"  {done.scenario_missing} skipped: their scenario is not in {args.scenarios}"
            )
        )
    return 0
