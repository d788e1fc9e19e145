"""Read-side queries for the Results page and the reports: typed, aggregated in SQL, UI-free.

What the studio shows about stored runs comes from here, so the page only lays
things out. Every chart-sized figure is computed from ``GROUP BY`` counts
(:func:`cvb_engine.results.db_tallies`) and never from response texts; only
:func:`cell_records` reads texts, and only the three (or fewer) records of the
one cell being looked at.

Also here: the published reference figures (``data/reference/cvb-2.0-groq.json``)
that the page and the HTML report show beside a user's own numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import String, case, func, literal, type_coerce
from sqlalchemy import select as sa_select
from sqlalchemy.orm import defer
from sqlmodel import Session, col, select

from cvb_engine.agent.trace import AgentTrace
from cvb_engine.agent.trace import read_trace as read_agent_trace
from cvb_engine.kinds import ErrorKind, RecordStatus, SeedArm
from cvb_engine.memory_trace import Delivery, Trace, read_delivery, read_trace
from cvb_engine.metrics import (
    Interval,
    IVRSummary,
    Rate,
    Summary,
    honored_only_when_ordered,
    ivr,
    ordered_arms,
    summarize,
)
from cvb_engine.report.notes import ReportNotes, limitations_of, sandbox_label, weaker_backends
from cvb_engine.results import (
    db_ivr_rows,
    db_tallies,
    db_trace_rows,
    run_scenario_ids,
    scoring_versions,
)
from cvb_engine.scenario import ScenarioError, load_library
from cvb_engine.scoring import SCORING_VERSION
from cvb_engine.store import CheckOutcome, ConstraintResult, Record, Run, as_utc

# --------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunInfo:
    """One stored run with the counts the run picker shows."""

    id: str
    created: datetime
    updated: datetime
    status: str
    prompt_version: str
    total_cells: int
    n_records: int
    models: tuple[str, ...]
    note: str | None = None

    @property
    def label(self) -> str:
        day = self.created.strftime("%Y-%m-%d %H:%M")
        return f"{self.id} · {day} · {self.n_records:,} records · {self.status}"


def list_runs(session: Session) -> list[RunInfo]:
    """Every run, newest first, with its record count and models.

    Both come from the ``(run_id, model, arm)`` index alone: listing runs never
    reads the record rows (and their response texts).
    """
    counts = {
        str(rid): int(n)
        for rid, n in session.execute(
            sa_select(col(Record.run_id), func.count()).group_by(Record.run_id)
        )
    }
    models: dict[str, list[str]] = {}
    for rid, model in session.execute(
        sa_select(col(Record.run_id), col(Record.model)).distinct().order_by(Record.model)
    ):
        models.setdefault(rid, []).append(model)
    # Columns as stored, not through the ORM: a store is untrusted, and a time stamp that
    # does not parse, a status or a note of another type must not take the page down.
    runs = session.execute(
        sa_select(
            col(Run.id),
            type_coerce(col(Run.created), String),
            type_coerce(col(Run.updated), String),
            col(Run.status),
            col(Run.prompt_version),
            col(Run.total_cells),
            col(Run.note),
        ).order_by(col(Run.created).desc(), col(Run.id))
    )
    return [
        RunInfo(
            id=stored_text(rid, MAX_NAME_SHOWN),
            created=_moment(created),
            updated=_moment(updated),
            status=stored_text(status, MAX_NAME_SHOWN),
            prompt_version=stored_text(prompt_version, MAX_NAME_SHOWN),
            total_cells=stored_count(total) or 0,
            n_records=int(counts.get(str(rid), 0)),
            models=tuple(stored_text(m, MAX_NAME_SHOWN) for m in models.get(rid, ())),
            note=stored_text(note, 2_000) if note is not None else None,
        )
        for rid, created, updated, status, prompt_version, total, note in runs
    ]


def _moment(value: object) -> datetime:
    # a stored time stamp: a datetime (PostgreSQL), ISO text (SQLite), else the epoch
    if isinstance(value, datetime):
        return as_utc(value)
    try:
        return as_utc(datetime.fromisoformat(str(value)))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)


@dataclass(frozen=True)
class DataVersion:
    """A fingerprint of a set of runs' records, and whether they hold IVR problems.

    It changes when a record is added (a live run) or re-scored (``cvb score``
    sets ``scored_at``), so caches keyed by it never serve stale figures. One
    pass over the runs' rows computes it.
    """

    n_records: int
    last_id: int
    last_scored: str
    has_ivr: bool


def data_version(session: Session, run_ids: Iterable[str]) -> DataVersion:
    """The :class:`DataVersion` of ``run_ids`` (one aggregate query)."""
    ids = sorted(set(run_ids))
    if not ids:
        return DataVersion(0, 0, "", False)
    stated = func.max(case((col(Record.stated_passed).is_not(None), 1), else_=0))
    n, last, scored, ivr_ = session.execute(
        sa_select(
            func.count(), func.max(col(Record.id)), func.max(col(Record.scored_at)), stated
        ).where(col(Record.run_id).in_(ids))
    ).one()
    return DataVersion(int(n or 0), int(last or 0), str(scored or ""), bool(ivr_))


# --------------------------------------------------------------------------- aggregates


@dataclass
class Aggregates:
    """Every figure of the overview and the breakdowns for a set of runs (pooled)."""

    run_ids: tuple[str, ...]
    summary: Summary
    scenario_category: dict[str, str]
    n_records: int
    n_errors: int  # API failures
    # scoring version -> scored records it judged (1: NULL, before answer outcomes)
    scoring_versions: dict[int, int] = field(default_factory=dict)
    # run id -> how its executed checks were isolated (:func:`cvb_engine.report.sandbox_label`)
    sandboxes: dict[str, str] = field(default_factory=dict)
    # whether any of these runs was judged on a backend weaker than bwrap
    weaker_sandbox: bool = False
    # error records of a memory layer's failure (memory arms): not API failures
    n_memory_errors: int = 0

    @property
    def sandbox_text(self) -> str:
        """One line naming the sandbox backends that judged these runs."""
        labels = sorted(set(self.sandboxes.values()))
        if len(labels) <= 1:
            return f"Sandbox: {labels[0] if labels else 'not recorded'}"
        return "Sandbox: " + "; ".join(f"{rid}: {label}" for rid, label in self.sandboxes.items())

    @property
    def n_scored(self) -> int:
        return sum(r.n for r in self.summary.strict.values())

    @property
    def scenarios(self) -> list[str]:
        return sorted(self.scenario_category)

    @property
    def older_rules_text(self) -> str | None:
        """The warning that some scored records were judged by older scoring rules, or None."""
        return ReportNotes(self.scoring_versions).older_rules_text()


def aggregates(session: Session, run_ids: Iterable[str]) -> Aggregates:
    """Tallies aggregated in SQL, then every metric (the engine's own functions)."""
    ids = tuple(sorted(set(run_ids)))
    tallies, ctallies = db_tallies(session, ids)
    summary = summarize(tallies, ctallies, traces=db_trace_rows(session, ids))
    runs = [(run, rid) for rid in ids if (run := session.get(Run, rid)) is not None]
    return Aggregates(
        run_ids=ids,
        summary=summary,
        scenario_category={t.scenario_id: t.category for t in tallies},
        n_records=sum(t.n_scored + t.n_errors + t.n_memory_errors for t in tallies),
        n_errors=sum(t.n_errors for t in tallies),
        n_memory_errors=sum(t.n_memory_errors for t in tallies),
        scoring_versions=scoring_versions(session, ids) if ids else {},
        sandboxes={rid: sandbox_label(run.params) for run, rid in runs},
        weaker_sandbox=any(weaker_backends(run.params) for run, _ in runs),
    )


def report_notes(
    session: Session, run_ids: Iterable[str], scenarios_root: str | Path | None
) -> ReportNotes:
    """What the Markdown and HTML reports of ``run_ids`` say besides the metrics (as
    ``cvb report`` does): the scoring versions of their records and the stated limitations
    of their scenarios' constraints, read from the library under ``scenarios_root``.

    A library that is not there or does not load gives no limitations: an export never
    fails for want of its notes.
    """
    ids = sorted(set(run_ids))
    if not ids:
        return ReportNotes()
    limitations: tuple[tuple[str, str, str], ...] = ()
    if scenarios_root is not None and Path(scenarios_root).is_dir():
        try:
            library = load_library(scenarios_root)
        except ScenarioError:
            library = {}
        limitations = limitations_of(library, run_scenario_ids(session, ids))
    return ReportNotes(scoring_versions(session, ids), limitations)


@dataclass(frozen=True)
class ScenarioRow:
    """One (model, scenario): strict accuracy per arm and the mandated − incentivized gap."""

    model: str
    scenario_id: str
    category: str
    rates: dict[str, Rate]
    gap: float | None


def _point_gap(rates: Mapping[str, Rate]) -> float | None:
    m, i = rates.get(SeedArm.MANDATED), rates.get(SeedArm.INCENTIVIZED)
    if m is None or i is None or m.value is None or i.value is None:
        return None
    return m.value - i.value


def scenario_rows(
    agg: Aggregates,
    *,
    models: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
) -> list[ScenarioRow]:
    """Per-scenario strict accuracy, filtered by model and category; largest gap first."""
    s = agg.summary
    out = []
    for model in s.models:
        if models and model not in models:
            continue
        for sid in agg.scenarios:
            cat = agg.scenario_category[sid]
            if categories and cat not in categories:
                continue
            rates = {a: r for a in s.arms if (r := s.by_scenario.get((model, a, sid))) is not None}
            if rates:
                out.append(ScenarioRow(model, sid, cat, rates, _point_gap(rates)))
    return sorted(
        out, key=lambda r: (-(r.gap if r.gap is not None else -9), r.model, r.scenario_id)
    )


@dataclass(frozen=True)
class ConstraintRow:
    """One (model, scenario, constraint): honored share per arm."""

    model: str
    scenario_id: str
    category: str
    constraint_id: str
    rates: dict[str, Rate]
    gap: float | None  # honored when mandated − honored as memory


def constraint_rows(
    agg: Aggregates,
    *,
    models: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
) -> list[ConstraintRow]:
    """Per-constraint honored share per arm, filtered by model and category."""
    s = agg.summary
    grouped: dict[tuple[str, str, str], dict[str, Rate]] = {}
    for (model, arm, sid, cid), rate in s.by_constraint.items():
        grouped.setdefault((model, sid, cid), {})[arm] = rate
    out = []
    for (model, sid, cid), rates in sorted(grouped.items()):
        cat = agg.scenario_category.get(sid, "")
        if (models and model not in models) or (categories and cat not in categories):
            continue
        ordered = {a: rates[a] for a in s.arms if a in rates}
        out.append(ConstraintRow(model, sid, cat, cid, ordered, _point_gap(ordered)))
    return out


def only_when_ordered(
    agg: Aggregates,
    *,
    models: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
) -> list[ConstraintRow]:
    """Constraints honored more often as orders than as memory, largest difference first
    (:func:`cvb_engine.metrics.honored_only_when_ordered`, with the counts behind it)."""
    s = agg.summary
    out = []
    for model, sid, cid, _, _ in honored_only_when_ordered(s):
        cat = agg.scenario_category.get(sid, "")
        if (models and model not in models) or (categories and cat not in categories):
            continue
        rates = {
            a: r for a in s.arms if (r := s.by_constraint.get((model, a, sid, cid))) is not None
        }
        out.append(ConstraintRow(model, sid, cat, cid, rates, _point_gap(rates)))
    return out


# --------------------------------------------------------------------------- compare runs


def _difference(a: Rate | Interval | None, b: Rate | Interval | None) -> float | None:
    """B − A of two point estimates, None when either is missing."""
    if a is None or b is None or a.value is None or b.value is None:
        return None
    return b.value - a.value


@dataclass(frozen=True)
class ArmDelta:
    """Strict accuracy of one (model, arm) in run A and run B."""

    model: str
    arm: str
    a: Rate | None
    b: Rate | None

    @property
    def delta(self) -> float | None:
        return _difference(self.a, self.b)


@dataclass(frozen=True)
class GapDelta:
    """The gap of one model in run A and run B."""

    model: str
    a: Interval | None
    b: Interval | None

    @property
    def delta(self) -> float | None:
        return _difference(self.a, self.b)


@dataclass(frozen=True)
class Comparison:
    """Run B against run A, per model: arm accuracy and gap, each with B − A. ``only_in_a``
    and ``only_in_b`` name the models of one run; ``arms_only_in_a`` and ``arms_only_in_b``
    the arms of one run (not compared: there is no B − A to take)."""

    run_a: str
    run_b: str
    models: list[str]
    arms: list[str]
    arm_deltas: list[ArmDelta]
    gap_deltas: list[GapDelta]
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    arms_only_in_a: list[str] = field(default_factory=list)
    arms_only_in_b: list[str] = field(default_factory=list)


def compare_summaries(run_a: str, a: Summary, run_b: str, b: Summary) -> Comparison:
    """Per-model deltas between two summaries (B − A) on every arm both runs ran (the seed
    arms first, then the variants in the matrix's order); models of either run are listed."""
    models = sorted(set(a.models) | set(b.models))
    arms = ordered_arms(set(a.arms) & set(b.arms))
    arm_deltas = [
        ArmDelta(m, arm, a.strict.get((m, arm)), b.strict.get((m, arm)))
        for m in models
        for arm in arms
    ]
    gap_deltas = [GapDelta(m, a.gap.get(m), b.gap.get(m)) for m in models]
    return Comparison(
        run_a=run_a,
        run_b=run_b,
        models=models,
        arms=arms,
        arm_deltas=arm_deltas,
        gap_deltas=gap_deltas,
        only_in_a=sorted(set(a.models) - set(b.models)),
        only_in_b=sorted(set(b.models) - set(a.models)),
        arms_only_in_a=ordered_arms(set(a.arms) - set(b.arms)),
        arms_only_in_b=ordered_arms(set(b.arms) - set(a.arms)),
    )


def compare_runs(session: Session, run_a: str, run_b: str) -> Comparison:
    """Compare two stored runs (each aggregated in SQL on its own)."""
    return compare_summaries(
        run_a, aggregates(session, [run_a]).summary, run_b, aggregates(session, [run_b]).summary
    )


# --------------------------------------------------------------------------- one cell


@dataclass(frozen=True)
class CheckView:
    """One check's verdict on one record, with the spans that triggered it."""

    check_id: str
    kind: str
    passed: bool
    reason: str
    scope: str
    evidence: tuple[tuple[int, int, int], ...]  # (line, col, length)

    def label(self, constraint_id: str) -> str:
        return f"{constraint_id}/{self.check_id}"


@dataclass(frozen=True)
class ConstraintView:
    constraint_id: str
    honored: bool
    checks: tuple[CheckView, ...]

    @property
    def failed(self) -> tuple[CheckView, ...]:
        return tuple(c for c in self.checks if not c.passed)


@dataclass(frozen=True)
class CellRecord:
    """One stored record with everything the side-by-side view shows."""

    id: int
    run_id: str
    model: str
    scenario_id: str
    scenario_version: int
    category: str
    arm: str
    rep: int
    status: str
    error: str | None
    response: str
    code: str
    strict: bool | None
    stated_passed: bool | None
    latency_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    prompt_version: str
    messages_sha256: str
    scenario_sha256: str
    constraints: tuple[ConstraintView, ...]
    # answered | unparseable | no-code; None for an error record or one scored before outcomes
    outcome: str | None = None
    truncated: bool = False  # the endpoint stopped at max_tokens (finish_reason "length")
    response_cut: bool = False  # cvb stored the reply cut at --max-response-chars
    reasoning: str | None = None  # the endpoint's separate reasoning field, never scored
    scoring_version: int | None = None  # None: version 1, before outcomes
    # an error record's kind: "memory" (a memory layer failed), else "api"
    error_kind: str | None = None
    # what a memory layer gave the cell (memory and memory-tool arms), read as untrusted
    # data; None when there is none or it does not read (memory_unreadable says which)
    memory: Trace | None = None
    memory_unreadable: bool = False
    # which constraints' notes reached the model whole (incentivized stale=/budget=)
    delivery: Delivery | None = None
    # the agent episode (agent arm), read as untrusted data; None when there is none or
    # it does not read (agent_unreadable says which)
    agent: AgentTrace | None = None
    agent_unreadable: bool = False
    # past the view's budget: constraints and evidence spans left out, and whether a
    # stored value did not read (shown as missing, never as a crash)
    constraints_omitted: int = 0
    spans_omitted: int = 0
    malformed: bool = False

    @property
    def cut_constraints(self) -> list[str]:
        """The constraints with a note cut from the memory the model saw (``budget=``)."""
        return self.delivery.cut_ids() if self.delivery is not None else []

    @property
    def memory_failure(self) -> bool:
        """An error record of a memory layer's failure (not an API failure)."""
        return self.status == RecordStatus.ERROR and self.error_kind == ErrorKind.MEMORY

    @property
    def violated(self) -> list[str]:
        return [c.constraint_id for c in self.constraints if not c.honored]

    @property
    def older_rules(self) -> bool:
        """Scored by rules older than this cvb's (re-scoring may change its verdicts)."""
        return (
            self.status == RecordStatus.OK
            and self.strict is not None
            and self.rules < SCORING_VERSION
        )

    @property
    def rules(self) -> int:
        """The scoring version that judged the record (a NULL one is version 1)."""
        return self.scoring_version if self.scoring_version is not None else 1


def split_span(text: str, line: int, col: int, length: int) -> list[tuple[int, int, int]]:
    """One evidence span as per-line spans that cover visible text.

    Spans are anchored at their start line and cut at its end
    (:func:`cvb_engine.checks.base.span_from_offsets`), so a match of
    ``(?m)^\\s*import requests`` that starts on the blank line above the import
    arrives as one blank character. A span that covers only whitespace up to
    the end of its line continued onto the next lines: it is shown on the next
    line that has text (its text without indentation). Spans that do cover
    text pass through, cut at each newline should they run past one.
    """
    lines = text.split("\n")
    if not 1 <= line <= len(lines) or length <= 0:
        return [(line, col, length)]
    pieces: list[tuple[int, int, int]] = []
    remaining, n, c = length, line, max(col, 0)
    while remaining > 0 and n <= len(lines):
        current = lines[n - 1]
        chunk = current[c : c + min(remaining, max(len(current) - c, 0))]
        if chunk.strip():
            start = c + len(chunk) - len(chunk.lstrip())
            pieces.append((n, start, len(chunk.rstrip()) - (start - c)))
        remaining -= len(chunk) + 1  # the newline counts as one character of the span
        n, c = n + 1, 0
    if pieces:
        return pieces
    if not lines[line - 1][max(col, 0) :].strip():
        for n in range(line + 1, len(lines) + 1):
            body = lines[n - 1]
            if body.strip():
                indent = len(body) - len(body.lstrip())
                return [(n, indent, len(body.strip()))]
    return [(line, col, length)]


@dataclass(frozen=True)
class CellChoices:
    """What can be picked in one run: models, scenarios (with category), repetitions, arms."""

    models: list[str]
    scenarios: dict[str, str]
    reps: list[int]
    arms: list[str]


def cell_choices(session: Session, run_id: str) -> CellChoices:
    """The distinct models, scenarios, repetitions and arms of one run (no texts read)."""
    where = col(Record.run_id) == run_id
    models = [m for (m,) in session.execute(sa_select(col(Record.model)).where(where).distinct())]
    arms = [a for (a,) in session.execute(sa_select(col(Record.arm)).where(where).distinct())]
    scen = session.execute(
        sa_select(col(Record.scenario_id), col(Record.category)).where(where).distinct()
    )
    reps = [r for (r,) in session.execute(sa_select(col(Record.rep)).where(where).distinct())]
    return CellChoices(
        models=sorted(models),
        scenarios=dict(sorted((str(s), str(c)) for s, c in scen)),
        reps=sorted(reps),
        arms=ordered_arms(arms),
    )


#: What one cell's view shows at most per record: constraints (with their checks) and
#: evidence spans; a store may hold thousands, the view says how many more there are.
MAX_CONSTRAINTS_SHOWN = 100
MAX_SPANS_SHOWN = 200
#: The longest stored text a view takes (a response, code, reasoning, an error, a reason).
MAX_TEXT_SHOWN = 2_000_000
MAX_NAME_SHOWN = 500


def stored_text(value: object, limit: int = MAX_TEXT_SHOWN) -> str:
    """A stored text as a view takes it: a string (another type shown as its ``repr``),
    at most ``limit`` characters with a note of how many more there were."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        return f"{text[:limit]}… ({len(text) - limit:,} more characters)"
    return text


def stored_number(value: object) -> float | None:
    """A stored number as a view takes it: finite, else None (SQLite keeps any value)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int past a float's range
        return None
    return number if math.isfinite(number) else None


def stored_count(value: object) -> int | None:
    """A stored count (tokens, a version, a rep) as a view takes it: an int 0…10¹², else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**12:
        return None
    return value


def stored_spans(
    evidence_json: object, budget: int
) -> tuple[tuple[tuple[int, int, int], ...], int, bool]:
    """Evidence spans from their stored JSON: (spans within ``budget``, spans left out,
    whether the value did not read as a list of {line, col, length} counts)."""
    try:
        raw = json.loads(evidence_json) if isinstance(evidence_json, str) else None
    except (ValueError, RecursionError):
        raw = None
    if not isinstance(raw, list):
        return (), 0, evidence_json not in (None, "", "[]")
    spans = []
    malformed = False
    for item in raw:
        values = [item.get(k) for k in ("line", "col", "length")] if isinstance(item, dict) else []
        if len(values) != 3 or any(stored_count(v) is None for v in values):
            malformed = True
            continue
        line, column, length = (int(v) for v in values if isinstance(v, int))
        spans.append((line, column, length))
    kept = spans[: max(budget, 0)]
    return tuple(kept), len(spans) - len(kept), malformed


def cell_records(
    session: Session, run_id: str, model: str, scenario_id: str, rep: int
) -> dict[str, CellRecord]:
    """The records of one cell (one per arm), with their check outcomes and evidence.

    Every stored value is read as untrusted: a text of the wrong type or past
    :data:`MAX_TEXT_SHOWN`, a number that is not finite, evidence that does not read, is
    shown as missing or cut (``malformed`` says so), never raised; constraints and spans
    past :data:`MAX_CONSTRAINTS_SHOWN` / :data:`MAX_SPANS_SHOWN` are counted, not shown.
    """
    records = session.exec(
        select(Record)
        # time stamps are never shown here, and a stored one may not parse
        .options(*(defer(cast(Any, c)) for c in (Record.created, Record.scored_at)))
        .where(
            Record.run_id == run_id,
            Record.model == model,
            Record.scenario_id == scenario_id,
            Record.rep == rep,
        )
    ).all()
    ids = [r.id for r in records if isinstance(r.id, int)]
    checks: dict[int, dict[str, list[CheckView]]] = {rid: {} for rid in ids}
    honored: dict[int, dict[str, bool]] = {rid: {} for rid in ids}
    spans_left = dict.fromkeys(ids, MAX_SPANS_SHOWN)
    omitted = dict.fromkeys(ids, 0)
    malformed: set[int] = set()
    if ids:
        for o in session.exec(
            select(CheckOutcome)
            .where(col(CheckOutcome.record_id).in_(ids))
            .order_by(col(CheckOutcome.record_id), col(CheckOutcome.id))
        ):
            rid = o.record_id
            spans, more, bad = stored_spans(o.evidence_json, spans_left[rid])
            spans_left[rid] -= len(spans)
            omitted[rid] += more
            if bad:
                malformed.add(rid)
            checks[rid].setdefault(stored_text(o.constraint_id, MAX_NAME_SHOWN), []).append(
                CheckView(
                    stored_text(o.check_id, MAX_NAME_SHOWN),
                    stored_text(o.kind, MAX_NAME_SHOWN),
                    o.passed is True,
                    stored_text(o.reason, 2_000),
                    "response" if o.scope == "response" else "code",
                    spans,
                )
            )
        for c in session.exec(
            select(ConstraintResult)
            .where(col(ConstraintResult.record_id).in_(ids))
            .order_by(col(ConstraintResult.id))
        ):
            honored[c.record_id][stored_text(c.constraint_id, MAX_NAME_SHOWN)] = c.honored is True
    out: dict[str, CellRecord] = {}
    for r in records:
        rid = r.id if isinstance(r.id, int) else 0
        listed = list(honored.get(rid, {}).items())
        views = tuple(
            ConstraintView(cid, ok, tuple(checks.get(rid, {}).get(cid, ())))
            for cid, ok in listed[:MAX_CONSTRAINTS_SHOWN]
        )
        arm = stored_text(r.arm, MAX_NAME_SHOWN)
        trace = read_trace(r.memory_json) if isinstance(r.memory_json, str) else None
        delivery = read_delivery(r.memory_json) if isinstance(r.memory_json, str) else None
        latency = stored_number(r.latency_s)
        out[arm] = CellRecord(
            id=rid,
            run_id=stored_text(r.run_id, MAX_NAME_SHOWN),
            model=stored_text(r.model, MAX_NAME_SHOWN),
            scenario_id=stored_text(r.scenario_id, MAX_NAME_SHOWN),
            scenario_version=stored_count(r.scenario_version) or 0,
            category=stored_text(r.category, MAX_NAME_SHOWN),
            arm=arm,
            rep=stored_count(r.rep) or 0,
            status=RecordStatus.OK if r.status == RecordStatus.OK else RecordStatus.ERROR,
            error=stored_text(r.error) if r.error is not None else None,
            response=stored_text(r.response),
            code=stored_text(r.code),
            strict=r.strict if isinstance(r.strict, bool) else None,
            stated_passed=r.stated_passed if isinstance(r.stated_passed, bool) else None,
            latency_s=latency if latency is not None and latency >= 0 else None,
            prompt_tokens=stored_count(r.prompt_tokens),
            completion_tokens=stored_count(r.completion_tokens),
            finish_reason=stored_text(r.finish_reason, MAX_NAME_SHOWN) or None,
            prompt_version=stored_text(r.prompt_version, MAX_NAME_SHOWN),
            messages_sha256=stored_text(r.messages_sha256, MAX_NAME_SHOWN),
            scenario_sha256=stored_text(r.scenario_sha256, MAX_NAME_SHOWN),
            constraints=views,
            outcome=r.outcome if r.outcome in ("answered", "unparseable", "no-code") else None,
            truncated=r.truncated is True,
            response_cut=r.response_cut is True,
            reasoning=stored_text(r.reasoning) or None,
            scoring_version=stored_count(r.scoring_version),
            error_kind=ErrorKind.MEMORY if r.error_kind == ErrorKind.MEMORY else None,
            memory=trace,
            delivery=delivery,
            memory_unreadable=bool(r.memory_json) and trace is None and delivery is None,
            agent=(episode := read_agent_trace(r.agent_json)),
            agent_unreadable=isinstance(r.agent_json, str) and bool(r.agent_json) and not episode,
            constraints_omitted=max(0, len(listed) - MAX_CONSTRAINTS_SHOWN),
            spans_omitted=omitted.get(rid, 0),
            malformed=rid in malformed,
        )
    return {arm: out[arm] for arm in ordered_arms(out)}


# --------------------------------------------------------------------------- IVR


def has_ivr(session: Session, run_ids: Iterable[str]) -> bool:
    """Whether any record of the runs carries a stated-test verdict (an IVR problem)."""
    ids = list(run_ids)
    if not ids:
        return False
    stmt = (
        sa_select(literal(1))
        .where(col(Record.run_id).in_(ids), col(Record.stated_passed).is_not(None))
        .limit(1)
    )
    return session.execute(stmt).first() is not None


def ivr_results(session: Session, run_ids: Iterable[str]) -> dict[tuple[str, str], IVRSummary]:
    """IVR per (model, arm) for the runs (empty when they hold no IVR problem)."""
    ids = list(run_ids)
    if not has_ivr(session, ids):
        return {}
    return ivr(db_ivr_rows(session, ids))
