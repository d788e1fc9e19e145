"""The report's tables as typed objects: one builder per table, drawn by every renderer.

A figure is computed in :mod:`cvb_engine.metrics`; here it becomes a :class:`Table` of
:class:`Cell` (its text, the number behind it, its small print); the Markdown report
(:mod:`cvb_engine.report.markdown_report`), the HTML report (:mod:`cvb_engine.report.html`) and
the studio's Results views draw these tables and compute nothing. A new report section is
a new builder here plus its lines in each renderer (see the README's package map).

Which text came from outside (model names, arms, categories, constraint ids, layers) is
said by :attr:`Column.outside` and :attr:`Column.outside_name`: renderers that mark up
text (Markdown) write those as plain text; the others escape everything anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from cvb_engine.agent.metrics import ENDINGS, AgentStat
from cvb_engine.kinds import SeedArm
from cvb_engine.metrics import (
    BOOTSTRAP_RESAMPLES,
    LAYER_KINDS,
    DeliveryStat,
    Interval,
    IVRSummary,
    MemoryStat,
    Rate,
    StaleStat,
    Summary,
)
from cvb_engine.reference import PublishedCVB, Reference
from cvb_engine.report import memory_realism as mr
from cvb_engine.report.fmt import (
    arm_title,
    fmt_counts,
    fmt_fraction,
    fmt_gap,
    fmt_interval,
    fmt_rate,
    fmt_rate_ci,
    fmt_share,
    fmt_signed,
    has_layer_arms,
    rate_detail,
    resamples_text,
)

#: The tone of a gap cell (the renderers' colour for the mandated − incentivized gap).
GAP = "gap"

T = TypeVar("T")
U = TypeVar("U")

#: A table's budget: its columns (arms, categories, loads …) and its cells. A store or a
#: results file may name thousands of models and categories; a report shows this much of
#: each table and says how much more there is (the JSON and CSV exports hold every figure).
MAX_COLUMNS = 100
MAX_CELLS = 20_000
#: The most tables a section repeats (one per arm in "By category").
MAX_TABLES = 50


def fit(rows: Sequence[T], columns: Sequence[U], fixed: int = 1) -> tuple[list[T], list[U], str]:
    """The rows and columns a table shows within its budget (``fixed`` leading columns
    always), and the note of what it leaves out."""
    cols = list(columns[:MAX_COLUMNS])
    shown = list(rows[: max(1, MAX_CELLS // (len(cols) + fixed))])
    return shown, cols, omitted_text(len(rows) - len(shown), len(columns) - len(cols))


def omitted_text(rows: int, columns: int = 0, what: tuple[str, str] = ("rows", "columns")) -> str:
    """``"1,200 more rows and 40 more columns not shown …"``; empty when nothing is left out."""
    parts = [f"{n:,} more {name}" for n, name in zip((rows, columns), what, strict=True) if n]
    if not parts:
        return ""
    return " and ".join(parts) + " not shown (the JSON and CSV exports hold every figure)"


@dataclass(frozen=True)
class Cell:
    """One cell: ``text`` as every renderer writes it; ``value`` the number behind it
    (None: no figure), ``detail`` its small print (counts, a CI), ``tone`` what colours
    it (an arm, or :data:`GAP`; None: no colour)."""

    text: str
    value: float | None = None
    detail: str = ""
    tone: str | None = None


@dataclass(frozen=True)
class Column:
    """A column: its heading; ``outside``: its cells are text from outside (names);
    ``outside_name``: its heading is (a category, a constraint); ``numeric``: its cells
    carry a figure the studio shows as a number (``signed``: a difference, shown with its
    sign); ``help``: what it holds; ``key``: what names the column in data (an arm, where
    the heading adds its layer; default the heading)."""

    name: str
    key: str = ""
    outside: bool = False
    outside_name: bool = False
    numeric: bool = False
    help: str = ""
    signed: bool = False


@dataclass(frozen=True)
class Table:
    """One report table (cells are plain text: each renderer escapes them its own way)."""

    key: str
    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    note: str = ""
    title_outside: bool = False  # the title names an arm from outside
    omitted: str = ""  # what the table leaves out past its budget ("N more rows not shown")

    @property
    def header(self) -> list[str]:
        """The column headings."""
        return [c.name for c in self.columns]

    def texts(self) -> list[list[str]]:
        """Every row as its cells' texts."""
        return [[cell.text for cell in row] for row in self.rows]


def _text(value: str) -> Cell:
    return Cell(value)


def rate_cell(rate: Rate | None, tone: str | None) -> Cell:
    """A rate's cell: its figure, the rate behind it, its counts as small print."""
    value = rate.value if rate is not None else None
    return Cell(fmt_rate(rate), value, rate_detail(rate), tone)


