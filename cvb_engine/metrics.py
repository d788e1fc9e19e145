"""The metrics (README: Metrics), as pure functions over counts.

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
* error records are excluded from every denominator and counted apart, API
  failures apart from memory-layer failures (``error_kind`` "memory": the layer
  of a ``memory`` or ``memory-tool`` arm failed; never an API failure, never a
  violation);
* every scored record has an outcome (``answered``, ``unparseable``,
  ``no-code``; README: Answer outcomes) and may be ``truncated``: each outcome's share of
  the scored records, and strict and per-constraint accuracy **among answered**
  records, are reported beside the headline figures, which keep their
  definitions (a ``no-code`` record is scored, and honors nothing). Records
  scored before outcomes existed (scoring version 1) count as answered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from cvb_engine.kinds import ErrorKind, RecordStatus, SeedArm

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
    # an error record's kind: "memory" (a memory layer failed), else an API failure
    error_kind: str | None = None
    # the memory trace (Record.memory_json), for the memory-layer arms' reports; untrusted
    memory: str | None = None
    # the agent episode's trace (Record.agent_json), for the agent arm's reports; untrusted
    # (read with cvb_engine.agent.trace.read_trace)
    agent: str | None = None


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
    # error records of a memory layer's failure; n_errors counts the API failures
    n_memory_errors: int = 0

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
    """k successes out of n scored (errors counted apart, not in n): ``errors`` are API
    failures, ``memory_errors`` failures of a memory layer."""

    k: int
    n: int
    errors: int = 0
    memory_errors: int = 0

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None

    def __add__(self, other: Rate) -> Rate:
        return Rate(
            self.k + other.k,
            self.n + other.n,
            self.errors + other.errors,
            self.memory_errors + other.memory_errors,
        )


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
    """One memory variant for one model (README: Memory arms): of the incentivized arm, or of a
    memory-layer arm (``memory``, ``memory-tool``).

    ``strict_ci`` is a bootstrap over scenarios of the variant's strict
    accuracy; ``gap`` is strict(mandated) − strict(variant) with the same paired
    bootstrap as the headline gap (None values when the run has no mandated arm).
    ``series`` groups the variants of one curve: ``incentivized``, or a layer
    arm's name without its load (``memory``, ``memory@command=./l.py``); position,
    channel and turns are the incentivized arm's (empty for a layer arm).
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
    kind: str = SeedArm.INCENTIVIZED.value
    series: str = SeedArm.INCENTIVIZED.value
    # the incentivized arm's stale= ("" without) and budget= (None without)
    stale: str = ""
    budget: int | None = None


@dataclass(frozen=True)
class StaleStat:
    """One ``stale=`` variant beside the same variant without it, for one model (README:
    Memory realism): strict accuracy of each with a bootstrap CI over scenarios, and the
    drop, strict(base) − strict(stale), with the paired bootstrap of the headline gap."""

    model: str
    arm: str
    base: str
    stale: str
    strict: Rate
    strict_ci: Interval
    base_strict: Rate
    base_ci: Interval
    drop: Interval


@dataclass(frozen=True)
class DeliveryStat:
    """Accuracy split by whether each constraint's current note reached the model whole,
    for one model × variant with delivery records (``stale=``, ``budget=``; README: Memory
    realism).

    A pair is one (record, constraint). ``delivered`` pairs had the current note whole in
    the memory; ``not_delivered`` pairs did not (cut by the budget, or, under
    ``stale=only``, never in the memory). Honored among delivered pairs measures what the
    model did with what it got (1 − it is *ignored*); among not delivered pairs, what it
    did without. ``strict_whole`` / ``strict_cut`` split the records by whether every
    current note was delivered. CIs: bootstrap over scenarios. ``unavailable`` counts
    scored records without a readable delivery record, left out.
    """

    model: str
    arm: str
    n: int
    unavailable: int
    cut_records: int
    delivered: Rate
    delivered_ci: Interval
    not_delivered: Rate
    not_delivered_ci: Interval
    strict_whole: Rate
    strict_whole_ci: Interval
    strict_cut: Rate
    strict_cut_ci: Interval

    @property
    def delivered_share(self) -> float | None:
        """The share of pairs whose current note was delivered whole."""
        total = self.delivered.n + self.not_delivered.n
        return self.delivered.n / total if total else None

    @property
    def ignored(self) -> float | None:
        """The share of delivered pairs not honored."""
        return None if self.delivered.value is None else 1 - self.delivered.value


