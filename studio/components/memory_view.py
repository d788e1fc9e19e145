"""What a memory layer gave one record, above its code in Side by side (README: Bring your own memory layer).

For a record of a ``memory`` arm: the layer (name, version, transport), what
it returned for the task (a context, or chat messages) and which constraints
of the scenario came back in it. For ``memory-tool``: every tool call the model
made, by round, with its query, what the layer answered, the latency and
whether the answer held a constraint of the task; or that the model never
looked memory up. A memory failure shows the layer's message.

Everything here comes from the record's memory trace, which holds what an
external layer and a model returned: names and queries go through
:func:`~studio.components.text.plain`, texts through
:func:`~studio.components.text.block` into ``st.code`` (literal), never Markdown
or HTML. A trace that does not read is shown as unavailable.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from cvb_engine import MEMORY_TOOL_NAME as TOOL_NAME
from cvb_engine import CellRecord, Trace, TraceCall, layer_kind
from studio.components.text import block, plain

#: A returned text longer than this (characters) starts collapsed.
OPEN_LIMIT = 600


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:.0f} ms"


def _held(held: Sequence[str]) -> str:
    if not held:
        return "no constraint of this scenario"
    return "holds " + ", ".join(plain(c, limit=80) for c in held)


def show(record: CellRecord) -> None:
    """The record's memory panel; nothing for an arm without a memory layer."""
    if record.memory is None and not record.memory_unreadable and layer_kind(record.arm) is None:
        return
    with st.container(border=True, key=f"results_memory_{record.id}"):
        if record.memory_failure:
            st.error(
                "The memory layer failed, so this cell was not answered: a memory failure, "
                "neither an API failure nor a violation. The layer's message:",
                icon=":material/memory:",
            )
            st.code(block(record.error or "(no message)"), language=None, wrap_lines=True)
        if record.memory_unreadable:
            st.warning(
                "The memory trace of this record is unavailable: what is stored is not a "
                "memory trace cvb can read.",
                icon=":material/help:",
            )
            return
        if record.memory is None:
            st.caption("No memory trace is stored for this record.")
            return
        _layer(record.memory)
        if record.memory.arm == "memory-tool":
            _tool_calls(record.memory)
        else:
            for call in record.memory.calls:
                _prompt_call(call, failed=record.memory_failure)
        if record.memory.error and not record.memory_failure:
            st.warning("The memory layer reported: " + plain(record.memory.error, multiline=True))


def _layer(trace: Trace) -> None:
    layer = trace.layer
    name = layer.name or layer.label or "unnamed layer"
    version = f" {plain(layer.version, limit=80)}" if layer.version else ""
    transport = f" · {plain(layer.transport, limit=40)}" if layer.transport else ""
    st.markdown(f"**Memory layer:** {plain(name, limit=120)}{version}{transport}")
    facts = []
    if layer.label and layer.label != name:
        facts.append(f"configured as {plain(layer.label, limit=200)}")
    if trace.ingest is not None and trace.ingest.entries is not None:
        facts.append(f"ingested {trace.ingest.entries:,} entries in {_ms(trace.ingest.latency_s)}")
    if trace.held:
        facts.append("constraints that came back: " + ", ".join(plain(c) for c in trace.held))
    if facts:
        st.caption(" · ".join(facts))


def _text(title: str, text: str | None) -> None:
    """A returned text, in an expander that starts collapsed when the text is long."""
    body = text or ""
    with st.expander(f"{title} ({len(body):,} characters)", expanded=len(body) <= OPEN_LIMIT):
        st.code(block(body) or "(empty)", language=None, wrap_lines=True)


def _prompt_call(call: TraceCall, *, failed: bool) -> None:
    """The query of a ``memory`` cell; ``failed``: the record is this query's failure, whose
    message the panel shows already."""
    st.caption(
        f"Queried with the task · {_ms(call.latency_s)} · {len(call.entries)} entries named · "
        + ("failed" if call.error else _held(call.held))
    )
    if call.error:
        if not failed:
            st.warning("The query failed: " + plain(call.error, multiline=True))
    elif call.messages is not None:
        total = sum(len(m.content) for m in call.messages)
        with st.expander(
            f"Messages the layer returned ({len(call.messages)}, {total:,} characters)",
            expanded=total <= OPEN_LIMIT,
        ):
            for message in call.messages:
                st.markdown(f"**{plain(message.role, limit=40)}**")
                st.code(block(message.content) or "(empty)", language=None, wrap_lines=True)
    elif not (call.context or "").strip():
        st.info("The layer found nothing for this task: the model got the task alone.")
    else:
        _text("Context the layer returned", call.context)


def _tool_calls(trace: Trace) -> None:
    calls = trace.tool_calls
    if not calls:
        st.info(
            f"The model never looked memory up: it made no {TOOL_NAME} call.",
            icon=":material/search_off:",
        )
        return
    held = sum(bool(c.held) for c in calls)
    rounds = len({c.round for c in calls})
    st.caption(
        f"{len(calls)} tool call{'s' * (len(calls) != 1)} in {rounds} "
        f"round{'s' * (rounds != 1)} · {held} brought back a constraint of this scenario"
    )
    for call in calls:
        query = plain(call.query, limit=120) if call.query is not None else "no query"
        mark = "✗ failed" if call.error else _held(call.held)
        result = call.result_text or ""
        label = f"Round {call.round} · {TOOL_NAME}: {query} · {_ms(call.latency_s)} · {mark}"
        with st.expander(label, expanded=len(result) <= OPEN_LIMIT and not call.error):
            if call.query is None and call.arguments is not None:
                st.caption("Arguments the model sent:")
                st.code(block(call.arguments, limit=2000), language=None, wrap_lines=True)
            if call.error:
                st.warning("Not answered: " + plain(call.error, multiline=True))
            else:
                st.caption(
                    f"{len(call.entries)} entries named · {len(result):,} characters returned"
                )
                st.code(block(result) or "(empty)", language=None, wrap_lines=True)
