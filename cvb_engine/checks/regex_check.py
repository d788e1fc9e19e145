"""The ``regex`` check kind: a pattern that must not (``forbid``) or must (``require``) match.

Matching is textual. By default a match inside a comment, a docstring or a
string literal counts, exactly as in the original CVB design: a ``forbid``
pattern for ``import requests`` also fires on ``# we no longer import
requests``. Set ``ignore_comments_and_strings: true`` to match only against
code tokens: comments and string literals (docstrings included) are blanked
out first, offsets preserved, so evidence still points at the right column.
When the code cannot be tokenized the raw text is used, and a reason that
reports a match says so.

Patterns run under the ``regex`` module's ``timeout=``: a pattern that takes
longer than ``timeout_s`` on a text is a failed check with that reason, never a
hang.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from typing import Any, Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cvb_engine.checks.base import (
    MAX_EVIDENCE,
    CheckResult,
    Sibling,
    Span,
    Subject,
    register_check,
    span_from_offsets,
)

FLAG_VALUES: dict[str, int] = {
    "ignorecase": regex.IGNORECASE,
    "multiline": regex.MULTILINE,
    "dotall": regex.DOTALL,
    "verbose": regex.VERBOSE,
}
DEFAULT_TIMEOUT_S = 0.1


MAX_PATTERN_CHARS = 4000
MAX_REPEAT_WEIGHT = 5000
_COUNTED = re.compile(r"\{(\d+)(?:,(\d*))?\}")


def repeat_weight(pattern: str) -> int:
    """How many copies counted repeats expand to, multiplied along nesting.

    ``a{3}`` weighs 3, ``(a{3}){4}`` 12. A scan, not a parser: escapes and
    character classes are skipped, which is all the estimate needs.
    """
    frames = [1]  # the heaviest weight seen inside each open group
    last = 1  # the weight of the atom just before the current position
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            last = 1
            i += 2
            continue
        if ch == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "^":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            last = 1
            i = j + 1
            continue
        if ch == "(":
            frames.append(1)
            last = 1
        elif ch == ")":
            last = frames.pop() if len(frames) > 1 else 1
            frames[-1] = max(frames[-1], last)
        elif ch == "{":
            m = _COUNTED.match(pattern, i)
            if m:
                count = max(int(m.group(1)), int(m.group(2) or 0))
                last = last * max(count, 1)
                frames[-1] = max(frames[-1], last)
                i = m.end()
                continue
        else:
            last = 1
        i += 1
    return max(frames)


class Params(BaseModel):
    """Parameters of a ``regex`` check; exactly one of ``forbid`` and ``require``."""

    model_config = ConfigDict(extra="forbid")

    forbid: str | None = Field(default=None, description="a match is a violation")
    require: str | None = Field(default=None, description="no match is a violation")
    flags: list[Literal["ignorecase", "multiline", "dotall", "verbose"]] = Field(
        default_factory=list
    )
    scope: Literal["code", "response"] = Field(
        default="code", description="match against the extracted code or the whole response"
    )
    ignore_comments_and_strings: bool = Field(
        default=False, description="blank out comments and string literals before matching"
    )
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=5)

    @model_validator(mode="after")
    def _one_pattern(self) -> Params:
        if (self.forbid is None) == (self.require is None):
            raise ValueError("give exactly one of 'forbid' and 'require'")
        return self

    @field_validator("forbid", "require")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            if len(value) > MAX_PATTERN_CHARS:
                raise ValueError(f"pattern longer than {MAX_PATTERN_CHARS} characters")
            weight = repeat_weight(value)
            if weight > MAX_REPEAT_WEIGHT:
                # regex expands counted repeats at compile time: x{4294967294}
                # allocates gigabytes and ((x{255}){255}){255} compiles for minutes.
                raise ValueError(
                    f"counted repetition too large ({weight:,} copies when expanded; "
                    f"at most {MAX_REPEAT_WEIGHT:,}); use + or * instead"
                )
            try:
                regex.compile(value)
            except regex.error as exc:
                raise ValueError(f"pattern does not compile: {exc}") from None
            except (MemoryError, OverflowError, RecursionError) as exc:
                raise ValueError(f"pattern does not compile: {type(exc).__name__}") from None
        return value

    @property
    def pattern(self) -> str:
        return self.forbid if self.forbid is not None else str(self.require)

    def compiled(self) -> Any:
        flags = 0
        for name in self.flags:
            flags |= FLAG_VALUES[name]
        return regex.compile(self.pattern, flags)


# What the standard library's parser makes of a pattern (private, so looked up
# defensively: without it no pattern is read and blanking is never skipped).
try:
    _sre_parser: Any = importlib.import_module("re._parser")
    _sre: Any = importlib.import_module("re._constants")
    _SPACELESS_CATEGORIES = frozenset(
        {_sre.CATEGORY_DIGIT, _sre.CATEGORY_NOT_SPACE, _sre.CATEGORY_WORD}
    )
except (ImportError, AttributeError):  # pragma: no cover - another Python
    _sre_parser = None
# Syntax the regex module reads otherwise than re: POSIX classes, fuzzy counts.
_REGEX_ONLY = re.compile(r"\[:|\{\s*[A-Za-z]")
_RE_FLAGS = {
    "ignorecase": re.IGNORECASE,
    "multiline": re.MULTILINE,
    "dotall": re.DOTALL,
    "verbose": re.VERBOSE,
}


def blanking_cannot_add_a_match(params: Params) -> bool:
    """Whether every match of the pattern in blanked text is also a match in the text.

    Blanking turns the characters of comments and string literals into spaces
    (newlines kept), so a match that consumes no space, asserts nothing negative
    (no negative lookaround, ``\\B``, backreference or conditional) is made of
    characters the blanking left alone. Its ``\\b`` assertions hold in the text
    too: a blanked stretch starts with a quote, ``#`` or a string prefix after a
    non-word character, and ends with a quote or before a newline. For such a
    pattern, no match in the raw text means no match in the blanked text, and
    the blanking can be skipped. Patterns the standard parser does not read as
    the regex module does are never taken to be such.
    """
    if _sre_parser is None or _REGEX_ONLY.search(params.pattern):
        return False
    flags = 0
    for name in params.flags:
        flags |= _RE_FLAGS[name]
    try:
        parsed = _sre_parser.parse(params.pattern, flags)
    except Exception:  # re reads it otherwise (or not at all): assume nothing
        return False
    return _spaceless(parsed)


def _spaceless(items: Any) -> bool:
    """Whether a parsed (sub)pattern can neither consume a space nor assert a negation."""
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            ok = arg != 32
        elif name == "NOT_LITERAL":
            ok = arg == 32
        elif name == "IN":
            ok = all(_spaceless_member(str(kind), value) for kind, value in arg)
        elif name == "AT":
            ok = str(arg) != "AT_NON_BOUNDARY"
        elif name == "BRANCH":
            ok = all(_spaceless(branch) for branch in arg[1])
        elif name == "SUBPATTERN":
            ok = _spaceless(arg[3])
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            ok = _spaceless(arg[2])
        elif name == "ATOMIC_GROUP":
            ok = _spaceless(arg)
        elif name == "ASSERT":
            ok = _spaceless(arg[1])
        else:  # ANY, ASSERT_NOT, GROUPREF, GROUPREF_EXISTS, anything new
            ok = False
        if not ok:
            return False
    return True


def _spaceless_member(kind: str, value: Any) -> bool:
    if kind == "LITERAL":
        return bool(value != 32)
    if kind == "RANGE":
        return not value[0] <= 32 <= value[1]
    if kind == "CATEGORY":
        return value in _SPACELESS_CATEGORIES
    return False  # NEGATE and the rest


# One pass of the C regex engine finds every comment and string literal
# (prefixed, triple-quoted, with escapes). It is ~10x faster than the
# tokenize module, which matters when re-scoring 100,000 records. An
# unterminated triple-quoted string marks the code as untokenizable.
#
# Every alternative starts with its quote or "#", so the engine skips to those
# characters in C instead of trying the pattern at every position; the
# lookbehind after the quote accepts it when it follows 0, 1 or 2 prefix
# letters that themselves follow a non-word character (or the start), and the
# prefix is then blanked with the literal. This finds exactly the literals that
# "(?<!\w)[rRbBuUfF]{0,2}" before the quote would.
_PREFIX_LETTERS = "rRbBuUfF"
_L = f"[{_PREFIX_LETTERS}]"
_AFTER_PREFIX = rf"(?:(?<!\w.)|(?<={_L}.)(?<!\w{_L}.)|(?<={_L}{{2}}.)(?<!\w{_L}{{2}}.))"


def _quoted(quote: str, n: int) -> str:
    """Literals that open with ``quote``: triple-quoted, unterminated triple, one-line
    (``end``: its closing quote, absent when the line ends first)."""
    return (
        rf"{quote}{_AFTER_PREFIX}(?:(?P<t{n}>{quote * 2}[\s\S]*?{quote * 3})"
        rf"|(?P<open{n}>{quote * 2})|(?P<s{n}>(?:\\.|[^{quote}\\\n])*)(?P<end{n}>{quote})?)"
    )


# Matched at a quote or "#": the literal or comment that starts there, if any.
_COMMENT_OR_STRING = re.compile(_quoted("'", 1) + "|" + _quoted('"', 2) + r"|#(?P<c>[^\n]*)")
_OPENER = re.compile(r"[#'\"]")
_NOT_NEWLINE = re.compile(r"[^\n]")


def blank_comments_and_strings(code: str) -> str | None:
    """Return ``code`` with comments and string literals replaced by spaces.

    Newlines and offsets are kept so that spans found in the result are spans
    of the original. Returns None when the code cannot be tokenized (an
    unterminated triple-quoted string). A one-line literal whose line ends
    before it closes is not a literal: its quote is left as code and the scan
    goes on after it.

    The scan stays linear on a long line of such quotes (``\\'\\'\\'…``): every
    later quote of the same kind up to where the unclosed literal stops was
    escaped inside it, so a literal opening there cannot close either, and
    those quotes are passed over without another look to the end of the line.
    """
    pieces = []
    last = 0
    pos = 0
    # Per quote: the offset up to which that quote cannot open a closed literal.
    unclosed_until = {"'": -1, '"': -1}
    while (opener := _OPENER.search(code, pos)) is not None:
        start = opener.start()
        char = code[start]
        if char != "#" and start < unclosed_until[char]:
            pos = start + 1
            continue
        match = _COMMENT_OR_STRING.match(code, start)
        if match is None:  # a quote right after a name: not an opening quote
            pos = start + 1
            continue
        group = match.lastgroup or ""
        end = match.end()
        if group != "c":
            if group.startswith("open"):
                return None
            if group.startswith("s"):  # one-line, and the line ended first
                unclosed_until[char] = end
                pos = start + 1
                continue
            if start and code[start - 1] in _PREFIX_LETTERS:
                start -= 2 if start > 1 and code[start - 2] in _PREFIX_LETTERS else 1
        pieces.append(code[last:start])
        literal = code[start:end]
        pieces.append(_NOT_NEWLINE.sub(" ", literal) if "\n" in literal else " " * len(literal))
        last = pos = end
    pieces.append(code[last:])
    return "".join(pieces)


class PreparedRegex:
    """A ``regex`` check made ready: its compiled pattern, where the blanked text is
    kept in a subject's cache, and the verdict when nothing matches (results are
    immutable, so one object serves every record)."""

    __slots__ = ("absent", "compiled", "key", "params", "raw_first", "shared")

    def __init__(self, params: Params, siblings: Sequence[Sibling] = ()) -> None:
        self.params = params
        self.compiled = params.compiled()
        self.key = f"regex:blanked:{params.scope}"
        if params.forbid is not None:
            reason, passed = "forbidden pattern absent", True
        else:
            reason, passed = "required pattern not found", False
        self.absent = CheckResult(passed=passed, reason=reason, scope=params.scope)
        self.shared = (self.absent,)
        # No match in the raw text means none in the blanked text: try the raw first.
        self.raw_first = params.ignore_comments_and_strings and blanking_cannot_add_a_match(params)

    def _text_for(self, subject: Subject) -> tuple[str, str]:
        """The text to match and a note about how it was prepared."""
        params = self.params
        text = subject.text(params.scope)
        if not params.ignore_comments_and_strings:
            return text, ""
        cache = subject.cache
        key = self.key
        if key in cache:
            blanked = cache[key]
        else:
            blanked = cache[key] = blank_comments_and_strings(text)
        if blanked is None:
            return text, " (code not tokenizable: comments and strings were matched too)"
        return blanked, ""

    def run(self, subject: Subject) -> CheckResult:
        """Evaluate the check on ``subject``. Never raises on model output."""
        params, compiled, absent = self.params, self.compiled, self.absent
        if self.raw_first and self.key not in subject.cache:
            # Nothing in the raw text, nothing in the blanked text: no need to blank.
            try:
                if compiled.search(subject.text(params.scope), timeout=params.timeout_s) is None:
                    return absent
            except TimeoutError:
                pass  # decided on the blanked text, as any other pattern
        text, note = self._text_for(subject)
        spans: list[Span] = []
        try:
            for match in compiled.finditer(text, timeout=params.timeout_s):
                spans.append(span_from_offsets(text, match.start(), match.end()))
                if params.require is not None or len(spans) >= MAX_EVIDENCE:
                    break
        except TimeoutError:
            return CheckResult(
                passed=False,
                reason=f"pattern timed out after {params.timeout_s}s on this text{note}",
                scope=params.scope,
                timed_out=True,
            )
        if params.forbid is not None:
            if spans:
                lines = ", ".join(str(s.line) for s in spans[:5])
                return CheckResult(
                    passed=False,
                    reason=f"forbidden pattern matched at line {lines}{note}",
                    evidence=tuple(spans),
                    scope=params.scope,
                )
            return absent
        if spans:
            return CheckResult(
                passed=True,
                reason=f"required pattern found at line {spans[0].line}{note}",
                evidence=tuple(spans),
                scope=params.scope,
            )
        # Without a match the verdict is the same whether or not the text was blanked.
        return absent


@register_check(
    "regex",
    params=Params,
    prepare=PreparedRegex,
    description="A regular expression that must not (forbid) or must (require) match the code "
    "or the whole response; evaluated with a timeout.",
)
def run_regex(params: Params, subject: Subject) -> CheckResult:
    """Evaluate one regex check on one subject (prepared for it alone). Never raises on
    model output."""
    return PreparedRegex(params).run(subject)
