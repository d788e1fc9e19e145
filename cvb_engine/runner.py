"""The runner: models × scenarios × arms × repetitions against an OpenAI-compatible endpoint.

Guarantees:

* **Nothing lost.** Every finished request is committed as soon as it
  arrives, and scored right after, by a recorder process
  (:mod:`cvb_engine.recorder`); a worker sends its next request only once its
  last answer is committed, so a ``kill -9`` loses at most the requests in
  flight (one per worker). Answers a kill left unscored are scored on resume.
* **Nothing twice.** A cell (run, model, scenario, arm, rep) is unique in the
  store; re-running a run id sends only the cells without a successful record
  and overwrites error records in place. Runners that share a run (``--join``,
  on any machine) claim its cells in batches with leases (:mod:`cvb_engine.claims`):
  no cell is sent by two healthy runners.
* **Nothing mixed.** A run id is bound to its matrix (models, scenario
  versions, arms, repetitions, sampling parameters, prompt version); a
  different matrix under the same id is refused.
* **API failures are not violations.** 429 (honouring ``Retry-After`` up to a
  cap), 5xx, timeouts, dropped connections, malformed bodies, empty content
  and empty ``choices`` are retried with backoff; what still fails becomes an
  error record, excluded from accuracy.
* **Every reply is a record**. Whatever an endpoint sends, or
  whatever reading it raises, its cell gets an ok or an error record and the
  run goes on (:mod:`cvb_engine.replies` reads and validates the bytes).
  Bodies are read with a bound, replies longer than ``--max-response-chars``
  are stored cut there and flagged (``response_cut``), and every server string
  is scrubbed of the key before it is stored or shown. A run is ``finished``
  only when every cell of its matrix has a record; otherwise it ends
  ``incomplete`` and a resume sends the cells without a record first.

``python -m cvb_engine.runner`` is ``cvb run`` (:mod:`cvb_engine.cli.run`).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
import json
import os
import random
import socket
import ssl
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx2
import openai
from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cvb_engine import sandbox
from cvb_engine.arms import (
    DEFAULT_POOL,
    ArmContext,
    ArmError,
    arm_order,
    expand_sweep,
    parse_arm,
    parse_arms,
)
from cvb_engine.claims import CellFeed, ClaimError, RunClaims, runners, worker_name
from cvb_engine.endpoints import (
    DEFAULT_MODEL_COUNT,
    MODEL_PREFERENCE,
    Endpoint,
    EndpointError,
    choose_models,
    key_is_set,
    read_key,
    resolve,
    scrub,
)
from cvb_engine.kinds import RecordStatus, RunStatus
from cvb_engine.monitor import format_duration
from cvb_engine.prompts import PROMPT_VERSION, Message, build_messages, messages_sha256
from cvb_engine.recorder import Finished, Recorder, RecorderError, Setup
from cvb_engine.replies import (
    MAX_ERROR_CHARS,
    MAX_RESPONSE_CHARS,
    BadReply,
    BoundedClient,
    Reply,
    body_limit,
    is_cut,
    parse_catalog,
    parse_completion,
)
from cvb_engine.run_ids import RunIdError, check_run_id, new_run_id
from cvb_engine.run_options import RunOptions
from cvb_engine.safe_text import terminal_text
from cvb_engine.scenario import (
    ARMS,
    CVB_CATEGORIES,
    LoadedScenario,
    ScenarioError,
    load_library,
)
from cvb_engine.store import Record, Run, database_url, get_engine, redact_params, utcnow

Cell = tuple[str, str, str, int]  # model, scenario_id, arm, rep


class RunError(Exception):
    """A run that cannot start or go on, with a message for the user."""


# --------------------------------------------------------------------------- matrix


@dataclass(frozen=True)
class Matrix:
    """What a run id is bound to."""

    models: list[str]
    scenarios: dict[str, dict[str, Any]]  # id → {version, sha256, category}
    arms: list[str]
    runs: int
    temperature: float
    max_tokens: int
    seed: int | None
    prompt_version: str = PROMPT_VERSION
    # sha256 of the memory pool, when a variant draws distractors from it
    memory_pool: str | None = None
    # sha256 of the scenarios' superseded notes, when a variant shows them (stale=): the
    # scenario hashes leave the notes out (cvb_engine.scenario.content_sha256)
    superseded: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {
            "models": self.models,
            "scenarios": self.scenarios,
            "arms": self.arms,
            "runs": self.runs,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "prompt_version": self.prompt_version,
        }
        if self.memory_pool is not None:  # absent otherwise: older runs keep their hash
            out["memory_pool"] = self.memory_pool
        if self.superseded is not None:  # likewise
            out["superseded"] = self.superseded
        return out

    @property
    def sha256(self) -> str:
        blob = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def cells(self) -> list[Cell]:
        # Repetition-major, then scenario, arm, model: a live view sees every
        # arm and model fill up together instead of one after another.
        return [
            (model, sid, arm, rep)
            for rep in range(self.runs)
            for sid in sorted(self.scenarios)
            for arm in self.arms
            for model in self.models
        ]

    @property
    def size(self) -> int:
        return len(self.models) * len(self.scenarios) * len(self.arms) * self.runs


def diff_matrices(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        if key == "scenarios":
            o, n = old.get(key) or {}, new.get(key) or {}
            added = sorted(set(n) - set(o))
            removed = sorted(set(o) - set(n))
            changed = sorted(s for s in set(o) & set(n) if o[s] != n[s])
            parts = [f"added {added}" if added else "", f"removed {removed}" if removed else ""]
            parts.append(f"changed files {changed}" if changed else "")
            out.append("scenarios: " + "; ".join(p for p in parts if p))
        else:
            out.append(f"{key}: {old.get(key)!r} → {new.get(key)!r}")
    return out


def select_scenarios(
    library: dict[str, LoadedScenario],
    categories: Sequence[str] | None,
    only: Sequence[str] | None,
) -> dict[str, LoadedScenario]:
    """The scenarios a run covers: by id, by category, or by default the CVB set
    (the IVR pack runs when asked for, or when it is all there is)."""
    if only:
        missing = [s for s in only if s not in library]
        if missing:
            raise RunError(f"unknown scenario id(s): {', '.join(missing)}")
        return {s: library[s] for s in only}
    if categories:
        picked = {k: v for k, v in library.items() if v.scenario.category in categories}
    elif any(v.scenario.category in CVB_CATEGORIES for v in library.values()):
        picked = {k: v for k, v in library.items() if v.scenario.category in CVB_CATEGORIES}
    else:
        picked = dict(library)
    if not picked:
        raise RunError("no scenarios selected")
    return picked


# --------------------------------------------------------------------------- events


@dataclass
class Progress:
    """Counters a progress display reads."""

    total: int
    skipped: int = 0
    ok: int = 0
    errors: int = 0
    started: float = field(default_factory=time.monotonic)
    last_error: str | None = None

    @property
    def done(self) -> int:
        return self.ok + self.errors

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        remaining = self.total - self.done
        return remaining / self.rate if self.rate > 0 else None


def _fmt_rate(rate: float) -> str:
    return f"{rate:.1f} calls/s" if rate >= 1 else f"{rate * 60:.1f} calls/min"


class TerminalProgress:
    """A one-line progress bar on a terminal; plain periodic lines otherwise."""

    def __init__(self, stream: TextIO = sys.stderr, *, tty: bool | None = None) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self._last = 0.0
        self._last_pct = -1
        self._last_line: tuple[int, int, int] | None = None

    def __call__(self, p: Progress, final: bool = False) -> None:
        now = time.monotonic()
        if final and (p.total == 0 or (p.done, p.ok, p.errors) == self._last_line):
            # nothing was sent (cmd_run says so), or the last line already said it all
            if self.tty and p.total:
                self.stream.write("\n")
            return
        pct = int(100 * p.done / p.total) if p.total else 100
        eta = format_duration(p.eta_s, unknown="--:--")
        if self.tty:
            if not final and now - self._last < 0.1:
                return
            width = 30
            filled = int(width * p.done / p.total) if p.total else width
            bar = "█" * filled + "·" * (width - filled)
            line = (
                f"\r[{bar}] {p.done}/{p.total} ok {p.ok} err {p.errors} "
                f"| {_fmt_rate(p.rate)} | ETA {eta} "
            )
            self.stream.write(line + ("\n" if final else ""))
        else:
            step = pct // 10
            if not final and step == self._last_pct and now - self._last < 30:
                return
            self._last_pct = step
            self.stream.write(
                f"progress {p.done}/{p.total} ({pct}%) ok={p.ok} errors={p.errors} "
                f"rate={p.rate:.2f}/s eta={eta}\n"
            )
        self._last = now
        self._last_line = (p.done, p.ok, p.errors)
        self.stream.flush()


# --------------------------------------------------------------------------- requests


class FatalEndpointError(RunError):
    """The endpoint refuses every request (bad key, no permission): stop the run."""


def _retry_after(exc: openai.APIStatusError, cap: float) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), cap)
    except ValueError:
        return None


async def call_once(
    client: openai.AsyncOpenAI,
    model: str,
    messages: list[Message],
    *,
    temperature: float,
    max_tokens: int,
    seed: int | None,
    secret: str = "",
    max_chars: int = MAX_RESPONSE_CHARS,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | None = None,
) -> Reply:
    """One chat completion, read and validated by :func:`cvb_engine.replies.parse_completion`.

    The reply's separate reasoning field (``reasoning_content`` or ``reasoning``)
    is kept apart from the content and never scored. A reply whose content is
    empty but whose reasoning is not (a reasoning model cut off by
    ``max_tokens``) is an answer with no code, not an API failure.

    Raises:
        BadReply: the reply is not usable (not JSON, no choices, content that
            is not text, no content and no reasoning).
    """
    kwargs: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
    if seed is not None:
        kwargs["seed"] = seed
    if tools:
        kwargs["tools"] = tools
        kwargs["tool_choice"] = tool_choice or "auto"
    # The raw response: the body is parsed here, not by the client's unvalidated models.
    raw = await client.chat.completions.with_raw_response.create(
        model=model,
        messages=messages,  # type: ignore[arg-type]
        **kwargs,
    )
    http = raw.http_response
    return parse_completion(
        http.content, secret=secret, max_chars=max_chars, body_cut=is_cut(http), tools=bool(tools)
    )


async def call_with_retries(
    client: openai.AsyncOpenAI,
    model: str,
    messages: list[Message],
    *,
    temperature: float,
    max_tokens: int,
    seed: int | None,
    max_attempts: int,
    retry_after_cap_s: float,
    secret: str,
    max_chars: int = MAX_RESPONSE_CHARS,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | None = None,
) -> Finished:
    """Call until success or ``max_attempts``; a failure becomes an error result.

    Never raises for what an endpoint sends (only :class:`FatalEndpointError`
    for a refused key, and cancellation): anything else, even an exception
    nobody foresaw, is retried and then becomes the error record.
    """
    error = "not attempted"
    started = time.monotonic()
    for attempt in range(1, max_attempts + 1):
        wait: float | None = None
        t0 = time.monotonic()
        try:
            reply = await call_once(
                client,
                model,
                messages,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
                secret=secret,
                max_chars=max_chars,
                tools=tools,
                tool_choice=tool_choice,
            )
            return Finished(
                cell=("", "", "", 0),
                status=RecordStatus.OK,
                response=reply.content,
                error=None,
                latency_s=round(time.monotonic() - t0, 4),
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                finish_reason=reply.finish_reason,
                attempts=attempt,
                messages_sha256="",
                reasoning=reply.reasoning,
                response_cut=reply.cut,
                tool_calls=reply.tool_calls,
            )
        except openai.AuthenticationError as exc:
            raise FatalEndpointError(
                _server_text(
                    f"the endpoint refused the API key (HTTP {exc.status_code}): {exc.message}",
                    secret,
                )
            ) from None
        except openai.PermissionDeniedError as exc:
            raise FatalEndpointError(
                _server_text(f"the endpoint refused access (HTTP 403): {exc.message}", secret)
            ) from None
        except openai.RateLimitError as exc:
            error = f"HTTP 429 rate limited: {exc.message}"
            wait = _retry_after(exc, retry_after_cap_s)
        except openai.APIStatusError as exc:
            error = f"HTTP {exc.status_code}: {exc.message}"
            if exc.status_code < 500 and exc.status_code not in (408, 409):
                break  # the request itself is wrong (400, 404, 422): retrying cannot help
        except openai.APITimeoutError:
            error = "request timed out"
        except openai.APIConnectionError as exc:
            error = f"connection failed: {exc.__cause__ or exc}"
        except BadReply as exc:
            error = str(exc)
        except (httpx2.HTTPError, openai.OpenAIError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            # Nothing a server sends may end the run: whatever reading
            # a reply raised that nobody foresaw is this cell's error.
            error = f"unusable reply ({type(exc).__name__}): {exc}"
        if attempt < max_attempts:
            if wait is None:
                wait = min(30.0, 0.5 * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)
            await asyncio.sleep(wait)
    return Finished(
        cell=("", "", "", 0),
        status=RecordStatus.ERROR,
        response=None,
        error=_server_text(error, secret)
        + f" (after {attempt} attempt{'s' if attempt > 1 else ''}, "
        f"{time.monotonic() - started:.1f}s)",
        latency_s=None,
        prompt_tokens=None,
        completion_tokens=None,
        finish_reason=None,
        attempts=attempt,
        messages_sha256="",
        error_kind="api",
    )


def _server_text(text: object, secret: str) -> str:
    """An error message built from server text: scrubbed, and cut to a sane length."""
    return scrub(str(text), secret)[:MAX_ERROR_CHARS]


def make_client(
    endpoint: Endpoint,
    key: str,
    timeout_s: float,
    concurrency: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    max_response_chars: int = MAX_RESPONSE_CHARS,
) -> openai.AsyncOpenAI:
    """An ``openai`` client for ``concurrency`` requests at a time.

    Its HTTP client keeps at most ``body_limit(max_response_chars)`` bytes of
    any response body (:class:`cvb_engine.replies.BoundedClient`).

    Building an SSL context costs about 0.1 s (it loads the CA bundle): pass one
    (from ``httpx2.create_ssl_context()``) to clients made by the dozen.
    """
    limits = httpx2.Limits(
        max_connections=max(concurrency, 1) + 4, max_keepalive_connections=max(concurrency, 1) + 4
    )
    http_client = BoundedClient(
        max_body_bytes=body_limit(max_response_chars),
        limits=limits,
        timeout=timeout_s,
        verify=ssl_context if ssl_context is not None else True,
    )
    return openai.AsyncOpenAI(
        base_url=endpoint.base_url,
        api_key=key,
        max_retries=0,  # retries are ours: backoff, Retry-After cap, error records
        timeout=timeout_s,
        http_client=http_client,
    )


async def probe_catalog(
    endpoint: Endpoint,
    key: str,
    timeout_s: float = 20.0,
    *,
    ssl_context: ssl.SSLContext | None = None,
) -> list[str]:
    """Model ids from ``GET /models``; a clear :class:`RunError` when that fails."""
    client = make_client(endpoint, key, timeout_s, 1, ssl_context=ssl_context)
    try:
        raw = await client.models.with_raw_response.list()
        return parse_catalog(raw.http_response.content, secret=key)
    except openai.AuthenticationError:
        raise RunError(
            f"{endpoint.base_url} refused the key in ${endpoint.api_key_env} (HTTP 401)"
        ) from None
    except openai.APIConnectionError:
        raise RunError(f"cannot reach {endpoint.base_url} (connection failed)") from None
    except openai.APIStatusError as exc:
        raise RunError(
            f"{endpoint.base_url}/models answered HTTP {exc.status_code}: "
            + _server_text(exc.message, key)
        ) from None
    except Exception as exc:  # whatever the body was, it is not a catalog
        raise RunError(
            f"{endpoint.base_url}/models gave an unusable answer: {_server_text(exc, key)}"
        ) from None
    finally:
        await client.close()


# --------------------------------------------------------------------------- run


def join_options(o: RunOptions) -> RunOptions:
    """``o`` with every matrix option it does not set taken from the stored run ``o.run_id``.

    What it does set is kept: a different matrix is then refused when the run is bound.

    Raises:
        RunError: no run id, no such run, or its scenario library is not where it says.
    """
    if not o.run_id:
        raise RunError("--join needs --run-id: the run to take part in")
    url = database_url(o.db)
    with Session(get_engine(url)) as session:
        run = session.get(Run, o.run_id)
    if run is None:
        label = make_url(url).render_as_string(hide_password=True)
        raise RunError(
            f"no run {o.run_id!r} to join in the store {label}: start it without --join "
            "(or point --db at the store it is in)"
        )
    params = run.params
    given = o.given_matrix()
    take: dict[str, Any] = {}
    if "scenarios" not in given and params.get("scenarios_path"):
        take["scenarios"] = str(params["scenarios_path"])
        if not Path(take["scenarios"]).exists():
            raise RunError(
                f"run {o.run_id!r} was started with the scenario library "
                f"{take['scenarios']!r}, which is not here: point --scenarios at a copy of it"
            )
    if not {"only", "categories"} & given and params.get("scenarios"):
        take["only"] = sorted(params["scenarios"])
    if "models" not in given and params.get("models"):
        take["models"] = list(params["models"])
    if not {"arms", "memory_sweep"} & given and params.get("arms"):
        take["arms"], take["memory_sweep"] = list(params["arms"]), ()
    for name in ("runs", "temperature", "max_tokens", "seed"):
        if name not in given and name in params:
            take[name] = params[name]
    return o.changed(**take)


@dataclass
class RunOutcome:
    run_id: str
    matrix: Matrix
    progress: Progress
    # the run's status; running when other runners go on with it (cancelled: this
    # runner was, and they are still stopping)
    status: str
    # the run's other live runners when this one left
    others: list[str] = field(default_factory=list)


def pool_path(scenarios: str) -> Path:
    """The memory pool of a scenario library: its ``memory/pool.yaml``, else the shipped one."""
    root = Path(scenarios)
    own = (root if root.is_dir() else root.parent) / "memory" / "pool.yaml"
    return own if own.is_file() else DEFAULT_POOL


def _default_run_id() -> str:
    return new_run_id()


def layer_state_root() -> Path:
    """Where command layers keep their state: ``$CVB_LAYER_STATE``, else ``data/memory-layers``."""
    return Path(os.environ.get("CVB_LAYER_STATE") or Path("data") / "memory-layers")


class BenchmarkRun:
    """One invocation of ``cvb run``: plan, bind to the store, send, record."""

    sandbox_name: str | None = None
    run_id: str | None = None
    cells: CellFeed  # what the workers send, claimed from the run's queue (set by _execute)

    def __init__(
        self,
        options: RunOptions,
        *,
        on_progress: Callable[[Progress, bool], None] | None = None,
    ) -> None:
        self.o = options
        self.on_progress = on_progress
        if options.run_id is not None:
            try:
                check_run_id(options.run_id, "run_id")
            except RunIdError as exc:
                raise RunError(str(exc)) from None
        if options.join:
            options = self.o = join_options(options)
        try:
            library = load_library(options.scenarios)
        except ScenarioError as exc:
            raise RunError(f"scenarios do not load:\n{exc}") from None
        self.library = select_scenarios(library, options.categories, options.only)
        try:
            variants = parse_arms([*options.arms, *expand_sweep(list(options.memory_sweep))])
        except ArmError as exc:
            raise RunError(str(exc)) from None
        if not variants:
            raise RunError(f"no arms to run; the seed arms are {', '.join(ARMS)}")
        self.arms = arm_order(variants)  # one set of arms, one matrix, whatever the order given
        for name in self.arms:  # a live arm names a layer that must exist (not yet be reached)
            variant = parse_arm(name)
            if variant.live:
                from cvb_engine.arms.layered import layer_spec

                try:
                    layer_spec(variant.params)
                except ArmError as exc:
                    raise RunError(f"arm {name}: {exc}") from None
        self.arm_context = ArmContext(pool_path(options.scenarios))
        if (
            options.runs < 1
            or options.concurrency < 1
            or options.max_tokens < 1
            or options.max_response_chars < 1
        ):
            raise RunError(
                "--runs, --concurrency, --max-tokens and --max-response-chars must be at least 1"
            )
        try:
            self.endpoint = resolve(options.endpoint, options.base_url, options.api_key_env)
        except EndpointError as exc:
            raise RunError(str(exc)) from None

    @functools.cached_property
    def ssl_context(self) -> ssl.SSLContext:
        """One SSL context for every client of this run (building one costs ~0.1 s)."""
        return httpx2.create_ssl_context()

    def matrix(self, models: list[str]) -> Matrix:
        return Matrix(
            models=list(models),
            scenarios={
                sid: {
                    "version": item.scenario.version,
                    "sha256": item.sha256,
                    "category": item.scenario.category,
                }
                for sid, item in sorted(self.library.items())
            },
            arms=list(self.arms),
            runs=self.o.runs,
            temperature=self.o.temperature,
            max_tokens=self.o.max_tokens,
            seed=self.o.seed,
            memory_pool=self.pool_sha256(),
            superseded=self.superseded_sha256(),
        )

    def superseded_sha256(self) -> str | None:
        """A hash of every scenario's superseded notes when a variant shows them (``stale=``),
        else None: editing a note then changes the matrix of a run that showed it."""
        if not any(getattr(parse_arm(a).params, "stale", None) for a in self.arms):
            return None
        notes = {
            sid: {c.id: c.superseded for c in item.scenario.constraints}
            for sid, item in sorted(self.library.items())
        }
        return hashlib.sha256(json.dumps(notes, sort_keys=True).encode()).hexdigest()

    def pool_sha256(self) -> str | None:
        """The memory pool's sha256 when a variant draws on it (part of the matrix), else None.

        Raises:
            RunError: a variant needs the pool and it does not load.
        """
        if not any(parse_arm(a).uses_pool for a in self.arms):
            return None
        try:
            digest = self.arm_context.pool_sha256()
            for arm in self.arms:  # every variant builds, before any request is sent
                for item in self.library.values():
                    build_messages(item.scenario, arm, self.arm_context)
        except ArmError as exc:
            raise RunError(str(exc)) from None
        except (OSError, ValueError, ScenarioError) as exc:
            raise RunError(f"memory pool {self.arm_context.pool_path}: {exc}") from None
        return digest

    def dry_models(self) -> tuple[list[str], str]:
        if self.o.models:
            return list(self.o.models), "given"
        if self.endpoint.models:
            return self.endpoint.models, f"from preset {self.endpoint.name}"
        return list(MODEL_PREFERENCE[:DEFAULT_MODEL_COUNT]), "assumed (not probed in a dry run)"

    async def resolve_models(self, key: str) -> list[str]:
        wanted = list(self.o.models) or self.endpoint.models
        if wanted:
            try:
                catalog = await probe_catalog(self.endpoint, key, ssl_context=self.ssl_context)
            except RunError as exc:
                if "cannot reach" in str(exc) or "refused the key" in str(exc):
                    raise
                return wanted  # some servers have no /models; the calls will tell
            unknown = [m for m in wanted if m not in catalog]
            if unknown and catalog:
                raise RunError(
                    f"model(s) not offered by {self.endpoint.base_url}: {', '.join(unknown)}; "
                    f"its catalog has: {', '.join(catalog[:30])}"
                )
            return wanted
        catalog = await probe_catalog(self.endpoint, key, ssl_context=self.ssl_context)
        try:
            return choose_models(catalog)
        except EndpointError as exc:
            raise RunError(str(exc)) from None

    def bind(self, matrix: Matrix, session: Session) -> tuple[str, list[Cell], dict[Cell, int]]:
        """Create or resume the run; return its id, the cells still to send, and the
        record ids of cells that already have a record (errors to overwrite)."""
        run_id = self.o.run_id or _default_run_id()
        run = session.get(Run, run_id)
        params = redact_params(
            {
                **matrix.as_dict(),
                "endpoint": self.endpoint.name,
                "base_url": self.endpoint.base_url,
                "api_key_env": self.endpoint.api_key_env,
                "concurrency": self.o.concurrency,
                "timeout_s": self.o.timeout_s,
                "max_attempts": self.o.max_attempts,
                "max_response_chars": self.o.max_response_chars,
                "scenarios_path": str(self.o.scenarios),
                # provenance, not the matrix: the version of each arm kind that built messages
                "arm_versions": {v.kind.name: v.kind.version for v in map(parse_arm, matrix.arms)},
            }
        )
        if run is None:
            if self.o.retry_errors:
                raise RunError(f"no run {run_id!r} to retry")
            run = Run(
                id=run_id,
                prompt_version=PROMPT_VERSION,
                params_json=json.dumps(params),
                matrix_sha256=matrix.sha256,
                total_cells=matrix.size,
                note=self.o.note,
            )
        elif run.matrix_sha256 != matrix.sha256:
            old = {k: run.params.get(k) for k in matrix.as_dict()}
            changes = "; ".join(diff_matrices(old, matrix.as_dict()))
            raise RunError(
                f"run {run_id!r} exists with a different matrix ({changes}). "
                "Resume it with the same arguments, or choose a new --run-id."
            )
        else:
            self._check_runners(run, session)
        rows = session.execute(
            sa_select(
                col(Record.model),
                col(Record.scenario_id),
                col(Record.arm),
                col(Record.rep),
                col(Record.status),
                col(Record.id),
            ).where(col(Record.run_id) == run_id)
        ).all()
        status = {(m, s, a, r): st for m, s, a, r, st, _ in rows}
        stored = {(m, s, a, r): rid for m, s, a, r, _, rid in rows}
        if self.o.retry_errors:
            todo = [c for c in matrix.cells() if status.get(c) == RecordStatus.ERROR]
        else:
            # Cells without any record first, then the errors: a request that keeps
            # failing costs its own retries, never the cells behind it.
            todo = [c for c in matrix.cells() if c not in status]
            todo += [c for c in matrix.cells() if status.get(c) == RecordStatus.ERROR]
        run.params_json = json.dumps(sandbox.with_backend(run.params, self.sandbox_name))
        run.status = "running"
        run.pid = os.getpid()
        run.host = socket.gethostname()
        run.updated = utcnow()
        session.add(run)
        try:
            session.commit()
        except IntegrityError:
            # Another process created this run id a moment ago: bind to it instead.
            session.rollback()
            if self.o.run_id is None:
                raise
            return self.bind(matrix, session)
        return run_id, todo, stored

    @functools.cached_property
    def worker(self) -> str:
        """This runner's name on its records and claims: ``--worker``, else ``host:pid``."""
        return worker_name(self.o.worker)

    def _check_runners(self, run: Run, session: Session) -> None:
        """Before binding an existing run: this runner's name is free, and a cancel that
        its runners still carry out is not undone (a cancel nobody carries out any more
        is cleared: this runner resumes the run).

        Raises:
            RunError: a live runner of the run has this name, or the run is being cancelled.
        """
        states = runners(session, run.id)
        live = [s for s in states if s.live]
        if any(s.worker == self.worker for s in live):
            raise RunError(
                f"a runner named {self.worker!r} is already taking part in run {run.id!r}: "
                "give this one another --worker name"
            )
        if run.cancel_requested:
            if live:
                raise RunError(
                    f"run {run.id!r} is being cancelled: {len(live)} runner(s) still finish "
                    "their cells; resume it once they have stopped"
                )
            run.cancel_requested = None

    async def probe_tools(self, models: list[str], key: str) -> None:
        """With a memory-tool arm: one request per model, before the run, that must make
        a tool call; a model without tool support stops the run before it starts.

        Raises:
            RunError: a model refused or ignored the tool.
        """
        if not any(parse_arm(a).kind.name == "memory-tool" for a in self.arms):
            return
        from cvb_engine.memory_run import probe_tools

        client = make_client(
            self.endpoint,
            key,
            self.o.timeout_s,
            1,
            ssl_context=self.ssl_context,
            max_response_chars=self.o.max_response_chars,
        )
        try:
            for model in models:
                problem = await probe_tools(client, model, key)
                if problem:
                    raise RunError(
                        _server_text(
                            f"the memory-tool arm needs tool calls (the OpenAI tools API), and "
                            f"{self.endpoint.base_url} with model {model} does not make them: "
                            f"{problem}. Drop the memory-tool arm for this endpoint.",
                            key,
                        )
                    )
        finally:
            await client.close()

    def sandbox_backend(self) -> str | None:
        """The backend that will judge this run's executed checks, or None when no
        scenario of the run executes model code.

        Raises:
            RunError: model code would run and no sandbox works (no silent fallback).
        """
        from cvb_engine.scoring import executes_code  # scoring itself runs in the recorder

        if not any(executes_code(item.scenario) for item in self.library.values()):
            return None
        try:
            return sandbox.choose(self.o.sandbox)  # a weaker backend named: warned
        except sandbox.SandboxError as exc:
            raise RunError(str(exc)) from None

    async def execute(self) -> RunOutcome:
        # Before the first request: a run whose answers cannot be judged sends nothing.
        self.sandbox_name = self.sandbox_backend()
        from cvb_engine.agent.run import agent_arms_problem

        if problem := agent_arms_problem(self.arms):
            raise RunError(problem)
        key = read_key_or_fail(self.endpoint)
        # Started first: the recorder imports its modules while the catalog is probed.
        recorder = await Recorder.spawn(hide=[self.endpoint.api_key_env])
        try:
            return await self._execute(key, recorder)
        finally:
            await recorder.close()  # a recorder never told about a run just exits

    async def _execute(self, key: str, recorder: Recorder) -> RunOutcome:
        if self.o.lease_s <= 0:
            raise RunError("--lease must be more than 0 seconds")
        models = await self.resolve_models(key)
        await self.probe_tools(models, key)
        matrix = self.matrix(models)
        url = database_url(self.o.db)
        engine = get_engine(url)
        with Session(engine, expire_on_commit=False) as session:
            run_id, todo, stored = self.bind(matrix, session)
        self.run_id = run_id  # a live arm's layer keeps the run's memory under it
        progress = Progress(total=len(todo), skipped=matrix.size - len(todo))
        # The cells are claimed from the run's queue as the workers need them: any
        # number of runners can send one run (cvb_engine.claims).
        claims = RunClaims(
            engine, run_id, self.worker, lease_s=self.o.lease_s, errors_only=self.o.retry_errors
        )
        self.cells = CellFeed(claims, self.o.concurrency, lambda: (progress.done, progress.errors))
        status = "failed"  # unless the sending ends as it should
        joined = False
        others: list[str] = []
        try:
            try:
                claims.join(todo, api_key_env=self.endpoint.api_key_env or None)
                joined = True
            except ClaimError as exc:
                raise RunError(str(exc)) from None
            recorder.begin(
                Setup(
                    url=url,
                    run_id=run_id,
                    library=self.library,
                    stored=stored,
                    worker=self.worker,
                )
            )
            self.cells.start()
            await self._send(todo, matrix, key, recorder, progress)
            status = RunStatus.CANCELLED if self.cells.cancelled else RunStatus.FINISHED
        except asyncio.CancelledError:
            status = RunStatus.CANCELLED
        except ClaimError as exc:
            raise RunError(str(exc)) from None
        finally:
            # Everything sent is committed and scored before the run is marked done.
            await self.cells.close()
            await recorder.close()
            failed = recorder.failure is not None or status == RunStatus.FAILED
            if joined:
                mine = RunStatus.FAILED if failed else status
                others = claims.leave(mine, progress.done, progress.errors)
            claims.close()
            with Session(engine) as session:
                complete = _stored_cells(session, run_id) >= matrix.size
                run = session.get(Run, run_id)
                if run is not None:
                    if others and not complete:
                        # Other runners go on: the last one out writes the run's status,
                        # and the run's process is one of theirs now.
                        live = [s for s in runners(session, run_id) if s.live]
                        if live:
                            run.pid, run.host = live[0].pid, live[0].host
                        if status != RunStatus.CANCELLED:  # this runner's end, not the run's
                            status = RunStatus.RUNNING
                    else:
                        if failed:
                            status = RunStatus.FAILED
                        elif complete:
                            status = RunStatus.FINISHED
                        elif status == RunStatus.FINISHED:
                            status = RunStatus.INCOMPLETE  # a resume sends what is missing
                        run.status = status
                        run.pid = None
                    run.updated = utcnow()
                    session.add(run)
                    session.commit()
            if self.on_progress:
                self.on_progress(progress, True)
        if recorder.failure is not None:
            raise RunError(f"storing results failed: {recorder.failure}") from recorder.failure
        return RunOutcome(run_id, matrix, progress, status, others)

    async def _send(
        self, todo: list[Cell], matrix: Matrix, key: str, recorder: Recorder, progress: Progress
    ) -> None:
        # One client (one connection) per worker. A shared pool probes each of its
        # idle connections for every request it places, and a connection waiting
        # for its answer's commit sits idle: with 16 workers that probing cost
        # as much CPU as storing and committing did.
        n_workers = min(self.o.concurrency, len(todo))
        clients = [
            make_client(
                self.endpoint,
                key,
                self.o.timeout_s,
                1,
                ssl_context=self.ssl_context,
                max_response_chars=self.o.max_response_chars,
            )
            for _ in range(n_workers)
        ]
        messages_cache: dict[tuple[str, str], tuple[list[Message], str, str | None]] = {}
        pending = self.cells  # claimed as the workers go (cvb_engine.claims)

        def messages_for(sid: str, arm: str) -> tuple[list[Message], str, str | None]:
            key_ = (sid, arm)
            if key_ not in messages_cache:
                scenario = self.library[sid].scenario
                msgs = build_messages(scenario, arm, self.arm_context)
                # what the record keeps of the memory it was given (delivered notes)
                memory = parse_arm(arm).memory(scenario, self.arm_context)
                memory_json = None if memory is None else json.dumps(memory, sort_keys=True)
                messages_cache[key_] = (msgs, messages_sha256(msgs), memory_json)
            return messages_cache[key_]

        # The live arms' layers ingest the project's memory before any cell is sent.
        layers = await self._open_layers({arm for _, _, arm, _ in todo})
        from cvb_engine.agent.run import AgentRun, is_agent_arm  # an episode per agent cell

        agents = AgentRun(self.arm_context, self.sandbox_name)

        async def answer(client: openai.AsyncOpenAI, cell: Cell) -> Finished:
            model, sid, arm, rep = cell

            async def send(
                msgs: list[Message],
                tools: list[dict[str, Any]] | None = None,
                tool_choice: str | None = None,
            ) -> Finished:
                return await call_with_retries(
                    client,
                    model,
                    msgs,
                    temperature=matrix.temperature,
                    max_tokens=matrix.max_tokens,
                    # Each repetition gets its own seed: identical seeds would make
                    # repetitions at temperature > 0 copies of each other.
                    seed=None if matrix.seed is None else matrix.seed + rep,
                    max_attempts=self.o.max_attempts,
                    retry_after_cap_s=self.o.retry_after_cap_s,
                    secret=key,
                    max_chars=self.o.max_response_chars,
                    tools=tools,
                    tool_choice=tool_choice,
                )

            if is_agent_arm(arm):
                result = await agents.answer(self.library[sid].scenario, arm, model, send)
            elif arm in layers:
                from cvb_engine.memory_run import answer_memory, answer_tool

                layer = layers[arm]
                live = answer_tool if layer.variant.kind.name == "memory-tool" else answer_memory
                result = await live(layer, sid, send)
            else:
                msgs, digest, memory_json = messages_for(sid, arm)
                result = await send(msgs)
                result.messages_sha256 = digest
                result.memory_json = memory_json
            result.cell = cell
            result.tool_calls = ()
            return result

        async def worker(client: openai.AsyncOpenAI) -> None:
            async for cell in pending:
                result = await answer(client, cell)
                # The next request waits until this answer is committed: a kill -9
                # then loses at most one answer per worker, i.e. what is in flight.
                try:
                    await recorder.commit(result)
                except RecorderError as exc:
                    raise RunError(f"storing results failed: {exc}") from exc
                if result.status == RecordStatus.OK:
                    progress.ok += 1
                else:
                    progress.errors += 1
                    progress.last_error = result.error
                if self.on_progress:
                    self.on_progress(progress, False)

        # What exists now (modules, the scenario library, the store's metadata) lives as
        # long as the run: kept out of the collector's full passes, each of which would
        # otherwise walk those ~150,000 objects again (2-3% of the loop's time).
        gc.freeze()
        try:
            workers = [asyncio.create_task(worker(client)) for client in clients]
            try:
                await asyncio.gather(*workers)
            except BaseException:
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                raise
        finally:
            gc.unfreeze()
            for client in clients:
                await client.close()
            for layer in layers.values():
                await layer.close()

    async def _open_layers(self, arms: set[str]) -> dict[str, Any]:
        """A :class:`~cvb_engine.memory_run.LayerRun` per live arm among ``arms``, ingested.

        Raises:
            RunError: a layer failed to ingest the run's memory (nothing is sent).
        """
        live = [a for a in arm_order(arms) if parse_arm(a).live]
        if not live:
            return {}
        from cvb_engine.memory_run import LayerRun, LayerRunError

        scenarios = {sid: item.scenario for sid, item in sorted(self.library.items())}
        opened: dict[str, Any] = {}
        try:
            for arm in live:
                layer = LayerRun(
                    parse_arm(arm),
                    scenarios,
                    self.arm_context,
                    self.run_id or "",
                    layer_state_root(),
                )
                await layer.open()
                opened[arm] = layer
        except LayerRunError as exc:
            for layer in opened.values():
                await layer.close()
            raise RunError(f"memory layer: {exc}") from None
        return opened