def arm_columns(summary: Summary, arms: Sequence[str], what: str) -> list[Column]:
    """One numeric column per arm, headed with its title (a layer arm with its layer)."""
    return [
        Column(arm_title(summary, a), key=a, outside_name=True, numeric=True, help=f"{what}, {a}")
        for a in arms
    ]


def has_gap(summary: Summary) -> bool:
    """Whether both seed arms of the gap ran."""
    return SeedArm.MANDATED in summary.arms and SeedArm.INCENTIVIZED in summary.arms


GAP_HEADING = "gap (mandated − incentivized) [95% CI]"


def strict_note(resamples: int = BOOTSTRAP_RESAMPLES) -> str:
    """The accuracy table's note, naming the gap bootstrap's resamples."""
    return (
        "Strict accuracy: share of scored records with every constraint honored. "
        f"Gap CI: paired bootstrap over scenarios, {resamples_text(resamples)}."
    )


GAP_HELP = "mandated − incentivized strict accuracy; paired bootstrap over scenarios"


def accuracy_table(summary: Summary) -> Table:
    """Strict accuracy per model and arm, and the gap with its CI (its small print: the
    scenarios its bootstrap resampled); with a mandated arm, each agent variant's gap to
    mandated beside it (README: Agent arm)."""
    gap = has_gap(summary)
    agent_gaps = {(s.model, s.arm): s.gap for s in summary.agent}
    with_agents = SeedArm.MANDATED in summary.arms
    candidates = (
        [a for a in summary.arms if any(arm == a for _, arm in agent_gaps)] if with_agents else []
    )
    models, arms, omitted = fit(summary.models, summary.arms, 1 + gap + len(candidates))
    agent_arms = [a for a in candidates if a in arms]
    columns = [Column("model", outside=True), *arm_columns(summary, arms, "strict accuracy")]
    if gap:
        columns.append(Column(GAP_HEADING, help=f"{GAP_HELP}, {resamples_text(summary.resamples)}"))
    columns += [
        Column(
            f"gap (mandated − {a}) [95% CI]",
            key=f"gap:{a}",
            outside_name=True,
            help=f"mandated − {a} strict accuracy; paired bootstrap over scenarios, "
            f"{resamples_text(summary.resamples)}",
        )
        for a in agent_arms
    ]
    rows = []
    for m in models:
        cells = [_text(m), *(rate_cell(summary.strict.get((m, a)), a) for a in arms)]
        gaps = [summary.gap.get(m)] if gap else []
        gaps += [agent_gaps.get((m, a)) for a in agent_arms]
        for g in gaps:
            cells.append(
                Cell(fmt_gap(g), g.value if g else None, f"{g.n_units} scenarios" if g else "")
            )
        rows.append(tuple(cells))
    return Table(
        "accuracy",
        "Strict accuracy",
        tuple(columns),
        tuple(rows),
        strict_note(summary.resamples),
        omitted=omitted,
    )


def constraint_table(summary: Summary) -> Table:
    """Per-constraint accuracy (honored (record, constraint) pairs / all pairs)."""
    models, arms, omitted = fit(summary.models, summary.arms)
    columns = (
        Column("model", outside=True),
        *arm_columns(summary, arms, "per-constraint accuracy"),
    )
    rows = tuple(
        (_text(m), *(rate_cell(summary.constraint.get((m, a)), a) for a in arms)) for m in models
    )
    return Table(
        "constraint",
        "Per-constraint accuracy",
        columns,
        rows,
        "Honored (record, constraint) pairs / all pairs.",
        omitted=omitted,
    )


COUNTS_PLAIN = "Counts (scored records / error records)"
COUNTS_LAYERED = "Counts (scored records / API errors / memory failures)"
ERRORS_NOTE = "Error records (API failures) are excluded from every denominator."
ERRORS_NOTE_LAYERED = (
    "Error records are excluded from every denominator: API failures (the endpoint) and memory "
    "failures (the memory layer of a memory or memory-tool arm failed or timed out) are counted "
    "apart. A memory failure is neither an API failure nor a violation."
)


def counts_table(summary: Summary) -> Table:
    """Scored and error records per model and arm."""
    layered = has_layer_arms(summary)
    models, arms, omitted = fit(summary.models, summary.arms)
    columns = (
        Column("model", outside=True),
        *(Column(arm_title(summary, a), outside_name=True) for a in arms),
    )
    rows = tuple(
        (_text(m), *(_text(fmt_counts(summary.strict.get((m, a)), memory=layered)) for a in arms))
        for m in models
    )
    return Table(
        "counts",
        COUNTS_LAYERED if layered else COUNTS_PLAIN,
        columns,
        rows,
        ERRORS_NOTE_LAYERED if layered else ERRORS_NOTE,
        omitted=omitted,
    )


