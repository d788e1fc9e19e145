"""The ``cvb`` command (DESIGN §8)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from cvb_engine import sandbox
from cvb_engine.run_ids import RunIdError, check_run_id, run_id_arg
from cvb_engine.safe_text import terminal_text

# Everything heavier (the store and SQLAlchemy, numpy through the metrics, the
# openai client through the runner) is imported by the handler that needs it:
# `cvb --help`, `cvb lint` and `cvb doctor` start without it
# (tests/test_cli_help.py keeps it so).

Handler = Callable[[argparse.Namespace], int]
_COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Handler]] = {}


def command(
    name: str, setup: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Handler], Handler]:
    """Register a subcommand: its argument setup and its handler."""

    def decorate(fn: Handler) -> Handler:
        _COMMANDS[name] = (setup, fn)
        return fn

    return decorate


class CliError(Exception):
    """A user-facing error: printed as ``cvb: message`` with exit status 2."""


def add_sandbox_argument(p: argparse.ArgumentParser) -> None:
    """``--sandbox``: the only way, with ``CVB_SANDBOX``, to run model code on a backend
    weaker than bwrap."""
    p.add_argument(
        "--sandbox",
        choices=sandbox.BACKENDS,
        default=None,
        help="where model code runs (default: bwrap, and nothing runs without it; "
        "unshare and plain are weaker and used only when named here or in $CVB_SANDBOX)",
    )


def require_sandbox(choice: str | None) -> str:
    """The backend model code will run on; a :class:`CliError` naming what is missing
    when there is none, raised before anything executes."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", sandbox.WeakSandboxWarning)
        try:
            name = sandbox.choose(choice)
        except sandbox.SandboxError as exc:
            raise CliError(str(exc)) from None
    for w in caught:
        print(f"cvb: warning: {w.message}", file=sys.stderr)
    return name


# --------------------------------------------------------------------------- lint


def _lint_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", default=["scenarios"], help="files or directories")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--shipped",
        action="store_true",
        default=None,
        help="apply the shipped-set rules (exactly 5 per category is an error); default for directories",
    )
    mode.add_argument(
        "--authoring",
        dest="shipped",
        action="store_false",
        help="the per-category count is a warning, as while authoring",
    )
    p.add_argument("--quiet", action="store_true", help="print errors only")
    add_sandbox_argument(p)


@command("lint", _lint_args)
def cmd_lint(args: argparse.Namespace) -> int:
    """Lint scenario files: file:line: CODE message; exit 1 on any error."""
    from cvb_engine import lint as lint_mod

    if lint_mod.executes_samples(args.paths):
        require_sandbox(args.sandbox)  # samples are model-shaped code: never run unsandboxed
    findings = lint_mod.lint_paths(args.paths, shipped=args.shipped)
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    for f in findings:
        if f.severity == "error" or not args.quiet:
            print(terminal_text(f, multiline=False))  # file names and quoted keys
    files = len(lint_mod.discover(args.paths))
    sys.stdout.flush()
    print(f"{files} file(s): {errors} error(s), {warnings} warning(s)", file=sys.stderr)
    return 1 if errors else 0


# --------------------------------------------------------------------------- score


def _score_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_id", nargs="?", type=run_id_arg, help="run to re-score (default: the latest)"
    )
    p.add_argument("--scenarios", default="scenarios", help="scenario directory")
    p.add_argument("--db", help="database URL (default: $CVB_DATABASE_URL or data/cvb.db)")
    add_sandbox_argument(p)


def _latest_run_id(db: str | None) -> str:
    from sqlmodel import col, select

    from cvb_engine.store import Run, session_scope

    with session_scope(db) as session:
        run = session.exec(select(Run).order_by(col(Run.created).desc())).first()
        if run is None:
            raise CliError(f"no runs in {_safe_url(db)}; start one with `cvb run`")
        return run.id


