"""The processes of runs: start one detached, find the ones the studio started, stop one.

A run is never a thread of the studio: it is a ``cvb run`` process of its own,
detached from the studio (a new session, reparented away from it), so it goes
on when the page is reloaded, the browser closed or the studio restarted, and
several can run at once. What it prints goes to ``<logs>/<run id>.log``; a
small ``<run id>.json`` beside it remembers the process id, so the page can
show a run that is still starting (not yet in the store) or that failed before
it got there.

Keys: the command line holds ``--api-key-env NAME``, never a value. The
process inherits the caller's environment, where the key variable lives; the
store's URL is passed the same way (``CVB_DATABASE_URL``), so a password in a
PostgreSQL URL does not show in ``ps`` either.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import make_url

from cvb_engine.claims import request_cancel
from cvb_engine.endpoints import key_is_set, key_variable_problem_or_error
from cvb_engine.lifecycle.probe import key_missing_message
from cvb_engine.lifecycle.spec import command_line, shell_command
from cvb_engine.monitor import RunProgress, process_alive, this_host
from cvb_engine.run_ids import run_id_problem
from cvb_engine.run_options import RunOptions
from cvb_engine.store import database_url, get_engine

# The child starts the real run in a new session and exits at once: the run is
# then nobody's child in the caller (no zombie left behind, no tie to its life).
_SPAWN = (
    "import subprocess, sys\n"
    "log = open(sys.argv[1], 'ab')\n"
    "p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log,\n"
    "                     stderr=subprocess.STDOUT, start_new_session=True)\n"
    "print(p.pid, flush=True)\n"
)


class LaunchError(Exception):
    """A launch, cancel or resume that cannot be done; the message says why and what to do."""


# --------------------------------------------------------------------------- processes


def logs_dir(db_url: str) -> Path:
    """Where run logs go: ``$CVB_LOGS``, else ``logs/`` beside a SQLite store, else ``data/logs``."""
    given = os.environ.get("CVB_LOGS")
    if given:
        return Path(given)
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return Path(url.database).resolve().parent / "logs"
    return Path("data") / "logs"


@dataclass(frozen=True)
class Launch:
    """One process started by the studio (a launch, a resume or a retry)."""

    run_id: str
    pid: int
    host: str
    started: str  # ISO time, UTC
    action: str  # launch | resume | retry errors
    command: str  # the equivalent `cvb run ...` (no secret in it)
    log: str
    spec: dict[str, Any] | None = None  # the RunOptions, to start the same run again

    def launch_spec(self) -> RunOptions | None:
        if not self.spec:
            return None
        try:
            return RunOptions.model_validate(self.spec)
        except ValidationError:
            return None  # written by another version of the studio, or edited

    @property
    def started_at(self) -> datetime:
        return datetime.fromisoformat(self.started)

    @property
    def alive(self) -> bool:
        return self.host == this_host() and process_alive(self.pid, started_by=self.started_at)


def _sidecar(logs: Path, run_id: str) -> Path:
    return logs / f"{run_id}.json"


def launch_run(spec: RunOptions, *, db_url: str, logs: Path, action: str = "launch") -> Launch:
    """Start ``cvb run`` for ``spec`` as a detached background process."""
    if spec.run_id is None:
        raise LaunchError("a launch needs a run id (new_run_id() makes one)")
    if spec.db is not None:
        raise LaunchError("a launch names its store with db_url=, not in the run's options")
    if problem := run_id_problem(spec.run_id):
        raise LaunchError(problem)
    key_env = spec.api_key_env or ""  # none: a keyless endpoint (the local model)
    if problem := key_variable_problem_or_error(key_env):
        raise LaunchError(problem)
    if not key_is_set(key_env):
        raise LaunchError(key_missing_message(key_env))
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{spec.run_id}.log"
    display = shell_command(spec)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"== {action} at {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC ==\n$ {display}\n")
    env = {**os.environ, "CVB_DATABASE_URL": db_url, "PYTHONUNBUFFERED": "1"}
    try:
        helper = subprocess.run(
            [sys.executable, "-c", _SPAWN, str(log), *command_line(spec)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            start_new_session=True,
            check=False,
        )
        pid = int(helper.stdout.strip())
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"could not start cvb run: {exc}") from None
    started = Launch(
        run_id=spec.run_id,
        pid=pid,
        host=this_host(),
        started=datetime.now(UTC).isoformat(),
        action=action,
        command=display,
        log=str(log),
        spec=spec.model_dump(mode="json"),
    )
    tmp = _sidecar(logs, spec.run_id).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(started), indent=1), encoding="utf-8")
    tmp.replace(_sidecar(logs, spec.run_id))
    return started


def _read_launch(path: Path) -> Launch | None:
    try:
        return Launch(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None  # missing, half-written or foreign: not ours to show


def launch_of(logs: Path, run_id: str) -> Launch | None:
    """The latest process the studio started for ``run_id``, if any."""
    return _read_launch(_sidecar(logs, run_id))


def recent_launches(logs: Path, limit: int = 20) -> list[Launch]:
    """The latest process started for each run id, newest first."""
    if not logs.is_dir():
        return []
    found = [item for item in map(_read_launch, logs.glob("*.json")) if item is not None]
    return sorted(found, key=lambda item: item.started, reverse=True)[:limit]


def forget_launch(logs: Path, run_id: str) -> None:
    """Stop listing a launch that never reached the store (its log stays)."""
    _sidecar(logs, run_id).unlink(missing_ok=True)


def log_tail(path: str | Path, lines: int = 12) -> str:
    """The last lines of a run's log (progress bars folded to their last state)."""
    try:
        with Path(path).open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(fh.tell() - 16_384, 0))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.splitlines())
    return "\n".join(text.splitlines()[-lines:])


