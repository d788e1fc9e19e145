"""``studio.components.text``: outside text as literal Markdown, plotly labels and blocks."""

from __future__ import annotations

import pytest
from markdown_support import HOSTILE, assert_inert, shown

from studio.components.text import block, cap, chart_text, plain, unlinked


@pytest.mark.parametrize(
    "value",
    [
        HOSTILE,
        "openai/gpt-oss-20b",
        "llama3:8b",
        "- a list?",
        "1. or this",
        "# heading",
        "> quote",
        "a_b_ *c* `d` ~~e~~ |f| {g}",
        "<script>alert(1)</script> &amp; &lt;",
        ":material/warning: :red[x] :smile:",
        "see https://evil.test or www.evil.test or me@evil.test",
    ],
)
def test_plain_shows_the_value_as_written(value: str) -> None:
    assert shown(plain(value)) == value
    assert_inert([plain(value)], value, required=False)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("openai/gpt-oss-20b", "openai/gpt-oss-20b"),  # nothing to escape: unchanged
        ("m-a", "m-a"),
        ("- x", "\\- x"),
        ("2) x", "2\\) x"),
        ("[x](y)", "\\[x\\]\\(y\\)"),
        ("a\x1b[31mb", "a\\\\x1b\\[31mb"),  # the escape shown, not sent
        ("two\nlines", "two\\\\nlines"),
        (None, "–"),
    ],
)
def test_plain(value: object, expected: str) -> None:
    assert plain(value) == expected


def test_plain_multiline_keeps_breaks() -> None:
    assert plain("one\n- two", multiline=True) == "one  \n\\- two"


def test_plain_caps_long_values() -> None:
    out = plain("x" * 1000, limit=10)
    assert out.startswith("x" * 10) and "990 more characters" in out


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("<b>m</b>", "&lt;b&gt;m&lt;/b&gt;"),
        ('<a href="http://evil.test">x</a>', '&lt;a href="http://evil.test"&gt;x&lt;/a&gt;'),
        ("a & b", "a &amp; b"),
        ("m-a", "m-a"),
        ("a\nb", "a\\nb"),
    ],
)
def test_chart_text(value: str, expected: str) -> None:
    assert chart_text(value) == expected


def test_block_is_literal_but_visible_and_capped() -> None:
    assert block(HOSTILE) == HOSTILE
    assert block("a\x1bb\nc") == "a\\x1bb\nc"
    assert block(None) == ""
    assert "more characters" in block("y" * 30, limit=5)
    assert cap("abc", 3) == "abc"


def test_unlinked_breaks_bare_links_only() -> None:
    out = unlinked("| m | https://evil.test |")
    assert "https://evil" not in out and out.replace("\u200b", "") == "| m | https://evil.test |"
