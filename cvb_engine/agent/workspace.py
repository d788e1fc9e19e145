"""The workspace of an agent cell: a small repository built from the scenario, no model involved.

What it holds (every path relative to the workspace root)::

    README.md                      the imaginary product (Fernhollow) and the layout
    fernhollow/__init__.py         the package
    fernhollow/<module>.py         the file the task names (a one-line stub)
    tests/test_<module>.py         IVR problems: the stated tests, as a test function
    + the project memory, where ``rules=`` puts it:

``agents-md`` (default)
    ``AGENTS.md`` at the root.
``claude-md``
    ``CLAUDE.md`` at the root.
``adr``
    one decision record per note, ``docs/decisions/NNNN-<label>.md``.
``readme``
    a "Conventions" section at the end of ``README.md``.
``nested``
    ``fernhollow/AGENTS.md`` (the package the task touches) holds the constraints;
    the root ``AGENTS.md`` holds only the distractors (``position`` has nothing to
    place there).

The notes are the incentivized arm's, drawn the same way
(:func:`cvb_engine.memory_notes.memory_notes`): the scenario's constraints
phrased as memory among ``load`` pool distractors at ``position`` (with
``stale=``, beside or instead of the decisions they replaced), each shown as
the incentivized arm shows it, ``- Decision n (label): text``. The same scenario and parameters give the same
bytes (:attr:`Workspace.sha256`).

``budget=N`` cuts the memory the way an agent tool with a rules-file byte limit
loads it: the rules files in reading order (the root ``AGENTS.md`` before the
package's for ``nested``; the decision records by number for ``adr``; the whole
``README.md`` for ``readme``) share the N bytes; each is cut at a line boundary
to what the files before it left, with the marker line of
:func:`cvb_engine.memory_notes.cut`, and once one is cut every later one holds
the marker alone. The workspace holds the files as cut, so ``read_file``,
``search_files`` and a preloaded system message see only what was delivered, and
a constraint whose note was cut has no place in them (it cannot be "read"). The
file to write exists as a stub holding
only a docstring: the agent's solution is the file's final content when it
differs from the stub; a file left as it was was never written.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cvb_engine.agent.trace import ConstraintPlace, RulesFile
from cvb_engine.arms import ArmError
from cvb_engine.arms.incentivized import MEMORY_HEADER
from cvb_engine.memory_notes import (
    Cut,
    MemoryNote,
    NoteKind,
    Stale,
    cut_in_order,
    delivered,
    memory_notes,
)
from cvb_engine.prompts import INCENTIVIZED_ITEM, task_block
from cvb_engine.scenario import Scenario

__all__ = [
    "PACKAGE",
    "PRODUCT",
    "RULES",
    "Rules",
    "Workspace",
    "build_workspace",
    "target_paths",
    "task_message",
]

Rules = Literal["agents-md", "claude-md", "adr", "readme", "nested"]
RULES: tuple[Rules, ...] = ("agents-md", "claude-md", "adr", "readme", "nested")
#: The imaginary product of the memory pool (``scenarios/memory/pool.yaml``) and its package.
PRODUCT = "Fernhollow"
PACKAGE = "fernhollow"
#: The root rules file of each placement (what ``preload=true`` puts in the system
#: message); decision records have none.
ROOT_RULES: dict[str, str | None] = {
    "agents-md": "AGENTS.md",
    "claude-md": "CLAUDE.md",
    "adr": None,
    "readme": "README.md",
    "nested": "AGENTS.md",
}

README = """# {product}

{product} is a platform for community tool libraries: members reserve and borrow drills,
ladders and sewing machines through the web app and the mobile app.

This repository holds the `{package}` Python package.

## Layout