def _stored_cells(session: Session, run_id: str) -> int:
    """Cells of the run with a record, ok or error (a cell is unique in the store)."""
    return int(
        session.execute(
            sa_select(func.count()).select_from(Record).where(col(Record.run_id) == run_id)
        ).scalar_one()
    )


def read_key_or_fail(endpoint: Endpoint) -> str:
    try:
        return read_key(endpoint.api_key_env)
    except EndpointError as exc:
        raise RunError(str(exc)) from None


# --------------------------------------------------------------------------- dry run


def print_dry_run(run: BenchmarkRun, out: TextIO = sys.stdout) -> int:
    # Model ids come from the endpoint's catalog: every line is shown as text.
    shown = _TerminalWriter(out)
    models, source = run.dry_models()
    matrix = run.matrix(models)
    by_cat: dict[str, int] = {}
    for meta in matrix.scenarios.values():
        by_cat[meta["category"]] = by_cat.get(meta["category"], 0) + 1
    shown.write(f"endpoint   {run.endpoint.name} {run.endpoint.base_url}\n")
    shown.write(f"key        {_key_line(run.endpoint.api_key_env)}\n")
    shown.write(f"models     {', '.join(models)} ({source})\n")
    shown.write(
        f"scenarios  {len(matrix.scenarios)} ("
        + ", ".join(f"{c} {n}" for c, n in sorted(by_cat.items()))
        + ")\n"
    )
    shown.write(f"arms       {', '.join(matrix.arms)}\n")
    for arm in matrix.arms:
        variant = parse_arm(arm)
        if variant.live:
            from cvb_engine.arms.layered import layer_spec

            spec = layer_spec(variant.params)
            what = "answers a tool" if variant.kind.name == "memory-tool" else "gives the context"
            key = f", key {_key_line(spec.key_env)}" if spec.key_env else ""
            shown.write(f"layer      {arm}: {spec.label} {what} (not reached in a dry run{key})\n")
        from cvb_engine.agent.run import describe_agent_arm

        if description := describe_agent_arm(arm):
            shown.write(f"agent      {arm}: {description}\n")
    try:
        backend = run.sandbox_backend()
        shown.write(f"sandbox    {backend or 'none needed: no scenario executes model code'}\n")
    except RunError as exc:
        shown.write(f"sandbox    MISSING: the run will refuse to start: {exc}\n")
    shown.write(f"runs       {matrix.runs}\n")
    shown.write(
        f"sampling   temperature {matrix.temperature}, max_tokens {matrix.max_tokens}, seed {matrix.seed}\n"
    )
    shown.write(
        f"matrix     {len(matrix.scenarios)} scenarios × {len(matrix.arms)} arms × {matrix.runs} runs × "
        f"{len(models)} models = {matrix.size} calls\n"
    )
    if run.o.run_id:
        engine = get_engine(run.o.db)
        with Session(engine) as session:
            existing = session.get(Run, run.o.run_id)
            if existing is not None:
                done = session.exec(
                    select(Record.id).where(
                        Record.run_id == run.o.run_id, col(Record.status) == RecordStatus.OK
                    )
                ).all()
                shown.write(
                    f"resume     run {run.o.run_id}: {len(done)} done, {matrix.size - len(done)} to send\n"
                )
    shown.write("dry run: nothing was sent\n")
    return 0


def _key_line(api_key_env: str) -> str:
    """The dry run's word on the key: the real run refuses without one."""
    if not api_key_env:
        return "none needed"
    if key_is_set(api_key_env):
        return f"from {api_key_env}"
    return f"{api_key_env} is not set: the real run will refuse; export it first"


class _TerminalWriter:
    """``write`` through :func:`~cvb_engine.safe_text.terminal_text`."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        self.stream.write(terminal_text(text))

    def line(self, text: str) -> None:
        self.write(text + "\n")


if __name__ == "__main__":
    # Run as a program this file is `cvb run`: it hands the process to the CLI's entry
    # point, which imports the runner (the runner never imports the CLI).
    import runpy

    sys.argv[1:1] = ["run"]
    runpy.run_module("cvb_engine.cli", run_name="__main__", alter_sys=True)


__all__ = ["BenchmarkRun", "Matrix", "Progress", "RunError", "RunOptions", "TerminalProgress"]
