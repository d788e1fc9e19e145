"""Scoring: apply a scenario's checks to one response (pure, re-runnable).

A scenario's checks are prepared once, into its :class:`ScoringPlan` (see
:func:`plan`). A response is parsed once (the
:class:`~cvb_engine.checks.base.Subject` caches its tree and each kind's derived
analysis), then every prepared check of every constraint runs on it. A constraint is honored when all its checks pass; a
record is strictly accurate when every constraint is honored (README: Metrics).
Nothing here raises on model output: a check that crashes is recorded as a
failed check with the exception in its reason.

Every scored record also has an *outcome* (see :mod:`cvb_engine.extract`):
``answered``, ``unparseable`` or ``no-code``, and a ``truncated`` flag when
the endpoint's ``finish_reason`` was ``length``. A ``no-code`` record honors
no constraint: its checks do not run, and each constraint carries one failed
verdict of kind ``outcome`` that says why (writing nothing is never credited
as obeying a "don't"). :data:`SCORING_VERSION` names these rules; records keep
the version that judged them, so a report can say a run was judged by older
rules and ``cvb score`` can bring it up to date.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cvb_engine.checks.applies import CONDITIONS, applies
from cvb_engine.checks.base import (
    CheckKind,
    CheckResult,
    Prepared,
    Sibling,
    Subject,
    get_kind,
)
from cvb_engine.extract import Outcome, extract, outcome_from, sanitize, without_files
from cvb_engine.results_format import CheckEntry, ConstraintEntry
from cvb_engine.scenario import Constraint, Reads, Scenario
from cvb_engine.scenario import executes_code as executes_code  # re-exported

#: The rules that turn a reply into verdicts. 1: the first build (no outcomes;
#: a reply without code could honor a constraint). 2: outcomes, structural
#: solution extraction, no-code honors nothing. 3: truncated code judged on its
#: longest prefix that parses, the solution sanitized statement by statement
#: (unless a constraint reads module-level code), more block shapes read. Bump it
#: whenever extraction or a check kind's judgement changes.
SCORING_VERSION = 3
#: Added to the reason of a check that failed for want of something (no evidence to
#: blame) in a reply cut off at its token limit: what it asks for may have come later.
CUT_NOTE = (
    " (the reply was cut off at its token limit; what this check asks for may have come "
    "after the cut, so the code written so far is not blamed for it)"
)
NO_CODE_CHECK = CheckResult(
    passed=False,
    reason="the reply has no code (a refusal, a question, prose, or reasoning that never "
    "ended): no constraint is honored",
)


@dataclass(frozen=True)
class CheckVerdict:
    check_id: str
    kind: str
    result: CheckResult

    def as_dict(self) -> dict[str, Any]:
        """The verdict as the results file has it."""
        return CheckEntry.of(self.check_id, self.kind, self.result).model_dump(mode="json")


@dataclass(frozen=True)
class ConstraintVerdict:
    constraint_id: str
    checks: tuple[CheckVerdict, ...]

    @property
    def honored(self) -> bool:
        return all(c.result.passed for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        """The verdict as the results file has it."""
        entry = ConstraintEntry.of_checks(
            CheckEntry.of(c.check_id, c.kind, c.result) for c in self.checks
        )
        return entry.model_dump(mode="json")


@dataclass(frozen=True)
class Scored:
    code: str
    constraints: tuple[ConstraintVerdict, ...]
    stated_passed: bool | None = None
    stated_detail: CheckResult | None = None
    outcome: Outcome = "answered"
    truncated: bool = False
    scoring_version: int = SCORING_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def strict(self) -> bool:
        return all(c.honored for c in self.constraints)

    @property
    def n_honored(self) -> int:
        return sum(c.honored for c in self.constraints)

    def constraints_dict(self) -> dict[str, Any]:
        return {c.constraint_id: c.as_dict() for c in self.constraints}


def run_check(kind_name: str, params: Any, subject: Subject) -> CheckResult:
    """Run one check on one subject, turning any exception into a failed result (model
    output is data)."""
    kind = get_kind(kind_name)
    if kind is None:
        return _unknown(kind_name)
    return _run(_prepare(kind, params, ()), subject)


def _unknown(kind_name: str) -> CheckResult:
    return CheckResult(passed=False, reason=f"unknown check kind {kind_name!r}")


def _crashed(exc: Exception) -> CheckResult:
    return CheckResult(passed=False, reason=f"check crashed: {type(exc).__name__}: {exc}")


@dataclass(frozen=True, slots=True)
class _Failing:
    """What stands for a check that cannot be prepared: the same failed result always."""

    result: CheckResult

    @property
    def shared(self) -> tuple[CheckResult, ...]:
        return (self.result,)

    def run(self, subject: Subject) -> CheckResult:
        return self.result


def _prepare(kind: CheckKind, params: Any, siblings: Sequence[Sibling]) -> Prepared:
    try:
        return kind.prepare(params, siblings)
    except Exception as exc:  # as a crash while running: every record gets the failure
        return _Failing(_crashed(exc))


def _run(prepared: Prepared, subject: Subject) -> CheckResult:
    try:
        return prepared.run(subject)
    except Exception as exc:  # a bug in a check (or a RecursionError) must not stop a run
        return _crashed(exc)


@dataclass(frozen=True, slots=True)
class PlannedCheck:
    """One check of a plan: its id and kind, prepared, with one verdict made ahead for
    each result it shares between records (nothing to blame), so that records share
    those verdicts too."""

    check_id: str
    kind: str
    prepared: Prepared
    shared: tuple[CheckVerdict, ...]

    def verdict(self, subject: Subject) -> CheckVerdict:
        try:  # as _run, one call less: this runs for every check of every record
            result = self.prepared.run(subject)
        except Exception as exc:
            result = _crashed(exc)
        for verdict in self.shared:
            if verdict.result is result:
                return verdict
        return CheckVerdict(self.check_id, self.kind, result)


class ScoringPlan:
    """A scenario's checks prepared for scoring: the :class:`PlannedCheck` objects of
    each constraint, in order, every check prepared with all the scenario's checks as
    its siblings; the stated tests are prepared when first run (an ``exec`` check)."""

    __slots__ = (
        "_stated",
        "applies_when",
        "constraints",
        "entry_point",
        "reads",
        "source",
        "stated_tests",
    )

    def __init__(self, scenario: Scenario) -> None:
        #: The constraints the plan was made from (see :func:`plan`).
        self.source: list[Constraint] = scenario.constraints
        self.stated_tests = scenario.stated_tests
        specs = [spec for c in scenario.constraints for spec in c.checks]
        siblings: tuple[Sibling, ...] = tuple((spec.kind, spec.params()) for spec in specs)
        self.constraints: tuple[tuple[str, tuple[PlannedCheck, ...]], ...] = tuple(
            (
                c.id,
                tuple(
                    self._planned(check_id, spec.kind, spec.params(), siblings)
                    for check_id, spec in zip(c.check_ids(), c.checks, strict=True)
                ),
            )
            for c in scenario.constraints
        )
        #: What each constraint's checks read, in the order of ``constraints``.
        self.reads: tuple[Reads, ...] = tuple(c.reads for c in scenario.constraints)
        #: The condition each constraint applies under (None: always).
        self.applies_when: tuple[str | None, ...] = tuple(
            c.applies_when for c in scenario.constraints
        )
        self.entry_point = scenario.entry_point
        self._stated: Prepared | None = None

    @staticmethod
    def _planned(
        check_id: str, kind_name: str, params: Any, siblings: tuple[Sibling, ...]
    ) -> PlannedCheck:
        kind = get_kind(kind_name)
        prepared = (
            _Failing(_unknown(kind_name)) if kind is None else _prepare(kind, params, siblings)
        )
        shared = tuple(CheckVerdict(check_id, kind_name, r) for r in prepared.shared)
        return PlannedCheck(check_id, kind_name, prepared, shared)

    def stated(self) -> Prepared:
        """The stated tests as a prepared ``exec`` check (validated when first asked for)."""
        if self._stated is None:
            kind = get_kind("exec")
            if kind is None:
                self._stated = _Failing(
                    CheckResult(passed=False, reason="stated tests need the 'exec' check kind")
                )
            else:
                params = kind.params.model_validate({"test": self.stated_tests})
                self._stated = _prepare(kind, params, ())
        return self._stated


def plan(scenario: Scenario) -> ScoringPlan:
    """The scoring plan of ``scenario``, made once per scenario object and kept with it
    (re-scoring 100,000 records prepares each check once)."""
    slot = scenario.plan_slot()
    found = slot.value
    # A scenario's fields never change; the check is for a copy.copy(), which shares
    # the slot (model_copy starts an empty one) and may be given other constraints.
    if (
        not isinstance(found, ScoringPlan)
        or found.source is not scenario.constraints
        or found.stated_tests != scenario.stated_tests
    ):
        found = slot.value = ScoringPlan(scenario)
    return found


class _Subjects:
    """The subjects one record's checks read: the whole code, the sanitized solution
    (the same subject when sanitizing drops nothing), and either without the files a
    constraint is not about; made when first asked for and shared by the checks."""

    __slots__ = ("_made", "entry_point", "response", "whole")

    def __init__(self, whole: Subject, response: str, entry_point: str | None) -> None:
        self.whole = whole
        self.response = response
        self.entry_point = entry_point
        self._made: dict[tuple[bool, tuple[str, ...]], Subject] = {}

    def of(self, reads: Reads) -> Subject:
        key = (reads.module_level, tuple(reads.except_files))
        found = self._made.get(key)
        if found is not None:
            return found
        subject = self.whole
        tree = subject.tree
        if isinstance(tree, ast.Module):
            code = subject.code
            if not reads.module_level:
                code, tree = sanitize(code, tree, self.entry_point)
            if reads.except_files:
                code, tree = without_files(code, tree, reads.except_files)
            if code is not subject.code:
                subject = Subject(code, self.response)
                subject.use_tree(tree)
        self._made[key] = subject
        return subject


def _noted(verdict: CheckVerdict, check: PlannedCheck, cut_from: int) -> CheckVerdict:
    """A check that failed on code cut off at the token limit only for want of something
    the rest of the reply may have held: a required call, a test's behaviour (nothing in
    the code to blame), or an accumulator of the cut statement not read yet. It passes,
    saying why; a violation the written code shows still fails."""
    result = verdict.result
    if result.passed or result.timed_out:
        return verdict
    if result.evidence:
        params = getattr(check.prepared, "params", None)
        later_read = getattr(params, "construct_kind", None) == "unread-accumulator"
        if not later_read or any(span.line < cut_from for span in result.evidence):
            return verdict
    noted = CheckResult(passed=True, reason=result.reason + CUT_NOTE, scope=result.scope)
    return CheckVerdict(verdict.check_id, verdict.kind, noted)


_SOLUTION = Reads()
#: The verdict of a constraint whose condition the solution does not meet (one per
#: condition, shared by every record).
_NOT_APPLICABLE = {
    name: CheckVerdict("applies-when", "applies-when", CheckResult(passed=True, reason=reason))
    for name, (_, reason) in CONDITIONS.items()
}


def score_code(
    scenario: Scenario,
    code: str,
    response: str | None = None,
    *,
    outcome: Outcome | None = None,
    truncated: bool = False,
    tree: ast.Module | None = None,
    cut: bool = False,
) -> Scored:
    """Score already-extracted ``code`` against every constraint of ``scenario``.

    ``code`` is the solution whole; each constraint's checks read it sanitized unless
    the constraint reads module-level code (:class:`~cvb_engine.scenario.Reads`), and
    the stated tests run on the sanitized solution (a model's own wrong ``assert`` at
    the top level does not fail the import). ``outcome`` defaults to what ``code``
    itself is (parsed once, for the checks too); ``tree`` is the parse of ``code`` when
    the caller has it. ``cut``: the code is the longest prefix that parses of a reply
    cut off; with ``truncated`` too, a check that fails for want of something says so.
    """
    planned = plan(scenario)
    text = code if response is None else response
    whole = Subject(code, text)
    if tree is not None:
        whole.use_tree(tree)
    if outcome is None:
        parsed = whole.tree if code.strip() else None
        outcome = outcome_from(code, parsed if isinstance(parsed, ast.Module) else None)
    if outcome == "no-code":
        return Scored(
            code=code,
            constraints=tuple(
                ConstraintVerdict(cid, (CheckVerdict("no-code", "outcome", NO_CODE_CHECK),))
                for cid, _ in planned.constraints
            ),
            stated_passed=False
            if scenario.stated_tests and scenario.stated_tests.strip()
            else None,
            stated_detail=NO_CODE_CHECK if scenario.stated_tests else None,
            outcome=outcome,
            truncated=truncated,
        )
    subjects = _Subjects(whole, text, planned.entry_point)
    verdicts = tuple(
        ConstraintVerdict(constraint_id, tuple([check.verdict(subject) for check in checks]))
        if condition is None or applies(condition, subject)
        else ConstraintVerdict(constraint_id, (_NOT_APPLICABLE[condition],))
        for (constraint_id, checks), subject, condition in zip(
            planned.constraints,
            map(subjects.of, planned.reads),
            planned.applies_when,
            strict=True,
        )
    )
    if cut:
        parsed = whole.tree
        # the last top-level statement is the one the cut ended
        cut_from = parsed.body[-1].lineno if isinstance(parsed, ast.Module) and parsed.body else 1
        verdicts = tuple(
            ConstraintVerdict(
                v.constraint_id,
                tuple(
                    _noted(verdict, check, cut_from)
                    for verdict, check in zip(v.checks, checks, strict=False)
                ),
            )
            for v, (_, checks) in zip(verdicts, planned.constraints, strict=True)
        )
    stated: CheckResult | None = None
    if scenario.stated_tests and scenario.stated_tests.strip():
        stated = _run(planned.stated(), subjects.of(_SOLUTION))
    return Scored(
        code=code,
        constraints=verdicts,
        stated_passed=None if stated is None else stated.passed,
        stated_detail=stated,
        outcome=outcome,
        truncated=truncated,
        extra={"cut": True} if cut else {},
    )


def score_response(scenario: Scenario, response: str, finish_reason: str | None = None) -> Scored:
    """Extract the solution from ``response`` and score it.

    Checks with ``scope: response`` read the reply without its reasoning. A reply cut
    off at its token limit (``finish_reason`` ``length``) has code that does not parse
    judged on its longest prefix that does.
    """
    truncated = finish_reason == "length"
    found = extract(response, scenario.entry_point, truncated=truncated)
    return score_code(
        scenario,
        found.module,
        found.answer,
        outcome=found.outcome,
        truncated=truncated,
        tree=found.module_tree,
        cut=found.cut,
    )


def score_agent(scenario: Scenario, agent_json: str) -> Scored:
    """Score an agent episode (the ``agent`` arm): the final content of the files its task
    named, never the reply. A named file never written (or a trace that cannot be read)
    is ``no-code``: it honors nothing."""
    from cvb_engine.agent.trace import read_trace

    trace = read_trace(agent_json)
    if trace is None:
        return _no_code(scenario, "the agent episode's trace is unreadable: nothing to score")
    missing = [t for t in trace.targets if t not in {f.path for f in trace.files}]
    if not trace.targets or missing:
        named = ", ".join(missing) or "the named file"
        return _no_code(scenario, f"the agent never wrote {named}: no constraint is honored")
    code = trace.code()
    return score_code(scenario, code, code)


def _no_code(scenario: Scenario, reason: str) -> Scored:
    why = CheckResult(passed=False, reason=reason)
    has_tests = bool(scenario.stated_tests and scenario.stated_tests.strip())
    return Scored(
        code="",
        constraints=tuple(
            ConstraintVerdict(cid, (CheckVerdict("no-code", "outcome", why),))
            for cid, _ in plan(scenario).constraints
        ),
        stated_passed=False if has_tests else None,
        stated_detail=why if has_tests else None,
        outcome="no-code",
    )


def score_record(
    scenario: Scenario,
    response: str,
    finish_reason: str | None = None,
    agent_json: str | None = None,
) -> Scored:
    """Score a stored record: an agent episode from its files (:func:`score_agent`), any
    other answer from its reply (:func:`score_response`)."""
    if agent_json is not None:
        return score_agent(scenario, agent_json)
    return score_response(scenario, response, finish_reason)
