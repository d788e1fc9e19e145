"""Start, cancel, resume and retry ``cvb run`` processes for the Run page.

A run is never a thread of the studio: it is a ``cvb run`` process of its own,
detached from the studio (a new session, reparented away from it), so it goes
on when the page is reloaded, the browser closed or the studio restarted, and
several can run at once. What it prints goes to ``<logs>/<run id>.log``; a
small ``<run id>.json`` beside it remembers the process id, so the page can
show a run that is still starting (not yet in the store) or that failed before
it got there.

Keys: the command line holds ``--api-key-env NAME``, never a value. The
process inherits the studio's environment, where the key variable lives; the
store's URL is passed the same way (``CVB_DATABASE_URL``), so a password in a
PostgreSQL URL does not show in ``ps`` either.

Progress, liveness and accuracy are read from the store by
:mod:`cvb_engine.monitor`; this module only starts and signals processes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.engine import make_url
from sqlmodel import Session, col, select

from cvb_engine import ARMS, LoadedScenario, ScenarioError, load_library
from cvb_engine import new_run_id as new_run_id  # the run page names runs with these
from cvb_engine import run_id_problem as run_id_problem
from cvb_engine.arms import ArmContext, ArmError, arm_order, expand_sweep, parse_arms
from cvb_engine.claims import request_cancel
from cvb_engine.endpoints import (
    BUILTIN,
    DEFAULT_MODEL_COUNT,
    MODEL_PREFERENCE,
    Endpoint,
    EndpointError,
    choose_models,
    key_is_set,
    key_variable_problem_or_error,
    load_presets,
    read_key,
)
from cvb_engine.monitor import RunProgress, process_alive, this_host
from cvb_engine.prompts import PROMPT_VERSION, build_messages
from cvb_engine.runner import (
    DEFAULTS,
    Matrix,
    RunError,
    pool_path,
    probe_catalog,
    select_scenarios,
)
from cvb_engine.store import Run, database_url, get_engine

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
ENDPOINT_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,39}$")
# What the store's secret filter (store.redact_params) looks for in a key.
_SECRET_WORDS = ("key", "token", "secret", "password", "authorization")
# The child starts the real run in a new session and exits at once: the run is
# then nobody's child in the studio (no zombie left behind, no tie to its life).
_SPAWN = (
    "import subprocess, sys\n"
    "log = open(sys.argv[1], 'ab')\n"
    "p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log,\n"
    "                     stderr=subprocess.STDOUT, start_new_session=True)\n"
    "print(p.pid, flush=True)\n"
)


class LaunchError(Exception):
    """A launch, cancel or resume that cannot be done; the message says why and what to do."""


# --------------------------------------------------------------------------- what to run


@dataclass(frozen=True)
class LaunchSpec:
    """The arguments of one ``cvb run`` (DESIGN §8), without any secret."""

    scenarios: str
    base_url: str
    api_key_env: str
    run_id: str
    endpoint: str | None = None  # the preset's name, kept with the run for display
    models: tuple[str, ...] = ()  # empty: the runner probes the catalog
    categories: tuple[str, ...] = ()
    only: tuple[str, ...] = ()  # scenario ids; wins over categories
    arms: tuple[str, ...] = ARMS
    runs: int = int(DEFAULTS["runs"])
    temperature: float = float(DEFAULTS["temperature"])
    max_tokens: int = int(DEFAULTS["max_tokens"])
    concurrency: int = int(DEFAULTS["concurrency"])
    seed: int | None = int(DEFAULTS["seed"])
    timeout_s: float = float(DEFAULTS["timeout_s"])
    max_attempts: int = int(DEFAULTS["max_attempts"])
    note: str | None = None
    retry_errors: bool = False


def _num(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def run_arguments(spec: LaunchSpec) -> list[str]:
    """The arguments after ``cvb run``; a key variable's *name* only."""
    args = ["--scenarios", spec.scenarios]
    if spec.endpoint and spec.endpoint in _preset_names():
        args += ["--endpoint", spec.endpoint]
    args += ["--base-url", spec.base_url, "--api-key-env", spec.api_key_env]
    if spec.models:
        args += ["--models", ",".join(spec.models)]
    if spec.only:
        args += ["--only", ",".join(spec.only)]
    elif spec.categories:
        args += ["--categories", ",".join(spec.categories)]
    args += ["--arms", ",".join(spec.arms), "--runs", str(spec.runs)]
    args += ["--temperature", _num(spec.temperature), "--max-tokens", str(spec.max_tokens)]
    args += ["--seed", str(-1 if spec.seed is None else spec.seed)]
    args += ["--concurrency", str(spec.concurrency), "--timeout", _num(spec.timeout_s)]
    args += ["--max-attempts", str(spec.max_attempts), "--run-id", spec.run_id]
    if spec.note:
        args += ["--note", spec.note]
    if spec.retry_errors:
        args.append("--retry-errors")
    return args