def category_tables(summary: Summary) -> list[Table]:
    """Strict accuracy per model × category, one table per arm (at most
    :data:`MAX_TABLES`; the last one says how many more arms were left out)."""
    models, categories, omitted = fit(summary.models, summary.categories)
    columns = (
        Column("model", outside=True),
        *(Column(c, outside_name=True, numeric=True) for c in categories),
    )
    arms = summary.arms[:MAX_TABLES]
    tables = [
        Table(
            f"category:{arm}",
            arm_title(summary, arm),
            columns,
            tuple(
                (
                    _text(m),
                    *(rate_cell(summary.by_category.get((m, arm, c)), arm) for c in categories),
                )
                for m in models
            ),
            title_outside=True,
            omitted=omitted,
        )
        for arm in arms
    ]
    more = len(summary.arms) - len(arms)
    if tables and more:
        last = tables[-1]
        note = f"{more:,} more arms' tables not shown (the JSON and CSV exports hold every figure)"
        tables[-1] = replace(last, omitted=f"{last.omitted}; {note}" if last.omitted else note)
    return tables


def category_gap_table(summary: Summary) -> Table | None:
    """The gap per model × category (its CI as small print); None without both seed arms."""
    if not has_gap(summary):
        return None
    models, categories, omitted = fit(summary.models, summary.categories)
    columns = (
        Column("model", outside=True),
        *(Column(c, outside_name=True, numeric=True) for c in categories),
    )
    rows = []
    for m in models:
        cells = [_text(m)]
        for c in categories:
            g = summary.category_gap.get((m, c))
            v = g.value if g is not None else None
            ci = (
                f"[{fmt_signed(g.low)}, {fmt_signed(g.high)}]"
                if g is not None and g.low is not None and g.high is not None
                else ""
            )
            cells.append(Cell(fmt_signed(v), v, ci, GAP))
        rows.append(tuple(cells))
    return Table(
        "category:gap", "gap (mandated − incentivized)", columns, tuple(rows), omitted=omitted
    )


OUTCOMES_NOTE = (
    "Outcome of each scored record: *answered* (code found, it parses), *unparseable* (code "
    "found, it does not parse), *no code* (a refusal, a question, prose, or reasoning that never "
    "ended; it honors no constraint). *Truncated*: the endpoint stopped at max_tokens. "
    "Accuracy among answered separates broken or missing code from disobedience."
)
OUTCOME_HEADER = [
    "model",
    "arm",
    "answered",
    "unparseable",
    "no code",
    "truncated",
    "strict among answered",
    "per-constraint among answered",
]
_OUTCOME_HELP = {
    "truncated": "share stopped at max_tokens (any outcome)",
    "strict among answered": "strictly accurate / answered records",
    "per-constraint among answered": "honored (record, constraint) pairs of answered records",
}


def outcome_table(summary: Summary) -> Table:
    """One row per model × arm with scored records: outcome shares, then strict and
    per-constraint accuracy among answered records."""
    rows: list[tuple[Cell, ...]] = []
    budget = MAX_CELLS // len(OUTCOME_HEADER)
    # in model, then arm order, over the pairs that have outcomes (never every model × arm)
    model_at = {m: i for i, m in enumerate(summary.models)}
    arm_at = {a: i for i, a in enumerate(summary.arms)}
    pairs = sorted(
        (key for key, o in summary.outcomes.items() if o.n and key[0] in model_at),
        key=lambda key: (model_at[key[0]], arm_at.get(key[1], len(arm_at))),
    )
    for m, a in pairs[:budget]:
        o = summary.outcomes[(m, a)]
        rows.append(
            (
                _text(m),
                _text(arm_title(summary, a)),
                _text(fmt_share(o, "answered")),
                _text(fmt_share(o, "unparseable")),
                _text(fmt_share(o, "no-code")),
                _text(fmt_share(o, "truncated")),
                _text(fmt_rate(summary.strict_answered.get((m, a)), counts=True)),
                _text(fmt_rate(summary.constraint_answered.get((m, a)))),
            )
        )
    more = max(0, len(pairs) - budget)
    columns = tuple(
        Column(h, outside=i < 2, help=_OUTCOME_HELP.get(h, ""))
        for i, h in enumerate(OUTCOME_HEADER)
    )
    return Table(
        "outcomes",
        "Answer outcomes",
        columns,
        tuple(rows),
        OUTCOMES_NOTE,
        omitted=omitted_text(more),
    )


# --------------------------------------------------------------------------- memory

MEMORY_NOTE = (
    "Memory arms: the incentivized arm with its constraints among `load` distractor notes from "
    "the project-memory pool, at a `position` (start, middle, end, spread), through a `channel` "
    "(inline user turn, system message, AGENTS.md file, earlier turns of the conversation); "
    "memory-layer arms (memory, memory-tool) over the same memory, each with its layer. "
    "Strict accuracy with a 95% bootstrap CI over scenarios; gap = mandated − variant, paired "
    "bootstrap over scenarios. At load 0 the position does not apply."
)

