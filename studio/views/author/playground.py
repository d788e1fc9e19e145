"""Check playground: run the open scenario's checks on any code, or on its own samples,
and read each check's verdict and reason."""

from __future__ import annotations

import streamlit as st

from cvb_engine import Scored
from cvb_engine import authoring as au
from studio import cache
from studio.components.code_view import code_html
from studio.components.verdict_marks import marks_for
from studio.views.author.context import AuthorContext, md

ss = st.session_state


MAX_CODE_CHARS = 100_000
PASS = ":green[:material/check_circle:]"
FAIL = ":red[:material/cancel:]"


def load_sample(verdicts: list[au.SampleVerdict]) -> None:
    key = ss.get("author_sample")
    verdict = next((v for v in verdicts if v.key == key), None)
    if verdict is not None:
        ss.author_code = verdict.code
        ss.author_loaded_sample = verdict
    ss.author_sample = None


def show_verdicts(scored: Scored, summary: dict[str, list[tuple[str, str]]]) -> None:
    """Overall verdict, then one card per constraint listing each check's verdict and reason."""
    failed = [c for c in scored.constraints if not c.honored]
    n = len(scored.constraints)
    if failed:
        st.markdown(f"#### {FAIL} Violates {len(failed)} of {n} constraint(s)")
    else:
        st.markdown(f"#### {PASS} Honors all {n} constraint(s)")
    for verdict in scored.constraints:
        with st.container(border=True):
            icon = PASS if verdict.honored else FAIL
            state_word = ":green[honored]" if verdict.honored else ":red[violated]"
            st.markdown(f"{icon} **{verdict.constraint_id}** — {state_word}")
            params = dict(summary.get(verdict.constraint_id, []))
            for check in verdict.checks:
                label = f"{verdict.constraint_id}/{check.check_id}"
                mark = ":green[pass]" if check.result.passed else ":red[**fail**]"
                st.markdown(f"{mark} `{label}` — {md(check.result.reason)}")
                st.caption(md(params.get(label, check.kind)))
    if scored.stated_detail is not None:
        ok = ":green[pass]" if scored.stated_passed else ":red[**fail**]"
        st.markdown(f"**Stated tests:** {ok} — {md(scored.stated_detail.reason)}")


def show_sample_agreement(scored: Scored, code: str) -> None:
    """When the code is a loaded sample, whether its constraint's verdict matches its label."""
    loaded = ss.get("author_loaded_sample")
    if loaded is None or loaded.code != code:
        return
    verdict = next((c for c in scored.constraints if c.constraint_id == loaded.constraint_id), None)
    note = (
        f"Sample **{loaded.constraint_id} · {loaded.label} #{loaded.index}** — "
        f"expected: {loaded.expected_text}; "
    )
    if verdict is not None and verdict.honored == loaded.expected_honored:
        st.success(note + "the checks agree.")
    else:
        st.error(note + "**the checks disagree** — a check or the sample needs fixing.")


def sample_label(v: au.SampleVerdict) -> str:
    mark = {None: "…", True: "✓", False: "✗"}[v.agrees]
    return f"{mark} {v.constraint_id} · {v.label} #{v.index} — expected: {v.expected_text}"


def render(ctx: AuthorContext) -> None:
    doc, text, lint = ctx.doc, ctx.text, ctx.lint
    item = lint.item if lint is not None else None
    if doc is None or lint is None:
        st.info("Nothing is open. Pick a scenario in the **Library** tab first.")
    elif item is None:
        st.warning(
            "The YAML in the editor does not load yet, so its checks cannot run. "
            "Fix the errors shown in the **Editor** tab."
        )
    else:
        scenario = item.scenario
        path = str(item.path)
        st.caption(
            f"Runs every check of **{scenario.id}** — as it is in the editor, unsaved edits "
            "included — on the code below. Matching spans are highlighted and labelled "
            "`constraint-id/check-id`."
        )
        verdicts = cache.samples(text, path)
        st.selectbox(
            "Load one of the scenario's own samples",
            [v.key for v in verdicts],
            index=None,
            format_func=lambda key: sample_label(next(v for v in verdicts if v.key == key)),
            placeholder="Choose a sample (✓ agrees with its label, ✗ disagrees)…",
            key="author_sample",
            on_change=load_sample,
            args=(verdicts,),
        )
        code_col, verdict_col = st.columns([2, 3], gap="medium")
        with code_col:
            code = st.text_area(
                "Code to check",
                key="author_code",
                height=340,
                max_chars=MAX_CODE_CHARS,
                persist_state="session",
                placeholder="Paste or type Python code, as a model might answer…",
                help="Checks run when the box loses focus or on Ctrl+Enter.",
            )
            code = code or ""
        scored = cache.score(text, path, code) if code.strip() else None
        with verdict_col:
            if scored is None:
                st.markdown("#### Verdicts")
                st.caption(
                    "Type or paste code on the left (or load a sample above): each constraint "
                    "and each of its checks shows pass or fail here, with the reason."
                )
            else:
                show_verdicts(scored, au.check_summary(scenario))
                show_sample_agreement(scored, code)
        if scored is not None:
            st.markdown("**Highlighted** — each span a check matched, labelled by that check")
            st.html(code_html(code, marks_for(scored)))

        st.markdown("#### The scenario's samples")
        disagree = [v for v in verdicts if v.agrees is False]
        if disagree:
            st.error(
                "These samples disagree with their label (lint reports them as E008): "
                + ", ".join(f"**{v.constraint_id} · {v.label} #{v.index}**" for v in disagree)
            )
        elif verdicts:
            st.caption("Every sample agrees with its label.")
        st.dataframe(
            [
                {
                    "constraint": v.constraint_id,
                    "sample": f"{v.label} #{v.index}",
                    "expected": v.expected_text,
                    "got": v.got_text,
                    "verdict": {None: "… not run", True: "✓ agrees", False: "✗ disagrees"}[
                        v.agrees
                    ],
                }
                for v in verdicts
            ],
            hide_index=True,
            key="author_samples_table",
        )
