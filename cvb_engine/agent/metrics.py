"""Read versus obeyed: the agent arm's figures per model × agent variant (README: Agent arm).

Pure functions over records of ``agent`` variants (:class:`~cvb_engine.metrics.RecordRow`
with their trace, :attr:`~cvb_engine.metrics.RecordRow.agent`). Each record is
first boiled down to an :class:`Episode` (its verdicts and the few facts of
its trace the reports use), so a store of long transcripts is read in batches
and never held whole. Then, per (model, variant), :func:`agent_stats` gives an
:class:`AgentStat`:

* strict and per-constraint accuracy over scored episodes, each with a 95%
  bootstrap CI over scenarios (the project's :func:`~cvb_engine.metrics.bootstrap_ratio`);
* the gap to the mandated arm (strict(mandated) − strict(variant)), paired
  bootstrap over scenarios as the headline gap;
* *read*: the share of scored episodes in which the agent saw at least one
  constraint of its task (``AgentTrace.read``: it opened the file holding it, or
  a search showed one of its lines); a constraint that ``preload=true`` put in
  the system message (``AgentTrace.preloaded``) is counted apart, as *in the
  system message*, so a preloaded variant's "read" still says what it opened;
* strict accuracy when read and when not read, and per-constraint accuracy
  split by whether *that* constraint was read, each with its CI;
* steps (tool rounds), tool calls and tokens per episode; how episodes ended
  (``answer``, ``steps``, ``error``, ``timeout``); refused tool calls.

An agent program (``agent@command=...``) whose file reads could not be
observed (``CommandRun.reads_observed`` false) has no read flags worth the
name: its episodes are counted (``reads_unobserved``) and left out of the read
figures, never counted as "not read". Scored episodes whose trace is missing
or does not read are counted (``unavailable``) and left out of every trace-based figure, never guessed;
they still count in strict and per-constraint accuracy, which come from
the verdicts. Error records (the endpoint failed for good) are counted apart
and in no denominator, as everywhere in cvb.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from cvb_engine.agent.trace import read_trace
from cvb_engine.kinds import RecordStatus
from cvb_engine.metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    Interval,
    Rate,
    RecordRow,
    Tally,
    _gap,
    bootstrap_ratio,
)

__all__ = [
    "AGENT_KIND",
    "ENDINGS",
    "AgentStat",
    "Episode",
    "agent_stats",
    "episode",
    "episodes",
    "is_agent_arm",
]

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
    trace = read_trace(row.agent)
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
    from cvb_engine.metrics import ordered_arms

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