def starting_launches(recent: list[Launch], runs: dict[str, RunProgress]) -> list[Launch]:
    """Launches whose process is alive but has not yet marked its run as running."""
    return [
        item
        for item in recent
        if item.alive and (item.run_id not in runs or runs[item.run_id].updated < item.started_at)
    ]


def ended_early(recent: list[Launch], runs: dict[str, RunProgress]) -> list[Launch]:
    """Launches whose process ended before it started its run (the log says why).

    A process that gets as far as the store marks its run as running, which
    moves the run's ``updated`` past the launch; one that stops earlier (an
    unknown model, a changed matrix, an unreachable endpoint) leaves no trace
    there.
    """
    out = []
    for item in recent:
        if item.alive:
            continue
        run = runs.get(item.run_id)
        if run is None or run.updated < item.started_at:
            out.append(item)
    return out


class CancelAsked(LaunchError):
    """Not a failure: the run's runners were asked to stop through the store, and no
    process of it runs here to signal (the message says so)."""


def cancel_run(
    progress: RunProgress | None, pending: Launch | None = None, *, db_url: str | None = None
) -> int:
    """Stop a run, keeping every finished cell: every runner of it, on any machine, is
    asked through the store (:func:`cvb_engine.claims.request_cancel`: each stops at its
    next claim or heartbeat, its cells in flight stored), and its process here gets
    SIGTERM.

    Returns the pid signalled. Refuses a process that is gone, and one on another host
    (it cannot be signalled from here; the message says whether its runners were asked).
    """
    asked = False
    if progress is not None and progress.active:
        asked = request_cancel(get_engine(database_url(db_url)), progress.run_id)
    if progress is not None and progress.active and progress.pid is not None:
        pid, host, started_by = progress.pid, progress.host, progress.updated
    elif pending is not None:
        pid, host, started_by = pending.pid, pending.host, pending.started_at
    elif asked:
        raise CancelAsked(
            "asked the run's runners to stop through the store; no process of it runs here"
        )
    else:
        raise LaunchError("this run has no process to stop")
    if host != this_host():
        if asked:
            raise CancelAsked(
                f"asked every runner of the run to stop through the store: each stops at its "
                f"next cell. Its process on {host} cannot be signalled from here"
            )
        raise LaunchError(
            f"the run's process runs on {host}, not here: stop it there (kill -TERM {pid})"
        )
    if not process_alive(pid, started_by=started_by):
        raise LaunchError(f"process {pid} has already ended")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        raise LaunchError(f"process {pid} has already ended") from None
    return pid
