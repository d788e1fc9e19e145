"""Side by side: one cell (model, scenario, repetition) under every arm, with its verdicts
marked in the code, a diff between two arms, and the prompts each arm received."""

from __future__ import annotations

import difflib
import html

import streamlit as st

from cvb_engine import CellRecord, Summary, arm_title, scenario_id_problem, split_span
from studio import cache, state
from studio.components import agent_view, memory_view
from studio.components.code_view import Mark, code_html
from studio.components.text import block, plain
from studio.views.results.context import ResultsContext

#: The most arms one cell shows side by side (a store may name thousands).
MAX_ARMS_SHOWN = 12
OUTCOME_WORDS = {"answered": "answered", "unparseable": "unparseable", "no-code": "no code"}


def badges_html(record: CellRecord) -> str:
    if record.status != "ok":
        what = "memory failure" if record.memory_failure else "API error"
        return (
            f'<div class="cvb-badges"><span class="cvb-badge err">{what}: not scored</span></div>'
        )

    out = ['<div class="cvb-badges">']
    if record.outcome is not None:
        cls = "out" if record.outcome == "answered" else "bad"
        word = OUTCOME_WORDS.get(record.outcome, record.outcome)
        out.append(
            f'<span class="cvb-badge {cls}" data-outcome="{html.escape(record.outcome)}" '
            f'title="answer outcome">{html.escape(word)}</span>'
        )
    if record.truncated:
        out.append(
            '<span class="cvb-badge err" data-outcome="truncated" '
            'title="the endpoint stopped at max_tokens">truncated</span>'
        )
    if record.response_cut:
        out.append(
            '<span class="cvb-badge err" data-outcome="cut" '
            'title="the reply was longer than --max-response-chars: cvb stored it cut">'
            "stored cut</span>"
        )
    if record.older_rules:
        out.append(
            f'<span class="cvb-badge err" data-scoring="{record.rules}" title="judged by older '
            f'scoring rules: re-score the run">scoring v{record.rules} · older rules</span>'
        )
    for c in record.constraints:
        cls, mark, word = ("ok", "✓", "honored") if c.honored else ("bad", "✗", "violated")
        out.append(
            f'<span class="cvb-badge {cls}" data-constraint="{html.escape(c.constraint_id)}" '
            f'title="{word}">{mark} {html.escape(c.constraint_id)} · {word}</span>'
        )
    out += delivery_badges(record)
    out.append("</div>")
    why = [
        f"<li><code>{html.escape(ch.label(c.constraint_id))}</code> {html.escape(ch.reason)}</li>"
        for c in record.constraints
        for ch in c.failed
    ]
    if why:
        out.append(f'<ul class="cvb-why">{"".join(why)}</ul>')
    return "".join(out)


def delivery_badges(record: CellRecord) -> list[str]:
    """What the memory the model saw lacked (``budget=``, ``stale=only``): a badge per
    constraint whose note the budget cut, and per constraint shown only by the decision it
    replaced."""
    delivery = record.delivery
    if delivery is None:
        return []
    out = []
    for cid in record.cut_constraints:
        out.append(
            f'<span class="cvb-badge err" data-cut="{html.escape(cid)}" title="its note was cut '
            f'from the memory the model saw (budget {delivery.budget or 0:,} bytes)">'
            f"✂ {html.escape(cid)} · cut from memory</span>"
        )
    for cid in delivery.constraints:
        if not delivery.current_shown(cid):
            out.append(
                f'<span class="cvb-badge err" data-stale="{html.escape(cid)}" title="the memory '
                'held only the decision this constraint replaced (stale=only)">'
                f"⌛ {html.escape(cid)} · outdated note only</span>"
            )
    return out


def marks_of(record: CellRecord, scope: str) -> list[Mark]:
    text = record.code if scope == "code" else record.response
    return [
        Mark(line, col_, length, ch.label(c.constraint_id), ch.reason, not ch.passed)
        for c in record.constraints
        for ch in c.checks
        if ch.scope == scope
        for span in ch.evidence
        for line, col_, length in split_span(text, *span)
    ]


def show_record(summary: Summary, record: CellRecord | None, arm: str) -> None:
    st.markdown(f"#### {plain(arm_title(summary, arm))}")
    if record is None:
        st.info("No record for this arm in the run.")
        return
    memory_view.show(record)  # a memory arm's layer, its context or tool calls: above the code
    agent_view.show(record)  # an agent episode's transcript: above the final file it wrote
    if record.status != "ok":
        st.html(badges_html(record))
        if record.memory_failure:
            return  # the memory panel shows the layer's message
        # The server's words: literal text, never Markdown.
        st.error("The request failed; the endpoint said:", icon=":material/error:")
        st.code(block(record.error or "(no message)"), language=None, wrap_lines=True)
        return
    n = len(record.constraints)
    bad = len(record.violated)
    verdict = (
        ":green[:material/check_circle: every constraint honored]"
        if record.strict
        else f":red[:material/cancel: no code in the reply: honors none of {n} constraint(s)]"
        if record.outcome == "no-code"
        else f":red[:material/cancel: violates {bad} of {n} constraint(s)]"
    )
    st.markdown(verdict)
    st.html(badges_html(record))
    left_out = [
        f"{n:,} more {what} not shown"
        for n, what in (
            (record.constraints_omitted, "constraints"),
            (record.spans_omitted, "evidence spans"),
        )
        if n
    ]
    if record.malformed:
        left_out.append("some stored evidence did not read and is left out")
    if left_out:
        st.caption(" · ".join(left_out) + " (the results file holds every one).")
    empty = (
        "# (the agent never wrote the named file)"
        if record.agent is not None
        else "# (no code in the response)"
    )
    if record.agent is not None and record.code:
        st.caption("The final content of the file(s) the task named, as scored:")
    st.html(code_html(record.code or empty, marks_of(record, "code")))
    response_marks = marks_of(record, "response")
    with st.expander("Full response" + (" (with marks)" if response_marks else "")):
        if response_marks:
            st.html(code_html(record.response, response_marks))
        else:
            st.text(block(record.response))
    if record.reasoning:
        with st.expander("Reasoning (separate field, not scored)"):
            st.code(block(record.reasoning), language=None, wrap_lines=True)
    tokens = f"{record.prompt_tokens or 0}+{record.completion_tokens or 0} tokens"
    latency = f"{record.latency_s:.2f} s" if record.latency_s is not None else "–"
    st.caption(
        f"record {record.id} · {latency} · {tokens} · finish {plain(record.finish_reason or '–')}"
    )


