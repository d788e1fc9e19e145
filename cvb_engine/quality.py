"""Check quality measured on a labelled corpus: precision, recall and F1 of violation detection.

A corpus is a folder of YAML files, one per scenario (``tests/corpus/`` ships
one written apart from every scenario's ``samples``)::

    scenario: http-client-choice
    samples:
      - id: requests-behind-alias          # unique within the file
        constraint: httpx-not-requests
        violates: true                     # the labeller's judgement of the constraint's intent
        tricky: true                       # optional: a spelling or shape the checks may miss
        why: requests imported under another name
        code: |
          import requests as r
          ...

Each sample is scored with the scenario's current checks; the *positive*
class is a violation, so precision is the share of flagged samples that
really violate and recall the share of violating samples that are flagged.
Nothing here runs model-written code outside the checks' own rules: ``exec``
checks run in the sandbox as in scoring.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cvb_engine.scenario import LoadedScenario, ScenarioError, line_for, parse_yaml
from cvb_engine.scoring import score_code, score_response


class CorpusError(ValueError):
    """A corpus file that cannot be used; the message names the file and the field."""


class CorpusSample(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    constraint: str = Field(min_length=1)
    violates: bool
    tricky: bool = False
    why: str = ""
    code: str


class CorpusFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: str
    samples: list[CorpusSample]


@dataclass(frozen=True)
class Labelled:
    path: Path
    scenario_id: str
    sample: CorpusSample


@dataclass
class Confusion:
    """Counts for one constraint, the positive class being "violates"."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    missed: list[str] = field(default_factory=list)  # violating samples the checks passed
    false_alarms: list[str] = field(default_factory=list)  # compliant samples flagged

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def precision(self) -> float:
        flagged = self.tp + self.fp
        return self.tp / flagged if flagged else 1.0

    @property
    def recall(self) -> float:
        violating = self.tp + self.fn
        return self.tp / violating if violating else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def add(self, other: Confusion) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.tn += other.tn
        self.missed.extend(other.missed)
        self.false_alarms.extend(other.false_alarms)


_Model = TypeVar("_Model", bound=BaseModel)
_Lines = dict[tuple[str | int, ...], int]


