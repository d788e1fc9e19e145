"""Reports: Markdown tables in the seed's shape, the JSON results file and a CSV of records.

``python -m cvb_engine.report`` is ``cvb report`` (``__main__.py`` hands over to
:mod:`cvb_engine.cli.report`; this module never imports the CLI).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cvb_engine.kinds import SeedArm
from cvb_engine.metrics import (
    LAYER_KINDS,
    Interval,
    IVRSummary,
    MemoryStat,
    Outcomes,
    Rate,
    Summary,
    ToolUse,
)
from cvb_engine.safe_text import markdown_code, write_csv
from cvb_engine.safe_text import markdown_text as _t
from cvb_engine.sandbox import DEFAULT_BACKEND, is_weaker
from cvb_engine.scenario import LoadedScenario
from cvb_engine.scoring import SCORING_VERSION

CSV_FIELDS = (
    "model",
    "scenario_id",
    "scenario_version",
    "category",
    "arm",
    "rep",
    "status",
    "error",
    "error_kind",
    "outcome",
    "truncated",
    "scoring_version",
    "strict",
    "constraints_honored",
    "constraints_violated",
    "stated_passed",
    "latency_s",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
    "prompt_version",
    "messages_sha256",
)


def sandbox_backends(params: object) -> list[str] | None:
    """The sandbox backends that judged a run (``params["sandbox"]``: a resume or a
    re-score may add one); None for a run made before cvb recorded them."""
    raw = params.get("sandbox") if isinstance(params, dict) else None
    if raw is None:
        return None
    return [str(n) for n in raw] if isinstance(raw, list) else [str(raw)]


def weaker_backends(params: object) -> list[str]:
    """The backends weaker than the default (bwrap) among those that judged a run."""
    return [n for n in sandbox_backends(params) or () if is_weaker(n)]


def sandbox_label(params: object) -> str:
    """How a run's executed checks were isolated, from its params, for a report's header;
    a run older than the record, or one that executed no code, says so."""
    names = sandbox_backends(params)
    if names is None:
        return "not recorded (a run made before cvb recorded it, or no code executed)"
    if not names:
        return "none (no check executed model code)"
    weaker = weaker_backends(params)
    text = ", ".join(names)
    if weaker:
        text += f" (weaker than {DEFAULT_BACKEND}: {', '.join(weaker)}, named by the user)"
    return text


@dataclass(frozen=True)
class ReportNotes:
    """What a report says besides the metrics: the scoring rules that judged its
    records and what the checks of its constraints cannot see."""

    # scoring version -> number of scored records it judged (1: before outcomes)
    scoring_versions: Mapping[int, int] = field(default_factory=dict)
    # (scenario id, constraint id, limitation) for every constraint that states one
    limitations: tuple[tuple[str, str, str], ...] = ()

    @property
    def older_rules(self) -> int:
        """Scored records judged by rules older than this cvb's."""
        return sum(n for v, n in self.scoring_versions.items() if v < SCORING_VERSION)

    def older_rules_text(self) -> str | None:
        if not self.older_rules:
            return None
        versions = ", ".join(str(v) for v in sorted(self.scoring_versions) if v < SCORING_VERSION)
        return (
            f"{self.older_rules:,} scored record(s) were judged by older scoring rules "
            f"(version {versions}; this cvb uses {SCORING_VERSION}). Their verdicts may differ "
            "from today's: re-score the run with `cvb score RUN_ID` (no API call)."
        )


def limitations_of(
    library: Mapping[str, LoadedScenario], scenario_ids: Iterable[str] | None = None
) -> tuple[tuple[str, str, str], ...]:
    """Every stated limitation of the constraints of ``scenario_ids`` (default: all)."""
    wanted = set(scenario_ids) if scenario_ids is not None else set(library)
    return tuple(
        (sid, c.id, " ".join(c.limitations.split()))
        for sid, item in sorted(library.items())
        if sid in wanted
        for c in item.scenario.constraints
        if c.limitations
    )