- `{package}/`: the package
{tests_line}"""
TESTS_LINE = "- `tests/`: the tests (plain test functions, run with `run_tests`)\n"
RULES_TITLE = "# {name}\n\n{header}\n\n{notes}\n"
CONVENTIONS = "\n## Conventions\n\n{header}\n\n{notes}\n"
NESTED_NOTE = "# AGENTS.md\n\n{header} These concern the `{package}` package.\n\n{notes}\n"
DECISION = "# Decision {n}: {label}\n\nStatus: accepted\n\n{text}\n"
STUB = '"""{title}."""\n'
TEST_FILE = "from {package}.{module} import {name}  # noqa: F401\n\n\ndef test_stated():\n{body}\n"
TASK_FILES = "Write the solution in {paths}."


def _snake(name: str) -> str:
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    text = re.sub(r"[^a-z0-9_]+", "_", text).strip("_")
    if not text or text[0].isdigit() or text in {"tests", "test", PACKAGE}:
        text = "task_" + text
    return text[:60]


_CALLED = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\(")


def module_name(scenario: Scenario) -> str:
    """The module the task's code goes in: from the entry point, else the first function
    the task names (``fetch_json(url)``), else the scenario id."""
    named = _CALLED.search(scenario.task)
    return _snake(scenario.entry_point or (named.group(1) if named else scenario.id))


def target_paths(scenario: Scenario) -> tuple[str, ...]:
    """The file(s) the task names, workspace-relative."""
    return (f"{PACKAGE}/{module_name(scenario)}.py",)


def task_message(scenario: Scenario, targets: Sequence[str]) -> str:
    """The first user message: the task (with its stated tests, as every arm has it), then
    the file(s) to write by path in backticks. It names no constraint and no rules file."""
    paths = [f"`{p}`" for p in targets]
    joined = paths[0] if len(paths) == 1 else ", ".join(paths[:-1]) + " and " + paths[-1]
    return task_block(scenario) + "\n\n" + TASK_FILES.format(paths=joined)


@dataclass(frozen=True)
class Workspace:
    """A workspace as planned: every file's text, what the task names, where the memory is."""

    files: dict[str, str]
    targets: tuple[str, ...]
    rules_files: tuple[RulesFile, ...]
    constraints: tuple[ConstraintPlace, ...]
    #: The root rules file (``preload``), or None (``rules=adr``).
    root_rules: str | None
    #: The stub each named file starts as.
    stubs: dict[str, str]
    has_tests: bool
    #: What the rules files delivered (README: Agent arm, ``budget``): the record's
    #: ``memory_json`` shape, per constraint ``delivered`` / ``superseded_delivered``.
    delivery: dict[str, Any] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """Digest of every path and its text: one per scenario and parameters."""
        digest = hashlib.sha256()
        for path in sorted(self.files):
            digest.update(path.encode() + b"\0" + self.files[path].encode() + b"\0")
        return digest.hexdigest()

    def write(self, root: Path) -> dict[str, int]:
        """Create the files under ``root`` (an empty folder the caller owns); return the
        memory files' access times (ns) as set."""
        for path, text in self.files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        # Memory files get an access time before their modification time: an agent
        # program that opens one then moves it forward (relatime), which is how the
        # command transport sees what was read (cvb_engine.agent.command).
        atimes = {}
        for rules in self.rules_files:
            stat = (root / rules.path).stat()
            os.utime(root / rules.path, ns=(stat.st_mtime_ns - 120 * 10**9, stat.st_mtime_ns))
            atimes[rules.path] = (root / rules.path).stat().st_atime_ns
        return atimes


def note_line(n: int, note: MemoryNote) -> str:
    """A note as the incentivized arm lists it."""
    return INCENTIVIZED_ITEM.format(n=n, cid=note.label, text=note.text)


def _is_rule(note: MemoryNote) -> bool:
    """A constraint's current note: what "read the rule" is about (a superseded note
    states the decision the constraint replaced)."""
    return note.kind == NoteKind.CURRENT and note.constraint_id is not None


def _places(path: str, text: str, notes: list[tuple[MemoryNote, str]]) -> list[ConstraintPlace]:
    """Where each constraint's current note sits in ``text`` (1-based lines, inclusive)."""
    places = []
    start = 0
    for note, line in notes:
        if not _is_rule(note):
            start = text.index(line, start) + len(line)
            continue
        at = text.index(line, start)
        first = text.count("\n", 0, at) + 1
        places.append(
            ConstraintPlace(
                constraint_id=note.constraint_id or "",
                path=path,
                line=first,
                end_line=first + line.count("\n"),
            )
        )
        start = at + len(line)
    return places


def _notes_file(
    path: str, template: str, notes: list[MemoryNote], **fields: Any
) -> tuple[str, Any]:
    lines = [(note, note_line(i, note)) for i, note in enumerate(notes, start=1)]
    text = template.format(
        header=MEMORY_HEADER, notes="\n".join(line for _, line in lines), **fields
    )
    return text, lines


