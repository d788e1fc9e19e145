"""Paired comparisons of two runs or two models, and flakiness across repetitions (pure).

Two runs (or two models of a run) are compared on the cells they share, never on their
whole denominators: a cell is (model, scenario, arm, repetition) between runs, and
(scenario, arm, repetition) between models. Only answered records (status ``ok``)
pair; an error on either side drops the cell from the comparison.

* The difference in strict accuracy is B − A over the shared cells, with a 95% CI
  from a paired bootstrap that resamples scenarios (cells of one scenario are not
  independent; ``BOOTSTRAP_RESAMPLES`` resamples, fixed seed, as for the gap).
* The exact McNemar test looks only at the discordant pairs: ``lost`` (A strictly
  accurate, B not) and ``gained`` (B, not A); two-sided p = min(1, 2·P(X ≤ min)) for
  X ~ Binomial(lost + gained, ½).
* Per scenario, which cells flipped each way.
* Flakiness, per model × arm of one run: among cells answered in ≥ 2 repetitions,
  the share whose strict verdict differs between repetitions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from math import comb
from typing import Any

from cvb_engine.metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, paired_bootstrap_gap
from cvb_engine.report.tables import Cell, Column, Table
from cvb_engine.safe_text import markdown_text

__all__ = [
    "COMPARISON_HEADER",
    "COMPARISON_NOTE",
    "FLAKINESS_HEADER",
    "FLAKINESS_NOTE",
    "Flakiness",
    "Pair",
    "PairedComparison",
    "ScenarioFlips",
    "Verdict",
    "compare_groups",
    "compare_pairs",
    "comparison_markdown",
    "comparison_table",
    "flakiness",
    "flakiness_markdown",
    "flakiness_table",
    "flips_table",
    "mcnemar_exact",
    "pair_models",
    "pair_runs",
    "verdicts",
]


@dataclass(frozen=True)
class Verdict:
    """One answered record's strict verdict, by its cell."""

    model: str
    scenario_id: str
    arm: str
    rep: int
    strict: bool


@dataclass(frozen=True)
class Pair:
    """One shared cell: its A and B verdicts. ``model`` is the run comparison's model,
    or ``"A vs B"`` model names when models are compared."""

    model: str
    scenario_id: str
    arm: str
    rep: int
    a: bool
    b: bool

    @property
    def cell(self) -> str:
        return f"{self.model} / {self.arm} / rep {self.rep}"


def verdicts(records: Iterable[Mapping[str, Any]]) -> list[Verdict]:
    """The answered, scored records of a results file as verdicts; others are left out.
    A repeated cell (a store should hold none) keeps its first record."""
    out: dict[tuple[str, str, str, int], Verdict] = {}
    for r in records:
        strict = r.get("strict")
        rep = r.get("rep")
        if r.get("status") != "ok" or not isinstance(strict, bool) or not isinstance(rep, int):
            continue
        v = Verdict(str(r.get("model")), str(r.get("scenario_id")), str(r.get("arm")), rep, strict)
        out.setdefault((v.model, v.scenario_id, v.arm, v.rep), v)
    return list(out.values())


def pair_runs(a: Sequence[Verdict], b: Sequence[Verdict]) -> list[Pair]:
    """The cells (model, scenario, arm, rep) answered in both runs."""
    in_b = {(v.model, v.scenario_id, v.arm, v.rep): v.strict for v in b}
    return [
        Pair(v.model, v.scenario_id, v.arm, v.rep, v.strict, in_b[key])
        for v in a
        if (key := (v.model, v.scenario_id, v.arm, v.rep)) in in_b
    ]


def pair_models(found: Sequence[Verdict], model_a: str, model_b: str) -> list[Pair]:
    """The cells (scenario, arm, rep) answered by both models."""
    in_b = {(v.scenario_id, v.arm, v.rep): v.strict for v in found if v.model == model_b}
    label = f"{model_a} vs {model_b}"
    return [
        Pair(label, v.scenario_id, v.arm, v.rep, v.strict, in_b[key])
        for v in found
        if v.model == model_a and (key := (v.scenario_id, v.arm, v.rep)) in in_b
    ]