@dataclass(frozen=True)
class ToolUse:
    """How one model used the memory tool under one ``memory-tool`` variant (README: Memory arms).

    Over the variant's scored records whose memory trace reads
    (:func:`cvb_engine.memory_trace.read_trace`); ``unavailable`` counts scored
    records whose trace is missing or does not read, left out of every figure
    here. A *call* is a tool call the model made (a refused one too); a *lookup*
    is a call the layer answered. Strict accuracy is split by whether the model
    looked memory up at all, and by whether some lookup brought back an entry
    holding a constraint of the record's own scenario; each with a bootstrap CI
    over scenarios.
    """

    model: str
    arm: str
    n: int
    unavailable: int
    looked: int  # records with at least one tool call
    calls: int
    lookups: int
    lookups_held: int  # lookups whose entries held a constraint of the task
    strict_looked: Rate
    strict_looked_ci: Interval
    strict_not_looked: Rate
    strict_not_looked_ci: Interval
    strict_held: Rate  # records where a lookup held a constraint of the task
    strict_held_ci: Interval

    @property
    def looked_share(self) -> float | None:
        return self.looked / self.n if self.n else None

    @property
    def calls_per_record(self) -> float | None:
        return self.calls / self.n if self.n else None

    @property
    def held_share(self) -> float | None:
        return self.lookups_held / self.lookups if self.lookups else None


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
    # one per (model, incentivized arm or variant, or memory-layer arm), when a run has
    # memory variants
    memory: list[MemoryStat] = field(default_factory=list)
    # memory-layer arm -> the layer's name (and version) as its records' traces give it,
    # else as its parameters name it (``bm25``, ``command``, ``http``)
    layers: dict[str, str] = field(default_factory=dict)
    # one per (model, memory-tool variant)
    tool_use: list[ToolUse] = field(default_factory=list)
    # one per (model, stale= variant whose base variant ran too)
    stale: list[StaleStat] = field(default_factory=list)
    # one per (model, variant with delivery records: stale=, budget=)
    delivery: list[DeliveryStat] = field(default_factory=list)
    # the resamples of every bootstrap of this summary (fewer than BOOTSTRAP_RESAMPLES only
    # past the work budget, :func:`bootstrap_resamples`)
    resamples: int = BOOTSTRAP_RESAMPLES
    # one per (model, agent variant): read versus obeyed (cvb_engine.agent.metrics)
    agent: list[AgentStat] = field(default_factory=list)


ARM_ORDER: tuple[str, ...] = tuple(a.value for a in SeedArm)


def tally(rows: Iterable[RecordRow]) -> tuple[list[Tally], list[ConstraintTally]]:
    """Aggregate records into per-scenario and per-constraint counts."""
    # scored, strict, API errors, unparseable, no-code, truncated, strict among answered,
    # memory failures
    cells: dict[tuple[str, str, str, str], list[int]] = defaultdict(lambda: [0] * 8)
    # pairs, honored, answered pairs, honored among answered
    pairs: dict[tuple[str, str, str, str, str], list[int]] = defaultdict(lambda: [0] * 4)
    for r in rows:
        key = (r.model, r.arm, r.scenario_id, r.category)
        counts = cells[key]
        if r.status != RecordStatus.OK or r.strict is None:
            counts[7 if is_memory_failure(r.status, r.error_kind) else 2] += 1
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


def is_memory_failure(status: str, error_kind: str | None) -> bool:
    """An error record of a memory layer's failure (else an error record is an API failure)."""
    return status == RecordStatus.ERROR and error_kind == ErrorKind.MEMORY


def ordered_arms(arms: Iterable[str]) -> list[str]:
    """The seed arms first, then variants in the matrix's order (by kind, then parameter
    values: ``memory``, ``memory@load=20``, ``memory-tool``); names this cvb does not know,
    sorted, last."""
    from cvb_engine.arms import ArmError, arm_order, parse_arm

    given = set(arms)
    present = given - set(ARM_ORDER)
    known, unknown = [], []
    for arm in sorted(present):
        try:
            parse_arm(arm)
        except ArmError:
            unknown.append(arm)
        else:
            known.append(arm)
    return [a for a in ARM_ORDER if a in given] + arm_order(known) + unknown


#: The index draws all the bootstraps of one summary may make: the CIs of a run of any
#: size people run (a memory sweep of 10 models × 35 scenarios × 64 variants is 4.5e8)
#: take BOOTSTRAP_RESAMPLES; past it each takes fewer, never fewer than MIN_RESAMPLES, so
#: that the work stays linear in the tallies. Reports say how many (Summary.resamples).
BOOTSTRAP_BUDGET = 500_000_000
MIN_RESAMPLES = 1_000


