"""Metrics of DESIGN §7, as pure functions over counts.

Everything is computed from *tallies* — counts per (model, arm, scenario) and
per (model, arm, scenario, constraint) — so the same code serves a results
file read into memory and a database aggregated with ``GROUP BY`` (the studio
at 100,000 records never loads response texts to draw a chart).

Definitions:

* strict accuracy (model, arm) = strictly accurate records / scored records;
* per-constraint accuracy (model, arm) = honored (record, constraint) pairs / all pairs;
* gap (model) = strict(mandated) − strict(incentivized), with a 95% CI from a
  paired bootstrap over scenarios: each resample draws scenarios with
  replacement and recomputes both arms' strict accuracy on the same draw;
* error records are excluded from every denominator and counted apart;
* every scored record has an outcome (``answered``, ``unparseable``,
  ``no-code``; DESIGN §10) and may be ``truncated``: each outcome's share of
  the scored records, and strict and per-constraint accuracy **among answered**
  records, are reported beside the headline figures, which keep their
  definitions (a ``no-code`` record is scored, and honors nothing). Records
  scored before outcomes existed (scoring version 1) count as answered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# numpy is imported by the functions that resample: `import cvb_engine` (and so
# `cvb lint`, `cvb --help`) does not pay for it.

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20260729
CI_LEVEL = 0.95


@dataclass(frozen=True)
class RecordRow:
    """The part of a record that metrics need."""

    model: str
    scenario_id: str
    category: str
    arm: str
    status: str
    strict: bool | None
    constraints: Mapping[str, bool] = field(default_factory=dict)
    stated_passed: bool | None = None
    outcome: str | None = None  # None: scored before outcomes existed (counts as answered)
    truncated: bool = False


@dataclass(frozen=True)
class Tally:
    """Counts for one (model, arm, scenario)."""

    model: str
    arm: str
    scenario_id: str
    category: str
    n_scored: int
    n_strict: int
    n_errors: int
    # Outcomes of the scored records (answered = n_scored - unparseable - no-code).
    n_unparseable: int = 0
    n_no_code: int = 0
    n_truncated: int = 0
    n_answered_strict: int = 0

    @property
    def n_answered(self) -> int:
        return self.n_scored - self.n_unparseable - self.n_no_code


@dataclass(frozen=True)
class ConstraintTally:
    """Counts for one (model, arm, scenario, constraint)."""

    model: str
    arm: str
    scenario_id: str
    category: str
    constraint_id: str
    n: int
    n_honored: int
    n_answered: int = -1  # -1: same as n (every record answered)
    n_answered_honored: int = -1

    @property
    def answered(self) -> tuple[int, int]:
        """(honored, pairs) among answered records."""
        if self.n_answered < 0:
            return self.n_honored, self.n
        return self.n_answered_honored, self.n_answered


@dataclass(frozen=True)
class Rate:
    """k successes out of n scored (errors counted apart, not in n)."""

    k: int
    n: int
    errors: int = 0

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None

    def __add__(self, other: Rate) -> Rate:
        return Rate(self.k + other.k, self.n + other.n, self.errors + other.errors)


@dataclass(frozen=True)
class Interval:
    """A point estimate with a bootstrap confidence interval."""

    value: float | None
    low: float | None
    high: float | None
    n_units: int  # scenarios (gap) or problems (IVR) that entered the bootstrap


@dataclass(frozen=True)
class Outcomes:
    """How the scored records of one (model, arm) split by outcome."""

    n: int = 0
    answered: int = 0
    unparseable: int = 0
    no_code: int = 0
    truncated: int = 0

    def share(self, name: str) -> float | None:
        """The share of scored records with outcome ``name`` (or the truncated flag)."""
        count = {
            "answered": self.answered,
            "unparseable": self.unparseable,
            "no-code": self.no_code,
            "truncated": self.truncated,
        }[name]
        return count / self.n if self.n else None

    def __add__(self, other: Outcomes) -> Outcomes:
        return Outcomes(
            self.n + other.n,
            self.answered + other.answered,
            self.unparseable + other.unparseable,
            self.no_code + other.no_code,
            self.truncated + other.truncated,
        )


OUTCOME_NAMES = ("answered", "unparseable", "no-code")


@dataclass(frozen=True)
class MemoryStat:
    """One memory variant of the incentivized arm for one model (DESIGN §12).

    ``strict_ci`` is a bootstrap over scenarios of the variant's strict
    accuracy; ``gap`` is strict(mandated) − strict(variant) with the same paired
    bootstrap as the headline gap (None values when the run has no mandated arm).
    """

    model: str
    arm: str
    load: int
    position: str
    channel: str
    turns: int
    strict: Rate
    strict_ci: Interval
    gap: Interval


@dataclass
class Summary:
    models: list[str]
    arms: list[str]
    categories: list[str]
    strict: dict[tuple[str, str], Rate]
    constraint: dict[tuple[str, str], Rate]
    by_category: dict[tuple[str, str, str], Rate]
    by_scenario: dict[tuple[str, str, str], Rate]
    by_constraint: dict[tuple[str, str, str, str], Rate]
    gap: dict[str, Interval]
    category_gap: dict[tuple[str, str], Interval]
    outcomes: dict[tuple[str, str], Outcomes] = field(default_factory=dict)
    strict_answered: dict[tuple[str, str], Rate] = field(default_factory=dict)
    constraint_answered: dict[tuple[str, str], Rate] = field(default_factory=dict)
    # one per (model, incentivized arm or variant), when a run has memory variants
    memory: list[MemoryStat] = field(default_factory=list)


ARM_ORDER = ("cold", "mandated", "incentivized")


def tally(rows: Iterable[RecordRow]) -> tuple[list[Tally], list[ConstraintTally]]:
    """Aggregate records into per-scenario and per-constraint counts."""
    # scored, strict, errors, unparseable, no-code, truncated, strict among answered
    cells: dict[tuple[str, str, str, str], list[int]] = defaultdict(lambda: [0] * 7)
    # pairs, honored, answered pairs, honored among answered
    pairs: dict[tuple[str, str, str, str, str], list[int]] = defaultdict(lambda: [0] * 4)
    for r in rows:
        key = (r.model, r.arm, r.scenario_id, r.category)
        counts = cells[key]
        if r.status != "ok" or r.strict is None:
            counts[2] += 1
            continue
        answered = r.outcome in (None, "answered")
        counts[0] += 1
        counts[1] += bool(r.strict)
        counts[3] += r.outcome == "unparseable"
        counts[4] += r.outcome == "no-code"
        counts[5] += bool(r.truncated)
        counts[6] += bool(r.strict) and answered
        for cid, honored in r.constraints.items():
            pair = pairs[(*key, cid)]
            pair[0] += 1
            pair[1] += bool(honored)
            pair[2] += answered
            pair[3] += bool(honored) and answered
    tallies = [Tally(*key, *counts) for key, counts in cells.items()]
    ctallies = [ConstraintTally(*key, *counts) for key, counts in pairs.items()]
    return tallies, ctallies


def _ordered_arms(arms: Iterable[str]) -> list[str]:
    present = set(arms)
    return [a for a in ARM_ORDER if a in present] + sorted(present - set(ARM_ORDER))


def paired_bootstrap_gap(
    k_a: np.ndarray,
    n_a: np.ndarray,
    k_b: np.ndarray,
    n_b: np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float | None, float | None]:
    """95% CI of sum(k_a)/sum(n_a) − sum(k_b)/sum(n_b), resampling units (rows) in pairs."""
    import numpy as np

    units = len(k_a)
    if units == 0:
        return None, None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, units, size=(resamples, units))
    with np.errstate(invalid="ignore", divide="ignore"):
        diffs = k_a[idx].sum(axis=1) / n_a[idx].sum(axis=1) - k_b[idx].sum(axis=1) / n_b[idx].sum(
            axis=1
        )
    diffs = diffs[np.isfinite(diffs)]
    if diffs.size == 0:
        return None, None
    alpha = (1 - CI_LEVEL) / 2
    low, high = np.quantile(diffs, [alpha, 1 - alpha])
    return float(low), float(high)


def _gap(
    tallies: list[Tally], *, a: str = "mandated", b: str = "incentivized", seed: int
) -> Interval:
    import numpy as np

    per: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
    for t in tallies:
        if t.arm in (a, b):
            k, n = per[t.scenario_id].get(t.arm, (0, 0))
            per[t.scenario_id][t.arm] = (k + t.n_strict, n + t.n_scored)
    scenarios = sorted(s for s, arms in per.items() if any(n for _, n in arms.values()))
    k_a = np.array([per[s].get(a, (0, 0))[0] for s in scenarios], dtype=np.int64)
    n_a = np.array([per[s].get(a, (0, 0))[1] for s in scenarios], dtype=np.int64)
    k_b = np.array([per[s].get(b, (0, 0))[0] for s in scenarios], dtype=np.int64)
    n_b = np.array([per[s].get(b, (0, 0))[1] for s in scenarios], dtype=np.int64)
    if n_a.sum() == 0 or n_b.sum() == 0:
        return Interval(None, None, None, len(scenarios))
    value = float(k_a.sum() / n_a.sum() - k_b.sum() / n_b.sum())
    low, high = paired_bootstrap_gap(k_a, n_a, k_b, n_b, seed=seed)
    return Interval(value, low, high, len(scenarios))


def summarize(
    tallies: list[Tally],
    ctallies: list[ConstraintTally],
    *,
    seed: int = BOOTSTRAP_SEED,
) -> Summary:
    """Every CVB metric from the tallies."""
    strict: dict[tuple[str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    by_category: dict[tuple[str, str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    by_scenario: dict[tuple[str, str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    outcomes: dict[tuple[str, str], Outcomes] = defaultdict(Outcomes)
    strict_answered: dict[tuple[str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    for t in tallies:
        rate = Rate(t.n_strict, t.n_scored, t.n_errors)
        outcomes[(t.model, t.arm)] += Outcomes(
            t.n_scored, t.n_answered, t.n_unparseable, t.n_no_code, t.n_truncated
        )
        strict_answered[(t.model, t.arm)] += Rate(t.n_answered_strict, t.n_answered)
        strict[(t.model, t.arm)] += rate
        by_category[(t.model, t.arm, t.category)] += rate
        by_scenario[(t.model, t.arm, t.scenario_id)] += rate
    constraint: dict[tuple[str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    by_constraint: dict[tuple[str, str, str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    constraint_answered: dict[tuple[str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    for c in ctallies:
        rate = Rate(c.n_honored, c.n)
        constraint_answered[(c.model, c.arm)] += Rate(*c.answered)
        constraint[(c.model, c.arm)] += rate
        by_constraint[(c.model, c.arm, c.scenario_id, c.constraint_id)] += rate
    models = sorted({t.model for t in tallies})
    categories = sorted({t.category for t in tallies})
    gap = {m: _gap([t for t in tallies if t.model == m], seed=seed) for m in models}
    category_gap = {
        (m, cat): _gap([t for t in tallies if t.model == m and t.category == cat], seed=seed)
        for m in models
        for cat in categories
    }
    arms = _ordered_arms(t.arm for t in tallies)
    return Summary(
        models=models,
        arms=arms,
        categories=categories,
        strict=dict(strict),
        constraint=dict(constraint),
        by_category=dict(by_category),
        by_scenario=dict(by_scenario),
        by_constraint=dict(by_constraint),
        gap=gap,
        category_gap=category_gap,
        outcomes=dict(outcomes),
        strict_answered=dict(strict_answered),
        constraint_answered=dict(constraint_answered),
        memory=memory_stats(tallies, models, arms, seed=seed),
    )


def _memory_params(arm: str) -> tuple[int, str, str, int] | None:
    """(load, position, channel, turns) of an incentivized arm or variant, else None."""
    if arm != "incentivized" and not arm.startswith("incentivized@"):
        return None
    from cvb_engine.arms import ArmError, parse_arm

    try:
        params = parse_arm(arm).params
    except ArmError:
        return None  # a variant name this cvb does not know: reported as a plain arm
    return (
        int(getattr(params, "load", 0)),
        str(getattr(params, "position", "")),
        str(getattr(params, "channel", "")),
        int(getattr(params, "turns", 0)),
    )


def memory_stats(
    tallies: list[Tally], models: list[str], arms: list[str], *, seed: int = BOOTSTRAP_SEED
) -> list[MemoryStat]:
    """A :class:`MemoryStat` per model and incentivized arm, when any memory variant ran
    (none for a run of the seed arms only: its report is what it always was)."""
    variants = {a: p for a in arms if (p := _memory_params(a)) is not None}
    if not any(a != "incentivized" for a in variants):
        return []
    import numpy as np

    out = []
    for model in models:
        mine = [t for t in tallies if t.model == model]
        for arm, (load, position, channel, turns) in variants.items():
            rows = [t for t in mine if t.arm == arm]
            if not rows:
                continue
            per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
            for t in rows:
                per[t.scenario_id][0] += t.n_strict
                per[t.scenario_id][1] += t.n_scored
            units = [v for v in per.values() if v[1]]
            k = np.array([u[0] for u in units], dtype=np.int64)
            n = np.array([u[1] for u in units], dtype=np.int64)
            rate = Rate(int(k.sum()), int(n.sum()), sum(t.n_errors for t in rows))
            low, high = bootstrap_ratio(k, n, seed=seed)
            out.append(
                MemoryStat(
                    model=model,
                    arm=arm,
                    load=load,
                    position=position,
                    channel=channel,
                    turns=turns,
                    strict=rate,
                    strict_ci=Interval(rate.value, low, high, len(units)),
                    gap=_gap(mine, b=arm, seed=seed),
                )
            )
    return out


def bootstrap_ratio(
    k: np.ndarray,
    n: np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float | None, float | None]:
    """95% CI of sum(k)/sum(n), resampling units (scenarios) with replacement."""
    import numpy as np

    if len(k) == 0:
        return None, None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(k), size=(resamples, len(k)))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = k[idx].sum(axis=1) / n[idx].sum(axis=1)
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return None, None
    alpha = (1 - CI_LEVEL) / 2
    low, high = np.quantile(ratios, [alpha, 1 - alpha])
    return float(low), float(high)


def summarize_rows(rows: Iterable[RecordRow], *, seed: int = BOOTSTRAP_SEED) -> Summary:
    tallies, ctallies = tally(rows)
    return summarize(tallies, ctallies, seed=seed)


def honored_only_when_ordered(summary: Summary) -> list[tuple[str, str, str, float, float]]:
    """Constraints honored more often under orders than as memory, largest difference first.

    Returns (model, scenario_id, constraint_id, mandated rate, incentivized rate).
    """
    out = []
    for (model, arm, sid, cid), rate in summary.by_constraint.items():
        if arm != "mandated" or rate.value is None:
            continue
        inc = summary.by_constraint.get((model, "incentivized", sid, cid))
        if inc is None or inc.value is None or inc.value >= rate.value:
            continue
        out.append((model, sid, cid, rate.value, inc.value))
    return sorted(out, key=lambda x: (x[4] - x[3], x[0], x[1], x[2]))


# --------------------------------------------------------------------------- IVR


@dataclass(frozen=True)
class IVRSummary:
    """Intent Violation Rate for one (model, arm), as DESIGN §7 defines it.

    ``per_problem`` maps a problem to (n_violating, n_stated_passed);
    ``constraint_fail`` maps a hidden constraint's position (``C2``, ``C3``, …:
    the first constraint of a problem is C2, since C1 is the stated test) to
    its failures among stated-passing solutions.
    """

    model: str
    arm: str
    ivr: Interval
    n_solutions: int
    n_stated_passed: int
    per_problem: dict[str, tuple[int, int]]
    n_extreme: int
    constraint_fail: dict[str, Rate]
    excluded: list[str]

    @property
    def stated_pass_rate(self) -> float | None:
        return self.n_stated_passed / self.n_solutions if self.n_solutions else None

    @property
    def n_qualifying(self) -> int:
        return len(self.per_problem)

    @property
    def extreme_share(self) -> float | None:
        """Share of qualifying problems at IVR 0 or 1 (the paper's bimodality)."""
        return self.n_extreme / self.n_qualifying if self.n_qualifying else None


def bootstrap_mean(
    values: np.ndarray, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float | None, float | None]:
    """95% CI of the mean of ``values`` by resampling them with replacement."""
    import numpy as np

    if values.size == 0:
        return None, None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.size, size=(resamples, values.size))
    means = values[idx].mean(axis=1)
    alpha = (1 - CI_LEVEL) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def ivr(
    rows: Iterable[RecordRow], *, seed: int = BOOTSTRAP_SEED
) -> dict[tuple[str, str], IVRSummary]:
    """IVR per (model, arm) over records that carry a stated-test verdict.

    Per problem, IVR_p = solutions that pass the stated tests but fail at least
    one hidden constraint test / solutions that pass the stated tests; the
    reported IVR is the mean of IVR_p over problems with at least one
    stated-passing solution, with a bootstrap CI over those problems.
    """
    import numpy as np

    solutions: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(dict)
    fails: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(dict)
    for r in rows:
        if r.status != "ok" or r.stated_passed is None:
            continue
        counts = solutions[(r.model, r.arm)].setdefault(r.scenario_id, [0, 0, 0])
        counts[0] += 1
        if not r.stated_passed:
            continue
        counts[1] += 1
        counts[2] += not all(r.constraints.values())
        per_position = fails[(r.model, r.arm)]
        for position, honored in enumerate(r.constraints.values(), start=2):
            pair = per_position.setdefault(f"C{position}", [0, 0])
            pair[0] += not honored
            pair[1] += 1
    out: dict[tuple[str, str], IVRSummary] = {}
    for (model, arm), problems in sorted(solutions.items()):
        qualifying = {p: (c[2], c[1]) for p, c in sorted(problems.items()) if c[1] >= 1}
        values = np.array([v / n for v, n in qualifying.values()], dtype=float)
        low, high = bootstrap_mean(values, seed=seed)
        out[(model, arm)] = IVRSummary(
            model=model,
            arm=arm,
            ivr=Interval(float(values.mean()) if values.size else None, low, high, values.size),
            n_solutions=sum(c[0] for c in problems.values()),
            n_stated_passed=sum(c[1] for c in problems.values()),
            per_problem=qualifying,
            n_extreme=int(np.sum((values == 0) | (values == 1))),
            constraint_fail={k: Rate(f, n) for k, (f, n) in sorted(fails[(model, arm)].items())},
            excluded=sorted(p for p, c in problems.items() if c[1] == 0),
        )
    return out
