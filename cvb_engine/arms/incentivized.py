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

A distractor is shown like a constraint, ``Decision n (slug): text``, with a
slug made from its own words, so that no id format tells the two apart.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from cvb_engine.arms import ArmContext, ArmError, Message, register_arm
from cvb_engine.prompts import INCENTIVIZED, INCENTIVIZED_ITEM, SYSTEM, task_block
from cvb_engine.scenario import Scenario

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

_T = TypeVar("_T")

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


_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "and",
        "or",
        "but",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "with",
        "by",
        "from",
        "as",
        "after",
        "before",
        "our",
        "we",
        "they",
        "their",
    ]
)


def slug(text: str) -> str:
    """A note id in the style of constraint ids, from the note's own first words."""
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP]
    return "-".join(words[:4]) or "note"


def distractors(scenario_id: str, pool: Sequence[Any], load: int) -> list[Any]:
    """The first ``load`` pool entries in the scenario's own fixed order."""
    if load > len(pool):
        raise ArmError(f"load={load}: the memory pool has only {len(pool)} entries")
    order = sorted(
        pool, key=lambda e: hashlib.sha256(f"{scenario_id}\0{e.id}".encode()).hexdigest()
    )
    return order[:load]


def place(facts: list[_T], others: list[_T], position: str) -> list[_T]:
    """``facts`` (the constraints, in order) placed among ``others`` at ``position``."""
    if position == "start":
        return facts + others
    if position == "end":
        return others + facts
    if position == "middle":
        half = len(others) // 2
        return others[:half] + facts + others[half:]
    # spread: the others cut into len(facts) + 1 chunks as equal as can be
    out: list[_T] = []
    k = len(facts)
    bounds = [round(i * len(others) / (k + 1)) for i in range(k + 2)]
    for i in range(k + 1):
        out += others[bounds[i] : bounds[i + 1]]
        if i < k:
            out.append(facts[i])
    return out


class Note(NamedTuple):
    """One note of the project memory as the memory arms draw it."""

    label: str  # what the note shows in parentheses: a constraint id, or a slug
    text: str
    constraint_id: str | None  # the constraint it states; None for a distractor


def memory_notes(scenario: Scenario, load: int, position: str, pool: Sequence[Any]) -> list[Note]:
    """The scenario's constraints among ``load`` distractors at ``position``, in order: the
    one draw every arm that writes project memory shares (this arm, the agent's rules
    files), so the same parameters give the same notes."""
    facts = [Note(c.id, c.text.strip(), c.id) for c in scenario.constraints]
    others = (
        [
            Note(slug(e.text), " ".join(e.text.split()), None)
            for e in distractors(scenario.id, pool, load)
        ]
        if load
        else []
    )
    return place(facts, others, position)


def note_line(n: int, note: Note) -> str:
    """A note as the memory shows it (``- Decision n (label): text``)."""
    return INCENTIVIZED_ITEM.format(n=n, cid=note.label, text=note.text)


def notes_of(scenario: Scenario, params: Params, context: ArmContext) -> str:
    pool = context.pool if params.load else ()
    notes = memory_notes(scenario, params.load, params.position, pool)
    return "\n".join(note_line(i, note) for i, note in enumerate(notes, start=1))


@register_arm(
    "incentivized",
    params=Params,
    version="2.0+memory.1",
    description="The constraints as project memory (past decisions), never as orders; with "
    "load, position and channel, among distractor notes and through other channels.",
    uses_pool=lambda p: p.load > 0,
)
def incentivized(scenario: Scenario, params: Params, context: ArmContext) -> list[Message]:
    notes = notes_of(scenario, params, context)
    task = task_block(scenario)
    system = {"role": "system", "content": SYSTEM}
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
