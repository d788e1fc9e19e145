"""``cvb lint``: scenario files checked, ``file:line: CODE message`` per finding."""

from __future__ import annotations

import argparse
import sys

from cvb_engine import sandbox
from cvb_engine.cli import command
from cvb_engine.cli.common import add_sandbox_argument
from cvb_engine.safe_text import terminal_text


def _lint_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths",
        nargs="*",
        help="files or directories (default: $CVB_SCENARIOS, else the shipped library)",
    )
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
    from cvb_engine.library import scenarios_root

    if not args.paths:
        args.paths = [str(scenarios_root())]
    if lint_mod.executes_samples(args.paths):
        sandbox.choose(args.sandbox)  # samples are model-shaped code: never run unsandboxed
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