def _safe_url(db: str | None) -> str:
    from sqlalchemy.engine import make_url

    from cvb_engine.store import database_url

    return make_url(database_url(db)).render_as_string(hide_password=True)


@command("score", _score_args)
def cmd_score(args: argparse.Namespace) -> int:
    """Re-score stored outputs with the current checks (no API call)."""
    from cvb_engine.results import iter_run_records, save_scores
    from cvb_engine.scoring import SCORING_VERSION, executes_code, score_response
    from cvb_engine.store import Record, Run, session_scope

    library = _library(args.scenarios)
    run_id = args.run_id or _latest_run_id(args.db)
    scored = changed = missing = older = verdicts_changed = 0
    with session_scope(args.db) as session:
        run = session.get(Run, run_id)
        if run is None:
            raise CliError(f"no run {run_id!r} in {_safe_url(args.db)}")
        if any(executes_code(item.scenario) for item in library.values()):
            # before the first execution; the run's params name every backend that judged it
            run.params_json = json.dumps(
                sandbox.with_backend(run.params, require_sandbox(args.sandbox))
            )
            session.add(run)
        ids = [r.id for r in iter_run_records(session, run_id) if r.status == "ok"]
        for rid in ids:
            record = session.get(Record, rid)
            assert record is not None
            item = library.get(record.scenario_id)
            if item is None:
                missing += 1
                continue
            if item.sha256 != record.scenario_sha256:
                changed += 1
            before = (record.strict, record.n_honored, record.outcome)
            scored_now = score_response(item.scenario, record.response or "", record.finish_reason)
            if record.scoring_version != SCORING_VERSION:
                older += 1
            save_scores(session, record, scored_now)
            if (scored_now.strict, scored_now.n_honored, scored_now.outcome) != before:
                verdicts_changed += 1
            scored += 1
            if scored % 500 == 0:
                session.commit()
        session.commit()
    # A stored run id may predate the run-id rule: shown, like the paths, as text.
    print(
        terminal_text(
            f"re-scored {scored} record(s) of run {run_id} under scoring version "
            f"{SCORING_VERSION}: {verdicts_changed} changed verdict or outcome"
        )
    )
    if older:
        print(f"  {older} had been judged by older scoring rules")
    if changed:
        print(f"  {changed} with a scenario file that changed since generation (provenance kept)")
    if missing:
        print(terminal_text(f"  {missing} skipped: their scenario is not in {args.scenarios}"))
    return 0


def _limitations(path: str, scenario_ids: list[str]) -> tuple[tuple[str, str, str], ...]:
    """The stated limitations of the run's constraints; none when the library does not load
    (a report never fails for want of its notes)."""
    from cvb_engine.report import limitations_of
    from cvb_engine.scenario import ScenarioError, load_library

    if not Path(path).is_dir():
        return ()
    try:
        return limitations_of(load_library(path), scenario_ids)
    except ScenarioError:
        return ()


def _library(path: str) -> dict[str, Any]:
    from cvb_engine.scenario import ScenarioError, load_library

    try:
        return load_library(path)
    except ScenarioError as exc:
        raise CliError(f"scenarios do not load:\n{exc}") from None


# --------------------------------------------------------------------------- report


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


@command("report", _report_args)
def cmd_report(args: argparse.Namespace) -> int:
    """Report a stored run or a results file: Markdown, JSON, CSV, HTML."""
    from cvb_engine.metrics import ivr, summarize_rows
    from cvb_engine.report import ReportNotes, ivr_markdown, markdown, records_csv, sandbox_label
    from cvb_engine.results import (
        ResultsFileError,
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
        try:
            data = load_results_file(target)
        except ResultsFileError as exc:
            raise CliError(str(exc)) from None
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
        run_id = target or _latest_run_id(args.db)
        with session_scope(args.db) as session:
            stored = session.get(Run, run_id)
            if stored is None:
                raise CliError(
                    f"no run {run_id!r} in {_safe_url(args.db)} (and no file {target!r})"
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
        from cvb_engine.report_html import html_report

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


# --------------------------------------------------------------------------- studio


def _studio_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8501)
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: only this machine can open the studio)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests addressed to NAME (or NAME:PORT), e.g. behind a reverse "
        "proxy; repeatable, added to $CVB_STUDIO_ALLOWED_HOSTS. Any other Host is refused "
        "(DNS rebinding)",
    )
    p.add_argument("--scenarios", default="scenarios", help="scenario folder the Author page edits")
    p.add_argument("--db", help="database URL (default: $CVB_DATABASE_URL or data/cvb.db)")