def command_line(spec: LaunchSpec) -> list[str]:
    """What is executed: this interpreter's ``cvb run`` (``python -m cvb_engine.runner``)."""
    return [sys.executable, "-m", "cvb_engine.runner", *run_arguments(spec)]


def shell_command(spec: LaunchSpec) -> str:
    """The same run as a ``cvb run`` command a researcher can paste in a terminal."""
    return shlex.join(["cvb", "run", *run_arguments(spec)])


def _preset_names() -> set[str]:
    try:
        return set(load_presets())
    except EndpointError:
        return set()


# --------------------------------------------------------------------------- dry run


@dataclass(frozen=True)
class Preview:
    """The matrix a launch would send, computed without sending anything."""

    scenarios: list[str]
    by_category: dict[str, int]
    arms: list[str]
    runs: int
    models: list[str]
    models_known: bool  # False: the catalog is probed at launch (size assumes 3 models)
    calls: int
    problems: list[str] = field(default_factory=list)

    @property
    def formula(self) -> str:
        models = counted(len(self.models), "model")
        if not self.models_known:
            models += " (probed at launch)"
        return (
            f"{counted(len(self.scenarios), 'scenario')} × {counted(len(self.arms), 'arm')} × "
            f"{counted(self.runs, 'repetition')} × {models} = {counted(self.calls, 'call')}"
        )


def counted(n: object, word: str) -> str:
    """``1 model``, ``3 models``; a count that is not a number (``?``) takes the plural."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def sweep_arms(
    loads: Sequence[int], positions: Sequence[str], channels: Sequence[str]
) -> list[str]:
    """The incentivized variants of a memory sweep (what ``--memory-sweep`` expands to);
    none when no load is chosen. An empty positions or channels list keeps the default."""
    if not loads:
        return []
    specs = [f"load={','.join(str(n) for n in loads)}"]
    if positions:
        specs.append(f"position={','.join(positions)}")
    if channels:
        specs.append(f"channel={','.join(channels)}")
    return expand_sweep(specs)


def preview(spec: LaunchSpec, library: dict[str, LoadedScenario]) -> Preview:
    """What ``cvb run --dry-run`` reports for ``spec``: the same scenario selection."""
    problems: list[str] = []
    try:
        chosen = select_scenarios(library, list(spec.categories), list(spec.only))
    except RunError as exc:
        chosen = {}
        problems.append(str(exc))
    if not spec.arms:
        problems.append("choose at least one arm")
    try:
        arms = arm_order(parse_arms(spec.arms))  # the matrix's arms, as cvb run orders them
        first = next(iter(chosen.values()), None)
        if first is not None:  # a load beyond the pool, say: found now, not at launch
            context = ArmContext(pool_path(spec.scenarios))
            for arm in arms:
                build_messages(first.scenario, arm, context)
    except ArmError as exc:
        arms = []
        problems.append(str(exc))
    except (OSError, ScenarioError) as exc:
        problems.append(f"memory pool: {exc}")
    models = list(spec.models) or list(MODEL_PREFERENCE[:DEFAULT_MODEL_COUNT])
    by_cat = Counter(item.scenario.category for item in chosen.values())
    calls = len(chosen) * len(arms) * spec.runs * len(models)
    return Preview(
        scenarios=sorted(chosen),
        by_category=dict(sorted(by_cat.items())),
        arms=arms,
        runs=spec.runs,
        models=models,
        models_known=bool(spec.models),
        calls=calls,
        problems=problems,
    )


# --------------------------------------------------------------------------- probing


@dataclass(frozen=True)
class ProbeResult:
    """An endpoint's ``/models`` catalog, against the preference list of DESIGN §6."""

    endpoint: str
    catalog: list[str]
    preferred: list[tuple[str, bool]]  # (model, offered?) in preference order
    default_models: list[str]  # what the runner would pick without --models
    error: str | None = None


