"""``cvb report``: a stored run or a results file as Markdown, JSON, CSV and HTML
(:mod:`cvb_engine.report` writes them)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cvb_engine.cli import CliError, command
from cvb_engine.cli.common import latest_run_id, store_label
from cvb_engine.run_ids import RunIdError, check_run_id
from cvb_engine.safe_text import terminal_text


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", nargs="?", help="RUN_ID or FILE.json (default: the latest run)")
    p.add_argument("--db", help="database URL (default: $CVB_DATABASE_URL or data/cvb.db)")
    p.add_argument("--markdown", metavar="F", help="write the Markdown report to F")
    p.add_argument("--json", metavar="F", help="write the results file to F")
    p.add_argument("--csv", metavar="F", help="write one CSV row per record to F")
    p.add_argument("--html", metavar="F", help="write a self-contained HTML report to F")
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        help="paired comparison of two runs (ids or results files) on the cells they share: "
        "difference in strict accuracy with a bootstrap CI, exact McNemar test, flipped cells",
    )
    p.add_argument(
        "--compare-models",
        nargs=2,
        metavar=("MODEL_A", "MODEL_B"),
        help="paired comparison of two models of the run on the cells they share",
    )
    p.add_argument(
        "--inspect",
        metavar="F",
        help="write the run as an inspect_ai eval log to F (.json or .eval; needs inspect-ai)",
    )
    p.add_argument(
        "--price-in",
        type=float,
        metavar="USD",
        help="USD per million prompt tokens for every model (with --price-out; default: the "
        "prices stored with the run, else the configured ones, else unknown)",
    )
    p.add_argument(
        "--price-out", type=float, metavar="USD", help="USD per million completion tokens"
    )
    p.add_argument(
        "--scenarios",
        help="scenario library whose constraints' stated limitations the report lists "
        "(default: $CVB_SCENARIOS, else the shipped library)",
    )


def _limitations(path: str | None, scenario_ids: list[str]) -> tuple[tuple[str, str, str], ...]:
    """The stated limitations of the run's constraints; none when the library does not load
    (a report never fails for want of its notes)."""
    from cvb_engine.library import scenarios_root
    from cvb_engine.report.notes import limitations_of
    from cvb_engine.scenario import ScenarioError, load_library

    path = str(scenarios_root(path))
    if not Path(path).is_dir():
        return ()
    try:
        return limitations_of(load_library(path), scenario_ids)
    except ScenarioError:
        return ()


def _results(target: str | None, db: str | None) -> tuple[str, dict[str, Any]]:
    """A run's id and its results file, from a results file or the store."""
    from cvb_engine.results import export_results, load_results_file
    from cvb_engine.store import Run, session_scope

    if target and (target.endswith(".json") or Path(target).is_file()):
        data = load_results_file(target)
        return str((data.get("run") or {}).get("id", Path(target).stem)), data
    if target:
        try:
            check_run_id(target, "RUN_ID")
        except RunIdError as exc:
            raise CliError(f"{exc} (and no file {target!r})") from None
    run_id = target or latest_run_id(db)
    with session_scope(db) as session:
        if session.get(Run, run_id) is None:
            raise CliError(f"no run {run_id!r} in {store_label(db)} (and no file {target!r})")
        return run_id, export_results(session, run_id)


def _compare(args: argparse.Namespace) -> str:
    """The Markdown of ``--compare`` / ``--compare-models`` (with each run's flakiness)."""
    from cvb_engine.compare import (
        compare_groups,
        comparison_markdown,
        flakiness,
        flakiness_markdown,
        pair_models,
        pair_runs,
        verdicts,
    )

    if args.compare:
        (id_a, data_a), (id_b, data_b) = (_results(t, args.db) for t in args.compare)
        found_a, found_b = verdicts(data_a["records"]), verdicts(data_b["records"])
        groups = compare_groups(pair_runs(found_a, found_b))
        parts = [
            comparison_markdown(f"Paired comparison: {id_a} vs {id_b}", groups, a=id_a, b=id_b)
        ]
        parts += [
            flakiness_markdown(flakiness(found_a), title=f"Flakiness: {id_a}"),
            flakiness_markdown(flakiness(found_b), title=f"Flakiness: {id_b}"),
        ]
        return "\n\n".join(parts)
    run_id, data = _results(args.target, args.db)
    found = verdicts(data["records"])
    model_a, model_b = args.compare_models
    known = {v.model for v in found}
    missing = [m for m in (model_a, model_b) if m not in known]
    if missing:
        raise CliError(
            f"run {run_id!r} has no answered record of {', '.join(missing)}; "
            f"its models: {', '.join(sorted(known)) or 'none'}"
        )
    groups = compare_groups(pair_models(found, model_a, model_b))
    title = f"Paired comparison in {run_id}: {model_a} vs {model_b}"
    return comparison_markdown(title, groups, a=model_a, b=model_b)