TOOL_USE_NOTE = (
    "memory-tool: the model gets one tool, `search_project_memory(query)`, and no memory in its "
    "prompt. Looked up: share of scored records with at least one tool call; calls per record: "
    "mean tool calls per scored record; lookups holding a constraint: share of the calls the "
    "layer answered whose entries held a constraint of the record's own scenario. Strict "
    "accuracy with its 95% CI (bootstrap over scenarios) and strictly accurate / records: when "
    "the model looked memory up, when it did not, and when a lookup brought back a constraint "
    "of its task. Records whose memory trace is missing or unreadable are left out, and counted."
)


def _incentivized(summary: Summary) -> list[MemoryStat]:
    """The incentivized arm's stats, none when no incentivized variant beyond the seed ran."""
    # stale= and budget= variants have tables of their own (cvb_engine.report.memory_realism)
    stats = [
        m
        for m in summary.memory
        if m.kind == SeedArm.INCENTIVIZED and not m.stale and m.budget is None
    ]
    return stats if any(m.arm != SeedArm.INCENTIVIZED for m in stats) else []


def memory_groups(summary: Summary) -> dict[tuple[str, str, str, int], dict[int, MemoryStat]]:
    """The incentivized curves: (model, channel, position, turns) -> load -> stat; a load-0
    stat joins every position."""
    groups: dict[tuple[str, str, str, int], dict[int, MemoryStat]] = {}
    stats = _incentivized(summary)
    positions = sorted({m.position for m in stats if m.load}) or ["spread"]
    for stat in stats:
        for pos in positions if stat.load == 0 else [stat.position]:
            groups.setdefault((stat.model, stat.channel, pos, stat.turns), {})[stat.load] = stat
    return groups


def layer_groups(summary: Summary) -> dict[tuple[str, str], dict[int, MemoryStat]]:
    """The memory-layer arms' curves: (model, series) -> load -> stat; a series is a layer
    arm's name without its load (``memory``, ``memory@command=./l.py``, ``memory-tool``)."""
    groups: dict[tuple[str, str], dict[int, MemoryStat]] = {}
    for stat in summary.memory:
        if stat.kind in LAYER_KINDS:
            groups.setdefault((stat.model, stat.series), {})[stat.load] = stat
    return groups


def series_title(summary: Summary, series: str, by_load: Mapping[int, MemoryStat]) -> str:
    """A layer series as reports name it: the series with its layer (``memory (bm25)``)."""
    layers = [summary.layers[s.arm] for s in by_load.values() if s.arm in summary.layers]
    return f"{series} ({layers[0]})" if layers else series


def memory_curves(summary: Summary) -> list[tuple[str, dict[int, MemoryStat]]]:
    """Every curve of the adherence-versus-memory-size chart, labelled: the incentivized
    arm's per model, channel and position, then each memory-layer series per model; only
    curves of two loads or more."""
    curves = []
    for (model, channel, pos, turns), by_load in sorted(memory_groups(summary).items()):
        if len(by_load) > 1:
            label = f"{channel} ({turns} turns)" if channel == "history" else channel
            curves.append((f"{model} · {label} · {pos}", by_load))
    for (model, series), by_load in sorted(layer_groups(summary).items()):
        if len(by_load) > 1:
            curves.append((f"{model} · {series_title(summary, series, by_load)}", by_load))
    return curves


def _plain(
    key: str, title: str, header: Sequence[str], rows: list[list[str]], names: int, note: str = ""
) -> Table:
    # the first ``names`` columns hold names from outside, the others cvb's figures and labels
    shown, heads, omitted = fit(rows, header[names:], names)
    width = names + len(heads)
    columns = tuple(Column(h, outside=i < names) for i, h in enumerate([*header[:names], *heads]))
    cells = tuple(tuple(map(_text, r[:width])) for r in shown)
    return Table(key, title, columns, cells, note, omitted=omitted)


def memory_curve_table(summary: Summary) -> Table:
    """The incentivized arm's adherence-versus-memory-size curve: one row per model,
    channel, position (and turns, for the history channel), one column per load."""
    loads = sorted({m.load for m in _incentivized(summary)})
    header = ["model", "channel", "position", *(f"load {n}" for n in loads)]
    rows = []
    for (model, channel, pos, turns), by_load in sorted(memory_groups(summary).items()):
        if len(by_load) == 1 and 0 in by_load and len(loads) > 1:
            continue  # a load-0 point alone is no curve
        label = f"{channel} ({turns} turns)" if channel == "history" else channel
        rows.append(
            [
                model,
                label,
                pos,
                *(fmt_interval(by_load[n].strict_ci) if n in by_load else "–" for n in loads),
            ]
        )
    return _plain(
        "memory:curve", "Adherence versus memory size (strict accuracy [95% CI])", header, rows, 1
    )


