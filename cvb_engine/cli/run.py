"""``cvb run``: the benchmark matrix against an OpenAI-compatible endpoint
(:class:`cvb_engine.run.BenchmarkRun` runs it; ``--dry-run`` prints it).

``python -m cvb_engine.runner`` is this command too.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import threading
from typing import TYPE_CHECKING, Any

from cvb_engine.cli import CliError, command
from cvb_engine.cli.common import add_sandbox_argument
from cvb_engine.endpoints import LOCAL_CONCURRENCY, LOCAL_TIMEOUT_S, EndpointError, resolve
from cvb_engine.kinds import RunStatus
from cvb_engine.run.recording import Recorder
from cvb_engine.run_ids import run_id_arg
from cvb_engine.run_options import DEFAULT_OPTIONS as D
from cvb_engine.run_options import RunOptions, flag
from cvb_engine.safe_text import terminal_text

if TYPE_CHECKING:
    from cvb_engine.run.execute import BenchmarkRun, RunOutcome


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


class _Given(argparse.Action):
    """Stores an option's value and notes that it was given: ``--join`` takes the matrix
    options that were not given from the stored run."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.given = frozenset({*getattr(namespace, "given", ()), self.dest})


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenarios", action=_Given, default=D.scenarios, help="scenario directory or file"
    )
    p.add_argument(
        "--models",
        action=_Given,
        type=_csv,
        help="comma-separated model ids (default: probe the catalog)",
    )
    p.add_argument(
        "--arms",
        action=_Given,
        type=_csv,
        default=list(D.arms),
        help="comma-separated arms: seed arms, variants such as "
        "incentivized@load=50,channel=system, memory layers (memory, "
        "memory@command=./layer.py, memory-tool)",
    )
    p.add_argument(
        "--memory-sweep",
        action=_Given,
        nargs="+",
        metavar="KEY=V1,V2",
        help="add every incentivized variant of these values, e.g. --memory-sweep "
        "load=0,10,50,200 position=start,end channel=inline,system; stale=none,with,only "
        "(the superseded decisions beside or instead of the constraints), budget=none,2000,8000 "
        "(bytes of memory delivered; not for channel=history), turns=0,2,8 (history channel); "
        "arm=incentivized,memory,agent sweeps those kinds (a memory layer's or the agent's curve beside the "
        "prompt's)",
    )
    p.add_argument("--runs", action=_Given, type=int, default=D.runs, help="repetitions per cell")
    p.add_argument("--categories", action=_Given, type=_csv, help="only these categories")
    p.add_argument("--only", action=_Given, type=_csv, help="only these scenario ids")
    p.add_argument("--endpoint", help="a named endpoint preset (groq, openai, local, or your own)")
    p.add_argument("--base-url", help="OpenAI-compatible base URL")
    p.add_argument("--api-key-env", help="NAME of the environment variable holding the key")
    p.add_argument(
        "--temperature",
        action=_Given,
        type=float,
        default=D.temperature,
        help="sampling temperature",
    )
    p.add_argument(
        "--max-tokens",
        action=_Given,
        type=int,
        default=D.max_tokens,
        help="completion tokens per call",
    )
    p.add_argument(
        "--seed",
        action=_Given,
        type=int,
        default=D.seed,
        help="base seed (+rep); -1 sends none",
    )
    p.add_argument(
        "--price-in",
        type=float,
        metavar="USD",
        help="USD per million prompt tokens, for every model (with --price-out; default: "
        "the preset's or data/endpoints.json's prices, else unknown)",
    )
    p.add_argument(
        "--price-out", type=float, metavar="USD", help="USD per million completion tokens"
    )
    p.add_argument(
        "--concurrency",
        type=int,
        help=f"requests in flight (default: {D.concurrency}; {LOCAL_CONCURRENCY} with --endpoint local)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        help=f"seconds per request (default: {D.timeout_s:g}; {LOCAL_TIMEOUT_S:g} with --endpoint local)",
    )
    p.add_argument(
        "--max-attempts",
        type=int,
        default=D.max_attempts,
        help="tries per cell before it is stored as an error",
    )
    p.add_argument(
        "--retry-after-cap",
        type=float,
        default=D.retry_after_cap_s,
        help="longest Retry-After wait honoured, in seconds",
    )
    p.add_argument(
        "--max-response-chars",
        type=int,
        default=D.max_response_chars,
        metavar="N",
        help="store replies longer than N characters cut at N, flagged as cut",
    )
    p.add_argument(
        "--run-id", type=run_id_arg, help="name the run; the same id resumes it (1–80 characters)"
    )
    p.add_argument(
        "--retry-errors", action="store_true", help="send only the cells stored as errors"
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the matrix and the number of calls; send nothing",
    )
    p.add_argument("--json", metavar="F", help="write the results file to F when done")
    p.add_argument("--db", help="database URL (default: $CVB_DATABASE_URL or data/cvb.db)")
    p.add_argument("--note", help="a free-text note stored with the run")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument(
        "--join",
        action="store_true",
        help="take part in the existing run --run-id (its matrix comes from the store; "
        "this runner's endpoint and key are its own)",
    )
    p.add_argument(
        "--worker",
        metavar="NAME",
        help="this runner's name on its records and claims (default: host:pid)",
    )
    # How long a claim on a cell lasts unless renewed: short in tests of dying runners.
    p.add_argument("--lease", type=float, default=D.lease_s, help=argparse.SUPPRESS)
    add_sandbox_argument(p)
    p.set_defaults(given=frozenset())