def render(ctx: ResultsContext) -> None:
    summary, url, run_ids, version = ctx.summary, ctx.url, ctx.run_ids, ctx.version
    run_pick = run_ids[0]
    if len(run_ids) > 1:
        run_pick = st.selectbox("Run", run_ids, key="results_sbs_run")
    choices = cache.cell_choices(url, run_pick, version)
    s1, s2, s3 = st.columns([3, 2, 1])
    model = s2.selectbox("Model", choices.models, key="results_sbs_model")

    sid = s1.selectbox(
        "Scenario",
        list(choices.scenarios),
        format_func=lambda x: f"{x} · {choices.scenarios[x]}",
        key="results_sbs_scenario",
    )
    rep = s3.selectbox("Repetition", choices.reps, key="results_sbs_rep")
    if model is None or sid is None or rep is None:
        st.info("This run has no records yet.")
    else:
        pooled = " · ".join(
            f"{plain(a)} {r.value:.2f} ({r.k}/{r.n})"
            for a in choices.arms
            if (r := summary.by_scenario.get((model, a, sid))) and r.value is not None
        )
        st.caption(
            f"Strict accuracy of {plain(model)} on {plain(sid)} over every repetition"
            f"{' of the selected runs' if len(run_ids) > 1 else ''}: {pooled}"
        )
        stacked = st.toggle(
            "One arm per row (for long lines)", key="results_sbs_stacked", value=False
        )
        records = cache.cell(url, run_pick, model, sid, int(rep), version)
        shown = choices.arms[:MAX_ARMS_SHOWN]
        if len(choices.arms) > len(shown):
            st.caption(
                f"{len(choices.arms) - len(shown):,} more arms not shown: the first "
                f"{len(shown)} are, side by side (the results file holds every one)."
            )
        slots = [st.container() for _ in shown] if stacked else st.columns(len(shown), gap="small")
        for slot, arm in zip(slots, shown, strict=True):
            with slot:
                show_record(summary, records.get(arm), arm)

        st.subheader("Diff between two arms")
        d1, d2, _ = st.columns([1, 1, 2])
        present = [a for a in shown if a in records]
        a_arm = d1.selectbox("From", present, index=0, key="results_sbs_diff_a")
        b_arm = d2.selectbox("To", present, index=len(present) - 1, key="results_sbs_diff_b")
        failed = [a for a in (a_arm, b_arm) if a and records[a].status != "ok"]
        if failed:
            st.info(
                "No diff: "
                + ", ".join(
                    f"{plain(a)} is "
                    + ("a memory failure" if records[a].memory_failure else "an API error")
                    for a in failed
                )
                + " record (no code)."
            )
        elif a_arm and b_arm:
            a_code, b_code = records[a_arm].code, records[b_arm].code
            diff = "\n".join(
                difflib.unified_diff(
                    a_code.splitlines(),
                    b_code.splitlines(),
                    fromfile=f"{a_arm}",
                    tofile=f"{b_arm}",
                    lineterm="",
                )
            )
            st.code(diff or "(identical code)", language="diff")

        prompts = cache.prompts_for(str(state.scenarios_root()), sid)
        with st.expander("Prompts each arm received"):
            if prompts is None and scenario_id_problem(sid) is not None:
                st.warning(
                    f"The stored scenario id {plain(sid)} is not a scenario id "
                    f"({plain(scenario_id_problem(sid))}): no file is looked up for it."
                )
            elif prompts is None:
                st.warning(
                    f"The scenario file {plain(sid)}.yaml is not under "
                    f"{plain(state.scenarios_root())}: its prompts cannot be rebuilt here."
                )
            else:
                ptabs = st.tabs([a for a in choices.arms if a in prompts["arms"]])
                for ptab, arm in zip(
                    ptabs, [a for a in choices.arms if a in prompts["arms"]], strict=True
                ):
                    with ptab:
                        p = prompts["arms"][arm]
                        sent = records.get(arm)
                        if sent is not None and sent.messages_sha256 == p["sha256"]:
                            st.caption(
                                f"Rebuilt from {plain(prompts['path'])}: byte-identical to "
                                f"what was sent (messages sha256 {p['sha256'][:12]}…)."
                            )
                        elif sent is not None:
                            st.warning(
                                "The scenario file changed since this record was generated: "
                                "what is shown is today's prompt, not the one sent "
                                f"(sent {plain(sent.messages_sha256[:12])}…, "
                                f"now {p['sha256'][:12]}…)."
                            )
                        for message in p["messages"]:
                            st.markdown(f"**{message['role']}**")
                            st.code(message["content"], language=None, wrap_lines=True)