def probe(endpoint: Endpoint, timeout_s: float = 15.0) -> ProbeResult:
    """List the catalog; errors (unset key, refused key, unreachable) come back as text."""
    empty = ProbeResult(endpoint.name, [], [(m, False) for m in MODEL_PREFERENCE], [])
    if problem := key_variable_problem_or_error(endpoint.api_key_env):
        return _with_error(empty, problem)
    try:
        key = read_key(endpoint.api_key_env)
    except EndpointError:
        return _with_error(empty, key_missing_message(endpoint.api_key_env))
    try:
        catalog = asyncio.run(probe_catalog(endpoint, key, timeout_s))
    except RunError as exc:
        return _with_error(empty, str(exc))
    try:
        defaults = choose_models(catalog)
    except EndpointError:
        defaults = []
    offered = set(catalog)
    return ProbeResult(
        endpoint.name, catalog, [(m, m in offered) for m in MODEL_PREFERENCE], defaults
    )


def _with_error(result: ProbeResult, error: str) -> ProbeResult:
    return ProbeResult(result.endpoint, [], result.preferred, [], error)


def is_local(endpoint: Endpoint) -> bool:
    """Whether ``endpoint`` is the bundled model's server (``cvb serve-local``)."""
    return endpoint.name == "local" or endpoint.base_url == BUILTIN["local"].base_url


def probe_advice(endpoint: Endpoint, result: ProbeResult) -> str | None:
    """What to do about a failed probe, when there is something to do."""
    if result.error and is_local(endpoint) and "cannot reach" in result.error:
        return (
            "The local model server is not running. Start it in a terminal with "
            "`cvb serve-local` (or run `cvb demo`, which starts it), then probe again."
        )
    return None


# --------------------------------------------------------------------------- defaults


def endpoint_of(params: dict[str, Any], presets: dict[str, Endpoint]) -> str | None:
    """The preset a stored run was sent to: by its stored name while that preset still
    has the run's URL, else the preset at the run's URL and key variable (a run sent
    with ``--base-url``, as older demos were, is stored as ``custom``); None if none."""
    base_url = str(params.get("base_url") or "")
    key_env = str(params.get("api_key_env") or "")
    named = presets.get(str(params.get("endpoint") or ""))
    if named is not None and (not base_url or named.base_url == base_url):
        return named.name
    for name in sorted(presets, key=lambda n: (presets[n].builtin, n)):
        if presets[name].base_url == base_url and presets[name].api_key_env == key_env:
            return name
    return None


def endpoint_label(params: dict[str, Any], presets: dict[str, Endpoint]) -> str:
    """How a stored run's endpoint is named on the page."""
    return endpoint_of(params, presets) or str(
        params.get("endpoint") or params.get("base_url") or "?"
    )


def latest_run_endpoint(session: Session, presets: dict[str, Endpoint]) -> str | None:
    """The preset the newest stored run used (the Run page opens on it), or None."""
    run = session.exec(select(Run).order_by(col(Run.created).desc())).first()
    return None if run is None else endpoint_of(run.params, presets)


def key_missing_message(api_key_env: str) -> str:
    return (
        f"The variable {api_key_env} is not set in the studio's environment, so nothing can be "
        f"sent to this endpoint. Stop the studio, run `export {api_key_env}=<your key>` in its "
        "terminal and start it again. The studio stores only the variable's name."
    )


# --------------------------------------------------------------------------- endpoints


def parse_models(text: str) -> list[str]:
    """Model ids from a comma- or newline-separated text, duplicates dropped."""
    out: list[str] = []
    for part in re.split(r"[,\n]", text):
        item = part.strip()
        if item and item not in out:
            out.append(item)
    return out


