"""``cvb run --dry-run``: what a run would send, and nothing sent."""

from __future__ import annotations

import sys
from typing import TextIO

from sqlmodel import Session, col, select

from cvb_engine.arms import parse_arm
from cvb_engine.cost import estimate_run, format_cost
from cvb_engine.endpoints import key_is_set
from cvb_engine.kinds import RecordStatus
from cvb_engine.run.errors import RunError
from cvb_engine.run.execute import BenchmarkRun
from cvb_engine.run.plan import Matrix
from cvb_engine.safe_text import terminal_text
from cvb_engine.store import Record, Run, get_engine


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
    for line in _estimate_lines(run, matrix, models):
        shown.write(line + "\n")
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


def _estimate_lines(run: BenchmarkRun, matrix: Matrix, models: list[str]) -> list[str]:
    """Token estimate per arm and cost bound per model (:func:`cvb_engine.cost.estimate_run`)."""
    estimate = estimate_run(
        [item.scenario for item in run.library.values()],
        matrix.arms,
        run.arm_context,
        runs=matrix.runs,
        models=models,
        max_tokens=matrix.max_tokens,
        endpoint=run.endpoint.name,
        price_in=run.o.price_in,
        price_out=run.o.price_out,
    )
    lines = []
    for a in estimate.arms:
        e = a.tokens
        if e is None:
            lines.append(f"tokens     {a.arm}: unknown ({a.why})")
        elif a.bounded:
            lines.append(
                f"tokens     {a.arm}: ~{e.prompt_tokens:,} prompt (characters / 4), at most "
                f"{e.completion_tokens_max:,} completion ({e.calls} calls)"
            )
        else:
            lines.append(
                f"tokens     {a.arm}: ~{e.prompt_tokens:,} prompt in the first requests of "
                f"{e.calls} episodes, up to {a.requests_max:,} requests in all ({a.why})"
            )
    left_out = [a.arm for a in estimate.arms if not a.bounded]
    suffix = f"; not included: {', '.join(left_out)}" if left_out else ""
    for model in models:
        price = estimate.prices[model]
        if price is None:
            lines.append(f"cost       {model}: unknown (no price; --price-in/--price-out)")
            continue
        lines.append(
            f"cost       {model}: at most {format_cost(estimate.cost_max(model))} "
            f"(prompts ~{format_cost(estimate.prompts_cost(model))}; "
            f"{price.input_per_m:g} / {price.output_per_m:g} USD per million tokens, "
            f"{price.source}{suffix})"
        )
    return lines


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


__all__ = ["print_dry_run"]
