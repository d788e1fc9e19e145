"""The ``incentivized`` arm: the constraints as project memory, never as orders (README: Memory arms).

With its defaults it is the seed's arm, byte for byte (PROMPT_VERSION 2.0):
the constraints as "Decision" notes in the user turn, before the task. Its
parameters turn it into the memory arms no other tool measures:

``load``
    N distractor notes from the project-memory pool around the constraints
    (``scenarios/memory/pool.yaml``). Distractors are ordered per scenario by a
    hash of the scenario id and the entry id, so the 10 of ``load=10`` are the
    first 10 of ``load=50``: a curve over loads adds notes, it never swaps them.
``position``
    Where the constraints sit among the distractors: ``start``, ``middle``,
    ``end``, or ``spread`` evenly through the list.
``channel``
    How the same memory text arrives: ``inline`` (the user turn, as the seed
    did), ``system`` (the system message, as agent tools load project
    instructions), ``file`` (the user turn presents it as the repository's
    ``AGENTS.md``), ``history`` (stated in an earlier turn, followed by
    ``turns`` unrelated scripted exchanges before the task).

``stale``
    ``with``: each constraint's superseded note (the decision it replaced, dated)
    just before its current note, dated later; ``only``: the superseded note
    instead of the current one (:mod:`cvb_engine.memory_notes`).
``budget``
    Bytes of the memory block (inline, system) or file (``AGENTS.md``) that
    reach the model: cut at a line boundary, with a marker line
    (:func:`cvb_engine.memory_notes.cut`). Each record stores, per constraint,
    whether its note was delivered whole (:func:`memory_of`).

A distractor is shown like a constraint, ``Decision n (slug): text``, with a
slug made from its own words, so that no id format tells the two apart.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cvb_engine.arms import ArmContext, ArmError, Message, register_arm
from cvb_engine.memory_notes import (
    Cut,
    MemoryNote,
    Stale,
    cut,
    delivery_of,
    distractors,
    memory_notes,
    place,
    slug,
)
from cvb_engine.prompts import INCENTIVIZED, INCENTIVIZED_ITEM, SYSTEM, task_block
from cvb_engine.scenario import Scenario

__all__ = ["Params", "distractors", "memory_of", "place", "slug"]

MEMORY_HEADER = (
    "Project memory: notes the team keeps about this repository, gathered over earlier work on it."
)
SYSTEM_MEMORY = "{system}\n\n{header}\n\n{notes}"
FILE_MEMORY = (
    "The repository's AGENTS.md file, as the team keeps it:\n\n"
    "```markdown\n# AGENTS.md\n\n{header}\n\n{notes}\n```\n\n---\n\n{task_block}"
)
HISTORY_MEMORY = "{header}\n\n{notes}\n\nThese are the notes for the work ahead; the task follows."
HISTORY_ACK = "Thanks, I have read the project notes."

#: Unrelated exchanges for the ``history`` channel, in order (``turns`` takes the first K).
#: Declarative, about no library and no constraint: they only put distance between
#: the memory and the task.
EXCHANGES: tuple[tuple[str, str], ...] = (
    (
        "Before the task, a quick one: what does git bisect do, in a sentence?",
        "It walks the history between a good and a bad commit by halving the range, so the "
        "commit that introduced a change turns up in a few steps.",
    ),
    (
        "What is a usual length for a commit subject line?",
        "Around fifty characters is the common convention; the longer explanation goes in the "
        "body, after a blank line.",
    ),
    (
        "Is UTC the same as GMT?",
        "For everyday purposes their clocks agree; UTC is the atomic-clock standard and GMT "
        "is a zone on the map.",
    ),
    (
        "What does semantic versioning mean by a major version?",
        "A major version signals changes that are not backwards compatible; minor and patch "
        "versions add features and fixes.",
    ),
    (
        "What is the difference between a merge and a rebase?",
        "A merge joins two histories with a merge commit; a rebase replays commits on top of "
        "another base, which gives a linear history.",
    ),
    (
        "What does SLA stand for?",
        "Service level agreement: the availability or response speed a service promises its users.",
    ),
    (
        "What is a feature flag?",
        "A switch in configuration that turns a code path on or off while the service runs, "
        "so a change can ship dark and be enabled later.",
    ),
    (
        "How do teams usually name release branches?",
        "Many use the version number, such as release/4.2, so the branch and the tag it "
        "produces share a name.",
    ),
)

Position = Literal["start", "middle", "end", "spread"]
Channel = Literal["inline", "system", "file", "history"]


class Params(BaseModel):
    """Parameters of the incentivized arm; the defaults are the seed's arm."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    load: int = Field(0, ge=0, le=2000, description="distractor notes from the memory pool")
    position: Position = Field("spread", description="where the constraints sit among them")
    channel: Channel = Field("inline", description="how the memory reaches the model")
    turns: int = Field(
        2, ge=0, le=len(EXCHANGES), description="history channel: unrelated exchanges after it"
    )
    stale: Stale | None = Field(
        None,
        description="the decisions the constraints replaced: beside them (with) or instead (only)",
    )
    budget: int | None = Field(
        None,
        ge=1,
        le=10_000_000,
        description="bytes of memory delivered (inline, system, file); the rest is cut",
    )

    @field_validator("stale", "budget", mode="before")
    @classmethod
    def _none(cls, value: object) -> object:
        # ``stale=none`` / ``budget=none`` name the default, so a sweep can include it
        return None if isinstance(value, str) and value.strip().lower() in ("none", "") else value

    @model_validator(mode="after")
    def _budget_channel(self) -> Params:
        if self.budget is not None and self.channel == "history":
            raise ValueError(
                "budget applies to a memory delivered as a block or file "
                "(channel inline, system or file), not to history"
            )
        return self