@command("report", _report_args)
def cmd_report(args: argparse.Namespace) -> int:
    """Report a stored run or a results file: Markdown, JSON, CSV, HTML."""
    from cvb_engine.results import write_text_atomic

    if args.compare and (args.target or args.compare_models):
        raise CliError("--compare names both runs: give no RUN and no --compare-models with it")
    if args.compare or args.compare_models:
        text = _compare(args)
        if args.markdown:
            write_text_atomic(args.markdown, text + "\n")
            print(terminal_text(f"wrote markdown: {args.markdown}"))
        else:
            print(terminal_text(text))
        return 0
    from cvb_engine.compare import flakiness, flakiness_markdown, flakiness_table, verdicts
    from cvb_engine.cost import run_costs
    from cvb_engine.metrics import ivr, summarize_rows
    from cvb_engine.report.cost_table import cost_markdown, cost_table
    from cvb_engine.report.export import records_csv
    from cvb_engine.report.markdown_report import ivr_markdown, markdown
    from cvb_engine.report.notes import ReportNotes, sandbox_label
    from cvb_engine.results import (
        db_ivr_rows,
        db_summary,
        export_results,
        file_scoring_versions,
        load_results_file,
        rows_from_results,
        run_scenario_ids,
        scoring_versions,
        write_json_atomic,
    )
    from cvb_engine.store import Run, session_scope

    target = args.target
    if target and (target.endswith(".json") or Path(target).is_file()):
        data = load_results_file(target)
        rows = rows_from_results(data)
        summary = summarize_rows(rows)
        ivr_results = ivr(rows)
        run_id = str((data.get("run") or {}).get("id", Path(target).stem))
        run_info = data.get("run")
        params = run_info.get("params") if isinstance(run_info, dict) else None
        versions = file_scoring_versions(data)
        scenario_ids = sorted({r.scenario_id for r in rows})
    else:
        if target:
            try:
                check_run_id(target, "RUN_ID")
            except RunIdError as exc:
                raise CliError(f"{exc} (and no file {target!r})") from None
        run_id = target or latest_run_id(args.db)
        with session_scope(args.db) as session:
            stored = session.get(Run, run_id)
            if stored is None:
                raise CliError(
                    f"no run {run_id!r} in {store_label(args.db)} (and no file {target!r})"
                )
            params = stored.params
            summary = db_summary(session, [run_id])
            ivr_results = ivr(db_ivr_rows(session, [run_id]))
            versions = scoring_versions(session, [run_id])
            scenario_ids = run_scenario_ids(session, [run_id])
            # the records: the cost table and the exports read them
            data = export_results(session, run_id)
    meta = {"run": run_id, "prompt version": data.get("prompt_version", "–") if data else "–"}
    if not data:
        meta.pop("prompt version")
    meta["sandbox"] = sandbox_label(params)
    notes = ReportNotes(versions, _limitations(args.scenarios, scenario_ids))
    text = markdown(summary, title=f"CVB results: {run_id}", meta=meta, notes=notes)
    if ivr_results:
        text += "\n" + ivr_markdown(ivr_results)
    costs = run_costs(data, price_in=args.price_in, price_out=args.price_out)
    if costs:
        text += "\n\n" + cost_markdown(costs)
    flaky = flakiness(verdicts(data.get("records") or []))
    if any(f.cells for f in flaky):
        text += "\n\n" + flakiness_markdown(flaky)
    if args.inspect:
        from cvb_engine.export_inspect import write_inspect_log

        try:
            write_inspect_log(data, args.inspect, summary=summary, scenarios=args.scenarios)
        except ImportError as exc:
            raise CliError(str(exc)) from None
    if args.markdown:
        write_text_atomic(args.markdown, text + "\n")
    if args.json:
        write_json_atomic(args.json, data)
    if args.csv:
        write_text_atomic(args.csv, records_csv(data["records"]))
    if args.html:
        from cvb_engine.report.html import html_report

        write_text_atomic(
            args.html,
            html_report(
                summary,
                title=f"CVB results: {run_id}",
                meta=meta,
                ivr_results=ivr_results,
                notes=notes,
                sections=[
                    *([cost_table(costs)] if costs else []),
                    *([flakiness_table(flaky)] if any(f.cells for f in flaky) else []),
                ],
            ),
        )
    outputs = (
        ("markdown", args.markdown),
        ("json", args.json),
        ("csv", args.csv),
        ("html", args.html),
        ("inspect", args.inspect),
    )
    if not any(path for _, path in outputs):
        print(terminal_text(text))
    else:
        for flag, path in outputs:
            if path:
                print(terminal_text(f"wrote {flag}: {path}"))
    return 0
