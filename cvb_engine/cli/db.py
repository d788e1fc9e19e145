"""``cvb db``: the store's version and runs, its migration, and copying runs between stores
(:mod:`cvb_engine.dbtools`)."""

from __future__ import annotations

import argparse

from cvb_engine.cli import command
from cvb_engine.cli.common import store_label
from cvb_engine.kinds import RunStatus
from cvb_engine.run_ids import run_id_arg
from cvb_engine.safe_text import terminal_text


def _db_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    info = sub.add_parser("info", help="the store's URL, schema version and runs")
    info.add_argument("--db", help="database URL (default: $CVB_DATABASE_URL or data/cvb.db)")
    upgrade = sub.add_parser("upgrade", help="migrate the store to this cvb's schema")
    upgrade.add_argument("--db", help="database URL (default: $CVB_DATABASE_URL or data/cvb.db)")
    copy = sub.add_parser("copy", help="copy runs between stores without duplicating cells")
    copy.add_argument("--from", dest="source", required=True, metavar="URL")
    copy.add_argument("--to", dest="target", required=True, metavar="URL")
    copy.add_argument(
        "--run",
        dest="runs",
        action="append",
        type=run_id_arg,
        metavar="RUN_ID",
        help="only this run (repeatable)",
    )


def _label(url: str) -> str:
    """The URL as printed: no password, no control character."""
    return terminal_text(store_label(url), multiline=False)


@command("db", _db_args)
def cmd_db(args: argparse.Namespace) -> int:
    """Store version, migrations and copying runs between stores."""
    from sqlalchemy import func
    from sqlalchemy import select as sa_select
    from sqlmodel import Session, col, select

    from cvb_engine.claims import runners
    from cvb_engine.dbtools import copy_runs, runner_lines
    from cvb_engine.store import (
        SCHEMA_VERSION,
        Record,
        Run,
        database_url,
        get_engine,
        stored_version,
        upgrade_schema,
    )

    if args.db_command == "info":
        url = database_url(args.db)
        engine = get_engine(url, create=False)
        version = stored_version(engine)
        print(f"store           {_label(url)}")
        print(f"backend         {engine.dialect.name}")
        if version is None:
            print(f"schema version  none yet (created as {SCHEMA_VERSION} on first use)")
            return 0
        state = (
            "current"
            if version == SCHEMA_VERSION
            else (
                "older: run `cvb db upgrade`" if version < SCHEMA_VERSION else "newer than this cvb"
            )
        )
        print(f"schema version  {version} ({state}; this cvb uses {SCHEMA_VERSION})")
        if version == SCHEMA_VERSION:
            with Session(engine) as session:
                runs = list(session.exec(select(Run).order_by(col(Run.created))))
                counts = dict(
                    session.execute(
                        sa_select(col(Record.run_id), func.count()).group_by(col(Record.run_id))
                    ).all()
                )
                # The runners of a running run: live ones with their pace, lapsed ones.
                by_run = {
                    r.id: runners(session, r.id) for r in runs if r.status == RunStatus.RUNNING
                }
            print(f"runs            {len(runs)}")
            for run in runs:
                # A store is outside text: an id may predate the run-id rule.
                name, status = (terminal_text(v, multiline=False) for v in (run.id, run.status))
                print(f"  {name:<32} {status:<10} {counts.get(run.id, 0)}/{run.total_cells} cells")
                for line in runner_lines(by_run.get(run.id, [])):
                    print(f"    {line}")
        return 0
    if args.db_command == "upgrade":
        url = database_url(args.db)
        passed = upgrade_schema(get_engine(url, create=False))
        if passed:
            print(
                f"migrated {_label(url)} to schema {passed[-1]} (through {', '.join(map(str, passed))})"
            )
        else:
            print(f"{_label(url)} is at schema {SCHEMA_VERSION}; nothing to do")
        return 0
    source, target = get_engine(args.source), get_engine(args.target)
    report = copy_runs(source, target, args.runs)
    print(
        f"copied {_label(args.source)} → {_label(args.target)}: "
        f"{len(report.runs_created)} new run(s), {len(report.runs_merged)} merged; "
        f"{report.records_added} record(s) added, {report.records_replaced} error record(s) replaced, "
        f"{report.records_kept} already there"
    )
    for run_id in report.runs_conflicting:
        print(
            f"  skipped {terminal_text(run_id, multiline=False)}: the target has a run with this id and a different matrix"
        )
    for run_id, why in report.runs_refused:
        print(
            f"  refused {terminal_text(run_id, multiline=False)}: "
            f"{terminal_text(why, multiline=False)} (nothing of it was written)"
        )
    return 1 if report.runs_conflicting or report.runs_refused else 0
