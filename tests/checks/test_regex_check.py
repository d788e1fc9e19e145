"""The regex check kind: forbid/require, flags, scope, comments/strings, timeouts."""

from __future__ import annotations

import random
import re
import subprocess
import time
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from cvb_engine.checks.base import Span, Subject
from cvb_engine.checks.regex_check import (
    Params,
    blank_comments_and_strings,
    blanking_cannot_add_a_match,
    run_regex,
)

COMMENTED = '# we no longer import requests\n"""requests was removed"""\nimport httpx\n'


@pytest.mark.parametrize(
    ("params", "code", "passed"),
    [
        pytest.param(
            {"forbid": r"\bimport requests\b"}, "import requests\n", False, id="forbid-hit"
        ),
        pytest.param({"forbid": r"\bimport requests\b"}, "import httpx\n", True, id="forbid-miss"),
        pytest.param({"require": r"\bhttpx\."}, "httpx.get(u)", True, id="require-hit"),
        pytest.param({"require": r"\bhttpx\."}, "requests.get(u)", False, id="require-miss"),
        pytest.param(
            {"forbid": "IMPORT", "flags": ["ignorecase"]}, "import x", False, id="ignorecase"
        ),
        pytest.param({"forbid": "^x", "flags": ["multiline"]}, "a\nx = 1", False, id="multiline"),
        pytest.param({"forbid": "^x"}, "a\nx = 1", True, id="no-multiline"),
        # Documented behaviour: by default comments and strings count ...
        pytest.param({"forbid": r"requests"}, COMMENTED, False, id="comment-counts-by-default"),
        # ... and can be excluded.
        pytest.param(
            {"forbid": r"requests", "ignore_comments_and_strings": True},
            COMMENTED,
            True,
            id="comment-ignored",
        ),
        pytest.param(
            {"forbid": r"requests", "ignore_comments_and_strings": True},
            "x = f'{requests}'",
            None,
            id="fstring",
        ),
    ],
)
def test_regex_verdicts(params: dict, code: str, passed: bool | None) -> None:
    result = run_regex(Params.model_validate(params), Subject(code=code))
    if passed is not None:
        assert result.passed is passed, result.reason
    assert result.reason


def test_evidence_spans_point_at_matches() -> None:
    code = "import os\nimport requests\nx = 1  # requests\n"
    result = run_regex(Params(forbid=r"requests"), Subject(code=code))
    assert result.evidence == (Span(2, 7, 8), Span(3, 9, 8))


def test_scope_response_sees_prose() -> None:
    subject = Subject(code="x = 1", response="I used requests.\n```python\nx = 1\n```")
    assert not run_regex(Params(forbid="requests", scope="response"), subject).passed
    assert run_regex(Params(forbid="requests", scope="code"), subject).passed


def test_blanking_keeps_offsets() -> None:
    blanked = blank_comments_and_strings(COMMENTED)
    assert blanked is not None
    assert len(blanked) == len(COMMENTED)
    assert "requests" not in blanked and "import httpx" in blanked
    assert blank_comments_and_strings("x = '''unterminated") is None