def build_workspace(
    scenario: Scenario,
    rules: Rules = "agents-md",
    load: int = 0,
    position: str = "spread",
    pool: Sequence[Any] = (),
    stale: Stale | None = None,
    budget: int | None = None,
) -> Workspace:
    """The workspace of ``scenario`` with its memory placed by ``rules`` (cut to ``budget``
    bytes in reading order when given).

    Raises:
        ArmError: ``load`` is more than the pool holds.
    """
    module = module_name(scenario)
    targets = target_paths(scenario)
    has_tests = bool(scenario.stated_tests and scenario.stated_tests.strip())
    files: dict[str, str] = {}
    readme = README.format(
        product=PRODUCT, package=PACKAGE, tests_line=TESTS_LINE if has_tests else ""
    )
    files["README.md"] = readme
    files[f"{PACKAGE}/__init__.py"] = f'"""{PRODUCT}."""\n'
    stubs = {t: STUB.format(title=" ".join(scenario.title.split()).rstrip(".")) for t in targets}
    files.update(stubs)
    if has_tests:
        body = "\n".join(
            "    " + line if line.strip() else ""
            for line in (scenario.stated_tests or "").strip().splitlines()
        )
        files[f"tests/test_{module}.py"] = TEST_FILE.format(
            package=PACKAGE, module=module, name=scenario.entry_point or module, body=body
        )

    try:
        notes = memory_notes(scenario, load=load, position=position, stale=stale, pool=pool)
    except ValueError as exc:
        raise ArmError(str(exc)) from None
    # the rules files in reading order, as planned; the budget cuts them below
    planned: list[tuple[str, str, list[tuple[MemoryNote, str]]]] = []

    def add(path: str, text: str, lines: list[tuple[MemoryNote, str]]) -> None:
        planned.append((path, text, lines))

    if rules in ("agents-md", "claude-md"):
        name = "AGENTS.md" if rules == "agents-md" else "CLAUDE.md"
        add(name, *_notes_file(name, RULES_TITLE, notes, name=name))
    elif rules == "readme":
        section, lines = _notes_file("README.md", CONVENTIONS, notes)
        add("README.md", readme + section, lines)
    elif rules == "nested":
        others = [n for n in notes if n.constraint_id is None]
        facts = [n for n in notes if n.constraint_id is not None]  # superseded ones too
        add("AGENTS.md", *_notes_file("AGENTS.md", RULES_TITLE, others, name="AGENTS.md"))
        inner = f"{PACKAGE}/AGENTS.md"
        add(inner, *_notes_file(inner, NESTED_NOTE, facts, package=PACKAGE))
    else:  # adr: one record per note, numbered in the drawn order
        for n, note in enumerate(notes, start=1):
            label = re.sub(r"[^a-z0-9-]+", "-", note.label.lower()).strip("-")[:48] or "note"
            path = f"docs/decisions/{n:04d}-{label}.md"
            add(path, DECISION.format(n=n, label=note.label, text=note.text), [(note, note.text)])

    cuts = cut_in_order([text for _, text, _ in planned], budget)
    per = _delivery(planned, cuts, [c.id for c in scenario.constraints])
    rules_files: list[RulesFile] = []
    places: list[ConstraintPlace] = []
    for (path, text, lines), result in zip(planned, cuts, strict=True):
        files[path] = result.text
        got = delivered(_spans(text, lines), result)
        # a cut note is not in the file: it has no place to be read at
        kept = [line for line, whole in zip(lines, got, strict=True) if whole]
        rules_files.append(
            RulesFile(
                path=path,
                constraints=tuple(n.constraint_id or "" for n, _ in kept if _is_rule(n)),
                notes=len(kept),
            )
        )
        places.extend(p for p in _places(path, text, lines) if per[p.constraint_id]["delivered"])
    delivery = {
        "arm": "agent",
        "channel": rules,
        "stale": stale,
        "budget": budget,
        "bytes": sum(r.total for r in cuts),
        "kept_bytes": sum(r.kept for r in cuts),
        "cut": any(r.was_cut for r in cuts),
        "constraints": per,
    }
    ordered = dict(sorted(files.items()))
    return Workspace(
        files=ordered,
        targets=targets,
        rules_files=tuple(rules_files),
        constraints=tuple(places),
        root_rules=ROOT_RULES[rules],
        stubs=stubs,
        has_tests=has_tests,
        delivery=delivery,
    )


def _spans(text: str, lines: list[tuple[MemoryNote, str]]) -> list[tuple[int, int]]:
    """Each note's byte span (UTF-8) in ``text``, in order."""
    spans = []
    start = 0
    for _note, line in lines:
        at = text.index(line, start)
        begin = len(text[:at].encode("utf-8"))
        spans.append((begin, begin + len(line.encode("utf-8"))))
        start = at + len(line)
    return spans


def _delivery(
    planned: list[tuple[str, str, list[tuple[MemoryNote, str]]]],
    cuts: list[Cut],
    constraint_ids: list[str],
) -> dict[str, dict[str, bool | None]]:
    """Per constraint, whether its current and superseded notes reached the agent whole
    (:func:`cvb_engine.memory_notes.delivery_of`, over every rules file)."""
    per: dict[str, dict[str, bool | None]] = {
        cid: {"delivered": False, "superseded_delivered": None} for cid in constraint_ids
    }
    for (_path, text, lines), result in zip(planned, cuts, strict=True):
        for (note, _line), got in zip(lines, delivered(_spans(text, lines), result), strict=True):
            if note.constraint_id is None or note.constraint_id not in per:
                continue
            key = "delivered" if note.kind == NoteKind.CURRENT else "superseded_delivered"
            per[note.constraint_id][key] = got
    return per
