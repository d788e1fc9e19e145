"""Editor: the open scenario's YAML with live lint, and saving to the library or as a draft."""

from __future__ import annotations

import streamlit as st

from cvb_engine import MAX_SCENARIO_BYTES
from cvb_engine import authoring as au
from studio.components.findings_view import findings_html
from studio.views.author.context import AuthorContext, save

ss = st.session_state


def render(ctx: AuthorContext) -> None:
    drafts, doc, text, lint = ctx.drafts, ctx.doc, ctx.text, ctx.lint
    if doc is None or lint is None:
        st.info(
            "Nothing is open. Pick a scenario in the **Library** tab, or start a new one there."
        )
    else:
        where = {"library": "library file", "draft": "draft", "new": "new, not saved yet"}
        head, badges = st.columns([3, 2], vertical_alignment="bottom")
        with head:
            st.subheader(doc["name"], anchor=False)
            st.caption(
                f"{where[doc['where']]}"
                + (f" · `{ctx.rel(doc['path'])}`" if doc.get("path") else "")
            )
        with badges, st.container(horizontal=True, horizontal_alignment="right"):
            if lint.errors:
                st.badge(f"{lint.errors} lint error{'s' * (lint.errors != 1)}", color="red")
            elif lint.warnings:
                st.badge(f"lint clean · {lint.warnings} warning(s)", color="orange")
            else:
                st.badge("lint clean", icon=":material/check:", color="green")
            if text != doc["baseline"]:
                st.badge("unsaved changes", color="violet")

        edit_col, side_col = st.columns([3, 2], gap="medium")
        with edit_col:
            st.text_area(
                "Scenario YAML",
                key="author_yaml",
                height=640,
                max_chars=MAX_SCENARIO_BYTES,
                persist_state="session",
                help="Lint runs when the editor loses focus or on Ctrl+Enter.",
            )
        with side_col:
            with st.container(border=True):
                plan = au.plan_library_save(lint, ss.author_owned)
                draft_plan = au.plan_draft_save(text, drafts, doc["name"], ss.author_owned)
                st.markdown("**Save**")
                if plan.target is not None:
                    st.caption(f"Library file: `{ctx.rel(plan.target)}`")
                if draft_plan.target is not None:
                    st.caption(
                        f"Draft file: `{ctx.rel(draft_plan.target)}` (kept out of the library; "
                        "saved whatever lint says)"
                    )
                if plan.blocked:
                    st.caption(f"🔒 Saving to the library is blocked: {plan.blocked}.")
                if plan.needs_confirmation:
                    changed = str(plan.target) in ss.author_owned
                    st.warning(
                        f"`{ctx.rel(plan.target or '')}` already exists"
                        + (" and changed on disk since you opened it." if changed else ".")
                    )
                    st.checkbox("Overwrite the existing file", key="author_overwrite")
                if draft_plan.needs_confirmation:
                    st.checkbox(
                        f"Overwrite the existing draft `{ctx.rel(draft_plan.target or '')}`",
                        key="author_overwrite_draft",
                    )
                save_col, draft_col = st.columns(2)
                save_col.button(
                    "Save to library",
                    key="author_save",
                    type="primary",
                    icon=":material/save:",
                    width="stretch",
                    disabled=bool(plan.blocked)
                    or (plan.needs_confirmation and not ss.get("author_overwrite")),
                    on_click=save,
                    args=(ctx, "library"),
                )
                draft_col.button(
                    "Save draft",
                    key="author_save_draft",
                    icon=":material/draft:",
                    width="stretch",
                    disabled=bool(draft_plan.blocked)
                    or (draft_plan.needs_confirmation and not ss.get("author_overwrite_draft")),
                    on_click=save,
                    args=(ctx, "draft"),
                    help=f"Writes the text as it is, lint errors included, to `{ctx.rel(drafts)}/`, "
                    "outside the linted library.",
                )
                flash = ss.pop("author_flash", None)
                if flash:
                    status, message = flash
                    {"saved": st.success, "confirm": st.warning}.get(status, st.error)(message)
            with st.container(border=True):
                st.markdown(
                    f"**Lint** — {lint.errors} error(s), {lint.warnings} warning(s)"
                    if lint.findings
                    else "**Lint**"
                )
                tall = len(lint.findings) > 5
                with st.container(height=470 if tall else "content", border=False):
                    st.html(findings_html(lint.findings, text))
