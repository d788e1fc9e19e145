"""An agent episode in Side by side: what the agent read, did and wrote (README: Agent arm).

For a record of an ``agent`` variant, above its code: the episode in one line
(variant, steps, tool calls, refusals, tokens, how it ended), read versus
obeyed per constraint of the cell (did the agent see the constraint's text,
did its file honor it, and where the text lives), the task it was given, and
the transcript: every tool call by round with the arguments the model sent and
what the tool returned, refusals with their reason. A result that showed a
constraint (a rules file it read, a search hit on a constraint line) is drawn
with the constraint's lines highlighted and named. The final file, with every
violation marked by its check, is the code view below the panel.

Everything here came from a model, an agent program or an imported file:
names go through :func:`~studio.components.text.plain`, texts through
:func:`~studio.components.text.block` into ``st.code`` or through the code
view (which escapes), never Markdown or raw HTML. A trace that does not read is
shown as unavailable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import streamlit as st

from cvb_engine import AgentToolCall, AgentTrace, CellRecord, episode_read_table, is_agent_arm
from studio.components.code_view import Mark, code_html
from studio.components.tables import draw_table
from studio.components.text import block, plain

#: A result longer than this (characters) starts collapsed.
OPEN_LIMIT = 600
#: The most tool calls drawn for one episode (the rest are counted).
CALLS_SHOWN = 120
ENDED = {
    "answer": "the model answered without a tool call",
    "steps": "its tool rounds ran out (then one last request without tools)",
    "error": "a request failed for good",
    "timeout": "the agent program ran out of time",
}
# One line of a search_files result: ``path:line: text``.
_HIT = re.compile(r"^(?P<path>[^\n:]+):(?P<line>\d+): ")


def show(record: CellRecord) -> None:
    """The record's agent panel; nothing for a record of another arm."""
    if record.agent is None and not record.agent_unreadable and not is_agent_arm(record.arm):
        return
    with st.container(border=True, key=f"results_agent_{record.id}"):
        if record.agent_unreadable:
            st.warning(
                "The agent trace of this record is unavailable: what is stored is not an "
                "agent trace cvb can read.",
                icon=":material/help:",
            )
            return
        trace = record.agent
        if trace is None:
            st.caption("No agent trace is stored for this record.")
            return
        _summary(trace)
        _read_versus_obeyed(record)
        if trace.command is not None:
            _command(trace)
        with st.expander(f"Task the agent was given ({len(trace.task):,} characters)"):
            st.code(block(trace.task) or "(empty)", language=None, wrap_lines=True)
        _transcript(trace)
        if trace.final_text:
            with st.expander("The agent's last message (not scored)"):
                st.code(block(trace.final_text), language=None, wrap_lines=True)
        if trace.error:
            st.warning("The episode reported: " + plain(trace.error, multiline=True))


def _summary(trace: AgentTrace) -> None:
    tokens = "–" if trace.tokens is None else f"{trace.tokens:,}"
    latency = "–" if trace.latency_s is None else f"{trace.latency_s:.1f} s"
    refused = f" ({trace.refused} refused)" if trace.refused else ""
    st.markdown(
        f"**Agent episode** · {plain(trace.variant, limit=160)} · {trace.steps} tool "
        f"round{'s' * (trace.steps != 1)} · {trace.tool_calls} call"
        f"{'s' * (trace.tool_calls != 1)}{refused} · {tokens} tokens · {latency}"
    )
    ending = ENDED.get(trace.ended_by, plain(trace.ended_by))
    rules = ", ".join(plain(f.path, limit=120) for f in trace.rules_files) or "none"
    preload = " · the root rules file was also in the system message" if trace.preload else ""
    wrote = (
        "wrote every named file"
        if trace.wrote
        else "never wrote "
        + ", ".join(
            plain(t, limit=120) for t in trace.targets if t not in {f.path for f in trace.files}
        )
    )
    cut = (
        f" · {trace.replies_cut} repl{'ies were' if trace.replies_cut != 1 else 'y was'} cut at "
        "the body limit: tool calls after the cut were never read"
        if trace.replies_cut
        else ""
    )
    st.caption(f"Ended: {ending} · {wrote} · rules files: {rules}{preload}{cut}")


def _read_versus_obeyed(record: CellRecord) -> None:
    """Per constraint of the cell: read (opened or found by a search), in the system message
    (``preload``), obeyed, and where its text lives (the ids and paths drawn as text)."""
    table = episode_read_table(record)
    if table.rows:
        draw_table(table, key=f"results_agent_read_{record.id}")