def layer_curve_table(summary: Summary) -> Table:
    """The memory-layer arms against memory size: one row per model and series (a layer
    arm without its load), with its layer, one column per load (strict accuracy [95% CI])."""
    groups = layer_groups(summary)
    loads = sorted({n for by_load in groups.values() for n in by_load})
    header = ["model", "arm", "layer", *(f"load {n}" for n in loads)]
    rows = []
    for (model, series), by_load in sorted(groups.items()):
        layers = [summary.layers[s.arm] for s in by_load.values() if s.arm in summary.layers]
        rows.append(
            [
                model,
                series,
                layers[0] if layers else "–",
                *(fmt_interval(by_load[n].strict_ci) if n in by_load else "–" for n in loads),
            ]
        )
    return _plain(
        "memory:layers",
        "Memory layers versus memory size (strict accuracy [95% CI])",
        header,
        rows,
        3,
    )


def memory_position_table(summary: Summary) -> Table:
    """Strict accuracy by where the constraints sit, at each load above 0."""
    stats = _incentivized(summary)
    positions = [
        p
        for p in ("start", "middle", "end", "spread")
        if any(m.position == p and m.load for m in stats)
    ]
    header = ["model", "load", "channel", *positions]
    cells: dict[tuple[str, int, str], dict[str, str]] = {}
    for stat in stats:
        if stat.load:
            key = (stat.model, stat.load, stat.channel)
            cells.setdefault(key, {})[stat.position] = fmt_interval(stat.strict_ci)
    rows = [
        [model, str(load), channel, *(by.get(p, "–") for p in positions)]
        for (model, load, channel), by in sorted(cells.items())
        if len(by) > 1
    ]
    return _plain(
        "memory:position", "Position of the constraints (strict accuracy [95% CI])", header, rows, 1
    )


def memory_channel_table(summary: Summary) -> Table:
    """Each channel's gap to mandated, with its CI: one row per model, load and position."""
    stats = _incentivized(summary)
    channels = [
        c for c in ("inline", "system", "file", "history") if any(m.channel == c for m in stats)
    ]
    header = ["model", "load", "position", *(f"gap: {c}" for c in channels)]
    cells: dict[tuple[str, int, str], dict[str, str]] = {}
    for stat in stats:
        key = (stat.model, stat.load, stat.position if stat.load else "–")
        cells.setdefault(key, {})[stat.channel] = fmt_gap(stat.gap)
    rows = [
        [model, str(load), pos, *(by.get(c, "–") for c in channels)]
        for (model, load, pos), by in sorted(cells.items())
    ]
    return _plain("memory:channel", "Channels: gap to mandated [95% CI]", header, rows, 1)


TOOL_USE_HEADER = [
    "model",
    "arm",
    "records",
    "looked up",
    "calls per record",
    "lookups holding a constraint",
    "strict: looked up",
    "strict: did not look",
    "strict: a constraint came back",
    "trace unavailable",
]


def tool_use_table(summary: Summary) -> Table:
    """How each model used the memory tool, per memory-tool variant (:class:`ToolUse`)."""
    rows = []
    for u in summary.tool_use:
        calls = u.calls_per_record
        rows.append(
            [
                u.model,
                arm_title(summary, u.arm),
                str(u.n),
                f"{fmt_fraction(u.looked_share)} ({u.looked}/{u.n})",
                "–" if calls is None else f"{calls:.2f}",
                f"{fmt_fraction(u.held_share)} ({u.lookups_held}/{u.lookups})",
                fmt_rate_ci(u.strict_looked, u.strict_looked_ci),
                fmt_rate_ci(u.strict_not_looked, u.strict_not_looked_ci),
                fmt_rate_ci(u.strict_held, u.strict_held_ci),
                str(u.unavailable),
            ]
        )
    return _plain(
        "memory:tool",
        "Memory lookups by the model (memory-tool)",
        TOOL_USE_HEADER,
        rows,
        2,
        TOOL_USE_NOTE,
    )


def has_memory(summary: Summary) -> bool:
    """Whether the memory section has anything to show: memory variants, tool use, or what
    ``stale=`` and ``budget=`` did (an agent run's too: its rules files were cut or held a
    superseded decision)."""
    return bool(summary.memory or summary.tool_use or summary.stale or summary.delivery)


def memory_tables(summary: Summary) -> list[Table]:
    """The memory section's tables that have rows: what the Markdown and HTML reports and
    the studio's Memory view show."""
    tables = [
        memory_curve_table(summary),
        layer_curve_table(summary),
        memory_position_table(summary),
        memory_channel_table(summary),
        tool_use_table(summary),
        *realism_tables(summary),
    ]
    return [t for t in tables if t.rows]


# --------------------------------------------------------------------------- agent arm

