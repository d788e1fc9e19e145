"""What a launch sends: the ``cvb run`` command line of a :class:`RunOptions`, and its dry run.

The options hold no secret: the key is named by its environment variable
(``--api-key-env NAME``), never given.
"""

from __future__ import annotations

import shlex
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cvb_engine.arms import (
    ArmContext,
    ArmError,
    arm_order,
    build_messages,
    expand_sweep,
    parse_arms,
)
from cvb_engine.cost import RunEstimate, estimate_run
from cvb_engine.endpoints import DEFAULT_MODEL_COUNT, MODEL_PREFERENCE, EndpointError, load_presets
from cvb_engine.run.errors import RunError
from cvb_engine.run.plan import pool_path, select_scenarios
from cvb_engine.run_options import DEFAULT_OPTIONS, RunOptions, flag
from cvb_engine.scenario import LoadedScenario, ScenarioError

# --------------------------------------------------------------------------- what to run


def _num(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


#: Options written only when they differ from their default, after the ones always written.
#: Not ``db``: a database URL may hold a password, so a launch names its store in the
#: environment (``CVB_DATABASE_URL``), never on the command line it shows.
_WHEN_SET = (
    "memory_sweep",
    "retry_after_cap_s",
    "max_response_chars",
    "sandbox",
    "worker",
    "lease_s",
)


def run_arguments(spec: RunOptions) -> list[str]:
    """The arguments after ``cvb run`` that parse back into ``spec`` (a key variable's
    *name* only): the inverse of :func:`cvb_engine.cli.run.options_from_args`."""
    args = ["--scenarios", spec.scenarios]
    if spec.endpoint and spec.endpoint in _preset_names():
        args += ["--endpoint", spec.endpoint]
    if spec.base_url is not None:
        args += ["--base-url", spec.base_url]
    if spec.api_key_env is not None:
        args += ["--api-key-env", spec.api_key_env]
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
    args += ["--max-attempts", str(spec.max_attempts)]
    if spec.run_id is not None:
        args += ["--run-id", spec.run_id]
    if spec.note:
        args += ["--note", spec.note]
    if spec.retry_errors:
        args.append("--retry-errors")
    if spec.join:
        args.append("--join")
    for name in _WHEN_SET:
        value = getattr(spec, name)
        if value == getattr(DEFAULT_OPTIONS, name):
            continue
        if name == "memory_sweep":
            args += [flag(name), *value]
        else:
            args += [flag(name), _num(value) if isinstance(value, float) else str(value)]
    return args


def command_line(spec: RunOptions) -> list[str]:
    """What is executed: this interpreter's ``cvb run`` (``python -m cvb_engine.runner``)."""
    return [sys.executable, "-m", "cvb_engine.runner", *run_arguments(spec)]


def shell_command(spec: RunOptions) -> str:
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
    loads: Sequence[int],
    positions: Sequence[str],
    channels: Sequence[str],
    *,
    stale: Sequence[str] = (),
    budgets: Sequence[int | None] = (),
    turns: Sequence[int] = (),
) -> list[str]:
    """The incentivized variants of a memory sweep (what ``--memory-sweep`` expands to);
    none when no load, stale setting, budget or turns count is chosen. An empty list keeps
    that parameter's default. ``stale`` takes ``none``, ``with``, ``only``; a budget of None
    is no budget. A budget applies to the channels that deliver a block or a file, turns to
    the history channel: each channel gets the axes that apply to it."""
    if not (loads or stale or budgets or turns):
        return []
    # without a budget or turns every channel takes the same axes: one sweep, as before
    groups: list[list[str]] = [list(channels)]
    if budgets or turns:
        groups = [[c for c in channels if c != "history"], ["history"]]
        if not channels:
            # turns alone sweep the history channel; a budget, the default channel
            groups = ([[]] if budgets else []) + ([["history"]] if turns else [])
        elif "history" not in channels:
            groups = groups[:1]
        elif not groups[0]:
            groups = groups[1:]
    names: list[str] = []
    for group in groups:
        specs = [f"load={','.join(str(n) for n in loads)}"] if loads else []
        if positions:
            specs.append(f"position={','.join(positions)}")
        if group:
            specs.append(f"channel={','.join(group)}")
        if stale:
            specs.append(f"stale={','.join(stale)}")
        if budgets and group != ["history"]:
            specs.append(f"budget={','.join('none' if b is None else str(b) for b in budgets)}")
        if turns and group == ["history"]:
            specs.append(f"turns={','.join(str(t) for t in turns)}")
        names += expand_sweep(specs) if specs else ["incentivized"]
    return list(dict.fromkeys(names))


def preview_launch(spec: RunOptions, library: dict[str, LoadedScenario]) -> Preview:
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


def estimate_launch(spec: RunOptions, library: dict[str, LoadedScenario]) -> RunEstimate | None:
    """The tokens and cost ``spec`` would send (:func:`cvb_engine.cost.estimate_run`: what
    ``cvb run --dry-run`` prints), for the same scenarios, arms and models as
    :func:`preview_launch`; None when those do not make a matrix yet."""
    try:
        chosen = select_scenarios(library, list(spec.categories), list(spec.only))
        arms = arm_order(parse_arms(spec.arms))
        models = list(spec.models) or list(MODEL_PREFERENCE[:DEFAULT_MODEL_COUNT])
        if not chosen or not arms:
            return None
        return estimate_run(
            [item.scenario for _, item in sorted(chosen.items())],
            arms,
            ArmContext(pool_path(spec.scenarios)),
            runs=spec.runs,
            models=models,
            max_tokens=spec.max_tokens,
            endpoint=spec.endpoint,
            price_in=spec.price_in,
            price_out=spec.price_out,
        )
    except (RunError, ArmError, OSError, ScenarioError):
        return None  # the preview says what is wrong
