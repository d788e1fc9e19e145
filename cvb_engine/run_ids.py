"""The one rule for run ids, shared by the CLI, the results file and the studio.

A run id names a run in the store, in reports, in file names the studio
offers for download (``<run id>.csv``) and in log file names, and it is
printed on terminals: it is 1–80 letters, digits, ``.``, ``_`` or ``-``,
starting with a letter or a digit. Default ids (``run-YYYYmmdd-HHMMSS-xxxx``)
follow it.
"""

from __future__ import annotations

import argparse
import re
import secrets
import time

from cvb_engine.safe_text import terminal_text

RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")  # matched whole (fullmatch)
RUN_ID_RULE = "a run id is 1–80 letters, digits, '.', '_' or '-', starting with a letter or digit"


class RunIdError(ValueError):
    """A run id that breaks the rule; the message names where it came from."""


def new_run_id() -> str:
    """``run-YYYYmmdd-HHMMSS-xxxx`` (UTC): the random suffix keeps two runs started
    in the same second apart."""
    return time.strftime("run-%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def run_id_problem(run_id: object) -> str | None:
    """``None`` for a valid run id; otherwise the rule it breaks (without the value,
    which the caller shows as it shows text: the studio as text, the CLI quoted)."""
    if isinstance(run_id, str) and RUN_ID_PATTERN.fullmatch(run_id):
        return None
    return RUN_ID_RULE


def _found(value: object) -> str:
    if not isinstance(value, str):
        return f"found {type(value).__name__}"
    shown = value if len(value) <= 100 else value[:100] + "…"
    return f"found {terminal_text(repr(shown), multiline=False)}"


def check_run_id(run_id: object, field: str) -> str:
    """``run_id`` when it is valid; :class:`RunIdError` naming ``field`` otherwise.

    Args:
        run_id: the value to check.
        field: where it came from, as the user knows it (``--run-id``,
            ``RUN_ID``, ``results.json: run.id``).
    """
    problem = run_id_problem(run_id)
    if problem is not None:
        raise RunIdError(f"{field}: {problem}; {_found(run_id)}")
    assert isinstance(run_id, str)
    return run_id


def run_id_arg(value: str) -> str:
    """An ``argparse`` ``type=`` for run ids: argparse names the flag in its error."""
    problem = run_id_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem}; {_found(value)}")
    return value
