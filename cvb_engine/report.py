"""Reports: Markdown tables in the seed's shape, the JSON results file and a CSV of records.

``python -m cvb_engine.report`` takes the same arguments as ``cvb report``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from cvb_engine.metrics import Interval, Rate, Summary

CSV_FIELDS = (
    "model",
    "scenario_id",
    "scenario_version",
    "category",
    "arm",
    "rep",
    "status",
    "error",
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
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def markdown(
    summary: Summary, *, title: str = "CVB results", meta: dict[str, Any] | None = None
) -> str:
    """The Markdown report: arm accuracy with the gap, per-constraint accuracy, counts,
    then one table per arm by category and the gap by category."""
    arms = summary.arms
    out = [f"# {title}", ""]
    for key, value in (meta or {}).items():
        out.append(f"- {key}: {value}")
    if meta:
        out.append("")
    has_gap = "mandated" in arms and "incentivized" in arms
    out += ["## Strict accuracy", ""]
    header = ["model", *arms] + (["gap (mandated − incentivized) [95% CI]"] if has_gap else [])
    out += _table(
        header,
        (
            [m, *(fmt_rate(summary.strict.get((m, a))) for a in arms)]
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
    out += ["## Per-constraint accuracy", ""]
    out += _table(
        ["model", *arms],
        ([m, *(fmt_rate(summary.constraint.get((m, a))) for a in arms)] for m in summary.models),
    )
    out += ["", "## Counts (scored records / error records)", ""]
    out += _table(
        ["model", *arms],
        ([m, *(_counts(summary.strict.get((m, a))) for a in arms)] for m in summary.models),
    )
    out += ["", "Error records (API failures) are excluded from every denominator.", ""]
    out += ["## By category", ""]
    for arm in arms:
        out += [f"### {arm}", ""]
        out += _table(
            ["model", *summary.categories],
            (
                [m, *(fmt_rate(summary.by_category.get((m, arm, c))) for c in summary.categories)]
                for m in summary.models
            ),
        )
        out.append("")
    if has_gap:
        out += ["### gap (mandated − incentivized)", ""]
        out += _table(
            ["model", *summary.categories],
            (
                [m, *(fmt_signed(summary.category_gap[(m, c)].value) for c in summary.categories)]
                for m in summary.models
            ),
        )
        out.append("")
    return "\n".join(out)


def _counts(rate: Rate | None) -> str:
    if rate is None:
        return "–"
    return f"{rate.n} / {rate.errors}"


def records_csv(records: Iterable[dict[str, Any]]) -> str:
    """CSV of records (one row per cell), from results-file record dicts."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in records:
        cons = r.get("constraints") or {}
        row = dict(r)
        row["constraints_honored"] = ";".join(k for k, v in cons.items() if v.get("honored"))
        row["constraints_violated"] = ";".join(k for k, v in cons.items() if not v.get("honored"))
        usage = r.get("usage") or {}
        row["prompt_tokens"] = usage.get("prompt_tokens")
        row["completion_tokens"] = usage.get("completion_tokens")
        writer.writerow(row)
    return buf.getvalue()


if __name__ == "__main__":
    import sys

    from cvb_engine.cli import main

    sys.exit(main(["report", *sys.argv[1:]]))