def fmt_share(outcomes: Outcomes | None, name: str) -> str:
    share = outcomes.share(name) if outcomes is not None else None
    return "–" if share is None else f"{share:.3f}"


def fmt_rate(rate: Rate | None, *, counts: bool = False) -> str:
    if rate is None or rate.value is None:
        return "–"
    text = f"{rate.value:.3f}"
    return f"{text} ({rate.k}/{rate.n})" if counts else text


def fmt_signed(value: float | None) -> str:
    if value is None:
        return "–"
    if abs(value) < 5e-4:
        return "0.000"
    return f"{value:+.3f}".replace("-", "−")


def fmt_gap(gap: Interval | None) -> str:
    if gap is None or gap.value is None:
        return "–"
    if gap.low is None or gap.high is None:
        return fmt_signed(gap.value)
    return f"{fmt_signed(gap.value)} [{fmt_signed(gap.low)}, {fmt_signed(gap.high)}]"


def arm_title(summary: Summary, arm: str) -> str:
    """An arm as reports name it: a memory-layer arm with its layer, ``memory (bm25)``,
    ``memory@command=./l.py (my-layer 0.1)``; any other arm by its name."""
    layer = summary.layers.get(arm)
    return f"{arm} ({layer})" if layer else arm


def has_layer_arms(summary: Summary) -> bool:
    """Whether a memory-layer arm ran (its failures are then counted apart in every table)."""
    return bool(summary.layers) or any(r.memory_errors for r in summary.strict.values())


def error_counts(summary: Summary) -> tuple[int, int]:
    """(API failures, memory-layer failures) over every model and arm."""
    rates = summary.strict.values()
    return sum(r.errors for r in rates), sum(r.memory_errors for r in rates)


def _table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    # Cells are Markdown already: values from outside go through ``_t`` before.
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def markdown(
    summary: Summary,
    *,
    title: str = "CVB results",
    meta: dict[str, Any] | None = None,
    notes: ReportNotes | None = None,
) -> str:
    """The Markdown report: arm accuracy with the gap, answer outcomes with accuracy
    among answered records, per-constraint accuracy, counts, one table per arm by
    category and the gap by category, then the limitations of the checks.

    Names and ids in the tables, the title and ``meta`` come from records, files
    and servers: they are written as plain text (:func:`~cvb_engine.safe_text.markdown_text`).
    """
    arms = summary.arms
    out = [f"# {_t(title)}", ""]
    for key, value in (meta or {}).items():
        out.append(f"- {_t(key)}: {_t(value)}")
    if meta:
        out.append("")
    older = notes.older_rules_text() if notes else None
    if older:
        out += [f"> **Judged by older rules.** {older}", ""]
    has_gap = SeedArm.MANDATED in arms and SeedArm.INCENTIVIZED in arms
    titles = [_t(arm_title(summary, a)) for a in arms]
    layered = has_layer_arms(summary)
    out += ["## Strict accuracy", ""]
    header = ["model", *titles] + (["gap (mandated − incentivized) [95% CI]"] if has_gap else [])
    out += _table(
        header,
        (
            [_t(m), *(fmt_rate(summary.strict.get((m, a))) for a in arms)]
            + ([fmt_gap(summary.gap.get(m))] if has_gap else [])
            for m in summary.models
        ),
    )
    out += [
        "",
        "Strict accuracy: share of scored records with every constraint honored. "
        "Gap CI: paired bootstrap over scenarios, 10,000 resamples, fixed seed.",
        "",
    ]
    out += outcomes_markdown(summary)
    out += ["## Per-constraint accuracy", ""]
    out += _table(
        ["model", *titles],
        (
            [_t(m), *(fmt_rate(summary.constraint.get((m, a))) for a in arms)]
            for m in summary.models
        ),
    )
    out += ["", f"## {COUNTS_LAYERED if layered else COUNTS_PLAIN}", ""]
    out += _table(
        ["model", *titles],
        (
            [_t(m), *(_counts(summary.strict.get((m, a)), memory=layered) for a in arms)]
            for m in summary.models
        ),
    )
    out += ["", ERRORS_NOTE_LAYERED if layered else ERRORS_NOTE, ""]
    out += ["## By category", ""]
    for arm in arms:
        out += [f"### {_t(arm_title(summary, arm))}", ""]
        out += _table(
            ["model", *map(_t, summary.categories)],
            (
                [
                    _t(m),
                    *(fmt_rate(summary.by_category.get((m, arm, c))) for c in summary.categories),
                ]
                for m in summary.models
            ),
        )
        out.append("")
    if has_gap:
        out += ["### gap (mandated − incentivized)", ""]
        out += _table(
            ["model", *map(_t, summary.categories)],
            (
                [
                    _t(m),
                    *(fmt_signed(summary.category_gap[(m, c)].value) for c in summary.categories),
                ]
                for m in summary.models
            ),
        )
        out.append("")
    out += memory_markdown(summary)
    from cvb_engine.report.agent import agent_markdown  # the section imports this module

    out += agent_markdown(summary)
    out += limitations_markdown(notes.limitations if notes else ())
    return "\n".join(out)


