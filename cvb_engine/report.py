"""Reports: Markdown tables in the seed's shape, the JSON results file and a CSV of records.

``python -m cvb_engine.report`` takes the same arguments as ``cvb report``.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cvb_engine.metrics import Interval, IVRSummary, MemoryStat, Outcomes, Rate, Summary
from cvb_engine.safe_text import markdown_code, write_csv
from cvb_engine.safe_text import markdown_text as _t
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
    """The backends weaker than bwrap among those that judged a run."""
    return [n for n in sandbox_backends(params) or () if n != "bwrap"]


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
        text += f" (weaker than bwrap: {', '.join(weaker)}, named by the user)"
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
    has_gap = "mandated" in arms and "incentivized" in arms
    out += ["## Strict accuracy", ""]
    header = ["model", *map(_t, arms)] + (
        ["gap (mandated − incentivized) [95% CI]"] if has_gap else []
    )
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
        ["model", *map(_t, arms)],
        (
            [_t(m), *(fmt_rate(summary.constraint.get((m, a))) for a in arms)]
            for m in summary.models
        ),
    )
    out += ["", "## Counts (scored records / error records)", ""]
    out += _table(
        ["model", *map(_t, arms)],
        ([_t(m), *(_counts(summary.strict.get((m, a))) for a in arms)] for m in summary.models),
    )
    out += ["", "Error records (API failures) are excluded from every denominator.", ""]
    out += ["## By category", ""]
    for arm in arms:
        out += [f"### {_t(arm)}", ""]
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
    out += limitations_markdown(notes.limitations if notes else ())
    return "\n".join(out)


MEMORY_NOTE = (
    "Memory arms: the incentivized arm with its constraints among `load` distractor notes from "
    "the project-memory pool, at a `position` (start, middle, end, spread), through a `channel` "
    "(inline user turn, system message, AGENTS.md file, earlier turns of the conversation). "
    "Strict accuracy with a 95% bootstrap CI over scenarios; gap = mandated − variant, paired "
    "bootstrap over scenarios. At load 0 the position does not apply."
)


def memory_groups(summary: Summary) -> dict[tuple[str, str, str, int], dict[int, MemoryStat]]:
    """(model, channel, position, turns) -> load -> stat; a load-0 stat joins every position."""
    groups: dict[tuple[str, str, str, int], dict[int, MemoryStat]] = {}
    positions = sorted({m.position for m in summary.memory if m.load}) or ["spread"]
    for stat in summary.memory:
        for pos in positions if stat.load == 0 else [stat.position]:
            groups.setdefault((stat.model, stat.channel, pos, stat.turns), {})[stat.load] = stat
    return groups


def memory_curve_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """The adherence-versus-memory-size curve as a table: one row per model, channel,
    position (and turns, for the history channel), one column per load."""
    loads = sorted({m.load for m in summary.memory})
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


def memory_channel_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """Each channel's gap to mandated, with its CI: one row per model, load and position."""
    channels = [
        c
        for c in ("inline", "system", "file", "history")
        if any(m.channel == c for m in summary.memory)
    ]
    header = ["model", "load", "position", *(f"gap: {c}" for c in channels)]
    cells: dict[tuple[str, int, str], dict[str, str]] = {}
    for stat in summary.memory:
        key = (stat.model, stat.load, stat.position if stat.load else "–")
        cells.setdefault(key, {})[stat.channel] = fmt_gap(stat.gap)
    rows = [
        [model, str(load), pos, *(by.get(c, "–") for c in channels)]
        for (model, load, pos), by in sorted(cells.items())
    ]
    return header, rows


def memory_position_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """Strict accuracy by where the constraints sit, at each load above 0."""
    positions = [
        p
        for p in ("start", "middle", "end", "spread")
        if any(m.position == p and m.load for m in summary.memory)
    ]
    header = ["model", "load", "channel", *positions]
    cells: dict[tuple[str, int, str], dict[str, str]] = {}
    for stat in summary.memory:
        if stat.load:
            key = (stat.model, stat.load, stat.channel)
            cells.setdefault(key, {})[stat.position] = fmt_interval(stat.strict_ci)
    rows = [
        [model, str(load), channel, *(by.get(p, "–") for p in positions)]
        for (model, load, channel), by in sorted(cells.items())
        if len(by) > 1
    ]
    return header, rows


def memory_markdown(summary: Summary) -> list[str]:
    """The "Memory arms" section, or nothing for a run without memory variants."""
    if not summary.memory:
        return []
    out = ["## Memory arms", "", MEMORY_NOTE, ""]
    for title, (header, rows) in (
        ("Adherence versus memory size (strict accuracy [95% CI])", memory_curve_table(summary)),
        ("Position of the constraints (strict accuracy [95% CI])", memory_position_table(summary)),
        ("Channels: gap to mandated [95% CI]", memory_channel_table(summary)),
    ):
        if rows:
            out += [f"### {title}", ""]
            # the model is from outside; channels, positions and figures are cvb's own
            out += _table(header, ([_t(row[0]), *row[1:]] for row in rows))
            out.append("")
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
                    a,
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


def _counts(rate: Rate | None) -> str:
    if rate is None:
        return "–"
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


if __name__ == "__main__":
    import sys

    from cvb_engine.cli import main

    sys.exit(main(["report", *sys.argv[1:]]))
