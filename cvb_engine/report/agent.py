"""The agent arm's report section: read versus obeyed, and how episodes went (README: Agent arm).

The figures are :class:`~cvb_engine.agent.metrics.AgentStat` (one per model ×
agent variant, on :attr:`~cvb_engine.metrics.Summary.agent`); this module only
lays them out, once, as table models (:func:`agent_tables`) that the Markdown
report, the HTML report and the studio's Results page all draw, and as the
results file's ``agent`` summary (:func:`agent_dict`). Model and variant names
come from records (a command variant holds a user's command line): they are the
first two columns of every table, which renderers write as plain text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cvb_engine.agent.metrics import ENDINGS, AgentStat
from cvb_engine.metrics import Interval, Rate, Summary
from cvb_engine.report import MemoryTable, _table, fmt_fraction, fmt_gap, fmt_interval
from cvb_engine.safe_text import markdown_text as _t

__all__ = [
    "AGENT_NOTE",
    "ENDING_TITLES",
    "agent_dict",
    "agent_markdown",
    "agent_tables",
]

AGENT_NOTE = (
    "Agent arm: each cell is an episode in a small repository built from the scenario, the "
    "constraints in its rules files (`rules`: AGENTS.md, CLAUDE.md, decision records, a README "
    "section, a nested AGENTS.md) among `load` distractor notes; the model works with tools "
    "for at most `steps` rounds (or the user's own agent program runs, `command`), and the "
    "file it leaves is scored. *Read*: the agent saw a constraint's text (opened the file "
    "holding it, a search showed one of its lines, or `preload` put the root rules file in its "
    "system message); *obeyed*: the checks passed. Strict accuracy when read / not read splits "
    "episodes by whether any constraint of the task was read; per-constraint accuracy when read "
    "/ not read splits (episode, constraint) pairs by whether that constraint was read. 95% CI: "
    "bootstrap over scenarios; gap to mandated: paired bootstrap over scenarios, as the "
    "headline gap. Episodes whose trace is missing or unreadable count in accuracy but in no "
    "read, step or token figure (counted under *trace unavailable*)."
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
    "strict: read",
    "strict: not read",
    "per-constraint: read",
    "per-constraint: not read",
    "trace unavailable",
]


def _share(k: int, n: int) -> str:
    return "–" if not n else f"{fmt_fraction(k / n)} ({k}/{n})"


def _rate_ci(rate: Rate, ci: Interval) -> str:
    """``0.667 [0.333, 1.000] (4/6)``, or "–" without any."""
    if rate.value is None:
        return "–"
    return f"{fmt_interval(ci)} ({rate.k}/{rate.n})"


def _per(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def read_rows(stats: Iterable[AgentStat]) -> list[list[str]]:
    """One row of :data:`READ_HEADER` per model × agent variant."""
    return [
        [
            s.model,
            s.arm,
            str(s.n),
            _rate_ci(s.strict, s.strict_ci),
            _rate_ci(s.constraint, s.constraint_ci),
            fmt_gap(s.gap),
            _share(s.read, s.traced),
            _share(s.read_all, s.traced),
            _rate_ci(s.strict_read, s.strict_read_ci),
            _rate_ci(s.strict_unread, s.strict_unread_ci),
            _rate_ci(s.constraint_read, s.constraint_read_ci),
            _rate_ci(s.constraint_unread, s.constraint_unread_ci),
            str(s.unavailable),
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
            _per(s.steps_per_episode),
            _per(s.calls_per_episode),
            _per(s.tokens_per_episode, 0),
            *(str(s.ended.get(k, 0)) for k in ENDINGS),
            f"{s.refused} ({s.refused_episodes})",
            str(s.no_file),
            str(s.errors),
        ]
        for s in stats
    ]


def agent_tables(summary: Summary) -> list[MemoryTable]:
    """The agent section's tables (none for a run without agent variants): what the Markdown
    and HTML reports and the studio's Results page show."""
    stats = summary.agent
    if not stats:
        return []
    return [
        MemoryTable("Read versus obeyed (agent arm)", list(READ_HEADER), read_rows(stats), names=2),
        MemoryTable(
            "Agent episodes: steps, tokens, how they ended",
            list(EPISODE_HEADER),
            episode_rows(stats),
            names=2,
            note=EPISODES_NOTE,
        ),
    ]


def agent_markdown(summary: Summary) -> list[str]:
    """The "Agent arm" section of the Markdown report, or nothing without agent variants."""
    tables = agent_tables(summary)
    if not tables:
        return []
    out = ["## Agent arm: read versus obeyed", "", AGENT_NOTE, ""]
    for table in tables:
        out += [f"### {table.title}", ""]
        out += _table(
            table.header,
            ([*map(_t, row[: table.names]), *row[table.names :]] for row in table.rows),
        )
        out += ["", table.note, ""] if table.note else [""]
    return out


def _rate(rate: Rate, ci: Interval) -> dict[str, Any]:
    return {"value": rate.value, "ci95": [ci.low, ci.high], "k": rate.k, "n": rate.n}


def agent_dict(stats: Iterable[AgentStat]) -> list[dict[str, Any]]:
    """The read-versus-obeyed figures for the results file (``agent``), one per model ×
    agent variant (a reader recomputes them from the records)."""
    return [
        {
            "model": s.model,
            "arm": s.arm,
            "episodes": s.n,
            "error_records": s.errors,
            "trace_unavailable": s.unavailable,
            "strict": _rate(s.strict, s.strict_ci),
            "per_constraint": _rate(s.constraint, s.constraint_ci),
            "gap_to_mandated": {
                "value": s.gap.value,
                "ci95": [s.gap.low, s.gap.high],
                "scenarios": s.gap.n_units,
            },
            "read": s.read,
            "read_share": s.read_share,
            "read_every_constraint": s.read_all,
            "strict_when_read": _rate(s.strict_read, s.strict_read_ci),
            "strict_when_not_read": _rate(s.strict_unread, s.strict_unread_ci),
            "per_constraint_when_read": _rate(s.constraint_read, s.constraint_read_ci),
            "per_constraint_when_not_read": _rate(s.constraint_unread, s.constraint_unread_ci),
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