AGENT_NOTE = (
    "Agent arm: each cell is an episode in a small repository built from the scenario, the "
    "constraints in its rules files (`rules`: AGENTS.md, CLAUDE.md, decision records, a README "
    "section, a nested AGENTS.md) among `load` distractor notes; the model works with tools "
    "for at most `steps` rounds (or the user's own agent program runs, `command`), and the "
    "file it leaves is scored. *Read*: the agent saw a constraint's text (opened the file "
    "holding it, or a search showed one of its lines); *in the system message*: `preload` put "
    "the root rules file's constraints there (counted apart from read); *obeyed*: the checks "
    "passed. Strict accuracy when read / not read splits "
    "episodes by whether any constraint of the task was read; per-constraint accuracy when read "
    "/ not read splits (episode, constraint) pairs by whether that constraint was read. 95% CI: "
    "bootstrap over scenarios; gap to mandated: paired bootstrap over scenarios, as the "
    "headline gap. Episodes whose trace is missing or unreadable count in accuracy but in no "
    "read, step or token figure (counted under *trace unavailable*); an agent program whose "
    "file reads could not be observed is in no read figure (*reads not observed*)."
)

EPISODES_NOTE = (
    "Per scored episode with a trace: tool rounds (steps), tool calls and tokens (prompt + "
    "completion, over the episodes whose endpoint reported them). Ended: the model answered "
    "without a tool call (answer), its `steps` rounds ran out (steps limit), a request failed "
    "for good (error), the agent program ran out of time (timeout); error records included. "
    "Refused: tool calls refused (a path outside the workspace, an unknown tool, arguments "
    "that are not JSON, a write over the cap), and the episodes with at least one. No file: "
    "a named file was never written (no-code, honors nothing)."
)

#: How each ending is named in the tables.
ENDING_TITLES = {
    "answer": "answer",
    "steps": "steps limit",
    "error": "error",
    "timeout": "timeout",
}

READ_HEADER = [
    "model",
    "arm",
    "episodes",
    "strict [95% CI]",
    "per-constraint [95% CI]",
    "gap to mandated [95% CI]",
    "read the rules",
    "read every constraint",
    "rules in the system message",
    "strict: read",
    "strict: not read",
    "per-constraint: read",
    "per-constraint: not read",
    "trace unavailable",
    "reads not observed",
]


def _agent_share(k: int, n: int) -> str:
    return "–" if not n else f"{fmt_fraction(k / n)} ({k}/{n})"


