"""Prompts: exactly what each arm sends for the open scenario, unsaved edits included."""

from __future__ import annotations

import streamlit as st

from cvb_engine import PROMPT_VERSION
from cvb_engine import authoring as au
from studio.views.author.context import AuthorContext

ARM_NOTES = {
    "cold": "The task alone: what a model does by default.",
    "mandated": "The task, then the constraints framed as explicit orders.",
    "incentivized": "The constraints as past decisions in project memory (never as orders), "
    "then the task. The gap between mandated and incentivized is the headline metric.",
}


def render(ctx: AuthorContext) -> None:
    lint = ctx.lint
    item = lint.item if lint is not None else None
    if item is None:
        st.info("Open a scenario whose YAML loads to see the prompts each arm sends.")
    else:
        st.caption(
            f"Exactly what each arm sends to the model (prompt version {PROMPT_VERSION}), "
            "built from the editor text, unsaved edits included."
        )
        arms = au.prompts(item.scenario)
        for arm_tab, (arm, messages) in zip(st.tabs(list(arms)), arms.items(), strict=True):
            with arm_tab:
                st.caption(ARM_NOTES.get(arm, ""))
                for message in messages:
                    st.markdown(f"**{message['role']}**")
                    st.code(message["content"], language=None, wrap_lines=True)