def _notes(scenario: Scenario, params: Params, context: ArmContext) -> list[MemoryNote]:
    try:
        return memory_notes(
            scenario,
            load=params.load,
            position=params.position,
            stale=params.stale,
            pool=context.pool if params.load else (),
        )
    except ValueError as exc:
        raise ArmError(str(exc)) from None


def _render(notes: list[MemoryNote]) -> tuple[str, list[tuple[int, int]]]:
    """The notes as the prompt lists them, and each note's byte span in that text."""
    lines = [
        INCENTIVIZED_ITEM.format(n=i, cid=note.label, text=note.text)
        for i, note in enumerate(notes, start=1)
    ]
    spans = []
    at = 0
    for line in lines:
        size = len(line.encode("utf-8"))
        spans.append((at, at + size))
        at += size + 1
    return "\n".join(lines), spans


def _document(params: Params, notes_text: str) -> tuple[str, int]:
    """The memory text a channel delivers as one block or file, and where the notes
    start in it (bytes): what ``budget`` cuts."""
    head = (
        f"# AGENTS.md\n\n{MEMORY_HEADER}\n\n"
        if params.channel == "file"
        else f"{MEMORY_HEADER}\n\n"
    )
    return head + notes_text, len(head.encode("utf-8"))


def _delivery(
    scenario: Scenario, params: Params, context: ArmContext
) -> tuple[str, Cut, dict[str, Any]]:
    notes = _notes(scenario, params, context)
    text, spans = _render(notes)
    document, offset = _document(params, text)
    result = cut(document, params.budget if params.channel != "history" else None)
    per = delivery_of(
        notes,
        [(a + offset, b + offset) for a, b in spans],
        result,
        [c.id for c in scenario.constraints],
    )
    info = {
        "arm": "incentivized",
        "channel": params.channel,
        "stale": params.stale,
        "budget": params.budget,
        "bytes": result.total,
        "kept_bytes": result.kept,
        "cut": result.was_cut,
        "constraints": per,
    }
    return text, result, info


def memory_of(scenario: Scenario, params: Params, context: ArmContext) -> dict[str, Any] | None:
    """What a record of this variant stores about its memory (``Record.memory_json``):
    per constraint whether its current note was delivered whole (``delivered``; False
    when the memory holds only the superseded note) and whether its superseded note
    was (``superseded_delivered``; None when it is not in the memory), with the
    memory's size, what was kept, and whether it was cut. None for a variant without
    ``stale`` or ``budget`` (its records stay as they were: every note delivered)."""
    if params.stale is None and params.budget is None:
        return None
    return _delivery(scenario, params, context)[2]


def notes_of(scenario: Scenario, params: Params, context: ArmContext) -> str:
    """The notes as the prompt lists them (before any budget)."""
    return _render(_notes(scenario, params, context))[0]


# The version stays: every variant that existed before stale= and budget= builds the same
# bytes (tests/test_arm_pins.py), and a new variant's name says what is new.
@register_arm(
    "incentivized",
    params=Params,
    version="2.0+memory.1",
    description="The constraints as project memory (past decisions), never as orders; with "
    "load, position and channel, among distractor notes and through other channels; with "
    "stale, beside or instead of the decisions they replaced; with budget, cut to N bytes.",
    uses_pool=lambda p: p.load > 0,
    memory_of=memory_of,
)
def incentivized(scenario: Scenario, params: Params, context: ArmContext) -> list[Message]:
    task = task_block(scenario)
    system = {"role": "system", "content": SYSTEM}
    if params.budget is not None:
        # a budget cuts the memory as one document: the block (inline, system) or the file
        _text, result, _info = _delivery(scenario, params, context)
        if params.channel == "system":
            content = f"{SYSTEM}\n\n{result.text}"
            return [{"role": "system", "content": content}, {"role": "user", "content": task}]
        if params.channel == "file":
            content = (
                "The repository's AGENTS.md file, as the team keeps it:\n\n"
                f"```markdown\n{result.text}\n```\n\n---\n\n{task}"
            )
            return [system, {"role": "user", "content": content}]
        return [system, {"role": "user", "content": f"{result.text}\n\n---\n\n{task}"}]
    notes = notes_of(scenario, params, context)
    if params.channel == "inline":
        return [
            system,
            {"role": "user", "content": INCENTIVIZED.format(task_block=task, notes=notes)},
        ]
    if params.channel == "system":
        content = SYSTEM_MEMORY.format(system=SYSTEM, header=MEMORY_HEADER, notes=notes)
        return [{"role": "system", "content": content}, {"role": "user", "content": task}]
    if params.channel == "file":
        content = FILE_MEMORY.format(header=MEMORY_HEADER, notes=notes, task_block=task)
        return [system, {"role": "user", "content": content}]
    messages = [
        system,
        {"role": "user", "content": HISTORY_MEMORY.format(header=MEMORY_HEADER, notes=notes)},
        {"role": "assistant", "content": HISTORY_ACK},
    ]
    for question, answer in EXCHANGES[: params.turns]:
        messages += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
        ]
    return [*messages, {"role": "user", "content": task}]
