"""`cvb_engine.safe_text`: CSV cells, terminal text and Markdown text from outside."""

from __future__ import annotations

import csv
import io
import re

import pytest

from cvb_engine.safe_text import (
    csv_cell,
    csv_row,
    markdown_code,
    markdown_text,
    terminal_text,
    write_csv,
)

OSC_TITLE = "\x1b]0;pwned\x07"
OSC_CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
# Everything a terminal may act on: ESC, C0, DEL, C1, bidi controls, lone surrogates.
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        pytest.param('=HYPERLINK("http://evil")', '\'=HYPERLINK("http://evil")', id="equals"),
        pytest.param("+1+1", "'+1+1", id="plus"),
        pytest.param("-2+3", "'-2+3", id="minus"),
        pytest.param("@SUM(A1)", "'@SUM(A1)", id="at"),
        pytest.param("\t=1", "'\t'=1", id="tab"),
        pytest.param("a;=1+1", "a;'=1+1", id="semicolon-piece"),
        pytest.param("a,+cmd|' /C calc'!A0", "a,'+cmd|' /C calc'!A0", id="comma-piece"),
        pytest.param("a\t@SUM(A1)", "a\t'@SUM(A1)", id="tab-piece"),
        pytest.param("x;  -2+3", "x;  '-2+3", id="piece-after-spaces"),
        pytest.param("c1;c2,c-3", "c1;c2,c-3", id="pieces-that-are-text"),
        pytest.param("\r=1", "'\r=1", id="carriage-return"),
        pytest.param("-0.25", "'-0.25", id="negative-number-as-text"),
        pytest.param(-0.25, -0.25, id="negative-float-stays-a-number"),
        pytest.param(-3, -3, id="negative-int-stays-a-number"),
        pytest.param(float("-inf"), "'-inf", id="infinite-float-is-text"),
        pytest.param(True, True, id="bool"),
        pytest.param(None, None, id="empty"),
        pytest.param("m-a", "m-a", id="plain-text"),
        pytest.param(" =1", " =1", id="leading-space"),
        pytest.param(["=x"], "['=x']", id="other-type-as-text"),
    ],
)
def test_csv_cell_neutralizes_what_a_spreadsheet_would_run(value: object, cell: object) -> None:
    assert csv_cell(value) == cell


def test_csv_row_round_trips_through_the_csv_module() -> None:
    row = {"model": "=1+1", "latency_s": -0.5, "error": 'a,"b"\n@c'}
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(row))
    writer.writerow(csv_row(row))
    back = next(csv.DictReader(io.StringIO(buf.getvalue()), fieldnames=list(row)))
    assert back == {"model": "'=1+1", "latency_s": "-0.5", "error": 'a,"b"\n@c'}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param(f"a{OSC_TITLE}b", "a\\x1b]0;pwned\\x07b", id="osc-window-title"),
        pytest.param(OSC_CLIPBOARD, "\\x1b]52;c;ZWNobyBwd25lZA==\\x07", id="osc-52-clipboard"),
        pytest.param("\x1b[2J\x1b[31m", "\\x1b[2J\\x1b[31m", id="csi"),
        pytest.param("\x9b31m", "\\x9b31m", id="c1-csi"),
        pytest.param("a\x7fb\x00c\x08", "a\\x7fb\\x00c\\x08", id="del-nul-backspace"),
        pytest.param("over\rwrite", "over\\rwrite", id="carriage-return"),
        pytest.param("abc\u202efed", "abc\\u202efed", id="bidi-override"),
        pytest.param("\u2066x\u2069\u200f", "\\u2066x\\u2069\\u200f", id="bidi-isolate-mark"),
        pytest.param("name\udc9b", "name\\udc9b", id="lone-surrogate"),
        pytest.param("line 1\n\tline 2", "line 1\n\tline 2", id="newline-tab-kept"),
        pytest.param("héllo – ok ✓", "héllo – ok ✓", id="printable-unicode-kept"),
    ],
)
def test_terminal_text_shows_control_characters(text: str, shown: str) -> None:
    assert terminal_text(text) == shown
    assert not UNSAFE.search(terminal_text(text))


def test_terminal_text_on_one_line_shows_newlines_and_tabs() -> None:
    assert terminal_text("a\nb\tc", multiline=False) == "a\\nb\\tc"


@pytest.mark.parametrize(
    ("text", "fragment", "absent"),
    [
        pytest.param(
            "<img src=x onerror=alert(1)>",
            "&lt;img src=x onerror=alert\\(1\\)&gt;",
            "<img",
            id="html",
        ),
        pytest.param("[click](http://evil)", "\\[click\\]\\(http\u200b://evil\\)", "](", id="link"),
        pytest.param("see https://evil.test/x", "https\u200b://", "https://", id="bare-url"),
        pytest.param("go to www.evil.test", "www\u200b.", "www.", id="www"),
        pytest.param("mail a@evil.test", "a@\u200bevil", "a@evil", id="e-mail"),
        pytest.param("mailto:a", "mailto\u200b:", "mailto:", id="mailto"),
        pytest.param("![x](http://evil/p.png)", "\\!\\[x\\]", "![", id="image"),
        pytest.param("a | b", "a \\| b", " | ", id="table-cell"),
        pytest.param("a\nb", "a\\\\nb", "\n", id="newline"),
        pytest.param("`code`", "\\`code\\`", "`code`", id="backticks"),
        pytest.param("$x$", "\\$x\\$", "$x$", id="math"),
        pytest.param("a & b", "a &amp; b", "a & b", id="ampersand"),
        pytest.param(OSC_TITLE, "\\\\x1b", "\x1b", id="escape"),
        pytest.param("openai/gpt-oss-20b", "openai/gpt-oss-20b", "\\", id="model-id-unchanged"),
    ],
)
def test_markdown_text_is_plain_text(text: str, fragment: str, absent: str) -> None:
    out = markdown_text(text)
    assert fragment in out and absent not in out


@pytest.mark.parametrize(
    ("text", "span"),
    [
        pytest.param("s1", "`s1`", id="plain"),
        pytest.param("a`b", "``a`b``", id="backtick-inside"),
        pytest.param("`x", "`` `x ``", id="backtick-at-the-edge"),
        pytest.param("<b>\n", "`<b>\\n`", id="html-and-newline"),
    ],
)
def test_markdown_code_is_one_verbatim_span(text: str, span: str) -> None:
    assert markdown_code(text) == span


def test_a_carriage_return_inside_a_cell_cannot_start_a_row() -> None:
    buf = io.StringIO()
    write_csv(buf, ["error", "n"], [{"error": 'x\r=HYPERLINK("http://evil")', "n": 1, "extra": 2}])
    rows = list(csv.DictReader(io.StringIO(buf.getvalue(), newline="")))
    assert rows == [{"error": 'x\r=HYPERLINK("http://evil")', "n": "1"}]