def mcnemar_exact(lost: int, gained: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (1.0 when there are none)."""
    n = lost + gained
    if n == 0:
        return 1.0
    tail = Fraction(sum(comb(n, i) for i in range(min(lost, gained) + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


@dataclass(frozen=True)
class ScenarioFlips:
    """The cells of one scenario whose verdict differs between A and B."""

    scenario_id: str
    lost: tuple[str, ...]  # strictly accurate in A, not in B
    gained: tuple[str, ...]  # strictly accurate in B, not in A


@dataclass(frozen=True)
class PairedComparison:
    """B against A on the cells they share (a group: all, one arm, one model)."""

    label: str
    pairs: int
    scenarios: int
    strict_a: int
    strict_b: int
    lost: int
    gained: int
    ci_low: float | None
    ci_high: float | None
    p_value: float
    flips: list[ScenarioFlips] = field(default_factory=list)

    @property
    def accuracy_a(self) -> float | None:
        return self.strict_a / self.pairs if self.pairs else None

    @property
    def accuracy_b(self) -> float | None:
        return self.strict_b / self.pairs if self.pairs else None

    @property
    def difference(self) -> float | None:
        """Strict accuracy of B − A over the shared cells."""
        return (self.strict_b - self.strict_a) / self.pairs if self.pairs else None


def compare_pairs(
    pairs: Sequence[Pair],
    *,
    label: str = "all",
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> PairedComparison:
    """The paired comparison of ``pairs``: difference, bootstrap CI, McNemar, flips."""
    import numpy as np

    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # k_a, k_b, n per scenario
    lost: dict[str, list[str]] = defaultdict(list)
    gained: dict[str, list[str]] = defaultdict(list)
    for p in pairs:
        t = per[p.scenario_id]
        t[0] += p.a
        t[1] += p.b
        t[2] += 1
        if p.a and not p.b:
            lost[p.scenario_id].append(p.cell)
        elif p.b and not p.a:
            gained[p.scenario_id].append(p.cell)
    ids = sorted(per)
    k_a = np.array([per[s][0] for s in ids], dtype=float)
    k_b = np.array([per[s][1] for s in ids], dtype=float)
    n = np.array([per[s][2] for s in ids], dtype=float)
    low, high = paired_bootstrap_gap(k_b, n, k_a, n, resamples=resamples, seed=seed)
    n_lost = sum(len(v) for v in lost.values())
    n_gained = sum(len(v) for v in gained.values())
    flips = [
        ScenarioFlips(s, tuple(sorted(lost.get(s, ()))), tuple(sorted(gained.get(s, ()))))
        for s in ids
        if s in lost or s in gained
    ]
    return PairedComparison(
        label=label,
        pairs=len(pairs),
        scenarios=len(ids),
        strict_a=int(k_a.sum()),
        strict_b=int(k_b.sum()),
        lost=n_lost,
        gained=n_gained,
        ci_low=low,
        ci_high=high,
        p_value=mcnemar_exact(n_lost, n_gained),
        flips=flips,
    )


def compare_groups(
    pairs: Sequence[Pair], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> list[PairedComparison]:
    """All shared cells, then each model (when there are several), then each arm."""
    groups: list[tuple[str, list[Pair]]] = [("all", list(pairs))]
    models = list(dict.fromkeys(p.model for p in pairs))
    if len(models) > 1:
        groups += [(f"model {m}", [p for p in pairs if p.model == m]) for m in models]
    arms = list(dict.fromkeys(p.arm for p in pairs))
    if len(arms) > 1:
        groups += [(f"arm {a}", [p for p in pairs if p.arm == a]) for a in arms]
    return [compare_pairs(g, label=label, resamples=resamples, seed=seed) for label, g in groups]


@dataclass(frozen=True)
class Flakiness:
    """Cells of one model × arm answered in ≥ 2 repetitions, and those whose verdict varied."""

    model: str
    arm: str
    cells: int
    flaky: int
    flaky_scenarios: tuple[str, ...]

    @property
    def share(self) -> float | None:
        return self.flaky / self.cells if self.cells else None


def flakiness(found: Sequence[Verdict]) -> list[Flakiness]:
    """Per model × arm (first-seen order), the flaky share of its repeated cells."""
    seen: dict[tuple[str, str], dict[str, set[bool]]] = defaultdict(lambda: defaultdict(set))
    reps: dict[tuple[str, str, str], int] = defaultdict(int)
    for v in found:
        seen[(v.model, v.arm)][v.scenario_id].add(v.strict)
        reps[(v.model, v.arm, v.scenario_id)] += 1
    out = []
    for (model, arm), by_scenario in seen.items():
        repeated = [s for s in by_scenario if reps[(model, arm, s)] >= 2]
        flaky = tuple(sorted(s for s in repeated if len(by_scenario[s]) == 2))
        out.append(Flakiness(model, arm, len(repeated), len(flaky), flaky))
    return out


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _p(value: float) -> str:
    return f"{value:.3g}" if value >= 0.001 else f"{value:.2e}"


#: What the comparison's figures mean, for every renderer.
COMPARISON_NOTE = (
    "Only the cells both answered are compared. Δ = strict accuracy of B − A; 95% CI: "
    f"paired bootstrap over scenarios ({BOOTSTRAP_RESAMPLES:,} resamples, fixed seed); p: exact "
    "McNemar test "
    "on the discordant cells (lost: strictly accurate in A only; gained: in B only)."
)
_COMPARISON_COLUMNS = (
    Column("group", outside=True),
    Column("shared cells"),
    Column("scenarios"),
    Column("A", numeric=True, help="strict accuracy of A on the shared cells"),
    Column("B", numeric=True, help="strict accuracy of B on the shared cells"),
    Column("Δ (B − A)", numeric=True),
    Column("95% CI", help="paired bootstrap over scenarios"),
    Column("lost", help="strictly accurate in A, not in B"),
    Column("gained", help="strictly accurate in B, not in A"),
    Column("p", help="exact McNemar test on the lost and gained cells"),
)
COMPARISON_HEADER = tuple(c.name for c in _COMPARISON_COLUMNS)
FLAKINESS_NOTE = (
    "Cells (model, scenario, arm) answered in 2 or more repetitions, and those whose "
    "strict verdict differs between repetitions."
)
_FLAKINESS_COLUMNS = (
    Column("model", outside=True),
    Column("arm", outside=True),
    Column("repeated cells"),
    Column("flaky"),
    Column("share", numeric=True),
    Column("flaky scenarios", outside=True),
)
FLAKINESS_HEADER = tuple(c.name for c in _FLAKINESS_COLUMNS)


def comparison_table(groups: Sequence[PairedComparison]) -> Table:
    """One row per group (all, each model, each arm)."""
    rows = []
    for g in groups:
        ci = (
            "–" if g.ci_low is None or g.ci_high is None else f"[{g.ci_low:+.3f}, {g.ci_high:+.3f}]"
        )
        diff = "–" if g.difference is None else f"{g.difference:+.3f}"
        rows.append(
            (
                Cell(g.label),
                Cell(str(g.pairs), g.pairs),
                Cell(str(g.scenarios), g.scenarios),
                Cell(_rate(g.accuracy_a), g.accuracy_a),
                Cell(_rate(g.accuracy_b), g.accuracy_b),
                Cell(diff, g.difference),
                Cell(ci),
                Cell(str(g.lost), g.lost),
                Cell(str(g.gained), g.gained),
                Cell(_p(g.p_value), g.p_value),
            )
        )
    return Table(
        key="paired",
        title="Paired comparison",
        columns=_COMPARISON_COLUMNS,
        rows=tuple(rows),
        note=COMPARISON_NOTE,
    )


def flips_table(comparison: PairedComparison) -> Table:
    """Per scenario with a flipped cell: the cells lost and gained."""
    return Table(
        key="flips",
        title="Flipped cells by scenario",
        columns=(
            Column("scenario", outside=True),
            Column("lost", outside=True),
            Column("gained", outside=True),
        ),
        rows=tuple(
            (Cell(f.scenario_id), Cell("; ".join(f.lost) or "–"), Cell("; ".join(f.gained) or "–"))
            for f in comparison.flips
        ),
    )


def flakiness_table(rows: Sequence[Flakiness], *, title: str = "Flakiness") -> Table:
    """One row per model × arm."""
    return Table(
        key="flakiness",
        title=title,
        columns=_FLAKINESS_COLUMNS,
        rows=tuple(
            (
                Cell(r.model),
                Cell(r.arm),
                Cell(str(r.cells), r.cells),
                Cell(str(r.flaky), r.flaky),
                Cell(_rate(r.share), r.share),
                Cell(", ".join(r.flaky_scenarios) or "–"),
            )
            for r in rows
        ),
        note=FLAKINESS_NOTE,
        title_outside=True,
    )


def comparison_markdown(title: str, groups: Sequence[PairedComparison], *, a: str, b: str) -> str:
    """The Markdown of a paired comparison: one row per group, then the flips of "all"."""
    from cvb_engine.report.markdown_report import table_lines

    table = comparison_table(groups)
    lines = [
        f"## {markdown_text(title)}",
        "",
        f"A = {markdown_text(a)}, B = {markdown_text(b)}. {table.note}",
        "",
        *table_lines(table),
    ]
    overall = groups[0] if groups else None
    if overall is not None and overall.flips:
        flips = flips_table(overall)
        lines += ["", f"### {flips.title}", "", *table_lines(flips)]
    elif overall is not None and overall.pairs:
        lines += ["", "No shared cell flipped."]
    if overall is not None and not overall.pairs:
        lines += ["", "The two share no answered cell: nothing to compare."]
    return "\n".join(lines)


def flakiness_markdown(rows: Sequence[Flakiness], *, title: str = "Flakiness") -> str:
    """The flakiness table: per model × arm, cells repeated and those whose verdict varied."""
    from cvb_engine.report.markdown_report import table_lines

    table = flakiness_table(rows, title=title)
    return "\n".join([f"## {markdown_text(title)}", "", table.note, "", *table_lines(table)])
