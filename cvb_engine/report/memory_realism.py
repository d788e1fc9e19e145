"""The memory-realism curves (README: Memory realism): which memory variants form the
adherence curves against the delivery budget and against the turns since the memory.

The figures are :mod:`cvb_engine.metrics`' (:class:`~cvb_engine.metrics.MemoryStat`); here
they are grouped into curves, which the table models (:mod:`cvb_engine.report.tables`:
the budget and turns tables), the SVG charts (:func:`cvb_engine.report.svg.realism_svg`)
and the studio's plotly charts draw. What the memory-realism tables say beside their
figures is here too. Nothing here computes a metric.
"""

from __future__ import annotations

from typing import Protocol

from cvb_engine.kinds import SeedArm
from cvb_engine.metrics import Interval, MemoryStat, Rate, Summary, is_agent_arm


class CurvePoint(Protocol):
    """One point of a curve: a variant's strict accuracy for one model (a memory variant's
    :class:`~cvb_engine.metrics.MemoryStat`, or an agent variant's ``AgentStat``)."""

    @property
    def model(self) -> str: ...
    @property
    def arm(self) -> str: ...
    @property
    def strict(self) -> Rate: ...
    @property
    def strict_ci(self) -> Interval: ...


STALE_NOTE = (
    "stale=with: each constraint's superseded note (the decision it replaced, dated earlier) "
    "sits just before its current note; stale=only: the superseded note stands instead of it. "
    "Drop: strict accuracy without stale minus with it, 95% CI by paired bootstrap over "
    "scenarios; a positive drop means the outdated note cost accuracy."
)
DELIVERY_NOTE = (
    "A note is delivered when its whole text came before the budget's cut (and, under "
    "stale=only, the current note is never delivered). Honored when delivered measures what "
    "the model did with what it got (ignored = 1 − it); honored when not delivered, what it "
    "did without. Pairs are (record, constraint); 95% CIs by bootstrap over scenarios."
)
BUDGET_NOTE = (
    "The memory block or file cut to N bytes at a line boundary, a marker line saying what was "
    "cut. Each cell: strict accuracy [95% CI], and the share of constraint notes delivered."
)

DELIVERY_HEADER = [
    "model",
    "arm",
    "records",
    "records with a note not delivered",
    "notes delivered",
    "honored: delivered",
    "honored: not delivered",
    "ignored (delivered, not honored)",
    "strict: every note delivered",
    "strict: some note not delivered",
]


def _incentivized(summary: Summary) -> list[MemoryStat]:
    return [m for m in summary.memory if m.kind == SeedArm.INCENTIVIZED]


def budget_groups(
    summary: Summary,
) -> dict[tuple[str, str, int, str, str], dict[int | None, CurvePoint]]:
    """The budget curves: (model, channel, load, position, stale) -> budget -> stat, for
    every group with a budgeted variant (``None``: the same variant without a budget).

    An agent variant's curve has its variant without the budget as its channel (the rules
    files share the budget: ``agent@rules=claude-md``), load 0 and no position."""
    groups: dict[tuple[str, str, int, str, str], dict[int | None, CurvePoint]] = {}
    for m in _incentivized(summary):
        if m.channel == "history":
            continue
        key = (m.model, m.channel, m.load, m.position if m.load else "–", m.stale)
        groups.setdefault(key, {})[m.budget] = m
    for a in summary.agent:
        found = _agent_curve(a.arm)
        if found is not None:
            series, budget, stale = found
            groups.setdefault((a.model, series, 0, "–", stale), {})[budget] = a
    return {k: v for k, v in groups.items() if any(b is not None for b in v)}


def _agent_curve(arm: str) -> tuple[str, int | None, str] | None:
    """An agent variant's curve (its name without ``budget=`` or ``stale=``), budget and
    stale setting; None for any other arm or a name this cvb does not parse."""
    if not is_agent_arm(arm):
        return None
    from cvb_engine.arms import ArmError, ArmVariant, parse_arm

    try:
        variant = parse_arm(arm)
    except ArmError:
        return None
    params = variant.params
    budget = getattr(params, "budget", None)
    stale = str(getattr(params, "stale", None) or "")
    plain = params.model_copy(update={"budget": None, "stale": None})
    return ArmVariant(variant.kind, plain).name, budget, stale


def turns_groups(summary: Summary) -> dict[tuple[str, int, str, str], dict[int, MemoryStat]]:
    """The history channel's curves: (model, load, position, stale) -> turns -> stat, for
    groups of two turns values or more."""
    groups: dict[tuple[str, int, str, str], dict[int, MemoryStat]] = {}
    for m in _incentivized(summary):
        if m.channel != "history" or m.budget is not None:
            continue
        key = (m.model, m.load, m.position if m.load else "–", m.stale)
        groups.setdefault(key, {})[m.turns] = m
    return {k: v for k, v in groups.items() if len(v) > 1}


Point = int | None  # a budget (None: no budget) or a number of turns


def budget_curves(summary: Summary) -> list[tuple[str, dict[Point, CurvePoint]]]:
    """The budget curves, labelled (model · channel · load, and the stale setting; an
    agent variant's without a load)."""
    return [
        (
            f"{model} · {channel}"
            + ("" if is_agent_arm(channel) else f" · load {load}")
            + (f" · stale={stale}" if stale else ""),
            dict(by),
        )
        for (model, channel, load, _pos, stale), by in sorted(
            budget_groups(summary).items(), key=lambda kv: tuple(str(x) for x in kv[0])
        )
        if len(by) > 1
    ]


def turns_curves(summary: Summary) -> list[tuple[str, dict[Point, MemoryStat]]]:
    """The turns curves of the history channel, labelled (model · load, stale setting)."""
    return [
        (
            f"{model} · load {load}" + (f" · stale={stale}" if stale else ""),
            {turns: stat for turns, stat in by.items()},
        )
        for (model, load, _pos, stale), by in sorted(
            turns_groups(summary).items(), key=lambda kv: tuple(str(x) for x in kv[0])
        )
    ]