@command("studio", _studio_args)
def cmd_studio(args: argparse.Namespace) -> int:
    """Start the Streamlit studio (Author, Run, Results)."""
    import importlib.util
    import os
    import subprocess

    from cvb_engine import hosts

    # find_spec locates the studio without importing it: the engine stays UI-free.
    spec = importlib.util.find_spec("studio")
    if spec is None or spec.origin is None:
        raise CliError("the studio package is not installed (pip install -e .)")
    app = Path(spec.origin).parent / "streamlit_app.py"
    env = dict(os.environ)
    env["CVB_SCENARIOS"] = str(Path(args.scenarios).resolve())
    if args.db:
        env["CVB_DATABASE_URL"] = args.db
    allowed = [*hosts.allowed_from_env(env), *args.allow_host]
    try:
        hosts.normalise_allowed(allowed)
    except ValueError as exc:
        raise CliError(f"--allow-host / ${hosts.ALLOWED_HOSTS_ENV}: {exc}") from None
    env[hosts.ALLOWED_HOSTS_ENV] = ",".join(allowed)
    env["CVB_STUDIO_PARENT_PID"] = str(os.getpid())  # the studio stops when this process does
    # studio/serve.py is `streamlit run` with the Host check in front (DNS rebinding).
    command_line = [
        sys.executable,
        str(app.parent / "serve.py"),
        str(app),
        "--server.address",
        args.host,
        "--server.port",
        str(args.port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        # no Deploy button (nor rerun / clear cache); the theme and print menu stay
        "--client.toolbarMode",
        "viewer",
    ]
    print(f"CVB Studio on http://{args.host}:{args.port}  (Ctrl-C stops it)", flush=True)
    try:
        return subprocess.call(command_line, env=env)
    except KeyboardInterrupt:
        return 0


# --------------------------------------------------------------------------- doctor


def _doctor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help="database URL (default: $CVB_DATABASE_URL or data/cvb.db)")


@command("doctor", _doctor_args)
def cmd_doctor(args: argparse.Namespace) -> int:
    """Say what this machine offers (sandbox, store, local model, browser) and how to fix what is missing."""
    from cvb_engine.doctor import findings

    found = findings(args.db)
    width = max(len(f.topic) for f in found)
    for f in found:
        mark = "ok" if f.ok else "MISSING" if f.needed else "no"
        print(terminal_text(f"{mark:<8}{f.topic:<{width + 2}}{f.detail}", multiline=False))
        if f.fix and not f.ok:
            print(terminal_text(f"{'':<8}{'':<{width + 2}}fix: {f.fix}", multiline=False))
    blocking = [f.topic for f in found if f.needed and not f.ok]
    if blocking:
        print(f"cvb doctor: {', '.join(blocking)} must be fixed before a run", file=sys.stderr)
    return 1 if blocking else 0


# --------------------------------------------------------------------------- main