# What blanking finds, as Python's tokenizer sees it: string prefixes, a quote
# after a word character (not a literal), escapes, comments and strings inside
# one another.
BLANKING = [
    pytest.param("x = 'a' + \"b\"", "x =     +    ", id="quotes"),
    pytest.param("f'{x}' rb'y' Rb\"z\"", "                  ", id="prefixes"),
    pytest.param("xf'a'", "xf'a'", id="word-before-prefix"),
    pytest.param("x'a' ", "x'a' ", id="word-before-quote"),
    pytest.param("(br'a')", "(     )", id="prefix-after-punctuation"),
    pytest.param("''' '", None, id="unterminated-triple"),
    pytest.param("'a\\'b' c", "       c", id="escaped-quote"),
    pytest.param("'a\nb'", "'a\nb'", id="one-line-string-unterminated"),
    pytest.param("x  # it's 'q'\ny", "x            \ny", id="quote-in-comment"),
    pytest.param("s = '# no'  # yes", "s =              ", id="hash-in-string"),
    pytest.param('"""a\n\'b"""\nc', "    \n     \nc", id="triple-multiline"),
    pytest.param("u'''x'''", "        ", id="triple-prefixed"),
    pytest.param("rbf'x'", "rbf'x'", id="three-letters-before-quote"),
    pytest.param("'a \\'b\n'c'", "'a \\'b\n   ", id="unclosed-then-next-line"),
    pytest.param("'\\'\\' \"q\" # c", "'\\'\\'        ", id="unclosed-then-other-quote"),
    pytest.param("x = 'a\\\n'", "x = 'a\\\n'", id="unclosed-at-line-continuation"),
    pytest.param("'\\'\\''b'", "      b'", id="escaped-quotes-then-closed"),
]


@pytest.mark.parametrize(("code", "blanked"), BLANKING)
def test_blanking(code: str, blanked: str | None) -> None:
    assert blank_comments_and_strings(code) == blanked


# The scan as it was first written, one regex over the whole text: the oracle
# for the scan that passes over quotes an unclosed literal has ruled out.
_P = r"(?:(?<!\w.)|(?<=[rRbBuUfF].)(?<!\w[rRbBuUfF].)|(?<=[rRbBuUfF]{2}.)(?<!\w[rRbBuUfF]{2}.))"


def _oracle_quoted(q: str, n: int) -> str:
    return (
        rf"{q}{_P}(?:(?P<t{n}>{q * 2}[\s\S]*?{q * 3})"
        rf"|(?P<open{n}>{q * 2})|(?P<s{n}>(?:\\.|[^{q}\\\n])*{q}))"
    )


_ORACLE = re.compile(_oracle_quoted("'", 1) + "|" + _oracle_quoted('"', 2) + r"|#(?P<c>[^\n]*)")


def oracle_blank(code: str) -> str | None:
    pieces, last = [], 0
    for match in _ORACLE.finditer(code):
        group, (start, end) = match.lastgroup or "", match.span()
        if group.startswith("open"):
            return None
        if group != "c" and start and code[start - 1] in "rRbBuUfF":
            start -= 2 if start > 1 and code[start - 2] in "rRbBuUfF" else 1
        pieces += [code[last:start], re.sub(r"[^\n]", " ", code[start:end])]
        last = end
    return "".join([*pieces, code[last:]])


def test_blanking_agrees_with_one_regex_over_the_text() -> None:
    rng = random.Random(7)
    pieces = ["'", '"', "\\", "#", "\n", " ", "a", "r", "b", "f", "'" * 3, '"' * 3, "\r", "é"]
    for _ in range(20_000):
        code = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        assert blank_comments_and_strings(code) == oracle_blank(code), repr(code)


def test_blanking_a_long_line_of_escaped_quotes_does_not_hang(
    run_python: Callable[[str], subprocess.CompletedProcess[str]],
) -> None:
    """Each quote of a line of escaped quotes opens a literal that runs to the end
    of the line; looking at each to the end of the line took minutes on 200,000
    characters (here with a 60 s guard, not a timing: the scan takes milliseconds)."""
    script = (
        "from cvb_engine.checks.regex_check import blank_comments_and_strings as blank\n"
        "code = 'x = ' + '\\\\\\'' * 100_000 + '\\ny = \"s\"'\n"
        "out = blank(code)\n"
        "assert out is not None and len(out) == len(code), out\n"
        "assert out.endswith('\\ny =    '), out[-20:]\n"
    )
    done = run_python(script)
    assert done.returncode == 0, done.stderr


def test_untokenizable_code_falls_back_to_raw_text() -> None:
    result = run_regex(
        Params(forbid="requests", ignore_comments_and_strings=True),
        Subject(code="import requests\nx = '''open"),
    )
    assert not result.passed and "not tokenizable" in result.reason


