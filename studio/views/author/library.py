"""Library: the scenario files and drafts with their lint state; open one, or start a new
scenario from a template."""

from __future__ import annotations

from collections import Counter

import streamlit as st

from cvb_engine import CATEGORIES, CVB_CATEGORIES, TEMPLATES
from studio.views.author.context import AuthorContext, create_from_template, open_entry, pick_row

ss = st.session_state


def render(ctx: AuthorContext) -> None:
    entries, root, doc, text = ctx.entries, ctx.root, ctx.doc, ctx.text
    present = sorted({e.category for e in entries if e.category in CATEGORIES})
    chosen = st.pills(
        "Filter by category",
        present,
        selection_mode="multi",
        key="author_filter",
        help="No category selected shows them all.",
    )
    shown = [e for e in entries if not chosen or e.category in chosen]
    counts = Counter(e.category for e in entries if e.where == "library")
    st.caption(
        " · ".join(
            f"{c} **{counts.get(c, 0)}**" + ("" if counts.get(c, 0) == 5 else " ⚠")
            for c in CVB_CATEGORIES
        )
        + " — the CVB set has 5 scenarios per category. "
        "Tick a row to choose it, then open it below."
    )
    if shown:
        st.dataframe(
            [
                {
                    "id": e.id,
                    "category": e.category,
                    "title": e.title,
                    "constraints": e.constraints,
                    "lint": e.status,
                    "where": "draft" if e.where == "draft" else "library",
                }
                for e in shown
            ],
            hide_index=True,
            key="author_table",
            on_select=lambda: pick_row(shown),
            selection_mode="single-row",
            column_config={
                "id": st.column_config.TextColumn(width="medium"),
                "title": st.column_config.TextColumn(width="large"),
                "constraints": st.column_config.NumberColumn(width="small"),
            },
        )
    else:
        st.info(f"No scenario files under `{root}` yet. Start a new one on the right.")

    dirty = doc is not None and text != doc["baseline"]
    if doc is not None and dirty:
        st.warning(
            f"**{doc['name']}** has unsaved changes. Opening or creating another scenario "
            "discards them; save them (or save a draft) in the Editor tab first."
        )
    open_col, new_col = st.columns(2, gap="large")
    with open_col, st.container(border=True):
        st.markdown("**Open a scenario**")
        labels = {
            e.key: f"{e.category} / {e.id}" + ("  (draft)" if e.where == "draft" else "")
            for e in shown
        }
        picked = st.selectbox(
            "Scenario",
            list(labels),
            index=None,
            format_func=lambda key: labels.get(key, key),
            placeholder="Choose or type to search…",
            key="author_pick",
        )
        st.button(
            "Discard changes and open" if dirty else "Open in editor",
            key="author_open",
            type="primary",
            disabled=picked is None,
            on_click=open_entry,
            args=(ctx, picked),
        )
        st.caption(
            "To start from an existing scenario, open it and change its `id`: saving then "
            "writes a new file and leaves the original alone."
        )
    with new_col, st.container(border=True):
        st.markdown("**Start a new scenario**")
        st.text_input(
            "id",
            key="author_new_id",
            placeholder="e.g. yaml-safe-load",
            help="Lowercase words joined by hyphens; it becomes the file name.",
        )
        # The templates are CVB scenarios; an IVR problem also needs stated tests, a
        # reference solution and exec checks, so it starts from an existing problem.
        st.selectbox(
            "Category",
            CVB_CATEGORIES,
            key="author_new_category",
            help="For an IVR problem, open an existing one from the ivr category and "
            "change its id.",
        )
        st.selectbox(
            "Template",
            list(TEMPLATES),
            key="author_new_template",
            format_func=lambda name: f"{name} — {TEMPLATES[name].summary}",
        )
        if ss.get("author_new_error"):
            st.error(ss.author_new_error)
        st.button(
            "Discard changes and create" if dirty else "Create from template",
            key="author_create",
            on_click=create_from_template,
            args=(ctx,),
        )
