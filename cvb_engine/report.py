"""Reports: Markdown tables in the seed's shape, the JSON results file and a CSV of records.

``python -m cvb_engine.report`` takes the same arguments as ``cvb report``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from cvb_engine.metrics import Interval, IVRSummary, Rate, Summary

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
                r.model,
                r.arm,
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
        ["model", "arm", *positions],
        (
            [r.model, r.arm, *(fmt_rate(r.constraint_fail.get(k), counts=True) for k in positions)]
            for r in results.values()
        ),
    )
    excluded = [
        f"{r.model} / {r.arm}: {', '.join(r.excluded)}" for r in results.values() if r.excluded
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
