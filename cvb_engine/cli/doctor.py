"""``cvb doctor``: the findings of :func:`cvb_engine.doctor.findings`, one line each."""

from __future__ import annotations

import argparse
import sys

from cvb_engine.cli import command
from cvb_engine.safe_text import terminal_text


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
