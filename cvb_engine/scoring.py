"""Scoring: apply a scenario's checks to one response (pure, re-runnable).

A response is parsed once (the :class:`~cvb_engine.checks.base.Subject`
caches its tree and each kind's derived analysis), then every check of every
constraint runs on it. A constraint is honored when all its checks pass; a
record is strictly accurate when every constraint is honored (DESIGN §7).
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
from dataclasses import dataclass, field
from typing import Any

from cvb_engine.checks.base import CheckKind, CheckResult, Subject, get_kind
from cvb_engine.extract import Outcome, extract, outcome_from
from cvb_engine.results_format import CheckEntry, ConstraintEntry
from cvb_engine.scenario import Scenario

#: The rules that turn a reply into verdicts. 1: the first build (no outcomes;
#: a reply without code could honor a constraint). 2: outcomes, structural
#: solution extraction, no-code honors nothing. Bump it whenever extraction or
#: a check kind's judgement changes.
SCORING_VERSION = 2
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
        return ConstraintEntry.of(self).model_dump(mode="json")


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
    """Run one check, turning any exception into a failed result (model output is data)."""
    return _run(get_kind(kind_name), kind_name, params, subject)


def _run(kind: CheckKind | None, kind_name: str, params: Any, subject: Subject) -> CheckResult:
    if kind is None:
        return CheckResult(passed=False, reason=f"unknown check kind {kind_name!r}")
    try:
        return kind.run(params, subject)
    except Exception as exc:  # a bug in a check (or a RecursionError) must not stop a run
        return CheckResult(passed=False, reason=f"check crashed: {type(exc).__name__}: {exc}")


# A check's verdicts by the id of their result: most results are objects a check
# kind shares between records (nothing to blame), and so can their verdicts be.
_Verdicts = dict[int, CheckVerdict]
Plan = list[tuple[str, list[tuple[str, str, Any, CheckKind | None, _Verdicts]]]]
# Every check of the plan as (kind name, params): what a Subject is told will run on it.
Checks = tuple[tuple[str, Any], ...]
_PLANS: dict[int, tuple[Scenario, Plan, Checks]] = {}


def _plan(scenario: Scenario) -> tuple[Plan, Checks]:
    """(constraint id, [(check id, kind, validated params, registered kind)]) for a
    scenario, validated once, and every check of it as (kind name, params).

    Scenarios are immutable, so the validated parameters are cached per object;
    re-scoring 100,000 records then validates each check's parameters once.
    """
    hit = _PLANS.get(id(scenario))
    if hit is not None and hit[0] is scenario:
        return hit[1], hit[2]
    plan: Plan = [
        (
            c.id,
            [
                (check_id, spec.kind, spec.params(), get_kind(spec.kind), {})
                for check_id, spec in zip(c.check_ids(), c.checks, strict=True)
            ],
        )
        for c in scenario.constraints
    ]
    checks = tuple((name, params) for _, listed in plan for _, name, params, _, _ in listed)
    if len(_PLANS) > 1024:
        _PLANS.clear()
    _PLANS[id(scenario)] = (scenario, plan, checks)
    return plan, checks


def score_code(
    scenario: Scenario,
    code: str,
    response: str | None = None,
    *,
    outcome: Outcome | None = None,
    truncated: bool = False,
    tree: ast.Module | None = None,
) -> Scored:
    """Score already-extracted ``code`` against every constraint of ``scenario``.

    ``outcome`` defaults to what ``code`` itself is (parsed once, for the checks
    too); ``tree`` is the parse of ``code`` when the caller has it.
    """
    plan, every_check = _plan(scenario)
    subject = Subject(code, code if response is None else response, {}, every_check)
    if tree is not None:
        subject._tree = tree
    if outcome is None:
        parsed = subject.tree if code.strip() else None
        outcome = outcome_from(code, parsed if isinstance(parsed, ast.Module) else None)
    if outcome == "no-code":
        return Scored(
            code=code,
            constraints=tuple(
                ConstraintVerdict(cid, (CheckVerdict("no-code", "outcome", NO_CODE_CHECK),))
                for cid, _ in plan
            ),
            stated_passed=False
            if scenario.stated_tests and scenario.stated_tests.strip()
            else None,
            stated_detail=NO_CODE_CHECK if scenario.stated_tests else None,
            outcome=outcome,
            truncated=truncated,
        )
    verdicts = []
    for constraint_id, checks in plan:
        check_verdicts = []
        for check_id, name, params, kind, seen in checks:
            result = _run(kind, name, params, subject)
            verdict = seen.get(id(result))
            if verdict is None or verdict.result is not result:
                verdict = CheckVerdict(check_id, name, result)
                if len(seen) > 16:
                    seen.clear()
                # The verdict holds the result, so its id stays unique while cached.
                seen[id(result)] = verdict
            check_verdicts.append(verdict)
        verdicts.append(ConstraintVerdict(constraint_id, tuple(check_verdicts)))
    stated: CheckResult | None = None
    if scenario.stated_tests and scenario.stated_tests.strip():
        stated = _run_stated_tests(scenario.stated_tests, subject)
    return Scored(
        code=code,
        constraints=tuple(verdicts),
        stated_passed=None if stated is None else stated.passed,
        stated_detail=stated,
        outcome=outcome,
        truncated=truncated,
    )


def score_response(scenario: Scenario, response: str, finish_reason: str | None = None) -> Scored:
    """Extract the solution from ``response`` and score it.

    Checks with ``scope: response`` read the reply without its reasoning.
    """
    found = extract(response, scenario.entry_point)
    return score_code(
        scenario,
        found.code,
        found.answer,
        outcome=found.outcome,
        truncated=finish_reason == "length",
        tree=found.tree,
    )


def _run_stated_tests(tests: str, subject: Subject) -> CheckResult:
    """Stated tests execute code, so they go through the ``exec`` kind (and its sandbox)."""
    kind = get_kind("exec")
    if kind is None:
        return CheckResult(passed=False, reason="stated tests need the 'exec' check kind")
    return run_check("exec", kind.params.model_validate({"test": tests}), subject)


def executes_code(scenario: Scenario) -> bool:
    """Whether scoring ``scenario`` runs model code (stated tests or an executing check),
    so that a command can refuse before it starts when no sandbox works."""
    if scenario.stated_tests:
        return True
    return any(
        (kind := get_kind(spec.kind)) is not None and kind.executes_code
        for constraint in scenario.constraints
        for spec in constraint.checks
    )
