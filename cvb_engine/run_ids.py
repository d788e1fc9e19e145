"""The one rule for run ids and the one for scenario ids, shared by the CLI, the results
file, the store's readers and the studio.

A run id names a run in the store, in reports, in file names the studio
offers for download (``<run id>.csv``) and in log file names, and it is
printed on terminals: it is 1–80 letters, digits, ``.``, ``_`` or ``-``,
starting with a letter or a digit. Default ids (``run-YYYYmmdd-HHMMSS-xxxx``)
follow it.

A scenario id names a scenario file in the library (``<category>/<id>.yaml``) and is
read back from stores and results files: it is 1–120 lowercase letters and digits in
words joined by single hyphens. Nothing read from outside becomes a file name or a
pattern before it passes this rule.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import secrets
import time

from cvb_engine.safe_text import terminal_text

RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")  # matched whole (fullmatch)
RUN_ID_RULE = "a run id is 1–80 letters, digits, '.', '_' or '-', starting with a letter or digit"


SCENARIO_ID_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # matched whole (fullmatch)
SCENARIO_ID_MAX = 120
SCENARIO_ID_RULE = (
    f"a scenario id is 1–{SCENARIO_ID_MAX} lowercase letters and digits in words joined by "
    "single hyphens"
)


class RunIdError(ValueError):
    """A run id (or a scenario id) that breaks its rule; the message names where it came
    from."""


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


def scenario_id_problem(scenario_id: object) -> str | None:
    """``None`` for a valid scenario id; otherwise the rule it breaks (without the value)."""
    if (
        isinstance(scenario_id, str)
        and len(scenario_id) <= SCENARIO_ID_MAX
        and SCENARIO_ID_PATTERN.fullmatch(scenario_id)
    ):
        return None
    return SCENARIO_ID_RULE


def check_scenario_id(scenario_id: object, field: str) -> str:
    """``scenario_id`` when it is valid; :class:`RunIdError` naming ``field`` otherwise."""
    problem = scenario_id_problem(scenario_id)
    if problem is not None:
        raise RunIdError(f"{field}: {problem}; {_found(scenario_id)}")
    assert isinstance(scenario_id, str)
    return scenario_id


def file_stem(run_id: object) -> str:
    """A file name stem for a run (a download, an export): the id itself when it passes the
    run-id rule, else ``run-`` and a digest of it (a stored id is never a file name unchecked)."""
    if run_id_problem(run_id) is None:
        assert isinstance(run_id, str)
        return run_id
    digest = hashlib.sha256(str(run_id).encode("utf-8", "replace")).hexdigest()[:12]
    return f"run-{digest}"


def run_id_arg(value: str) -> str:
    """An ``argparse`` ``type=`` for run ids: argparse names the flag in its error."""
    problem = run_id_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem}; {_found(value)}")
    return value
