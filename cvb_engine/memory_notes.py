"""Project memory as notes, and how much of it a tool delivers (README: Memory realism).

One pure function, :func:`memory_notes`, decides what a variant's project memory
holds and in what order: the scenario's constraints as current decisions, the
decisions they replaced (``stale=``), and distractors from the memory pool
(``load``, ``position``). The incentivized arm renders these notes into its
prompt; the agent arm renders the same notes into its rules files. Every note
says which constraint it belongs to and whether it is the current decision, the
superseded one, or a distractor, so a record can say what the model was given.

:func:`cut` cuts a memory text to a byte budget the way agent tools cut a rules
file that is too long: whole lines are kept while they fit, then one marker line
says that text was cut and how much. :func:`delivered` says, per note, whether
its text came entirely before the cut, and :func:`delivery_of` turns that into
the per-constraint flags a record stores. A renderer (the incentivized arm's
prompt, an agent's rules file) writes the notes in order, keeps each note's byte
span in the text it wrote, cuts that text, and asks :func:`delivery_of`.

Superseded notes
    A constraint's ``superseded`` field is the earlier decision it replaced, a
    dated note (``2022-06: The services are built on requests: ...``). With
    ``stale=with`` it sits just before the current note, which is then dated
    :data:`CURRENT_AS_OF`; with ``stale=only`` it stands instead of the current
    note (a memory that was never updated). A constraint without a superseded
    note (a user's own scenario) keeps its current note in both modes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from cvb_engine.arms import ArmError
from cvb_engine.scenario import Scenario

__all__ = [
    "CURRENT_AS_OF",
    "SUPERSEDED_DATE",
    "Cut",
    "MemoryNote",
    "NoteKind",
    "Stale",
    "cut",
    "cut_in_order",
    "delivered",
    "delivery_of",
    "distractors",
    "memory_notes",
    "place",
    "slug",
]

#: The date a current note carries when its superseded note is beside it: later than
#: every superseded note's date (lint E026 holds the notes to it).
CURRENT_AS_OF = "2026-01"
#: How a superseded note starts: its date, ``YYYY-MM`` (or ``YYYY-MM-DD``), and a colon.
SUPERSEDED_DATE = re.compile(r"^(\d{4}-(?:0[1-9]|1[0-2])(?:-(?:0[1-9]|[12]\d|3[01]))?): \S")

Stale = Literal["with", "only"]
Position = Literal["start", "middle", "end", "spread"]

#: The line that ends a cut memory text. Declarative, like the notes it follows.
CUT_MARKER = "[Cut here: the remaining {rest:,} of {total:,} bytes of this memory were not loaded ({budget:,}-byte limit).]"


class NoteKind(StrEnum):
    """What a memory note is."""

    CURRENT = "current"
    SUPERSEDED = "superseded"
    DISTRACTOR = "distractor"


@dataclass(frozen=True)
class MemoryNote:
    """One note of a project memory, in the order the memory holds them.

    ``label`` is what a rendering shows beside the note (the constraint id for a
    current note; for a superseded note and a distractor a slug of its own words,
    so neither tells which constraint it is about); ``constraint_id`` is whose
    note it is (None for a distractor).
    """

    label: str
    text: str
    kind: NoteKind
    constraint_id: str | None = None


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
    """The first ``load`` pool entries in the scenario's own fixed order (a larger load
    extends a smaller one).

    Raises:
        ArmError: ``load`` is larger than the pool.
    """
    if load > len(pool):
        raise ArmError(f"load={load}: the memory pool has only {len(pool)} entries")
    order = sorted(
        pool, key=lambda e: hashlib.sha256(f"{scenario_id}\0{e.id}".encode()).hexdigest()
    )
    return order[:load]


def place(facts: list[Any], others: list[Any], position: str) -> list[Any]:
    """``facts`` (in order) placed among ``others`` at ``position``: ``start``, ``end``,
    ``middle``, or ``spread`` (the others cut into len(facts) + 1 chunks as equal as can be)."""
    if position == "start":
        return facts + others
    if position == "end":
        return others + facts
    if position == "middle":
        half = len(others) // 2
        return others[:half] + facts + others[half:]
    out: list[Any] = []
    k = len(facts)
    bounds = [round(i * len(others) / (k + 1)) for i in range(k + 2)]
    for i in range(k + 1):
        out += others[bounds[i] : bounds[i + 1]]
        if i < k:
            out.append(facts[i])
    return out


def memory_notes(
    scenario: Scenario,
    *,
    load: int = 0,
    position: str = "spread",
    stale: Stale | None = None,
    pool: Sequence[Any] = (),
) -> list[MemoryNote]:
    """The notes of a scenario's project memory, in order.

    Each constraint gives one unit: its current note (default); its superseded note
    then its current note, dated :data:`CURRENT_AS_OF` (``stale="with"``); its
    superseded note alone (``stale="only"``). A constraint without a superseded note
    gives its current note in every mode. The units are placed among the first
    ``load`` distractors of ``pool`` at ``position``; a unit is never split, so a
    superseded note is always just before the note that replaced it.

    Args:
        scenario: The scenario whose constraints the memory states.
        load: Distractor notes from ``pool`` (0: none).
        position: Where the constraints sit among the distractors.
        stale: Whether the superseded notes are in the memory, and how.
        pool: Memory-pool entries (objects with ``id`` and ``text``); read when ``load > 0``.

    Raises:
        ArmError: ``load`` is larger than the pool.
    """
    units: list[list[MemoryNote]] = []
    for c in scenario.constraints:
        # the current note's text as the seed arm shows it (stripped, not re-spaced)
        current = MemoryNote(c.id, c.text.strip(), NoteKind.CURRENT, c.id)
        old = " ".join(c.superseded.split()) if c.superseded else None
        if stale is None or old is None:
            units.append([current])
            continue
        earlier = MemoryNote(slug(_undated(old)), old, NoteKind.SUPERSEDED, c.id)
        if stale == "only":
            units.append([earlier])
        else:
            dated = MemoryNote(c.id, f"{CURRENT_AS_OF}: {current.text}", NoteKind.CURRENT, c.id)
            units.append([earlier, dated])
    others = (
        [
            [MemoryNote(slug(e.text), " ".join(e.text.split()), NoteKind.DISTRACTOR)]
            for e in distractors(scenario.id, pool, load)
        ]
        if load
        else []
    )
    return [note for unit in place(units, others, position) for note in unit]


def _undated(text: str) -> str:
    match = SUPERSEDED_DATE.match(text)
    return text[match.end() - 1 :] if match else text


@dataclass(frozen=True)
class Cut:
    """A memory text after the budget: ``text`` is what is delivered (with the marker
    line when something was cut); ``kept`` is how many bytes of the original text it
    holds (all of them when nothing was cut)."""

    text: str
    kept: int
    total: int
    budget: int | None

    @property
    def was_cut(self) -> bool:
        return self.kept < self.total


def cut(text: str, budget: int | None, *, limit: int | None = None) -> Cut:
    """``text`` cut to ``budget`` bytes (UTF-8) at a line boundary.

    Whole lines are kept, from the top, while the kept bytes (line breaks included)
    stay within the budget; the first line that does not fit and everything after it
    are dropped, and one marker line saying how many bytes were not loaded ends the
    text. The marker is not counted in the budget (tools add their notice beside the
    file). A text within the budget, or no budget, is returned unchanged. ``limit`` is
    the limit the marker names and the result records (default: ``budget``): what is
    left of a budget shared by several files (:func:`cut_in_order`) is not the limit.
    """
    raw = text.encode("utf-8")
    if budget is None or len(raw) <= budget:
        return Cut(text, len(raw), len(raw), budget)
    kept_lines: list[str] = []
    used = 0
    for line in text.split("\n"):
        size = len(line.encode("utf-8")) + 1
        if used + size > budget:
            break
        kept_lines.append(line)
        used += size
    named = budget if limit is None else limit
    marker = CUT_MARKER.format(rest=len(raw) - used, total=len(raw), budget=named)
    return Cut("".join(f"{line}\n" for line in kept_lines) + marker, used, len(raw), named)


def cut_in_order(texts: Sequence[str], budget: int | None) -> list[Cut]:
    """Several files read in order under one byte budget, as an agent tool that loads
    every rules file from the root down under one limit does: each file is cut
    (:func:`cut`) to what the files before it left of ``budget``; once one is cut,
    every later file is delivered as the marker line alone. No budget: all unchanged.
    """
    out = []
    left = budget
    for text in texts:
        result = cut(text, left, limit=budget)
        if left is not None:
            left = 0 if result.was_cut else left - result.total
        out.append(result)
    return out


def delivered(spans: Sequence[tuple[int, int]], result: Cut) -> list[bool]:
    """For each byte span ``(start, end)`` of the original text, whether it lies
    entirely before the cut (so the model got all of it)."""
    return [end <= result.kept for _start, end in spans]


def delivery_of(
    notes: Sequence[MemoryNote],
    spans: Sequence[tuple[int, int]],
    result: Cut,
    constraint_ids: Sequence[str],
) -> dict[str, dict[str, bool | None]]:
    """Per constraint, what of its notes reached the model: ``delivered`` (its current note
    lies entirely before the cut; False when the memory does not hold it) and
    ``superseded_delivered`` (the same for its superseded note; None when the memory does
    not hold one). ``spans`` are the notes' byte spans in the text ``result`` was cut from,
    in the order of ``notes``: what a record stores (``Record.memory_json``)."""
    per: dict[str, dict[str, bool | None]] = {
        cid: {"delivered": False, "superseded_delivered": None} for cid in constraint_ids
    }
    for note, got in zip(notes, delivered(spans, result), strict=True):
        if note.constraint_id is None or note.constraint_id not in per:
            continue
        key = "delivered" if note.kind == NoteKind.CURRENT else "superseded_delivered"
        per[note.constraint_id][key] = got
    return per