def test_untokenizable_code_without_a_match_needs_no_note() -> None:
    for params in (
        Params(forbid="requests", ignore_comments_and_strings=True),
        Params(require="requests", ignore_comments_and_strings=True),
    ):
        result = run_regex(params, Subject(code="import httpx\nx = '''open"))
        assert "tokenizable" not in result.reason
        assert result.passed is (params.forbid is not None)


# Whether a match in blanked code is always one in the code itself, so that a
# pattern that finds nothing in the raw text needs no blanking.
RAW_FIRST = [
    (r"\brequests\.(get|post)\(", True),
    (r"\butcnow\(", True),
    (r"getLogger\(", True),
    (r"(?=foo)f\w+\d", True),
    (r"(?<=x)y", True),
    (r"[a-z]+|[0-9]", True),
    (r"[^ ]x", True),
    (r"\S+", True),
    (r"^import\s*$", False),
    (r"foo bar", False),
    (r"a.b", False),
    (r"[^a]", False),
    (r"\s", False),
    (r"\D", False),
    (r"\W", False),
    (r"[\x00-\x7f]", False),
    (r"(?<!x)y", False),
    (r"y(?!x)", False),
    (r"\Bx", False),
    (r"(a)\1", False),
    (r"(a)?(?(1)b|c)", False),
    (r"x{e<=1}", False),
    (r"[[:alpha:]]", False),
    (r"\p{L}", False),
]


@pytest.mark.parametrize(("pattern", "safe"), RAW_FIRST)
def test_blanking_cannot_add_a_match(pattern: str, safe: bool) -> None:
    params = Params(forbid=pattern, ignore_comments_and_strings=True)
    assert blanking_cannot_add_a_match(params) is safe


# Literals next to words, prefixes, comments at line ends: where a \b could move.
EDGES = [
    "x = 'a'foo\n",
    "foo'a' + rb'x'bar\n",
    "f(x)  # utcnow(\nutcnow (\n",
    "y = f'{requests.get(u)}'\nrequests .get(\n",
    'a = """\nrequests.get(\n"""\nb = 1  # getLogger(\n',
    "s = 'getLogger('\nt = u'x'getLogger(\n",
    "x = 1 if y else'requests.post('\n",
    "x = y  # a\nfoo1 = 'x' + 'y'\n",
]


@pytest.mark.parametrize("code", EDGES)
@pytest.mark.parametrize("pattern", [p for p, safe in RAW_FIRST if safe])
def test_skipping_the_blanking_changes_no_verdict(pattern: str, code: str) -> None:
    params = Params(forbid=pattern, ignore_comments_and_strings=True)
    blanked = blank_comments_and_strings(code)
    assert blanked is not None
    expected = params.compiled().search(blanked) is None
    assert run_regex(params, Subject(code=code)).passed is expected
    if not expected:  # a match in the blanked text is one in the raw text
        assert params.compiled().search(code) is not None


def test_catastrophic_pattern_times_out_as_failed_check() -> None:
    params = Params(forbid=r"(a|aa)+$", timeout_s=0.05)
    text = "a" * 40 + "b"
    start = time.monotonic()
    result = run_regex(params, Subject(code=text))
    assert time.monotonic() - start < 2
    assert not result.passed and result.timed_out and "timed out" in result.reason


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="neither"),
        pytest.param({"forbid": "a", "require": "b"}, id="both"),
        pytest.param({"forbid": "("}, id="does-not-compile"),
        pytest.param({"forbid": "a", "flags": ["unicode-ish"]}, id="unknown-flag"),
        pytest.param({"forbid": "a", "scope": "file"}, id="unknown-scope"),
        pytest.param({"forbid": "a", "timeout_s": 0}, id="zero-timeout"),
        pytest.param({"forbid": "a", "pattern": "b"}, id="extra-field"),
    ],
)
def test_invalid_params_are_refused(params: dict) -> None:
    with pytest.raises(ValidationError):
        Params.model_validate(params)