def endpoint_problems(name: str, base_url: str, api_key_env: str) -> list[str]:
    """What is wrong with an endpoint before it is saved (never echoing a pasted key)."""
    problems = []
    if not ENDPOINT_NAME_RE.match(name):
        problems.append(
            "Name: 1–40 lowercase letters, digits, '.', '_' or '-', e.g. `groq-eu` or `lab-vllm`."
        )
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or " " in base_url:
        problems.append("Base URL: an http(s) URL such as `https://api.groq.com/openai/v1`.")
    elif parts.username or parts.password:
        problems.append(
            "Base URL: leave credentials out of the URL; the key belongs in an environment variable."
        )
    if api_key_env and not ENV_NAME_RE.match(api_key_env):
        if len(api_key_env) >= 16 and " " not in api_key_env:
            problems.append(
                "Key variable: this looks like a key itself. Enter the NAME of the environment "
                "variable that holds the key (e.g. `GROQ_API_KEY`); keys are never stored."
            )
        else:
            problems.append(
                "Key variable: the name of an environment variable, e.g. `GROQ_API_KEY` "
                "(letters, digits and '_'), or empty when the server needs no key."
            )
    elif problem := key_variable_problem_or_error(api_key_env):
        problems.append(f"Key variable: {problem}.")
    return problems


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
    spec: dict[str, Any] | None = None  # the LaunchSpec, to start the same run again

    def launch_spec(self) -> LaunchSpec | None:
        if not self.spec:
            return None
        try:
            data: dict[str, Any] = {
                k: tuple(v) if isinstance(v, list) else v for k, v in self.spec.items()
            }
            return LaunchSpec(**data)
        except TypeError:
            return None  # written by another version of the studio

    @property
    def started_at(self) -> datetime:
        return datetime.fromisoformat(self.started)

    @property
    def alive(self) -> bool:
        return self.host == this_host() and process_alive(self.pid, started_by=self.started_at)


def _sidecar(logs: Path, run_id: str) -> Path:
    return logs / f"{run_id}.json"


def launch(spec: LaunchSpec, *, db_url: str, logs: Path, action: str = "launch") -> Launch:
    """Start ``cvb run`` for ``spec`` as a detached background process."""
    problem = run_id_problem(spec.run_id)
    if problem:
        raise LaunchError(problem)
    if problem := key_variable_problem_or_error(spec.api_key_env):
        raise LaunchError(problem)
    if not key_is_set(spec.api_key_env):
        raise LaunchError(key_missing_message(spec.api_key_env))
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
        spec=asdict(spec),
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


def launches(logs: Path, limit: int = 20) -> list[Launch]:
    """The latest process started for each run id, newest first."""
    if not logs.is_dir():
        return []
    found = [item for item in map(_read_launch, logs.glob("*.json")) if item is not None]
    return sorted(found, key=lambda item: item.started, reverse=True)[:limit]


def forget(logs: Path, run_id: str) -> None:
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


def starting(recent: list[Launch], runs: dict[str, RunProgress]) -> list[Launch]:
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