#: Subcommands defined in other modules, imported only when used (`cvb lint`
#: should not pay for importing the openai client), with the first line of their
#: handler's docstring, which `cvb --help` lists without importing them
#: (tests/test_cli_help.py checks that the two agree).
PLUGINS: dict[str, tuple[str, str]] = {
    "run": (
        "cvb_engine.runner",
        "Run the benchmark matrix against an OpenAI-compatible endpoint.",
    ),
    "demo": (
        "cvb_engine.local",
        "The first-run demo: a small matrix against the bundled local model (or a preset).",
    ),
    "serve-local": (
        "cvb_engine.local",
        "Serve the bundled SmolLM2-135M model on 127.0.0.1 (OpenAI-compatible).",
    ),
    "db": ("cvb_engine.dbtools", "Store version, migrations and copying runs between stores."),
    "audit": (
        "cvb_engine.ivr",
        "Audit the IVR pack: canonical solutions at IVR 0, reference solutions bite, no leaks.",
    ),
}


class _HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default in ``--help``, unless its help already states it or
    there is none to state (None, False)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and default is not None
            and default is not False
            and default != argparse.SUPPRESS
            and "default" not in text
        ):
            shown = ",".join(map(str, default)) if isinstance(default, list) else default
            text += f" (default: {shown})"
        return text


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors suggest the command or option meant."""

    def error(self, message: str) -> NoReturn:
        super().error(message + _did_you_mean(self, message))


def _known_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string of ``parser`` and of its subcommands."""
    found = list(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _known_options(sub)
    return found


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    import difflib
    import re

    if m := re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message):
        choices = re.findall(r"'([^']*)'", m.group(2))
        close = difflib.get_close_matches(m.group(1), choices, n=1)
    elif m := re.search(r"unrecognized arguments: (.*)", message):
        options = _known_options(parser)
        close = [
            match[0]
            for word in m.group(1).split()
            if word.startswith("-")
            and (match := difflib.get_close_matches(word.split("=")[0], options, n=1))
        ]
    else:
        return ""
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def build_parser(command_name: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cvb", description="Constraint-Violation Benchmark: lint, run, score, report."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _load_plugins(command_name)
    commands = {name: handler.__doc__ or "" for name, (_, handler) in _COMMANDS.items()}
    for name, (_, summary) in PLUGINS.items():
        commands.setdefault(name, summary)  # listed, not imported: not the command given
    for name, doc_text in commands.items():
        doc = doc_text.strip().splitlines()
        p = sub.add_parser(
            name,
            help=doc[0] if doc else None,
            description=doc[0] if doc else None,
            formatter_class=_HelpFormatter,
        )
        if name in _COMMANDS:
            setup, handler = _COMMANDS[name]
            setup(p)
            p.set_defaults(handler=handler)
        else:
            p.set_defaults(handler=_unloaded(name))
    return parser


def _unloaded(name: str) -> Handler:
    """The handler of a subcommand listed without its module; reached only when the
    command name is not the first word (``main`` loads the module it names)."""

    def handler(args: argparse.Namespace) -> int:
        raise CliError(f"put the command first: cvb {name} ...")

    return handler


def _load_plugins(command_name: str | None = None) -> None:
    """Import the module that adds ``command_name`` (it registers on import); none
    when it is a core command or not a command at all."""
    import importlib

    if command_name in _COMMANDS or command_name not in PLUGINS:
        return
    module = PLUGINS[command_name][0]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise


def _user_facing(exc: Exception) -> bool:
    """A :class:`CliError`, or a ``StoreError`` (whose module is imported only by the
    commands that open the store, so one that was never imported was never raised)."""
    store = sys.modules.get("cvb_engine.store")
    return isinstance(exc, CliError) or (store is not None and isinstance(exc, store.StoreError))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(first)
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except Exception as exc:
        if not _user_facing(exc):
            raise
        # Messages quote servers (API error reasons), files and names: shown as text.
        print(f"cvb: {terminal_text(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cvb: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Run as `python -m cvb_engine.cli`, this file is `__main__`, while plugin
    # modules register their commands on `cvb_engine.cli`: dispatch through that.
    from cvb_engine.cli import main as _main

    sys.exit(_main())
