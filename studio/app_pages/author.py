"""Author: browse the scenario library, edit a scenario with live lint, try its checks, save it.

The page routes to its tabs in :mod:`studio.views.author`; what they show comes from
:mod:`cvb_engine.authoring` (library, lint, samples, saving) and the engine. Session keys
start with ``author_``; the editor and playground texts persist across page switches.
"""

from __future__ import annotations

import streamlit as st

from studio.views.author import editor, kinds, library, playground, prompts
from studio.views.author.context import (
    EDITOR,
    KINDS,
    LIBRARY,
    MONOSPACE_CSS,
    PLAYGROUND,
    PROMPTS,
    load,
)

ctx = load()

st.html(MONOSPACE_CSS)
st.title("Author")
st.caption(
    "Write a benchmark scenario, lint it as you type, try its checks on code, and save it into "
    f"the library at `{ctx.root}`."
)

TABS = {
    LIBRARY: library.render,
    EDITOR: editor.render,
    PLAYGROUND: playground.render,
    PROMPTS: prompts.render,
    KINDS: kinds.render,
}
tabs = st.tabs(list(TABS), key="author_view", on_change="rerun", default=LIBRARY)
for render, tab in zip(TABS.values(), tabs, strict=True):
    if tab.open:  # only the open tab computes and draws
        with tab:
            render(ctx)
