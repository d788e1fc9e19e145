"""The results file's summaries (``ivr``, ``memory_tool``, ``agent_summary``) and the CSV of records: what
``cvb report --json`` and ``--csv`` write besides the records themselves."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cvb_engine.agent.metrics import ENDINGS, AgentStat
from cvb_engine.metrics import Interval, IVRSummary, Rate, Summary, ToolUse
from cvb_engine.safe_text import write_csv

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


def ivr_dict(results: Mapping[tuple[str, str], IVRSummary]) -> list[dict[str, Any]]:
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


def _agent_rate(rate: Rate, ci: Interval) -> dict[str, Any]:
    return {"value": rate.value, "ci95": [ci.low, ci.high], "k": rate.k, "n": rate.n}


def agent_dict(stats: Iterable[AgentStat]) -> list[dict[str, Any]]:
    """The read-versus-obeyed figures for the results file (``agent_summary``), one per model ×
    agent variant (a reader recomputes them from the records)."""
    return [
        {
            "model": s.model,
            "arm": s.arm,
            "episodes": s.n,
            "error_records": s.errors,
            "trace_unavailable": s.unavailable,
            "strict": _agent_rate(s.strict, s.strict_ci),
            "per_constraint": _agent_rate(s.constraint, s.constraint_ci),
            "gap_to_mandated": {
                "value": s.gap.value,
                "ci95": [s.gap.low, s.gap.high],
                "scenarios": s.gap.n_units,
            },
            "read": s.read,
            "read_share": s.read_share,
            "read_every_constraint": s.read_all,
            "rules_in_system_message": s.preloaded,
            "reads_not_observed": s.reads_unobserved,
            "strict_when_read": _agent_rate(s.strict_read, s.strict_read_ci),
            "strict_when_not_read": _agent_rate(s.strict_unread, s.strict_unread_ci),
            "per_constraint_when_read": _agent_rate(s.constraint_read, s.constraint_read_ci),
            "per_constraint_when_not_read": _agent_rate(
                s.constraint_unread, s.constraint_unread_ci
            ),
            "steps": s.steps,
            "steps_per_episode": s.steps_per_episode,
            "tool_calls": s.tool_calls,
            "refused_calls": s.refused,
            "episodes_with_refusals": s.refused_episodes,
            "tokens": s.tokens if s.tokens_n else None,
            "tokens_per_episode": s.tokens_per_episode,
            "episodes_without_file": s.no_file,
            "ended": {k: s.ended.get(k, 0) for k in ENDINGS},
        }
        for s in stats
    ]


def realism_dict(summary: Summary) -> dict[str, list[dict[str, Any]]]:
    """The memory-realism figures for the results file (``memory_realism``): the stale drops
    and the delivery split, numbers not text."""

    def interval(ci: Interval) -> dict[str, Any]:
        return {"value": ci.value, "low": ci.low, "high": ci.high, "units": ci.n_units}

    def rate(r: Rate, ci: Interval) -> dict[str, Any]:
        return {"k": r.k, "n": r.n, **interval(ci)}

    return {
        "stale": [
            {
                "model": s.model,
                "arm": s.arm,
                "base": s.base,
                "stale": s.stale,
                "strict": rate(s.strict, s.strict_ci),
                "base_strict": rate(s.base_strict, s.base_ci),
                "drop": interval(s.drop),
            }
            for s in summary.stale
        ],
        "delivery": [
            {
                "model": d.model,
                "arm": d.arm,
                "records": d.n,
                "unavailable": d.unavailable,
                "records_cut": d.cut_records,
                "honored_delivered": rate(d.delivered, d.delivered_ci),
                "honored_not_delivered": rate(d.not_delivered, d.not_delivered_ci),
                "strict_all_delivered": rate(d.strict_whole, d.strict_whole_ci),
                "strict_some_not_delivered": rate(d.strict_cut, d.strict_cut_ci),
            }
            for d in summary.delivery
        ],
    }