COUNTS_PLAIN = "Counts (scored records / error records)"
COUNTS_LAYERED = "Counts (scored records / API errors / memory failures)"
ERRORS_NOTE = "Error records (API failures) are excluded from every denominator."
ERRORS_NOTE_LAYERED = (
    "Error records are excluded from every denominator: API failures (the endpoint) and memory "
    "failures (the memory layer of a memory or memory-tool arm failed or timed out) are counted "
    "apart. A memory failure is neither an API failure nor a violation."
)

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
    stats = [m for m in summary.memory if m.kind == SeedArm.INCENTIVIZED]
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


def memory_curve_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """The incentivized arm's adherence-versus-memory-size curve as a table: one row per
    model, channel, position (and turns, for the history channel), one column per load."""
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
    return header, rows


def layer_curve_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
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
    return header, rows


def fmt_fraction(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def fmt_rate_ci(rate: Rate, ci: Interval) -> str:
    """``0.667 [0.333, 1.000] (4/6)``, or "–" without records."""
    if rate.value is None:
        return "–"
    return f"{fmt_interval(ci)} ({rate.k}/{rate.n})"


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


def tool_use_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """How each model used the memory tool, per memory-tool variant (:class:`ToolUse`)."""
    rows = [_tool_use_row(summary, u) for u in summary.tool_use]
    return list(TOOL_USE_HEADER), rows


def _tool_use_row(summary: Summary, u: ToolUse) -> list[str]:
    calls = u.calls_per_record
    return [
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


def tool_use_dict(uses: Iterable[ToolUse], layers: Mapping[str, str]) -> list[dict[str, Any]]:
    """The tool-use figures for the results file (``memory_tool``), one per model × variant;
    ``layers`` names each variant's layer (:attr:`Summary.layers`)."""

    def rate(r: Rate, ci: Interval) -> dict[str, Any]:
        return {"strict": r.value, "ci95": [ci.low, ci.high], "k": r.k, "n": r.n}

    return [
        {
            "model": u.model,
            "arm": u.arm,
            "layer": layers.get(u.arm),
            "records": u.n,
            "trace_unavailable": u.unavailable,
            "looked_up": u.looked,
            "looked_up_share": u.looked_share,
            "tool_calls": u.calls,
            "calls_per_record": u.calls_per_record,
            "lookups": u.lookups,
            "lookups_holding_a_constraint": u.lookups_held,
            "held_share": u.held_share,
            "when_looked_up": rate(u.strict_looked, u.strict_looked_ci),
            "when_not_looked_up": rate(u.strict_not_looked, u.strict_not_looked_ci),
            "when_a_constraint_came_back": rate(u.strict_held, u.strict_held_ci),
        }
        for u in uses
    ]


def memory_channel_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
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
    return header, rows


def memory_position_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
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
    return header, rows


@dataclass(frozen=True)
class MemoryTable:
    """One table of the memory section. Cells are plain text; the first ``names`` columns
    hold names from outside (models, arms, layers), the others cvb's figures and labels."""

    title: str
    header: list[str]
    rows: list[list[str]]
    names: int = 1
    note: str = ""


def memory_tables(summary: Summary) -> list[MemoryTable]:
    """The memory section's tables that have rows: what the Markdown and HTML reports and
    the studio's Memory view show."""
    tables = [
        MemoryTable(
            "Adherence versus memory size (strict accuracy [95% CI])", *memory_curve_table(summary)
        ),
        MemoryTable(
            "Memory layers versus memory size (strict accuracy [95% CI])",
            *layer_curve_table(summary),
            names=3,
        ),
        MemoryTable(
            "Position of the constraints (strict accuracy [95% CI])",
            *memory_position_table(summary),
        ),
        MemoryTable("Channels: gap to mandated [95% CI]", *memory_channel_table(summary)),
        MemoryTable(
            "Memory lookups by the model (memory-tool)",
            *tool_use_table(summary),
            names=2,
            note=TOOL_USE_NOTE,
        ),
    ]
    return [t for t in tables if t.rows]


def memory_markdown(summary: Summary) -> list[str]:
    """The "Memory arms" section, or nothing for a run without memory variants."""
    if not summary.memory and not summary.tool_use:
        return []
    out = ["## Memory arms", "", MEMORY_NOTE, ""]
    for table in memory_tables(summary):
        out += [f"### {table.title}", ""]
        out += _table(
            table.header,
            ([*map(_t, row[: table.names]), *row[table.names :]] for row in table.rows),
        )
        out += ["", table.note, ""] if table.note else [""]
    return out


OUTCOMES_NOTE = (
    "Outcome of each scored record: *answered* (code found, it parses), *unparseable* (code "
    "found, it does not parse), *no code* (a refusal, a question, prose, or reasoning that never "
    "ended; it honors no constraint). *Truncated*: the endpoint stopped at max_tokens. "
    "Accuracy among answered separates broken or missing code from disobedience."
)


def outcome_rows(summary: Summary) -> list[list[str]]:
    """One row per model × arm: outcome shares, then strict and per-constraint accuracy
    among answered records (shared by the Markdown and HTML reports)."""
    rows = []
    for m in summary.models:
        for a in summary.arms:
            o = summary.outcomes.get((m, a))
            if o is None or not o.n:
                continue
            rows.append(
                [
                    m,
                    arm_title(summary, a),
                    fmt_share(o, "answered"),
                    fmt_share(o, "unparseable"),
                    fmt_share(o, "no-code"),
                    fmt_share(o, "truncated"),
                    fmt_rate(summary.strict_answered.get((m, a)), counts=True),
                    fmt_rate(summary.constraint_answered.get((m, a))),
                ]
            )
    return rows


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


def outcomes_markdown(summary: Summary) -> list[str]:
    rows = [[_t(model), _t(arm), *figures] for model, arm, *figures in outcome_rows(summary)]
    if not rows:
        return []
    return ["## Answer outcomes", "", *_table(OUTCOME_HEADER, rows), "", OUTCOMES_NOTE, ""]


def limitations_markdown(limitations: Iterable[tuple[str, str, str]]) -> list[str]:
    items = list(limitations)
    if not items:
        return []
    out = [
        "## Limitations of the checks",
        "",
        "Checks are deterministic (regex and syntax tree): a pass means that no violation was "
        "detected. These constraints say what their checks cannot judge precisely:",
        "",
    ]
    out += [
        f"- {markdown_code(sid)} / {markdown_code(cid)}: {_t(text)}" for sid, cid, text in items
    ]
    return [*out, ""]


def fmt_interval(value: Interval) -> str:
    if value.value is None:
        return "–"
    if value.low is None or value.high is None:
        return f"{value.value:.3f}"
    return f"{value.value:.3f} [{value.low:.3f}, {value.high:.3f}]"


def ivr_markdown(results: dict[tuple[str, str], IVRSummary]) -> str:
    """The IVR section: IVR with CI, stated pass rate, bimodality, per-constraint failures."""
    if not results:
        return ""
    out = ["## Intent Violation Rate (IVR)", ""]
    out += _table(
        [
            "model",
            "arm",
            "stated-test pass rate",
            "IVR [95% CI]",
            "problems (qualifying / excluded)",
            "at IVR 0 or 1",
        ],
        (
            [
                _t(r.model),
                _t(r.arm),
                f"{r.stated_pass_rate:.1%} ({r.n_stated_passed}/{r.n_solutions})"
                if r.stated_pass_rate is not None
                else "–",
                fmt_interval(r.ivr),
                f"{r.n_qualifying} / {len(r.excluded)}",
                f"{r.extreme_share:.1%} ({r.n_extreme}/{r.n_qualifying})"
                if r.extreme_share is not None
                else "–",
            ]
            for r in results.values()
        ),
    )
    positions = sorted({k for r in results.values() for k in r.constraint_fail})
    out += ["", "Failure rate per hidden constraint among stated-passing solutions:", ""]
    out += _table(
        ["model", "arm", *map(_t, positions)],
        (
            [
                _t(r.model),
                _t(r.arm),
                *(fmt_rate(r.constraint_fail.get(k), counts=True) for k in positions),
            ]
            for r in results.values()
        ),
    )
    excluded = [
        f"{_t(r.model)} / {_t(r.arm)}: {', '.join(map(_t, r.excluded))}"
        for r in results.values()
        if r.excluded
    ]
    if excluded:
        out += ["", "Excluded problems (no stated-passing solution):", ""]
        out += [f"- {line}" for line in excluded]
    out += [
        "",
        "IVR per problem = stated-passing solutions failing ≥ 1 hidden test / stated-passing "
        "solutions; reported IVR = mean over problems with ≥ 1 stated-passing solution; "
        "CI: bootstrap over problems, 10,000 resamples, fixed seed.",
        "",
    ]
    return "\n".join(out)


def ivr_dict(results: dict[tuple[str, str], IVRSummary]) -> list[dict[str, Any]]:
    """IVR summaries for the results file."""
    return [
        {
            "model": r.model,
            "arm": r.arm,
            "ivr": r.ivr.value,
            "ivr_ci95": [r.ivr.low, r.ivr.high],
            "stated_pass_rate": r.stated_pass_rate,
            "n_solutions": r.n_solutions,
            "n_stated_passed": r.n_stated_passed,
            "qualifying_problems": r.n_qualifying,
            "share_at_0_or_1": r.extreme_share,
            "per_problem": {
                p: {"violating": v, "stated_passed": n} for p, (v, n) in r.per_problem.items()
            },
            "constraint_failure": {
                k: {"failed": v.k, "of": v.n} for k, v in r.constraint_fail.items()
            },
            "excluded": r.excluded,
        }
        for r in results.values()
    ]


def _counts(rate: Rate | None, *, memory: bool = False) -> str:
    if rate is None:
        return "–"
    if memory:
        return f"{rate.n} / {rate.errors} / {rate.memory_errors}"
    return f"{rate.n} / {rate.errors}"


def records_csv(records: Iterable[dict[str, Any]]) -> str:
    """CSV of records (one row per cell), from results-file record dicts.

    Written by :func:`~cvb_engine.safe_text.write_csv`: a model name, an error
    reason or a constraint id cannot be a formula in a spreadsheet, nor split a row.
    """

    def rows() -> Iterator[dict[str, Any]]:
        for r in records:
            cons = r.get("constraints") or {}
            usage = r.get("usage") or {}
            yield {
                **r,
                "constraints_honored": ";".join(k for k, v in cons.items() if v.get("honored")),
                "constraints_violated": ";".join(
                    k for k, v in cons.items() if not v.get("honored")
                ),
                "prompt_tokens": usage.get("prompt_tokens"),
                "completion_tokens": usage.get("completion_tokens"),
            }

    buf = io.StringIO()
    write_csv(buf, CSV_FIELDS, rows())
    return buf.getvalue()