def bootstrap_resamples(units: int) -> int:
    """The resamples each bootstrap takes when they resample ``units`` units in all."""
    if units * BOOTSTRAP_RESAMPLES <= BOOTSTRAP_BUDGET:
        return BOOTSTRAP_RESAMPLES
    return max(MIN_RESAMPLES, BOOTSTRAP_BUDGET // max(units, 1))


def _bootstrap_units(tallies: Iterable[Tally]) -> int:
    # what the bootstraps of summarize resample: each (model, scenario) of the seed gap
    # twice (per model, per category), each (model, variant, scenario) of a memory
    # variant three times (its CI, its gap, its tool use), and of an agent variant seven
    # times (strict and per-constraint, each when read and not read, its gap)
    seed: set[tuple[str, str]] = set()
    variants: set[tuple[str, str, str]] = set()
    agents: set[tuple[str, str, str]] = set()
    for t in tallies:
        if t.arm in (SeedArm.MANDATED, SeedArm.INCENTIVIZED):
            seed.add((t.model, t.scenario_id))
        if _memory_variant(t.arm) is not None:
            variants.add((t.model, t.arm, t.scenario_id))
        elif is_agent_arm(t.arm):
            agents.add((t.model, t.arm, t.scenario_id))
    return 2 * len(seed) + 3 * len(variants) + 7 * len(agents)


#: Indices drawn at once by a bootstrap (16 MiB of int64): its memory stays bounded
#: whatever the number of scenarios or problems resampled.
RESAMPLE_CHUNK = 1 << 21


def resampled_sums(
    columns: Sequence[np.ndarray], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int
) -> list[np.ndarray]:
    """Each column's sum over each of ``resamples`` resamples of its rows (the units: a
    scenario or a problem), drawn with replacement, the same rows for every column.

    The draw goes chunk by chunk, in the order of one ``(resamples, units)`` draw: the same
    seed gives the same figures as a whole-matrix draw, in bounded memory. Chunks hold an
    even number of indices, so none leaves half of a 64-bit random word behind (numpy
    draws bounded 32-bit integers two per word, per call).
    """
    import numpy as np

    units = len(columns[0])
    rng = np.random.default_rng(seed)
    rows = max(2, (RESAMPLE_CHUNK // max(units, 1)) & ~1)
    sums = [np.empty(resamples, dtype=np.result_type(c.dtype, np.int64)) for c in columns]
    for start in range(0, resamples, rows):
        count = min(rows, resamples - start)
        idx = rng.integers(0, units, size=(count, units))
        for out, column in zip(sums, columns, strict=True):
            out[start : start + count] = column[idx].sum(axis=1)
    return sums


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
    ska, sna, skb, snb = resampled_sums([k_a, n_a, k_b, n_b], resamples=resamples, seed=seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        diffs = ska / sna - skb / snb
    diffs = diffs[np.isfinite(diffs)]
    if diffs.size == 0:
        return None, None
    alpha = (1 - CI_LEVEL) / 2
    low, high = np.quantile(diffs, [alpha, 1 - alpha])
    return float(low), float(high)


def _gap(
    tallies: list[Tally],
    *,
    a: str = SeedArm.MANDATED.value,
    b: str = SeedArm.INCENTIVIZED.value,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
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
    low, high = paired_bootstrap_gap(k_a, n_a, k_b, n_b, resamples=resamples, seed=seed)
    return Interval(value, low, high, len(scenarios))


def summarize(
    tallies: list[Tally],
    ctallies: list[ConstraintTally],
    *,
    seed: int = BOOTSTRAP_SEED,
    traces: Iterable[RecordRow] = (),
) -> Summary:
    """Every CVB metric from the tallies.

    ``traces`` are records of the memory-layer arms with their memory trace
    (:attr:`RecordRow.memory`): every record of a ``memory-tool`` variant for its
    tool-use figures, and at least one record of each other layer arm to name its
    layer. Without them a layer arm is named by its parameters and has no
    tool-use figures. Records of ``agent`` variants among them, with their
    trace (:attr:`RecordRow.agent`) and verdicts, give the read-versus-obeyed
    figures (:func:`cvb_engine.agent.metrics.agent_stats`); each is boiled
    down as it is read, so ``traces`` may be a generator over a large store.
    """

    strict: dict[tuple[str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    by_category: dict[tuple[str, str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    by_scenario: dict[tuple[str, str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    outcomes: dict[tuple[str, str], Outcomes] = defaultdict(Outcomes)
    strict_answered: dict[tuple[str, str], Rate] = defaultdict(lambda: Rate(0, 0))
    for t in tallies:
        rate = Rate(t.n_strict, t.n_scored, t.n_errors, t.n_memory_errors)
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
    # one pass to group, then one gap per group: linear in the tallies, whatever the
    # number of models × categories (a pair without tallies has no gap: "–" everywhere)
    per_model: dict[str, list[Tally]] = defaultdict(list)
    per_category: dict[tuple[str, str], list[Tally]] = defaultdict(list)
    for t in tallies:
        per_model[t.model].append(t)
        per_category[(t.model, t.category)].append(t)
    n = bootstrap_resamples(_bootstrap_units(tallies))
    gap = {m: _gap(per_model[m], seed=seed, resamples=n) for m in models}
    category_gap = {
        key: _gap(group, seed=seed, resamples=n) for key, group in sorted(per_category.items())
    }
    arms = ordered_arms(t.arm for t in tallies)
    kept: list[RecordRow] = []
    agent_episodes = []
    delivered_agents: list[RecordRow] = []
    for r in traces:
        if is_agent_arm(r.arm):
            agent_episodes.append(episode(r))  # boiled down: its transcript is not kept
            if r.memory:  # a budget= / stale= variant's delivery record, for the split
                delivered_agents.append(replace(r, agent=None))
        else:
            kept.append(r)
    trace_rows = [r for r in kept if layer_kind(r.arm) is not None]
    memory = memory_stats(tallies, models, arms, seed=seed, resamples=n)
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
        memory=memory,
        layers=layer_names(arms, trace_rows),
        tool_use=tool_use(trace_rows, seed=seed, resamples=n),
        stale=stale_stats(tallies, memory, seed=seed, resamples=n),
        delivery=delivery_stats([*kept, *delivered_agents], seed=seed, resamples=n),
        resamples=n,
        agent=agent_stats(agent_episodes, tallies=tallies, seed=seed, resamples=n),
    )


#: The arm kinds that put a memory layer in the loop (README: Memory arms).
LAYER_KINDS = ("memory", "memory-tool")


@dataclass(frozen=True)
class _MemoryVariant:
    kind: str
    series: str
    load: int
    position: str = ""
    channel: str = ""
    turns: int = 0
    stale: str = ""
    budget: int | None = None


def layer_kind(arm: str) -> str | None:
    """``memory`` or ``memory-tool`` for a variant of that kind (by its name alone), else None."""
    kind = arm.partition("@")[0]
    return kind if kind in LAYER_KINDS else None


def _memory_variant(arm: str) -> _MemoryVariant | None:
    """What places ``arm`` on a memory curve: an incentivized arm or variant, or a memory-layer
    arm (its series is its name without the load); None for any other arm."""
    if (
        arm != SeedArm.INCENTIVIZED
        and not arm.startswith(f"{SeedArm.INCENTIVIZED}@")
        and not layer_kind(arm)
    ):
        return None
    from cvb_engine.arms import ArmError, ArmVariant, parse_arm

    try:
        variant = parse_arm(arm)
    except ArmError:
        return None  # a variant name this cvb does not know: reported as a plain arm
    params = variant.params
    load = int(getattr(params, "load", 0))
    if variant.kind.name in LAYER_KINDS:
        series = ArmVariant(variant.kind, params.model_copy(update={"load": 0})).name
        stale = str(getattr(params, "stale", None) or "")
        return _MemoryVariant(variant.kind.name, series, load, stale=stale)
    return _MemoryVariant(
        SeedArm.INCENTIVIZED.value,
        SeedArm.INCENTIVIZED.value,
        load,
        str(getattr(params, "position", "")),
        str(getattr(params, "channel", "")),
        int(getattr(params, "turns", 0)),
        str(getattr(params, "stale", None) or ""),
        getattr(params, "budget", None),
    )


def memory_stats(
    tallies: list[Tally],
    models: list[str],
    arms: list[str],
    *,
    seed: int = BOOTSTRAP_SEED,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> list[MemoryStat]:
    """A :class:`MemoryStat` per model and memory variant (the incentivized arm and its
    variants, the memory-layer arms), when any variant beyond the seed arms ran (none for a
    run of the seed arms only: its report is what it always was)."""
    variants = {a: v for a in arms if (v := _memory_variant(a)) is not None}
    if not any(a != SeedArm.INCENTIVIZED for a in variants):
        return []

    # grouped once: linear in the tallies, whatever the number of models and arms
    by_cell: dict[tuple[str, str], list[Tally]] = defaultdict(list)
    for t in tallies:
        by_cell[(t.model, t.arm)].append(t)
    out = []
    for model in models:
        mandated = by_cell.get((model, SeedArm.MANDATED.value), [])
        for arm, v in variants.items():
            rows = by_cell.get((model, arm), [])
            if not rows:
                continue
            k, n = _per_scenario(rows)
            rate = Rate(
                int(k.sum()),
                int(n.sum()),
                sum(t.n_errors for t in rows),
                sum(t.n_memory_errors for t in rows),
            )
            low, high = bootstrap_ratio(k, n, resamples=resamples, seed=seed)
            out.append(
                MemoryStat(
                    model=model,
                    arm=arm,
                    load=v.load,
                    position=v.position,
                    channel=v.channel,
                    turns=v.turns,
                    strict=rate,
                    strict_ci=Interval(rate.value, low, high, len(n)),
                    gap=_gap(mandated + rows, b=arm, seed=seed, resamples=resamples),
                    kind=v.kind,
                    series=v.series,
                    stale=v.stale,
                    budget=v.budget,
                )
            )
    return out


def base_arm(arm: str) -> str | None:
    """The variant ``arm`` names without its ``stale=`` (its canonical name), or None when
    ``arm`` has no stale setting or does not parse."""
    from cvb_engine.arms import ArmError, ArmVariant, parse_arm

    try:
        variant = parse_arm(arm)
    except ArmError:
        return None
    if getattr(variant.params, "stale", None) is None:
        return None
    return ArmVariant(variant.kind, variant.params.model_copy(update={"stale": None})).name


def stale_stats(
    tallies: list[Tally],
    memory: Iterable[MemoryStat],
    *,
    seed: int = BOOTSTRAP_SEED,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> list[StaleStat]:
    """A :class:`StaleStat` per model and ``stale=`` variant whose base variant (the same
    parameters without ``stale``) ran for that model too."""
    by_arm = {(m.model, m.arm): m for m in memory}
    # grouped once: linear in the tallies
    by_cell: dict[tuple[str, str], list[Tally]] = defaultdict(list)
    for t in tallies:
        by_cell[(t.model, t.arm)].append(t)
    out = []
    for (model, arm), stat in by_arm.items():
        base = base_arm(arm)
        if base is None or (model, base) not in by_arm:
            continue
        before = by_arm[(model, base)]
        pair = by_cell.get((model, base), []) + by_cell.get((model, arm), [])
        out.append(
            StaleStat(
                model=model,
                arm=arm,
                base=base,
                stale=str(getattr(_parsed(arm), "stale", None) or ""),
                strict=stat.strict,
                strict_ci=stat.strict_ci,
                base_strict=before.strict,
                base_ci=before.strict_ci,
                drop=_gap(pair, a=base, b=arm, seed=seed, resamples=resamples),
            )
        )
    return out


def _parsed(arm: str) -> object:
    """The parameters of the variant ``arm`` names (None when it does not parse)."""
    from cvb_engine.arms import ArmError, parse_arm

    try:
        return parse_arm(arm).params
    except ArmError:
        return None


def delivery_stats(
    rows: Iterable[RecordRow],
    *,
    seed: int = BOOTSTRAP_SEED,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> list[DeliveryStat]:
    """A :class:`DeliveryStat` per (model, arm) over the scored records whose memory is a
    delivery record (:func:`cvb_engine.memory_trace.read_delivery`)."""
    import numpy as np

    from cvb_engine.memory_trace import read_delivery

    # (model, arm) -> subset -> scenario -> [k, n]
    per: dict[tuple[str, str], dict[str, dict[str, list[int]]]] = defaultdict(
        lambda: {s: defaultdict(lambda: [0, 0]) for s in ("in", "out", "whole", "cut")}
    )
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in rows:
        if r.status != RecordStatus.OK or r.strict is None or not r.memory:
            continue
        if r.arm.partition("@")[0] not in (SeedArm.INCENTIVIZED, "agent"):
            continue  # the arms whose records store a delivery record
        key = (r.model, r.arm)
        delivery = read_delivery(r.memory)
        if delivery is None:
            counts[key][1] += 1
            continue
        counts[key][0] += 1
        all_in = True
        for cid, honored in r.constraints.items():
            d = delivery.constraints.get(cid)
            got = d is not None and d.delivered
            all_in &= got
            cell = per[key]["in" if got else "out"][r.scenario_id]
            cell[0] += bool(honored)
            cell[1] += 1
        counts[key][2] += not all_in
        cell = per[key]["whole" if all_in else "cut"][r.scenario_id]
        cell[0] += bool(r.strict)
        cell[1] += 1

    def rate_ci(units: dict[str, list[int]]) -> tuple[Rate, Interval]:
        k = np.array([v[0] for v in units.values()], dtype=np.int64)
        n = np.array([v[1] for v in units.values()], dtype=np.int64)
        rate = Rate(int(k.sum()), int(n.sum()))
        low, high = bootstrap_ratio(k, n, resamples=resamples, seed=seed)
        return rate, Interval(rate.value, low, high, len(units))

    out = []
    for key in sorted(counts):
        if not counts[key][0]:
            continue
        subsets = per[key]
        delivered, delivered_ci = rate_ci(subsets["in"])
        missed, missed_ci = rate_ci(subsets["out"])
        whole, whole_ci = rate_ci(subsets["whole"])
        some_cut, cut_ci = rate_ci(subsets["cut"])
        out.append(
            DeliveryStat(
                model=key[0],
                arm=key[1],
                n=counts[key][0],
                unavailable=counts[key][1],
                cut_records=counts[key][2],
                delivered=delivered,
                delivered_ci=delivered_ci,
                not_delivered=missed,
                not_delivered_ci=missed_ci,
                strict_whole=whole,
                strict_whole_ci=whole_ci,
                strict_cut=some_cut,
                strict_cut_ci=cut_ci,
            )
        )
    return out


def _per_scenario(rows: Iterable[Tally]) -> tuple[np.ndarray, np.ndarray]:
    """Strictly accurate and scored records per scenario (scenarios with scored records)."""
    import numpy as np

    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in rows:
        per[t.scenario_id][0] += t.n_strict
        per[t.scenario_id][1] += t.n_scored
    units = [v for v in per.values() if v[1]]
    return (
        np.array([u[0] for u in units], dtype=np.int64),
        np.array([u[1] for u in units], dtype=np.int64),
    )


def _params_layer(arm: str) -> str | None:
    """A layer arm's layer as its parameters name it: the built-in's name, or the transport."""
    from cvb_engine.arms import ArmError, parse_arm

    try:
        params = parse_arm(arm).params
    except ArmError:
        return None
    if getattr(params, "command", None):
        return "command"
    if getattr(params, "url", None):
        return "http"
    layer = getattr(params, "layer", None)
    return str(layer) if layer else None


def layer_names(arms: Iterable[str], traces: Iterable[RecordRow] = ()) -> dict[str, str]:
    """The layer of each memory-layer arm among ``arms``: the name (and version) its records'
    traces give most often (:attr:`cvb_engine.memory_trace.LayerInfo.title`), else what its
    parameters name (``bm25``; ``command`` or ``http`` for a layer that said nothing)."""
    from collections import Counter

    from cvb_engine.memory_trace import read_trace

    seen: dict[str, Counter[str]] = defaultdict(Counter)
    for r in traces:
        trace = read_trace(r.memory)
        if trace is not None and (title := trace.layer.title):
            seen[r.arm][title] += 1
    out = {}
    for arm in arms:
        if layer_kind(arm) is None:
            continue
        if seen.get(arm):
            # the most frequent name; a tie goes to the first in sorted order (stable)
            out[arm] = min(seen[arm].items(), key=lambda kv: (-kv[1], kv[0]))[0]
        elif (named := _params_layer(arm)) is not None:
            out[arm] = named
    return out


def tool_use(
    traces: Iterable[RecordRow],
    *,
    seed: int = BOOTSTRAP_SEED,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> list[ToolUse]:
    """A :class:`ToolUse` per (model, memory-tool variant) from its records' memory traces."""
    import numpy as np

    from cvb_engine.memory_trace import read_trace

    # (model, arm) -> counts, and -> subset -> scenario -> [strict, scored]
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0] * 6)
    subsets: dict[tuple[str, str], dict[str, dict[str, list[int]]]] = defaultdict(
        lambda: {s: defaultdict(lambda: [0, 0]) for s in ("looked", "not", "held")}
    )
    for r in traces:
        if layer_kind(r.arm) != "memory-tool" or r.status != RecordStatus.OK or r.strict is None:
            continue
        key = (r.model, r.arm)
        c = counts[key]
        trace = read_trace(r.memory)
        if trace is None:
            c[1] += 1
            continue
        calls = trace.tool_calls
        lookups = [call for call in calls if call.error is None]
        holds = bool(trace.held) or any(call.held for call in lookups)
        c[0] += 1
        c[2] += bool(calls)
        c[3] += len(calls)
        c[4] += len(lookups)
        c[5] += sum(bool(call.held) for call in lookups)
        chosen = ["looked" if calls else "not"] + (["held"] if holds else [])
        for name in chosen:
            cell = subsets[key][name][r.scenario_id]
            cell[0] += bool(r.strict)
            cell[1] += 1

    def rate_ci(per: dict[str, list[int]]) -> tuple[Rate, Interval]:
        k = np.array([v[0] for v in per.values()], dtype=np.int64)
        n = np.array([v[1] for v in per.values()], dtype=np.int64)
        rate = Rate(int(k.sum()), int(n.sum()))
        low, high = bootstrap_ratio(k, n, resamples=resamples, seed=seed)
        return rate, Interval(rate.value, low, high, len(per))

    out = []
    for (model, arm), c in sorted(counts.items()):
        looked, looked_ci = rate_ci(subsets[(model, arm)]["looked"])
        not_looked, not_ci = rate_ci(subsets[(model, arm)]["not"])
        with_held, held_ci = rate_ci(subsets[(model, arm)]["held"])
        out.append(
            ToolUse(
                model=model,
                arm=arm,
                n=c[0],
                unavailable=c[1],
                looked=c[2],
                calls=c[3],
                lookups=c[4],
                lookups_held=c[5],
                strict_looked=looked,
                strict_looked_ci=looked_ci,
                strict_not_looked=not_looked,
                strict_not_looked_ci=not_ci,
                strict_held=with_held,
                strict_held_ci=held_ci,
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
    sk, sn = resampled_sums([k, n], resamples=resamples, seed=seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = sk / sn
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return None, None
    alpha = (1 - CI_LEVEL) / 2
    low, high = np.quantile(ratios, [alpha, 1 - alpha])
    return float(low), float(high)


def summarize_rows(rows: Iterable[RecordRow], *, seed: int = BOOTSTRAP_SEED) -> Summary:
    """Every metric from records (a results file): :func:`tally`, then :func:`summarize`."""
    rows = list(rows)
    tallies, ctallies = tally(rows)
    return summarize(tallies, ctallies, seed=seed, traces=rows)


def honored_only_when_ordered(summary: Summary) -> list[tuple[str, str, str, float, float]]:
    """Constraints honored more often under orders than as memory, largest difference first.

    Returns (model, scenario_id, constraint_id, mandated rate, incentivized rate).
    """
    out = []
    for (model, arm, sid, cid), rate in summary.by_constraint.items():
        if arm != SeedArm.MANDATED or rate.value is None:
            continue
        inc = summary.by_constraint.get((model, SeedArm.INCENTIVIZED, sid, cid))
        if inc is None or inc.value is None or inc.value >= rate.value:
            continue
        out.append((model, sid, cid, rate.value, inc.value))
    return sorted(out, key=lambda x: (x[4] - x[3], x[0], x[1], x[2]))


# --------------------------------------------------------------------------- IVR


@dataclass(frozen=True)
class IVRSummary:
    """Intent Violation Rate for one (model, arm), as the README's Metrics section defines it.

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
    resamples: int = BOOTSTRAP_RESAMPLES  # of its CI's bootstrap (:func:`bootstrap_resamples`)

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
    (sums,) = resampled_sums([values], resamples=resamples, seed=seed)
    means = sums / values.size  # what ndarray.mean does: the sum, then one division
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
        if r.status != RecordStatus.OK or r.stated_passed is None:
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
    resamples = bootstrap_resamples(sum(len(problems) for problems in solutions.values()))
    for (model, arm), problems in sorted(solutions.items()):
        qualifying = {p: (c[2], c[1]) for p, c in sorted(problems.items()) if c[1] >= 1}
        values = np.array([v / n for v, n in qualifying.values()], dtype=float)
        low, high = bootstrap_mean(values, resamples=resamples, seed=seed)
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
            resamples=resamples,
        )
    return out


# --------------------------------------------------------------------------- agent arm
# Read versus obeyed (README: Agent arm), here beside the other metrics so that this module
# imports nothing that imports it; cvb_engine.agent.metrics names them for the agent package.
#
# Read versus obeyed: the agent arm's figures per model × agent variant (README: Agent arm).
#
# Pure functions over records of ``agent`` variants (:class:`~cvb_engine.metrics.RecordRow`
# with their trace, :attr:`~cvb_engine.metrics.RecordRow.agent`). Each record is
# first boiled down to an :class:`Episode` (its verdicts and the few facts of
# its trace the reports use), so a store of long transcripts is read in batches
# and never held whole. Then, per (model, variant), :func:`agent_stats` gives an
# :class:`AgentStat`:
#
# * strict and per-constraint accuracy over scored episodes, each with a 95%
#   bootstrap CI over scenarios (the project's :func:`~cvb_engine.metrics.bootstrap_ratio`);
# * the gap to the mandated arm (strict(mandated) − strict(variant)), paired
#   bootstrap over scenarios as the headline gap;
# * *read*: the share of scored episodes in which the agent saw at least one
#   constraint of its task (``AgentTrace.read``: it opened the file holding it, or
#   a search showed one of its lines); a constraint that ``preload=true`` put in
#   the system message (``AgentTrace.preloaded``) is counted apart, as *in the
#   system message*, so a preloaded variant's "read" still says what it opened;
# * strict accuracy when read and when not read, and per-constraint accuracy
#   split by whether *that* constraint was read, each with its CI;
# * steps (tool rounds), tool calls and tokens per episode; how episodes ended
#   (``answer``, ``steps``, ``error``, ``timeout``); refused tool calls.
#
# An agent program (``agent@command=...``) whose file reads could not be
# observed (``CommandRun.reads_observed`` false) has no read flags worth the
# name: its episodes are counted (``reads_unobserved``) and left out of the read
# figures, never counted as "not read". Scored episodes whose trace is missing
# or does not read are counted (``unavailable``) and left out of every trace-based figure, never guessed;
# they still count in strict and per-constraint accuracy, which come from
# the verdicts. Error records (the endpoint failed for good) are counted apart
# and in no denominator, as everywhere in cvb.

#: The arm kind whose records carry an agent trace.
AGENT_KIND: Final = "agent"
#: How an episode can end (:data:`cvb_engine.agent.trace.EndedBy`), in report order.
ENDINGS: Final = ("answer", "steps", "error", "timeout")


def is_agent_arm(arm: str) -> bool:
    """Whether ``arm`` names the agent arm or one of its variants (by its name alone)."""
    return arm.partition("@")[0] == AGENT_KIND


@dataclass(frozen=True)
class Episode:
    """One agent record as the reports count it: its verdicts and its trace's facts.

    ``traced`` is False when the record has no readable trace; the trace's
    facts are then empty and left out of every trace-based figure.
    """

    model: str
    arm: str
    scenario_id: str
    status: str
    strict: bool | None
    constraints: Mapping[str, bool] = field(default_factory=dict)
    outcome: str | None = None
    traced: bool = False
    read: Mapping[str, bool] = field(default_factory=dict)
    preloaded: tuple[str, ...] = ()
    reads_observed: bool = True
    steps: int = 0
    tool_calls: int = 0
    refused: int = 0
    tokens: int | None = None
    ended_by: str | None = None
    wrote: bool = False

    @property
    def scored(self) -> bool:
        return self.status == RecordStatus.OK and self.strict is not None

    @property
    def read_any(self) -> bool:
        """The agent saw at least one constraint of its task (only its own scenario's
        constraints count: a stray id in the trace does not)."""
        return any(self.read.get(cid, False) for cid in self.constraints) or (
            not self.constraints and any(self.read.values())
        )

    @property
    def in_system(self) -> bool:
        """The system message held at least one constraint of the task (``preload=true``)."""
        return any(cid in self.preloaded for cid in self.constraints)


def episode(row: RecordRow) -> Episode:
    """The :class:`Episode` of one record of an agent variant (its trace read once, as
    untrusted data: one that does not read leaves ``traced`` False)."""
    from cvb_engine.agent.trace import read_trace as read_agent_trace

    trace = read_agent_trace(row.agent)
    base = Episode(
        model=row.model,
        arm=row.arm,
        scenario_id=row.scenario_id,
        status=row.status,
        strict=row.strict,
        constraints=dict(row.constraints),
        outcome=row.outcome,
    )
    if trace is None:
        return base
    return Episode(
        model=base.model,
        arm=base.arm,
        scenario_id=base.scenario_id,
        status=base.status,
        strict=base.strict,
        constraints=base.constraints,
        outcome=base.outcome,
        traced=True,
        read=dict(trace.read),
        preloaded=tuple(trace.preloaded),
        reads_observed=trace.command is None or trace.command.reads_observed,
        steps=max(trace.steps, 0),
        tool_calls=trace.tool_calls,
        refused=trace.refused,
        tokens=trace.tokens,
        ended_by=trace.ended_by,
        wrote=trace.wrote,
    )


def episodes(rows: Iterable[RecordRow]) -> list[Episode]:
    """The episodes of the agent variants' records among ``rows`` (others are skipped)."""
    return [episode(r) for r in rows if is_agent_arm(r.arm)]


@dataclass(frozen=True)
class AgentStat:
    """Read versus obeyed for one model under one agent variant (see the module doc).

    Counts are of scored episodes unless named otherwise; every ``Rate`` comes
    with an ``Interval`` (its 95% bootstrap CI over scenarios).
    """

    model: str
    arm: str
    n: int  # scored episodes
    errors: int  # error records (not in any denominator)
    unavailable: int  # scored episodes without a readable trace
    strict: Rate
    strict_ci: Interval
    constraint: Rate
    constraint_ci: Interval
    gap: Interval  # strict(mandated) − strict(variant); None values without a mandated arm
    read: int  # traced scored episodes that saw at least one constraint
    read_all: int  # traced scored episodes that saw every constraint of their task
    preloaded: int  # traced scored episodes whose system message held a constraint (preload)
    reads_unobserved: int  # traced scored episodes of an agent program whose reads went unseen
    strict_read: Rate
    strict_read_ci: Interval
    strict_unread: Rate
    strict_unread_ci: Interval
    constraint_read: Rate  # honored pairs among the (episode, constraint) pairs read
    constraint_read_ci: Interval
    constraint_unread: Rate
    constraint_unread_ci: Interval
    steps: int  # tool rounds over traced scored episodes
    tool_calls: int
    refused: int  # refused tool calls
    refused_episodes: int  # traced scored episodes with at least one refused call
    tokens: int  # over the episodes that reported tokens
    tokens_n: int
    no_file: int  # traced scored episodes that left a named file unwritten
    # how every traced episode ended, error records included: ending -> count
    ended: Mapping[str, int] = field(default_factory=dict)

    @property
    def traced(self) -> int:
        """Scored episodes whose trace reads (the denominator of the trace figures)."""
        return self.n - self.unavailable

    @property
    def observed(self) -> int:
        """Traced scored episodes whose reads were observed (the read figures' denominator)."""
        return self.traced - self.reads_unobserved

    @property
    def read_share(self) -> float | None:
        return self.read / self.observed if self.observed else None

    @property
    def read_all_share(self) -> float | None:
        return self.read_all / self.observed if self.observed else None

    @property
    def preloaded_share(self) -> float | None:
        return self.preloaded / self.traced if self.traced else None

    @property
    def steps_per_episode(self) -> float | None:
        return self.steps / self.traced if self.traced else None

    @property
    def calls_per_episode(self) -> float | None:
        return self.tool_calls / self.traced if self.traced else None

    @property
    def tokens_per_episode(self) -> float | None:
        return self.tokens / self.tokens_n if self.tokens_n else None


# One (model, arm) subset: scenario -> [successes, trials]
_PerScenario = dict[str, list[int]]


def _rate_ci(per: _PerScenario, seed: int, resamples: int) -> tuple[Rate, Interval]:
    """A pooled rate over scenarios and its bootstrap CI (resampling scenarios)."""
    import numpy as np

    units = [v for v in per.values() if v[1]]
    k = np.array([u[0] for u in units], dtype=np.int64)
    n = np.array([u[1] for u in units], dtype=np.int64)
    rate = Rate(int(k.sum()), int(n.sum()))
    low, high = bootstrap_ratio(k, n, seed=seed, resamples=resamples)
    return rate, Interval(rate.value, low, high, len(units))


_SUBSETS: Final = (
    "strict",
    "constraint",
    "strict_read",
    "strict_unread",
    "constraint_read",
    "constraint_unread",
)


def agent_stats(
    items: Iterable[Episode],
    *,
    tallies: Iterable[Tally] = (),
    seed: int = BOOTSTRAP_SEED,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> list[AgentStat]:
    """An :class:`AgentStat` per (model, agent variant) among ``items``, sorted by model
    then variant (the matrix's order).

    ``tallies`` are the run's tallies (:func:`cvb_engine.metrics.tally`): with the
    mandated arm's among them, each stat carries its gap to mandated. Every bootstrap takes
    ``resamples`` (:func:`cvb_engine.metrics.bootstrap_resamples` of the run's summary).
    """
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    ended: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    subsets: dict[tuple[str, str], dict[str, _PerScenario]] = defaultdict(
        lambda: {s: defaultdict(lambda: [0, 0]) for s in _SUBSETS}
    )
    for e in items:
        if not is_agent_arm(e.arm):
            continue
        key = (e.model, e.arm)
        c = counts[key]
        if e.traced and e.ended_by is not None:
            ended[key][e.ended_by] += 1
        if not e.scored:
            c["errors"] += 1
            continue
        c["n"] += 1
        sub = subsets[key]
        _add(sub["strict"], e.scenario_id, bool(e.strict))
        for honored in e.constraints.values():
            _add(sub["constraint"], e.scenario_id, honored)
        if not e.traced:
            c["unavailable"] += 1
            continue
        c["preloaded"] += e.in_system
        if e.reads_observed:
            read_any = e.read_any
            c["read"] += read_any
            c["read_all"] += bool(e.constraints) and all(
                e.read.get(cid, False) for cid in e.constraints
            )
            name = "strict_read" if read_any else "strict_unread"
            _add(sub[name], e.scenario_id, bool(e.strict))
            for cid, honored in e.constraints.items():
                name = "constraint_read" if e.read.get(cid, False) else "constraint_unread"
                _add(sub[name], e.scenario_id, honored)
        else:
            c["reads_unobserved"] += 1
        c["steps"] += e.steps
        c["tool_calls"] += e.tool_calls
        c["refused"] += e.refused
        c["refused_episodes"] += e.refused > 0
        c["no_file"] += not e.wrote
        if e.tokens is not None:
            c["tokens"] += e.tokens
            c["tokens_n"] += 1

    by_model: dict[str, list[Tally]] = defaultdict(list)
    for t in tallies:
        by_model[t.model].append(t)
    order = {a: i for i, a in enumerate(ordered_arms({arm for _, arm in counts}))}
    out = []
    for model, arm in sorted(counts, key=lambda k: (k[0], order[k[1]])):
        c = counts[(model, arm)]
        figures = {s: _rate_ci(subsets[(model, arm)][s], seed, resamples) for s in _SUBSETS}
        mine = by_model.get(model, [])
        gap = (
            _gap(mine, b=arm, seed=seed, resamples=resamples)
            if mine
            else Interval(None, None, None, 0)
        )  # no tallies given: no gap to compute
        out.append(
            AgentStat(
                model=model,
                arm=arm,
                n=c["n"],
                errors=c["errors"],
                unavailable=c["unavailable"],
                strict=figures["strict"][0],
                strict_ci=figures["strict"][1],
                constraint=figures["constraint"][0],
                constraint_ci=figures["constraint"][1],
                gap=gap,
                read=c["read"],
                read_all=c["read_all"],
                preloaded=c["preloaded"],
                reads_unobserved=c["reads_unobserved"],
                strict_read=figures["strict_read"][0],
                strict_read_ci=figures["strict_read"][1],
                strict_unread=figures["strict_unread"][0],
                strict_unread_ci=figures["strict_unread"][1],
                constraint_read=figures["constraint_read"][0],
                constraint_read_ci=figures["constraint_read"][1],
                constraint_unread=figures["constraint_unread"][0],
                constraint_unread_ci=figures["constraint_unread"][1],
                steps=c["steps"],
                tool_calls=c["tool_calls"],
                refused=c["refused"],
                refused_episodes=c["refused_episodes"],
                tokens=c["tokens"],
                tokens_n=c["tokens_n"],
                no_file=c["no_file"],
                ended={k: ended[(model, arm)][k] for k in _endings(ended[(model, arm)])},
            )
        )
    return out


def _add(per: _PerScenario, scenario_id: str, success: bool) -> None:
    cell = per[scenario_id]
    cell[0] += bool(success)
    cell[1] += 1


def _endings(seen: Mapping[str, int]) -> list[str]:
    """The known endings in report order, then any other a trace named (sorted)."""
    return [k for k in ENDINGS if k in seen] + sorted(k for k in seen if k not in ENDINGS)
