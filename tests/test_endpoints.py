"""endpoints.scrub / storable: the one function every server string passes through."""

from __future__ import annotations

import pytest

from cvb_engine.endpoints import NO_KEY_PLACEHOLDER, SCRUB_MIN_RUN, scrub, storable

KEY = "sk-proj-AbCdEfGh12345678IjKlMnOp"
SHORT = "k3y!"  # shorter than SCRUB_MIN_RUN: removed only whole


@pytest.mark.parametrize(
    ("text", "secret", "expected"),
    [
        (f"key {KEY} here", KEY, "key *** here"),
        (f"key {KEY.upper()} here", KEY, "key *** here"),
        (f"key {KEY.lower()} here", KEY, "key *** here"),
        (f"key {KEY.swapcase()} here", KEY, "key *** here"),
        (f"{KEY}{KEY}", KEY, "******"),
        (f"a{KEY[:SCRUB_MIN_RUN]}b", KEY, "a***b"),  # a prefix of 12
        (f"a{KEY[5 : 5 + SCRUB_MIN_RUN]}b", KEY, "a***b"),  # 12 from the middle
        (f"a{KEY[-SCRUB_MIN_RUN:].upper()}b", KEY, "a***b"),  # a suffix, upper-cased
        (f"a{KEY[:-1]}b", KEY, "a***b"),  # all but the last character
        (f"a{KEY[: SCRUB_MIN_RUN - 1]}b", KEY, f"a{KEY[: SCRUB_MIN_RUN - 1]}b"),  # 11: kept
        (f"Bearer {KEY[:5]}***", KEY, f"Bearer {KEY[:5]}***"),  # the usual masked echo
        (f"x{KEY[:8]}\x00{KEY[8:]}y", KEY, "x***y"),  # split by a NUL: rejoined, then removed
        (f"{KEY[:14]} and {KEY[10:30]}", KEY, "*** and ***"),
        ("nothing to see", KEY, "nothing to see"),
        (f"say {SHORT} and {SHORT.upper()}", SHORT, "say *** and ***"),
        (f"say {SHORT[:3]}", SHORT, f"say {SHORT[:3]}"),
        ("not-needed", NO_KEY_PLACEHOLDER, "not-needed"),  # no key: nothing to remove
        ("abc", "", "abc"),
        ("ab ab", "ab", "ab ab"),  # too short to be a key
    ],
    ids=lambda v: repr(v)[:40] if isinstance(v, str) else None,
)
def test_scrub(text: str, secret: str, expected: str) -> None:
    assert scrub(text, secret) == expected


def test_scrub_finds_the_longest_run_where_a_window_repeats_in_the_key() -> None:
    key = "abcdefghijkl" + "abcdefghijkl" + "XYZ"  # its first window occurs twice
    assert scrub(f"<{key[12:]}>", key) == "<***>"
    assert scrub(f"<{key}>", key) == "<***>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("a\x00b\x00", "ab"),
        ("lone \ud800 high", "lone \ufffd high"),
        ("lone \udfff low", "lone \ufffd low"),
        ("pair 😀 kept", "pair 😀 kept"),
        ("tabs\tand\nnewlines", "tabs\tand\nnewlines"),
    ],
)
def test_storable(text: str, expected: str) -> None:
    out = storable(text)
    assert out == expected
    out.encode("utf-8")  # encodable, and so storable on every backend


def test_scrubbed_text_is_storable() -> None:
    assert scrub("a\x00\ud800b", KEY) == "a\ufffdb"
