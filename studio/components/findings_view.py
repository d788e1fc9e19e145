"""Lint findings as a readable list: severity, code, line, message and the line itself.

Self-contained HTML (inline ``<style>``), rendered with ``st.html``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from cvb_engine import Finding

CSS = """
<style>
.cvb-findings{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;font-size:14px;margin:0}
.cvb-findings .f{border-left:4px solid #cf222e;background:#fff5f5;border-radius:4px;
  padding:6px 10px;margin:0 0 8px 0}
.cvb-findings .f.warning{border-left-color:#bf8700;background:#fff8e1}
.cvb-findings .head{display:flex;gap:8px;align-items:baseline;flex-wrap:wrap}
.cvb-findings .code{font-weight:600;color:#cf222e;font-family:ui-monospace,Menlo,monospace}
.cvb-findings .warning .code{color:#9a6700}
.cvb-findings .line{color:#57606a;font-size:12px;white-space:nowrap}
.cvb-findings .msg{color:#1f2328}
.cvb-findings pre{margin:4px 0 0 0;padding:3px 6px;background:#f6f8fa;border-radius:3px;
  font-family:ui-monospace,Menlo,monospace;font-size:12px;white-space:pre-wrap;word-break:break-all}
.cvb-findings pre .n{color:#8c959f;user-select:none;margin-right:8px}
.cvb-findings .ok{color:#1a7f37;font-weight:600}
</style>
"""


BLOCK_INDICATORS = ("|", ">", "|-", ">-", "|+", ">+")
MAX_QUOTED_LINES = 4


def quoted_lines(lines: Sequence[str], line: int) -> list[tuple[int, str]]:
    """Line ``line`` (1-based) and, when it opens a block scalar (``text: >-``), the block's
    first lines too: the words lint objects to are there, not on the key's line."""
    if not 1 <= line <= len(lines):
        return []
    first = lines[line - 1]
    out = [(line, first)]
    if ":" in first and first.rstrip().rsplit(" ", 1)[-1] in BLOCK_INDICATORS:
        indent = len(first) - len(first.lstrip())
        for number in range(line + 1, min(len(lines), line + MAX_QUOTED_LINES) + 1):
            body = lines[number - 1]
            if body.strip() and len(body) - len(body.lstrip()) <= indent:
                break
            out.append((number, body))
    return out


def findings_html(findings: Sequence[Finding], text: str) -> str:
    """One block per finding, with the offending line(s) of ``text`` quoted under it."""
    if not findings:
        return CSS + '<div class="cvb-findings"><span class="ok">✓ No lint findings.</span></div>'
    lines = text.splitlines()
    out = [CSS, '<div class="cvb-findings">']
    for f in findings:
        source = quoted_lines(lines, f.line)
        quoted = ""
        if any(body.strip() for _, body in source):
            rows = (f'<span class="n">{n}</span>{html.escape(body)}' for n, body in source)
            quoted = "<pre>" + "\n".join(rows) + "</pre>"
        out.append(
            f'<div class="f {html.escape(f.severity)}" data-code="{html.escape(f.code)}" '
            f'data-line="{f.line}"><div class="head"><span class="code">{html.escape(f.code)}</span>'
            f'<span class="line">line {f.line}</span>'
            f'<span class="msg">{html.escape(f.message)}</span></div>{quoted}</div>'
        )
    out.append("</div>")
    return "".join(out)