def _per_episode(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def read_rows(stats: Iterable[AgentStat]) -> list[list[str]]:
    """One row of :data:`READ_HEADER` per model × agent variant."""
    return [
        [
            s.model,
            s.arm,
            str(s.n),
            fmt_rate_ci(s.strict, s.strict_ci),
            fmt_rate_ci(s.constraint, s.constraint_ci),
            fmt_gap(s.gap),
            _agent_share(s.read, s.observed),
            _agent_share(s.read_all, s.observed),
            _agent_share(s.preloaded, s.traced) if s.preloaded else "–",
            fmt_rate_ci(s.strict_read, s.strict_read_ci),
            fmt_rate_ci(s.strict_unread, s.strict_unread_ci),
            fmt_rate_ci(s.constraint_read, s.constraint_read_ci),
            fmt_rate_ci(s.constraint_unread, s.constraint_unread_ci),
            str(s.unavailable),
            str(s.reads_unobserved),
        ]
        for s in stats
    ]


EPISODE_HEADER = [
    "model",
    "arm",
    "episodes",
    "steps per episode",
    "tool calls per episode",
    "tokens per episode",
    *(f"ended: {ENDING_TITLES[k]}" for k in ENDINGS),
    "refused calls (episodes)",
    "no file",
    "error records",
]


def episode_rows(stats: Iterable[AgentStat]) -> list[list[str]]:
    """One row of :data:`EPISODE_HEADER` per model × agent variant."""
    return [
        [
            s.model,
            s.arm,
            str(s.n),
            _per_episode(s.steps_per_episode),
            _per_episode(s.calls_per_episode),
            _per_episode(s.tokens_per_episode, 0),
            *(str(s.ended.get(k, 0)) for k in ENDINGS),
            f"{s.refused} ({s.refused_episodes})",
            str(s.no_file),
            str(s.errors),
        ]
        for s in stats
    ]


def has_agent(summary: Summary) -> bool:
    """Whether the agent section has anything to show (a run with agent variants)."""
    return bool(summary.agent)


def agent_tables(summary: Summary) -> list[Table]:
    """The agent section's tables (none for a run without agent variants): what the Markdown
    and HTML reports and the studio's Agent view show. The first two columns (model, variant:
    a command variant holds a user's command line) are text from outside."""
    if not has_agent(summary):
        return []
    return [
        _plain(
            "agent:read",
            "Read versus obeyed (agent arm)",
            READ_HEADER,
            read_rows(summary.agent),
            2,
        ),
        _plain(
            "agent:episodes",
            "Agent episodes: steps, tokens, how they ended",
            EPISODE_HEADER,
            episode_rows(summary.agent),
            2,
            EPISODES_NOTE,
        ),
    ]


# --------------------------------------------------------------------------- memory realism
# (README: Memory realism) the stale drop, delivered versus not, the budget and turns curves


def _fmt(ci: Interval) -> str:
    return fmt_interval(ci)


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def stale_table(summary: Summary) -> Table:
    """Per model and base variant: strict accuracy without stale, with ``stale=with`` and
    with ``stale=only`` (each [95% CI]), and each drop [95% CI]."""
    header = ["model", "arm", "without stale", "stale=with", "drop", "stale=only", "drop"]
    cells: dict[tuple[str, str], dict[str, StaleStat]] = {}
    for stat in summary.stale:
        cells.setdefault((stat.model, stat.base), {})[stat.stale] = stat
    rows = []
    for (model, base), by in sorted(cells.items()):
        first = next(iter(by.values()))
        row = [model, base, _fmt(first.base_ci)]
        for setting in ("with", "only"):
            got = by.get(setting)
            row += [_fmt(got.strict_ci), fmt_gap(got.drop)] if got else ["–", "–"]
        rows.append(row)
    return _plain(
        "memory:stale",
        "Outdated notes: strict accuracy [95% CI] with the superseded decisions, and the drop",
        header,
        rows,
        2,
        mr.STALE_NOTE,
    )


def delivery_table(summary: Summary) -> Table:
    """Per model × variant with delivery records: delivered versus not delivered."""
    return _plain(
        "memory:delivery",
        "Delivered versus not delivered (per-constraint honored rate [95% CI])",
        mr.DELIVERY_HEADER,
        [_delivery_row(d) for d in summary.delivery],
        2,
        mr.DELIVERY_NOTE,
    )


def _delivery_row(d: DeliveryStat) -> list[str]:
    return [
        d.model,
        d.arm,
        f"{d.n}" + (f" (+{d.unavailable} unreadable)" if d.unavailable else ""),
        str(d.cut_records),
        _share(d.delivered_share),
        fmt_rate_ci(d.delivered, d.delivered_ci),
        fmt_rate_ci(d.not_delivered, d.not_delivered_ci),
        "–" if d.ignored is None else f"{d.ignored:.3f}",
        fmt_rate_ci(d.strict_whole, d.strict_whole_ci),
        fmt_rate_ci(d.strict_cut, d.strict_cut_ci),
    ]


def budget_table(summary: Summary) -> Table:
    """Strict accuracy against the delivery budget: one row per model, channel, load,
    position and stale setting, one column per budget (and one without)."""
    groups = mr.budget_groups(summary)
    budgets = sorted({b for by in groups.values() for b in by if b is not None})
    unlimited = any(None in by for by in groups.values())
    header = [
        "model",
        "channel",
        "load",
        "position",
        "stale",
        *(f"{b:,} bytes" for b in budgets),
        *(["no budget"] if unlimited else []),
    ]
    delivered = {(d.model, d.arm): d for d in summary.delivery}
    rows = []
    for (model, channel, load, pos, stale), by in sorted(
        groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])
    ):
        rows.append(
            [
                model,
                channel,
                str(load),
                pos,
                stale or "–",
                *(_budget_cell(by.get(b), delivered) for b in budgets),
                *([_budget_cell(by.get(None), delivered)] if unlimited else []),
            ]
        )
    return _plain(
        "memory:budget",
        "Adherence versus delivery budget (strict accuracy [95% CI])",
        header,
        rows,
        1,
        mr.BUDGET_NOTE,
    )


def _budget_cell(stat: mr.CurvePoint | None, delivered: dict[tuple[str, str], DeliveryStat]) -> str:
    if stat is None:
        return "–"
    d = delivered.get((stat.model, stat.arm))
    share = f" · {_share(d.delivered_share)} delivered" if d is not None else ""
    return _fmt(stat.strict_ci) + share


def turns_table(summary: Summary) -> Table:
    """Strict accuracy against the unrelated exchanges between the memory and the task
    (history channel): one row per model, load, position and stale setting."""
    groups = mr.turns_groups(summary)
    turns = sorted({t for by in groups.values() for t in by})
    header = ["model", "load", "position", "stale", *(f"{t} turns" for t in turns)]
    rows = [
        [
            model,
            str(load),
            pos,
            stale or "–",
            *(_fmt(by[t].strict_ci) if t in by else "–" for t in turns),
        ]
        for (model, load, pos, stale), by in sorted(
            groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])
        )
    ]
    return _plain(
        "memory:turns",
        "Adherence versus unrelated exchanges since the memory (history channel, strict "
        "accuracy [95% CI])",
        header,
        rows,
        1,
    )


def realism_tables(summary: Summary) -> list[Table]:
    """The memory-realism tables, in the order the memory section shows them."""
    return [
        stale_table(summary),
        delivery_table(summary),
        budget_table(summary),
        turns_table(summary),
    ]