def _read(path: Path) -> tuple[Any, _Lines]:
    """A corpus file through the scenarios' safe YAML reader (data and a path → line map)."""
    try:
        return parse_yaml(str(path), path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{path}: cannot read: {exc}") from exc
    except ScenarioError as exc:
        raise CorpusError(str(exc)) from exc


def _validate(
    model: type[_Model], data: Any, path: Path, lines: _Lines, at: tuple[int, ...] = ()
) -> _Model:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = (*at, *first["loc"])
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        line = line_for(lines, loc)
        raise CorpusError(f"{path}:{line}: {where}: {first['msg']}") from exc


def load_corpus(root: str | Path) -> list[Labelled]:
    """Every sample of every ``*.yaml`` file under ``root``, in file order."""
    out: list[Labelled] = []
    for path in sorted(Path(root).rglob("*.yaml")):
        data, lines = _read(path)
        parsed = _validate(CorpusFile, data, path, lines)
        seen: set[str] = set()
        for sample in parsed.samples:
            if sample.id in seen:
                raise CorpusError(f"{path}: sample id {sample.id!r} appears twice")
            seen.add(sample.id)
            out.append(Labelled(path, parsed.scenario, sample))
    return out


def measure(
    corpus: Iterable[Labelled], library: Mapping[str, LoadedScenario]
) -> dict[tuple[str, str], Confusion]:
    """(scenario id, constraint id) -> confusion counts of its checks on the corpus."""
    out: dict[tuple[str, str], Confusion] = {}
    for item in corpus:
        loaded = library.get(item.scenario_id)
        if loaded is None:
            raise CorpusError(f"{item.path}: unknown scenario {item.scenario_id!r}")
        ids = [c.id for c in loaded.scenario.constraints]
        if item.sample.constraint not in ids:
            raise CorpusError(
                f"{item.path}: sample {item.sample.id!r}: scenario {item.scenario_id!r} has "
                f"no constraint {item.sample.constraint!r} (it has {', '.join(ids)})"
            )
        scored = score_code(loaded.scenario, item.sample.code)
        verdict = next(c for c in scored.constraints if c.constraint_id == item.sample.constraint)
        flagged = not verdict.honored
        counts = out.setdefault((item.scenario_id, item.sample.constraint), Confusion())
        label = f"{item.path.name}:{item.sample.id}"
        if item.sample.violates and flagged:
            counts.tp += 1
        elif item.sample.violates:
            counts.fn += 1
            counts.missed.append(label)
        elif flagged:
            counts.fp += 1
            counts.false_alarms.append(label)
        else:
            counts.tn += 1
    return out


def overall(per_constraint: Mapping[tuple[str, str], Confusion]) -> Confusion:
    total = Confusion()
    for counts in per_constraint.values():
        total.add(counts)
    return total


# --------------------------------------------------------------------------- labelled replies


class ReplyExpect(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: Literal["answered", "unparseable", "no-code"]
    truncated: bool = False
    code_has: list[str] = Field(default_factory=list)
    code_lacks: list[str] = Field(default_factory=list)
    honored: dict[str, bool]


class LabelledReply(BaseModel):
    """A realistic chat reply with a careful human's verdicts (``tests/corpus/replies/``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    scenario: str
    shape: str
    finish_reason: str | None = "stop"
    reasoning: str | None = None
    response: str
    expect: ReplyExpect


@dataclass(frozen=True)
class ReplyJudgement:
    reply: LabelledReply
    outcome: str
    truncated: bool
    honored: dict[str, bool]
    problems: tuple[str, ...]  # every way the project's verdict differs from the label

    @property
    def agrees(self) -> bool:
        """Outcome and every constraint's verdict as the human judged them."""
        return self.outcome == self.reply.expect.outcome and self.honored == dict(
            self.reply.expect.honored
        )


def load_replies(root: str | Path) -> list[LabelledReply]:
    out: list[LabelledReply] = []
    seen: set[str] = set()
    for path in sorted(Path(root).rglob("*.yaml")):
        items, lines = _read(path)
        if not isinstance(items, list):
            raise CorpusError(f"{path}:1: expected a list of replies")
        for i, item in enumerate(items):
            reply = _validate(LabelledReply, item, path, lines, (i,))
            if reply.id in seen:
                raise CorpusError(f"{path}: reply id {reply.id!r} appears twice")
            seen.add(reply.id)
            out.append(reply)
    return out


def judge_replies(
    replies: Iterable[LabelledReply], library: Mapping[str, LoadedScenario]
) -> list[ReplyJudgement]:
    """Each reply through the project's own extraction and scoring, against its labels."""
    out = []
    for reply in replies:
        loaded = library.get(reply.scenario)
        if loaded is None:
            raise CorpusError(f"reply {reply.id!r}: unknown scenario {reply.scenario!r}")
        scored = score_response(loaded.scenario, reply.response, reply.finish_reason)
        honored = {c.constraint_id: c.honored for c in scored.constraints}
        expect = reply.expect
        problems = []
        if scored.outcome != expect.outcome:
            problems.append(f"outcome {scored.outcome}, labelled {expect.outcome}")
        if scored.truncated != expect.truncated:
            problems.append(f"truncated {scored.truncated}, labelled {expect.truncated}")
        problems += [f"solution lacks {s!r}" for s in expect.code_has if s not in scored.code]
        problems += [f"solution holds {s!r}" for s in expect.code_lacks if s and s in scored.code]
        problems += [
            f"{cid}: honored {honored.get(cid)}, labelled {want}"
            for cid, want in expect.honored.items()
            if honored.get(cid) != want
        ]
        out.append(
            ReplyJudgement(reply, scored.outcome, scored.truncated, honored, tuple(problems))
        )
    return out
