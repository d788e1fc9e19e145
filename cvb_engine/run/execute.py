"""Executing a run: the workers that claim cells, send them and hand answers to the recorder.

:class:`BenchmarkRun` is one ``cvb run``: it plans (:mod:`cvb_engine.run.plan`),
binds to the store (:mod:`cvb_engine.run.binding`), sends through
:mod:`cvb_engine.run.client`, commits through the recorder process
(:mod:`cvb_engine.recorder`) and decides the run's end with
:func:`cvb_engine.run.status.final_status`.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
import json
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import openai
from sqlmodel import Session

from cvb_engine import sandbox
from cvb_engine.arms import (
    ArmContext,
    ArmError,
    arm_order,
    build_messages,
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
    read_key,
    resolve,
)
from cvb_engine.kinds import RecordStatus, RunStatus
from cvb_engine.prompts import Message, messages_sha256
from cvb_engine.run.binding import Bound, bind, join_options, stored_cells
from cvb_engine.run.client import call_with_retries, make_client, probe_catalog, server_text
from cvb_engine.run.errors import RunError
from cvb_engine.run.plan import Cell, Matrix, pool_path, select_scenarios
from cvb_engine.run.progress import Progress
from cvb_engine.run.recording import Finished, Recorder, RecorderError, Setup
from cvb_engine.run.status import FinalStatus, final_status, runner_status
from cvb_engine.run.validate import option_problems
from cvb_engine.run_options import RunOptions
from cvb_engine.scenario import ARMS, ScenarioError, executes_code, load_library
from cvb_engine.store import Run, database_url, get_engine, utcnow


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


def layer_state_root() -> Path:
    """Where command layers keep their state: ``$CVB_LAYER_STATE``, else ``data/memory-layers``."""
    return Path(os.environ.get("CVB_LAYER_STATE") or Path("data") / "memory-layers")


def read_key_or_fail(endpoint: Endpoint) -> str:
    try:
        return read_key(endpoint.api_key_env)
    except EndpointError as exc:
        raise RunError(str(exc)) from None


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
        problems = option_problems(options)
        if problems:
            raise RunError("; ".join(problems))
        if options.join:
            options = self.o = join_options(options)
        try:
            library = load_library(options.scenarios, only=options.only)
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

    def bind(self, matrix: Matrix, session: Session) -> Bound:
        """Create or resume the run in the store (:func:`cvb_engine.run.binding.bind`)."""
        return bind(
            session,
            matrix,
            self.o,
            self.endpoint,
            worker=self.worker,
            sandbox_name=self.sandbox_name,
        )

    @functools.cached_property
    def worker(self) -> str:
        """This runner's name on its records and claims: ``--worker``, else ``host:pid``."""
        return worker_name(self.o.worker)

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
                        server_text(
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
        if not any(executes_code(item.scenario) for item in self.library.values()):
            return None
        try:
            return sandbox.choose(self.o.sandbox)  # a weaker backend named: warned
        except sandbox.SandboxError as exc:
            raise RunError(str(exc)) from None

    async def execute(self, recorder: Recorder | None = None) -> RunOutcome:
        """Send the run and wait until every answer is committed and scored.

        Args:
            recorder: A recorder process already started (``cvb run`` starts one before
                it imports this module); by default one is started here. Either way it
                is stopped when the run ends.
        """
        try:
            if recorder is None:
                # Started first: it imports its modules while this process checks the
                # run, probes the catalog and binds the run (stopped if any of that fails).
                recorder = await Recorder.spawn(hide=[self.endpoint.api_key_env])
            # Before the first request: a run whose answers cannot be judged sends nothing.
            self.sandbox_name = self.sandbox_backend()
            from cvb_engine.agent.run import agent_arms_problem  # agent@command needs bwrap

            if problem := agent_arms_problem(self.arms):
                raise RunError(problem)
            key = read_key_or_fail(self.endpoint)
            return await self._execute(key, recorder)
        finally:
            if recorder is not None:
                await recorder.close()  # a recorder never told about a run is stopped

    async def _execute(self, key: str, recorder: Recorder) -> RunOutcome:
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
        sent = RunStatus.FAILED  # unless the sending ends as it should
        final: FinalStatus | None = None
        joined = False
        others: list[str] = []
        try:
            try:
                claims.join(todo, api_key_env=self.endpoint.api_key_env or None)
                joined = True
            except ClaimError as exc:
                raise RunError(str(exc)) from None
            try:
                recorder.begin(
                    Setup(
                        url=url,
                        run_id=run_id,
                        library=self.library,
                        stored=stored,
                        worker=self.worker,
                    )
                )
            except RecorderError as exc:
                raise RunError(f"storing results failed: {exc}") from exc
            self.cells.start()
            await self._send(todo, matrix, key, recorder, progress)
            sent = RunStatus.CANCELLED if self.cells.cancelled else RunStatus.FINISHED
        except asyncio.CancelledError:
            sent = RunStatus.CANCELLED
        except ClaimError as exc:
            raise RunError(str(exc)) from None
        finally:
            # Everything sent is committed and scored before the run is marked done.
            await self.cells.close()
            await recorder.close()
            recorder_failed = recorder.failure is not None
            if joined:
                mine = runner_status(sent, recorder_failed=recorder_failed)
                others = claims.leave(mine, progress.done, progress.errors)
            claims.close()
            with Session(engine) as session:
                final = final_status(
                    sent,
                    recorder_failed=recorder_failed,
                    complete=stored_cells(session, run_id) >= matrix.size,
                    others_live=bool(others),
                )
                run = session.get(Run, run_id)
                if run is not None:
                    if final.ends_run:
                        run.status = final.status
                        run.pid = None
                    else:
                        # Other runners go on: the last one out writes the run's status,
                        # and the run's process is one of theirs now.
                        live = [s for s in runners(session, run_id) if s.live]
                        if live:
                            run.pid, run.host = live[0].pid, live[0].host
                    run.updated = utcnow()
                    session.add(run)
                    session.commit()
            if self.on_progress:
                self.on_progress(progress, True)
        if recorder.failure is not None:
            raise RunError(f"storing results failed: {recorder.failure}") from recorder.failure
        assert final is not None  # set in the finally block, which raised nothing
        return RunOutcome(run_id, matrix, progress, final.status, others)

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

            # ---- arm dispatch: an arm whose messages are not fixed in advance answers
            # through its own loop (memory layers: cvb_engine.memory_run; agent episodes:
            # cvb_engine.agent.run); every other arm sends its prepared messages once. A new
            # live arm kind goes here.
            if is_agent_arm(arm):
                result = await agents.answer(self.library[sid].scenario, arm, model, send)
            elif arm in layers:
                from cvb_engine.memory_run import answer_memory, answer_tool

                layer = layers[arm]
                live = answer_tool if layer.variant.kind.name == "memory-tool" else answer_memory
                result = await live(layer, sid, send)
            # ---- end of arm dispatch
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


__all__ = ["BenchmarkRun", "RunOutcome", "layer_state_root", "read_key_or_fail"]
