"""Text from outside, shown as text in the studio.

Model replies, reasoning, server error messages, model names, finish reasons,
run ids and notes come from endpoints or from stored and imported runs: none of
it was written by the person reading the page. Streamlit renders the body of
``st.markdown``, ``st.caption``, ``st.error``/``warning``/``info``/``success``
and widget labels as Markdown (images load, links are clickable, ``:red[...]``
recolours), and plotly reads a subset of HTML in labels and hover text. So:

- long or multi-line text goes to ``st.text`` / ``st.code``, which are literal;
- a value inside a Markdown message goes through :func:`plain`;
- a value inside a plotly label or hover goes through :func:`chart_text`.

Control characters are made visible by the engine's
:func:`cvb_engine.safe_text.terminal_text`, the same rule as the terminal's.
"""

from __future__ import annotations

import html
import re

from cvb_engine import terminal_text, unlinked

#: Longest value shown inline before it is cut (the full text stays in the store).
INLINE_LIMIT = 300
CHART_LIMIT = 80
BLOCK_LIMIT = 20_000
# What Streamlit's Markdown (CommonMark, GFM, math, ``:directive[...]``) reads
# anywhere in a line: emphasis, code, links, images, HTML, entities, math,
# directives, table pipes; backslash-escaped, they are shown as themselves.
# Plain ``-``, ``.``, ``/`` stay, so "openai/gpt-oss-20b" reads as written.
_INLINE = re.compile(r"([\\`*_~\[\](){}<>&$:|!#])")
# What only the start of a line makes into a list, a quote or a heading underline.
_LINE_START = re.compile(r"(?m)^([ \t]*)([-+=]|\d+(?=[.)]))")


def _escape_line_start(match: re.Match[str]) -> str:
    indent, marker = match.groups()
    # "1." / "1)": escape what follows the digits; "-", "+", "=": the mark itself.
    return f"{indent}{marker}\\" if marker[0].isdigit() else f"{indent}\\{marker}"


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def plain(value: object, *, limit: int = INLINE_LIMIT, multiline: bool = False) -> str:
    """``value`` as literal text inside a Streamlit Markdown string.

    Args:
        value: the untrusted value (converted with ``str``; ``None`` is "–").
        limit: characters kept; more is cut with a note of how many.
        multiline: keep line breaks (an error message); otherwise they are
            shown as ``\\n`` so the value stays on its line.
    """
    text = "–" if value is None else str(value)
    text = terminal_text(cap(text, limit), multiline=multiline)
    text = unlinked(text)  # bare URLs and e-mail addresses: the engine's one rule
    text = _INLINE.sub(r"\\\1", text)
    text = _LINE_START.sub(_escape_line_start, text)
    if multiline:
        # A single line break is a space in Markdown: keep it a break.
        text = text.replace("\n", "  \n")
    return text


def block(value: object, *, limit: int = BLOCK_LIMIT) -> str:
    """``value`` for ``st.text`` / ``st.code``: literal already, only capped and made visible."""
    text = "" if value is None else str(value)
    return terminal_text(cap(text, limit))


def chart_text(value: object, *, limit: int = CHART_LIMIT) -> str:
    """``value`` for a plotly label, tick, title or hover: ``<``, ``>``, ``&`` as entities."""
    text = "–" if value is None else str(value)
    return html.escape(terminal_text(cap(text, limit), multiline=False), quote=False)