def options_from_args(args: argparse.Namespace) -> RunOptions:
    """The parsed flags as :class:`RunOptions`: each field from its flag (:func:`flag`)."""
    from cvb_engine.arms import join_arm_items

    values = {
        name: getattr(args, flag(name)[2:].replace("-", "_"))
        for name in RunOptions.model_fields
        if name != "given"
    }
    # The bundled local server answers one request at a time on the CPU: eight queued requests
    # with a minute each timed out on a first run, so its preset sends one and waits longer.
    local = values["endpoint"] == "local"
    if values["concurrency"] is None:
        values["concurrency"] = LOCAL_CONCURRENCY if local else D.concurrency
    if values["timeout_s"] is None:
        values["timeout_s"] = LOCAL_TIMEOUT_S if local else D.timeout_s
    if values["seed"] is not None and values["seed"] < 0:
        values["seed"] = None  # --seed -1 sends none
    values["arms"] = join_arm_items(
        values["arms"]
    )  # a variant's parameters are comma-separated too
    return RunOptions(**values, given=frozenset(getattr(args, "given", ())))


@command("run", add_run_arguments)
def cmd_run(args: argparse.Namespace) -> int:
    """Run the benchmark matrix against an OpenAI-compatible endpoint."""
    if args.dry_run:
        from cvb_engine.run.dry_run import print_dry_run

        return print_dry_run(_bench(args))
    outcome = _run_with_signals(args)
    p = outcome.progress

    def say(line: str) -> None:
        print(terminal_text(line))  # the lines quote ids and paths: shown as text

    if p.total == 0 and outcome.status == RunStatus.FINISHED:
        say(f"nothing to send: run {outcome.run_id} is complete ({p.skipped} cells stored)")
    say(
        f"run {outcome.run_id}: {outcome.status}; sent {p.done} ({p.ok} ok, {p.errors} errors), "
        f"{p.skipped} already done, matrix {outcome.matrix.size}"
    )
    by_others = outcome.matrix.size - p.skipped - p.done
    if outcome.status == RunStatus.FINISHED and by_others > 0:
        say(f"  other runners of the run sent the other {by_others} cells")
    if outcome.others and outcome.status in (RunStatus.RUNNING, RunStatus.CANCELLED):
        say(
            f"  {len(outcome.others)} other runner(s) still work on it: "
            + ", ".join(outcome.others)
        )
    if outcome.status == RunStatus.INCOMPLETE:
        say(
            f"  some cells have no record; send them with: cvb run --run-id {outcome.run_id} "
            "(same arguments)"
        )
    if p.errors:
        say(
            f"  retry the errors with: cvb run --retry-errors --run-id {outcome.run_id} (same arguments)"
        )
    if args.json:
        from sqlmodel import Session

        from cvb_engine.results import export_results, write_json_atomic
        from cvb_engine.store import get_engine

        engine = get_engine(args.db)
        with Session(engine) as session:
            write_json_atomic(args.json, export_results(session, outcome.run_id))
        say(f"wrote {args.json}")
    say(f"report: cvb report {outcome.run_id}")
    return 0 if outcome.status == RunStatus.FINISHED else 1


def _bench(args: argparse.Namespace) -> BenchmarkRun:
    """The run the flags describe: options checked, scenarios loaded (nothing sent yet)."""
    from cvb_engine.run.execute import BenchmarkRun
    from cvb_engine.run.progress import TerminalProgress

    return BenchmarkRun(
        options_from_args(args), on_progress=None if args.quiet else TerminalProgress()
    )


async def _early_recorder(args: argparse.Namespace) -> Recorder | None:
    """The recorder process, started before anything heavy is imported: it imports its
    store and scoring modules on another core while this process imports its HTTP client,
    loads the scenarios and probes the endpoint. None when the endpoint flags do not
    resolve (the run then says why, and starts nothing)."""
    try:
        key_env = resolve(args.endpoint, args.base_url, args.api_key_env).api_key_env
    except EndpointError:
        return None
    return await Recorder.spawn(hide=[key_env] if key_env else [])


def _run_with_signals(args: argparse.Namespace) -> RunOutcome:
    """Run on a fresh event loop; SIGTERM (the studio's cancel) stops it cleanly."""

    async def main() -> RunOutcome:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        if task is not None and threading.current_thread() is threading.main_thread():
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        recorder = await _early_recorder(args)
        try:
            return await _bench(args).execute(recorder=recorder)
        finally:
            if recorder is not None:
                await recorder.close()  # a recorder never told about a run is stopped

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        raise CliError("run cancelled; resume it with the same --run-id") from None
