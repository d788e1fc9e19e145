"""Syntax-highlighted code with violating spans marked and labelled by their check.

``code_html`` returns self-contained HTML (inline styles only), so the same
markup works in ``st.html``, in the static HTML export and in a browser test.
"""

from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass

from pygments.lexers import PythonLexer
from pygments.styles import get_style_by_name
from pygments.token import Token, _TokenType

_STYLE = get_style_by_name("friendly")


@dataclass(frozen=True)
class Mark:
    """A span to mark: 1-based line, 0-based column, length; ``label`` names the check."""

    line: int
    col: int
    length: int
    label: str
    reason: str = ""
    violation: bool = True


def _color(ttype: _TokenType) -> str:
    while ttype is not Token and not _STYLE.style_for_token(ttype)["color"]:
        ttype = ttype.parent
    color = _STYLE.style_for_token(ttype)["color"]
    return f"#{color}" if color else "#24292f"


CSS = """
<style>
.cvb-code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:13px;line-height:1.45;
  background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:6px 0;overflow-x:auto;margin:0}
.cvb-code .ln{flex:none;width:3em;color:#8c959f;text-align:right;padding-right:10px;user-select:none}
.cvb-code .row{display:flex;padding-right:8px}
.cvb-code .src{flex:1;min-width:0;white-space:pre-wrap;word-break:break-all}
.cvb-code .row.hit{background:#ffebe9}
.cvb-code .row.ok{background:#e6ffec}
.cvb-code mark.v{background:#ffb3ad;border-bottom:2px solid #cf222e;border-radius:2px;padding:0}
.cvb-code mark.m{background:#abf2bc;border-bottom:2px solid #1a7f37;border-radius:2px;padding:0}
.cvb-code .tag{display:inline-block;margin-left:12px;font-size:11px;color:#fff;background:#cf222e;
  border-radius:9px;padding:0 7px;font-family:system-ui,sans-serif;max-width:100%}
.cvb-code .tag.m{background:#1a7f37}
</style>
"""


#: The most of a text the code view draws: past this a browser tab stalls on the
#: spans (a 5 MB reply never rendered); the rest is counted, not drawn.
VIEW_LIMIT = 60_000


def code_html(
    code: str,
    marks: list[Mark] | tuple[Mark, ...] = (),
    *,
    include_css: bool = True,
    limit: int = VIEW_LIMIT,
) -> str:
    """HTML for ``code`` with ``marks`` highlighted; every marked line names its checks.

    At most ``limit`` characters are drawn; a note says how many were left out.
    """
    hidden = max(0, len(code) - limit)
    if hidden:
        code = code[:limit]
    lines = code.split("\n")
    per_line: dict[int, list[Mark]] = defaultdict(list)
    for mark in marks:
        if 1 <= mark.line <= len(lines):
            per_line[mark.line].append(mark)
    # Colour per character from pygments, then cut each line into runs.
    colors: list[str] = []
    for _, ttype, value in PythonLexer(stripnl=False, ensurenl=False).get_tokens_unprocessed(code):
        colors.extend([_color(ttype)] * len(value))
    colors.extend(["#24292f"] * (len(code) - len(colors)))
    out = [CSS if include_css else "", '<pre class="cvb-code">']
    offset = 0
    for number, line in enumerate(lines, start=1):
        line_marks = per_line.get(number, [])
        kinds = [""] * len(line)
        for m in line_marks:
            for i in range(max(m.col, 0), min(m.col + max(m.length, 1), len(line))):
                kinds[i] = "v" if m.violation else (kinds[i] or "m")
        row_class = ""
        if line_marks:
            row_class = " hit" if any(m.violation for m in line_marks) else " ok"
        # A long line wraps inside its own box (.src), never under the line number,
        # and its check tags wrap with it instead of running out of a narrow column.
        parts = [f'<span class="ln">{number}</span><span class="src">']
        i = 0
        while i < len(line):
            j = i
            while (
                j < len(line) and kinds[j] == kinds[i] and colors[offset + j] == colors[offset + i]
            ):
                j += 1
            text = html.escape(line[i:j])
            span = f'<span style="color:{colors[offset + i]}">{text}</span>'
            if kinds[i]:
                title = html.escape(
                    "; ".join(
                        f"{m.label}: {m.reason}"
                        for m in line_marks
                        if m.col <= i < m.col + max(m.length, 1)
                    ),
                    quote=True,
                )
                span = f'<mark class="{kinds[i]}" title="{title}">{span}</mark>'
            parts.append(span)
            i = j
        for label in dict.fromkeys(m.label for m in line_marks):
            violation = any(m.violation for m in line_marks if m.label == label)
            cls = "tag" if violation else "tag m"
            parts.append(
                f'<span class="{cls}" data-check="{html.escape(label, quote=True)}">⚑ {html.escape(label)}</span>'
            )
        parts.append("</span>")
        out.append(f'<div class="row{row_class}" data-line="{number}">{"".join(parts)}</div>')
        offset += len(line) + 1
    if hidden:
        out.append(
            f'<div class="row" data-cut="{hidden}"><span class="ln">…</span><span class="src">'
            f"{hidden:,} more characters not shown here (the record holds them: export it)"
            "</span></div>"
        )
    out.append("</pre>")
    return "".join(out)