def cancel(
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


def _scenarios_folder(params: dict[str, Any], fallback: Path) -> Path:
    stored = str(params.get("scenarios_path") or "")
    folder = Path(stored) if stored and Path(stored).is_absolute() else None
    return folder if folder is not None and folder.exists() else fallback


def _matrix_sha256(
    params: dict[str, Any], ids: set[str], library: dict[str, Any], max_tokens: int
) -> str:
    return Matrix(
        models=list(params.get("models") or []),
        scenarios={
            sid: {
                "version": library[sid].scenario.version,
                "sha256": library[sid].sha256,
                "category": library[sid].scenario.category,
            }
            for sid in sorted(ids)
        },
        arms=list(params.get("arms") or []),
        runs=int(params.get("runs") or 0),
        temperature=float(params.get("temperature") or 0.0),
        max_tokens=max_tokens,
        seed=params.get("seed"),
        prompt_version=str(params.get("prompt_version") or PROMPT_VERSION),
    ).sha256


def _max_tokens_guesses() -> Iterator[int]:
    """Likely values first; a few seconds of digests at most (~0.3 ms each)."""
    common = [1024, 2048, 4096, 512, 8192, 256, 16384, 32768, 768, 1536, 3072, 128, 64]
    rest = [n for n in range(1, 8193) if n not in common]
    rest += [n for n in range(8193, 131_073) if n % 256 == 0 or n % 1000 == 0]
    yield from common
    yield from rest


def recover_matrix(
    progress: RunProgress, recorded: list[str], folder: Path
) -> tuple[list[str], int]:
    """The scenario ids and ``max_tokens`` of a stored run's matrix.

    The stored parameters may lack both: the store's secret filter drops every
    key that mentions a key, token, secret or password — ``max_tokens``, and
    scenario ids such as ``reset-token-generator`` (keys of the ``scenarios``
    object). What is missing is searched for — ids among the run's records and
    the library's ids that mention such a word, ``max_tokens`` among likely
    values first — and accepted only when it reproduces the run's matrix digest.
    """
    params = progress.params
    known = set(params.get("scenarios") or {}) | set(recorded)
    need = progress.n_scenarios - len(known)
    stored_max = params.get("max_tokens")
    if need <= 0 and stored_max is not None:
        return sorted(known), int(stored_max)
    try:
        library = load_library(folder)
    except ScenarioError:
        library = {}
    candidates = sorted(
        sid
        for sid in library
        if sid not in known and any(word in sid.lower() for word in _SECRET_WORDS)
    )
    combos = list(itertools.islice(itertools.combinations(candidates, max(need, 0)), 1_000))
    guesses = iter([int(stored_max)]) if stored_max is not None else _max_tokens_guesses()
    if all(sid in library for sid in known):
        for max_tokens in guesses:
            for combo in combos:
                ids = known | set(combo)
                if _matrix_sha256(params, ids, library, max_tokens) == progress.matrix_sha256:
                    return sorted(ids), max_tokens
    raise LaunchError(
        f"run {progress.run_id} was stored without some of its parameters (scenario ids or "
        f"max_tokens), and they cannot be recovered from {folder} as it is now. Resume it from "
        "a terminal with the command that started it (same arguments, same --run-id)."
    )


def spec_from_run(
    run_id: str,
    params: dict[str, Any],
    *,
    scenario_ids: list[str],
    max_tokens: int,
    scenarios_fallback: Path,
    retry_errors: bool = False,
) -> LaunchSpec:
    """The arguments that re-create a stored run's matrix (for resume and retry).

    The matrix must be identical for the runner to accept the run id again:
    the same models, scenario ids, arms, repetitions and sampling parameters.
    """
    models = params.get("models") or []
    if not models:
        raise LaunchError(f"run {run_id} stores no models; it cannot be resumed from here")
    seed = params.get("seed")
    return LaunchSpec(
        scenarios=str(_scenarios_folder(params, scenarios_fallback)),
        base_url=str(params.get("base_url") or ""),
        api_key_env=str(params.get("api_key_env") or ""),
        run_id=run_id,
        endpoint=params.get("endpoint"),
        models=tuple(models),
        only=tuple(scenario_ids),
        arms=tuple(params.get("arms") or ARMS),
        runs=int(params.get("runs") or 1),
        temperature=float(params.get("temperature") or 0.0),
        max_tokens=max_tokens,
        concurrency=int(params.get("concurrency") or DEFAULTS["concurrency"]),
        seed=None if seed is None else int(seed),
        timeout_s=float(params.get("timeout_s") or DEFAULTS["timeout_s"]),
        max_attempts=int(params.get("max_attempts") or DEFAULTS["max_attempts"]),
        retry_errors=retry_errors,
    )


def _again(
    progress: RunProgress,
    *,
    db_url: str,
    logs: Path,
    scenarios_fallback: Path,
    recorded: list[str],
    retry: bool,
) -> Launch:
    """Start a stored run again with its own arguments: those the studio launched it with,
    else (a run started from a terminal) those recovered from the store."""
    if progress.active:
        raise LaunchError(f"run {progress.run_id} is still running")
    previous = launch_of(logs, progress.run_id)
    spec = previous.launch_spec() if previous is not None else None
    models = tuple(progress.params.get("models") or ())
    if spec is not None and models:
        # The models the run settled on (a launch without models probed the catalog).
        spec = replace(spec, models=models, retry_errors=retry)
    else:
        folder = _scenarios_folder(progress.params, scenarios_fallback)
        ids, max_tokens = recover_matrix(progress, recorded, folder)
        spec = spec_from_run(
            progress.run_id,
            progress.params,
            scenario_ids=ids,
            max_tokens=max_tokens,
            scenarios_fallback=scenarios_fallback,
            retry_errors=retry,
        )
    return launch(spec, db_url=db_url, logs=logs, action="retry errors" if retry else "resume")


def resume(
    progress: RunProgress,
    *,
    db_url: str,
    logs: Path,
    scenarios_fallback: Path,
    recorded: list[str],
) -> Launch:
    """Start the run again under its id: only cells without a successful record are sent.

    ``recorded`` are the scenario ids the run has records for
    (:func:`cvb_engine.monitor.recorded_scenarios`).
    """
    return _again(
        progress,
        db_url=db_url,
        logs=logs,
        scenarios_fallback=scenarios_fallback,
        recorded=recorded,
        retry=False,
    )


def retry_errors(
    progress: RunProgress,
    *,
    db_url: str,
    logs: Path,
    scenarios_fallback: Path,
    recorded: list[str],
) -> Launch:
    """Send again only the cells stored as API errors (``--retry-errors``)."""
    return _again(
        progress,
        db_url=db_url,
        logs=logs,
        scenarios_fallback=scenarios_fallback,
        recorded=recorded,
        retry=True,
    )
