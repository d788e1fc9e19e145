"""``cvb report``: a stored run or a results file as Markdown, JSON, CSV and HTML
(:mod:`cvb_engine.report` writes them)."""

from __future__ import annotations

import argparse
from pathlib import Path

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
        "--scenarios",
        default="scenarios",
        help="scenario library whose constraints' stated limitations the report lists "
        "(default: scenarios)",
    )


def _limitations(path: str, scenario_ids: list[str]) -> tuple[tuple[str, str, str], ...]:
    """The stated limitations of the run's constraints; none when the library does not load
    (a report never fails for want of its notes)."""
    from cvb_engine.report.notes import limitations_of
    from cvb_engine.scenario import ScenarioError, load_library

    if not Path(path).is_dir():
        return ()
    try:
        return limitations_of(load_library(path), scenario_ids)
    except ScenarioError:
        return ()


@command("report", _report_args)
def cmd_report(args: argparse.Namespace) -> int:
    """Report a stored run or a results file: Markdown, JSON, CSV, HTML."""
    from cvb_engine.metrics import ivr, summarize_rows
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
        write_text_atomic,
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
            data = export_results(session, run_id) if (args.json or args.csv) else {}
    meta = {"run": run_id, "prompt version": data.get("prompt_version", "–") if data else "–"}
    if not data:
        meta.pop("prompt version")
    meta["sandbox"] = sandbox_label(params)
    notes = ReportNotes(versions, _limitations(args.scenarios, scenario_ids))
    text = markdown(summary, title=f"CVB results: {run_id}", meta=meta, notes=notes)
    if ivr_results:
        text += "\n" + ivr_markdown(ivr_results)
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
            ),
        )
    outputs = (
        ("markdown", args.markdown),
        ("json", args.json),
        ("csv", args.csv),
        ("html", args.html),
    )
    if not any(path for _, path in outputs):
        print(terminal_text(text))
    else:
        for flag, path in outputs:
            if path:
                print(terminal_text(f"wrote {flag}: {path}"))
    return 0
