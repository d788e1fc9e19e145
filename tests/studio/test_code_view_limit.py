"""The code view draws a bounded amount of any text, however long the reply."""

from __future__ import annotations

from studio.components.code_view import VIEW_LIMIT, Mark, code_html


def test_a_5_mb_reply_is_drawn_up_to_the_limit_and_says_what_it_left_out() -> None:
    line = "x = 'a' * 70  # " + "y" * 50 + "\n"
    text = line * (5_000_000 // len(line))
    out = code_html(text, [Mark(1, 0, 1, "c", "why", True), Mark(70_000, 0, 1, "c", "late", True)])
    assert f"{len(text) - VIEW_LIMIT:,} more characters not shown" in out
    assert out.count('data-line="') <= VIEW_LIMIT // len(line) + 1
    assert "late" not in out and "why" in out  # a mark past the limit is not drawn
    assert len(out) < 60 * VIEW_LIMIT  # bounded by the limit, not by the reply


def test_short_code_is_drawn_whole() -> None:
    out = code_html("def f():\n    return 1\n")
    assert "not shown" not in out and 'data-line="2"' in out
