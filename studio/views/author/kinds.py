"""Check kinds: every kind this installation knows, with its parameters (from the kinds'
own parameter models)."""

from __future__ import annotations

import streamlit as st

from cvb_engine import authoring as au
from studio.views.author.context import AuthorContext, md


def fields_table(fields: tuple[au.FieldDoc, ...]) -> str:
    """A Markdown table (it wraps long descriptions, unlike a data grid)."""

    def cell(value: str) -> str:
        return md(value).replace("\n", " ")

    rows = [
        f"| `{f.name}` | {cell(f.type)} | {cell(f.default)} | {cell(f.description)} |"
        for f in fields
    ]
    return "\n".join(["| parameter | type | default | meaning |", "|---|---|---|---|", *rows])


def render(ctx: AuthorContext) -> None:
    st.caption(
        "The check kinds this installation knows, with the parameters each accepts in a "
        "scenario's `checks:` list (read from the kinds' own parameter models)."
    )
    for kind in au.kind_reference():
        with st.container(border=True):
            sandbox = " · runs the code in the sandbox" if kind.executes_code else ""
            st.markdown(f"#### `kind: {kind.name}`{sandbox}")
            st.markdown(md(kind.description))
            tables = [("Parameters", kind.fields)]
            tables += [(f"Fields of `{holder}:`", fields) for holder, fields in kind.nested]
            for title, fields in tables:
                st.markdown(f"**{title}**\n\n" + fields_table(fields))