def _command(trace: AgentTrace) -> None:
    run = trace.command
    assert run is not None
    exit_text = "–" if run.exit_code is None else str(run.exit_code)
    time_text = "–" if run.time_s is None else f"{run.time_s:.1f} s"
    st.caption(
        f"Agent program: {plain(run.command, limit=200)} · exit {exit_text} · {time_text}"
        + (" · timed out" if run.timed_out else "")
        + (f" · sandbox {plain(run.sandbox, limit=80)}" if run.sandbox else "")
        + ("" if run.reads_observed else " · its reads could not be observed")
    )
    for name, text, cut in (
        ("stdout", run.stdout, run.stdout_cut),
        ("stderr", run.stderr, run.stderr_cut),
    ):
        if text:
            with st.expander(f"{name} ({len(text):,} characters{', stored cut' if cut else ''})"):
                st.code(block(text), language=None, wrap_lines=True)


def call_label(call: AgentToolCall) -> str:
    """A call's one-line title (Markdown: every value from the trace through ``plain``)."""
    about = ""
    parsed = call.parsed or {}
    asked = call.path if call.path is not None else parsed.get("path")
    if isinstance(asked, str):  # a refused path too: what the model asked for
        about = plain(asked, limit=100)
    elif isinstance(parsed.get("query"), str):
        about = "“" + plain(parsed["query"], limit=80) + "”"
    head = f"Round {call.round} · {plain(call.name, limit=60)}({about})"
    if call.refused:
        return head + " · ✗ refused"
    shown = f" · shows {', '.join(plain(c, limit=60) for c in call.shown)}" if call.shown else ""
    return head + f" · {len(call.result):,} characters{shown}"


def constraint_marks(trace: AgentTrace, call: AgentToolCall) -> list[Mark]:
    """Marks on the lines of ``call``'s result that hold a constraint's text it showed: the
    lines of a rules file it read, the hits of a search on constraint lines."""
    if not call.shown or call.refused:
        return []
    shown = set(call.shown)
    places = [p for p in trace.constraints if p.constraint_id in shown]
    lines = call.result.split("\n")
    marks = []
    if call.name == "read_file" and call.path is not None:
        for p in places:
            if p.path != call.path:
                continue
            for n in range(max(p.line, 1), min(p.end_line, len(lines)) + 1):
                marks.append(_mark(n, lines[n - 1], p.constraint_id))
    elif call.name == "search_files":
        for n, text in enumerate(lines, start=1):
            hit = _HIT.match(text)
            if hit is None:
                continue
            at = int(hit["line"])
            for p in places:
                if p.path == hit["path"] and p.line <= at <= p.end_line:
                    marks.append(_mark(n, text, p.constraint_id))
    return marks


def _mark(number: int, line: str, constraint_id: str) -> Mark:
    return Mark(
        number, 0, max(len(line), 1), f"rule: {constraint_id}", "the constraint's text", False
    )


def _transcript(trace: AgentTrace) -> None:
    calls: Sequence[AgentToolCall] = trace.calls
    if not calls:
        st.info("The agent made no tool call.", icon=":material/build_circle:")
        return
    st.markdown(f"**Transcript** · {len(calls)} tool call{'s' * (len(calls) != 1)}")
    for call in calls[:CALLS_SHOWN]:
        expanded = bool(call.shown) or call.refused or len(call.result) <= OPEN_LIMIT // 3
        with st.expander(call_label(call), expanded=expanded):
            if call.arguments is not None:
                cut = " (stored cut)" if call.arguments_cut else ""
                st.caption(f"Arguments the model sent{cut}:")
                st.code(block(call.arguments, limit=4000), language=None, wrap_lines=True)
            if call.refused:
                st.warning("Refused: " + plain(call.reason or "no reason given", multiline=True))
                continue
            cut = " (cut by the tool)" if call.result_cut else ""
            marks = constraint_marks(trace, call)
            if marks:
                st.caption(
                    f"What the tool returned{cut}; the lines holding a constraint are "
                    "highlighted and named:"
                )
                st.html(code_html(call.result, marks))
            else:
                st.caption(f"What the tool returned{cut}:")
                st.code(block(call.result) or "(empty)", language=None, wrap_lines=True)
    if len(calls) > CALLS_SHOWN:
        st.caption(f"{len(calls) - CALLS_SHOWN:,} more tool calls are not drawn here.")