# --------------------------------------------------------------------------- IVR


def ivr_note(resamples: int = BOOTSTRAP_RESAMPLES) -> str:
    """The IVR table's note, naming its bootstrap's resamples."""
    return (
        "IVR per problem = stated-passing solutions failing ≥ 1 hidden test / stated-passing "
        "solutions; reported IVR = mean over problems with ≥ 1 stated-passing solution; "
        f"CI: bootstrap over problems, {resamples_text(resamples)}."
    )


def ivr_table(results: Mapping[tuple[str, str], IVRSummary]) -> Table:
    """IVR per model × arm with its CI, the stated pass rate and bimodality."""
    header = [
        "model",
        "arm",
        "stated-test pass rate",
        "IVR [95% CI]",
        "problems (qualifying / excluded)",
        "at IVR 0 or 1",
    ]
    shown, _, omitted = fit(list(results.values()), header[2:], 2)
    rows = tuple(
        (
            _text(r.model),
            _text(r.arm),
            _text(
                f"{r.stated_pass_rate:.1%} ({r.n_stated_passed}/{r.n_solutions})"
                if r.stated_pass_rate is not None
                else "–"
            ),
            Cell(fmt_interval(r.ivr), r.ivr.value),
            _text(f"{r.n_qualifying} / {len(r.excluded)}"),
            _text(
                f"{r.extreme_share:.1%} ({r.n_extreme}/{r.n_qualifying})"
                if r.extreme_share is not None
                else "–"
            ),
        )
        for r in shown
    )
    columns = tuple(Column(h, outside=i < 2) for i, h in enumerate(header))
    resamples = min((r.resamples for r in results.values()), default=BOOTSTRAP_RESAMPLES)
    note = ivr_note(resamples)
    return Table("ivr", "Intent Violation Rate (IVR)", columns, rows, note, omitted=omitted)


def _position(key: str) -> tuple[int, str]:
    # C2, C3, …, C10 in number order (a text sort puts C10 before C2)
    digits = key[1:]
    return (int(digits), key) if digits.isdigit() and len(digits) < 9 else (1 << 62, key)


def _failures(rate: Rate | None) -> Cell:
    return Cell(fmt_rate(rate, counts=True), rate.value if rate is not None else None)


def ivr_constraint_table(results: Mapping[tuple[str, str], IVRSummary]) -> Table:
    """The failure rate per hidden constraint among stated-passing solutions."""
    every = sorted({k for r in results.values() for k in r.constraint_fail}, key=_position)
    shown, positions, omitted = fit(list(results.values()), every, 2)
    columns = (
        Column("model", outside=True),
        Column("arm", outside=True),
        *(Column(k, outside_name=True) for k in positions),
    )
    rows = tuple(
        (
            _text(r.model),
            _text(r.arm),
            *(_failures(r.constraint_fail.get(k)) for k in positions),
        )
        for r in shown
    )
    return Table(
        "ivr:constraints",
        "Failure rate per hidden constraint among stated-passing solutions",
        columns,
        rows,
        omitted=omitted,
    )


def ivr_excluded(results: Mapping[tuple[str, str], IVRSummary]) -> list[tuple[str, str, list[str]]]:
    """(model, arm, problems) for every model × arm with problems left out (no
    stated-passing solution)."""
    return [(r.model, r.arm, list(r.excluded)) for r in results.values() if r.excluded]


# --------------------------------------------------------------------------- published


def published_table(published: PublishedCVB, summary: Summary) -> Table:
    """The published strict accuracy per model and arm, the published gap (with yours
    beside it for a model in both)."""
    arms = [a.value for a in SeedArm]
    columns = (
        Column("model (published)", outside=True),
        *(Column(a, numeric=True) for a in arms),
        Column("gap"),
    )
    rows = []
    for m in published.models:
        cells = [_text(m)]
        for a in arms:
            v = published.strict[m].get(a)
            cells.append(Cell("–" if v is None else f"{v:.3f}", v))
        gap = fmt_signed(published.gap.get(m))
        if m in summary.models:
            gap += f" (yours: {fmt_gap(summary.gap.get(m))})"
        cells.append(Cell(gap, published.gap.get(m)))
        rows.append(tuple(cells))
    return Table("published", f"{published.label} · strict accuracy", columns, tuple(rows))


def published_ivr_table(reference: Reference) -> Table:
    """The published IVR figures."""
    columns = (
        Column("model (published)", outside=True),
        Column("stated-test pass rate", numeric=True),
        Column("IVR", numeric=True),
    )
    rows = tuple(
        (
            _text(p.model),
            Cell(f"{p.stated_pass_rate:.1%}", p.stated_pass_rate),
            Cell(f"{p.ivr:.1%}", p.ivr),
        )
        for p in reference.ivr
    )
    return Table("published:ivr", "Published IVR figures", columns, rows)
