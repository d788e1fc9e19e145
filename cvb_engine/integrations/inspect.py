"""CVB's scenarios as inspect_ai tasks, scored by CVB's own checks (extra ``[inspect]``).

One task per arm: each scenario of the library is a sample whose input is the arm's
messages (:func:`cvb_engine.prompts.build_messages`, byte for byte what ``cvb run``
sends), solved by a single ``generate()`` and scored by :func:`cvb_checks`, which
applies the scenario's checks to the reply exactly as ``cvb score`` does
(:func:`cvb_engine.scoring.score_response`). So inspect runs CVB against any provider
it supports::

    inspect eval cvb_engine/cvb -T arm=incentivized --model openai/gpt-4.1 --epochs 3

(by name once cvb-studio is installed: the ``inspect_ai`` entry point in ``pyproject.toml``
names this module; from an editable checkout, ``cvb_engine/integrations/inspect.py@cvb``)
or, from Python, ``inspect_ai.eval(cvb_tasks(), model=...)``. The sample's ``strict``
score is ``C`` when every constraint is honored; its metadata holds each constraint's
verdict and check reasons. A scenario whose checks execute code needs CVB's sandbox on
the machine that scores (``cvb doctor``).

Arms built by a memory layer at run time (``memory``, ``memory-tool``) are not tasks
here: their context needs CVB's runner.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, GenerateConfig
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer, stderr
from inspect_ai.solver import TaskState, generate

from cvb_engine.arms import ArmContext, build_messages, parse_arm
from cvb_engine.library import scenarios_root
from cvb_engine.prompts import PROMPT_VERSION, messages_sha256
from cvb_engine.scenario import ARMS, CVB_CATEGORIES, LoadedScenario, load_library
from cvb_engine.scoring import SCORING_VERSION, executes_code, score_response

__all__ = ["cvb", "cvb_checks", "cvb_dataset", "cvb_tasks"]


def _library(
    scenarios: str | Path | None, only: Sequence[str] | None, categories: Sequence[str] | None
) -> dict[str, LoadedScenario]:
    library = load_library(scenarios_root(scenarios))
    if only:
        missing = sorted(set(only) - set(library))
        if missing:
            raise ValueError(f"no scenario {', '.join(missing)} in {scenarios_root(scenarios)}")
        return {sid: library[sid] for sid in only}
    wanted = set(categories or CVB_CATEGORIES)
    return {sid: item for sid, item in sorted(library.items()) if item.scenario.category in wanted}


def cvb_dataset(
    arm: str,
    library: dict[str, LoadedScenario],
    pool: Path | None = None,
) -> MemoryDataset:
    """The samples of ``arm``: one per scenario, its input the arm's messages."""
    if parse_arm(arm).live:
        raise ValueError(f"arm {arm!r} takes its context from a memory layer: run it with cvb run")
    context = ArmContext(pool) if pool is not None else ArmContext()
    samples = []
    for sid, item in library.items():
        messages = build_messages(item.scenario, arm, context)
        chat: list[ChatMessage] = [
            ChatMessageSystem(content=m["content"])
            if m["role"] == "system"
            else ChatMessageUser(content=m["content"])
            for m in messages
        ]
        samples.append(
            Sample(
                id=sid,
                input=chat,
                target=[c.id for c in item.scenario.constraints],
                metadata={
                    "scenario_id": sid,
                    "scenario_version": item.scenario.version,
                    "scenario_sha256": item.sha256,
                    "category": item.scenario.category,
                    "arm": arm,
                    "prompt_version": PROMPT_VERSION,
                    "messages_sha256": messages_sha256(messages),
                },
            )
        )
    return MemoryDataset(samples, name=f"cvb-{arm}")


@scorer(metrics=[accuracy(), stderr()])
def cvb_checks(scenarios: str | None = None) -> Any:
    """CVB's checks on the reply: ``C`` when every constraint is honored (strict), with
    each constraint's verdict and check reasons in the explanation and metadata."""
    library = load_library(scenarios_root(scenarios))
    if any(executes_code(item.scenario) for item in library.values()):
        from cvb_engine import sandbox

        sandbox.choose(None)  # refuse before the first reply when no sandbox works here

    async def score(state: TaskState, target: Target) -> Score:
        sid = str(state.metadata.get("scenario_id"))
        item = library.get(sid)
        if item is None:
            return Score(value=INCORRECT, explanation=f"scenario {sid} is not in the library")
        stop = state.output.stop_reason if state.output else None
        finish = "length" if stop == "max_tokens" else stop
        # checks may execute the code in CVB's sandbox (a child process): off the loop
        scored = await asyncio.to_thread(
            score_response, item.scenario, state.output.completion, finish
        )
        failing = [c.constraint_id for c in scored.constraints if not c.honored]
        lines = [
            f"{c.constraint_id}: {'honored' if c.honored else 'NOT honored'}"
            + "".join(
                f"\n  {v.kind} {v.check_id}: {'passed' if v.result.passed else 'FAILED'}: "
                f"{v.result.reason}"
                for v in c.checks
            )
            for c in scored.constraints
        ]
        return Score(
            value=CORRECT if scored.strict else INCORRECT,
            answer=scored.code,
            explanation="\n".join(lines)
            + ("" if not failing else f"\nnot honored: {', '.join(failing)}"),
            metadata={
                "outcome": scored.outcome,
                "constraints": scored.constraints_dict(),
                "stated_passed": scored.stated_passed,
                "scoring_version": SCORING_VERSION,
            },
        )

    return score


@task
def cvb(
    arm: str = "incentivized",
    scenarios: str | None = None,
    only: str | None = None,
    categories: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 1024,
) -> Task:
    """The CVB scenarios under one arm (``-T arm=cold|mandated|incentivized|<variant>``).

    Args:
        arm: the arm or variant whose messages the model gets.
        scenarios: a scenario folder (default: ``$CVB_SCENARIOS``, else the shipped library).
        only: comma-separated scenario ids instead of the whole CVB set.
        categories: comma-separated categories (default: the seven CVB categories).
        temperature: sampling temperature (CVB's default 0).
        max_tokens: completion tokens per reply (CVB's default 1024).
    """
    ids = [s for s in (only or "").split(",") if s]
    cats = [c for c in (categories or "").split(",") if c]
    library = _library(scenarios, ids, cats)
    root = scenarios_root(scenarios)
    own_pool = root / "memory" / "pool.yaml"
    return Task(
        dataset=cvb_dataset(arm, library, own_pool if own_pool.is_file() else None),
        solver=generate(),
        scorer=cvb_checks(str(root)),
        config=GenerateConfig(temperature=temperature, max_tokens=max_tokens),
        name=f"cvb_{arm}",
        version=PROMPT_VERSION,
        metadata={"arm": arm, "prompt_version": PROMPT_VERSION, "scoring_version": SCORING_VERSION},
    )


def cvb_tasks(
    arms: Sequence[str] = ARMS,
    *,
    scenarios: str | None = None,
    only: Sequence[str] = (),
    categories: Sequence[str] = (),
    temperature: float = 0.0,
    max_tokens: int = 1024,
) -> list[Task]:
    """One :func:`cvb` task per arm (default: cold, mandated, incentivized)."""
    return [
        cvb(
            arm=arm,
            scenarios=scenarios,
            only=",".join(only) or None,
            categories=",".join(categories) or None,
            temperature=temperature,
            max_tokens=max_tokens,
        )
        for arm in arms
    ]
