"""``cvb audit``: the IVR pack audited (:func:`cvb_engine.ivr.audit_paths`), one line per problem."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from cvb_engine import sandbox
from cvb_engine.cli import CliError, command
from cvb_engine.cli.common import add_sandbox_argument
from cvb_engine.safe_text import terminal_text

if TYPE_CHECKING:
    from cvb_engine.ivr import ProblemAudit


def _audit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenarios",
        nargs="+",
        metavar="PATH",
        help="IVR problem files or folders (default: ivr/ of $CVB_SCENARIOS, else the "
        "shipped IVR pack)",
    )
    p.add_argument("--json", metavar="F", help="write the audit as JSON to F")
    p.add_argument("--workers", type=int, default=None, help="concurrent sandboxed executions")
    add_sandbox_argument(p)


def _line(p: ProblemAudit, width: int) -> str:
    errors = [f for f in p.findings if f.severity == "error"]
    warnings = [f for f in p.findings if f.severity == "warning"]
    head = f"{'ok' if p.ok else 'FAIL':<4}  {p.id:<{width}}  {p.source or '-':<13}"
    if errors:
        return f"{head}  " + "; ".join(f"{f.check}: {f.message}" for f in errors)
    text = f"{head}  {p.hidden} hidden, reference fails {len(p.reference_fails)}"
    if warnings:
        text += "; warning: " + "; ".join(f"{f.check}: {f.message}" for f in warnings)
    return text


@command("audit", _audit_args)
def cmd_audit(args: argparse.Namespace) -> int:
    """Audit the IVR pack: canonical solutions at IVR 0, reference solutions bite, no leaks."""
    from cvb_engine.ivr import audit_paths
    from cvb_engine.library import scenarios_root

    if not args.scenarios:
        args.scenarios = [str(scenarios_root() / "ivr")]
    missing = [p for p in args.scenarios if not Path(p).exists()]
    if missing:
        raise CliError(f"no such file or folder: {', '.join(missing)}")
    sandbox.choose(args.sandbox)  # before the first execution
    report = audit_paths(args.scenarios, workers=args.workers)
    if not report.problems:
        raise CliError(f"no IVR problems in {' '.join(args.scenarios)}")
    width = max(len(p.id) for p in report.problems)
    for p in report.problems:
        print(terminal_text(_line(p, width), multiline=False))  # quotes files and programs' output
    n, failed = len(report.problems), len(report.failed)
    print(
        f"{n} problem(s): {n - failed} ok, {failed} failed; "
        f"{report.executions} sandboxed executions in {report.seconds:.1f}s ({report.backend})"
    )
    if args.json:
        from cvb_engine.results import write_json_atomic

        write_json_atomic(args.json, report.as_dict())
        print(terminal_text(f"wrote json: {args.json}"))
    return 1 if failed else 0
