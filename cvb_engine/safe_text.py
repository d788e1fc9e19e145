"""Text from outside, made safe for the outputs people open.

Model names, server replies and error reasons, scenario and file names, run ids
and everything read from a results file or a store can hold bytes meant for
the program that displays them rather than for the reader. One function per
kind of output, used by every writer of that kind:

- :func:`write_csv` (:func:`csv_cell` for each cell): a spreadsheet does not
  run a cell as a formula (OWASP's CSV injection rule), nor split a row.
- :func:`terminal_text`: no escape sequence, control character or bidi
  override reaches a terminal; they are shown as ``\\x1b``, ``\\u202e``.
- :func:`markdown_text` / :func:`markdown_code`: a value in a Markdown report
  stays one piece of plain text: no raw HTML, link, image or broken table.

These make text inert for display. They do not sanitize text for any other use
(a shell, SQL, a file path); that is not what they are for.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

# --------------------------------------------------------------------------- CSV

#: OWASP: a spreadsheet reads a cell that starts with one of these as a formula.
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# a separator a spreadsheet may split on, spaces, then a formula's first character
_CSV_PIECE_FORMULA = re.compile(r"([,;\t][ ]*)(?=[=+\-@\r])")


def csv_cell(value: object) -> object:
    """``value`` as a CSV cell a spreadsheet shows as text, never runs.

    A text cell that starts with ``= + - @``, a tab or a carriage return gets a
    leading ``'`` (OWASP). Numbers the tool wrote as numbers (``int`` / finite
    ``float`` values, such as a latency or a token count) stay numeric even when
    negative: a spreadsheet reads ``-0.25`` as a number, not a formula. A string
    that looks like a number is still neutralized; only the type says a value
    is a number. ``None`` stays ``None`` (an empty cell).
    """
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    text = str(value)
    text = "'" + text if text.startswith(CSV_FORMULA_START) else text
    # A spreadsheet that splits cells on "," ";" or a tab (an import with another
    # separator) makes each piece a cell: a piece that would start a formula is neutralized
    # in place ("a;=1+1" -> "a;'=1+1").
    return _CSV_PIECE_FORMULA.sub(lambda m: m.group(1) + "'", text)


def csv_row(row: Mapping[str, Any]) -> dict[str, object]:
    """Every cell of ``row`` through :func:`csv_cell`."""
    return {key: csv_cell(value) for key, value in row.items()}


def write_csv(stream: TextIO, fieldnames: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """A header and ``rows`` (keys outside ``fieldnames`` are left out), every cell
    through :func:`csv_cell`.

    Lines end with ``\r\n`` (RFC 4180): the csv module quotes a cell holding a
    character of the line terminator, so with a bare ``\n`` terminator a
    carriage return inside a cell would be written unquoted, and a reader
    would start a new row there, whose first cell no one neutralized.
    """
    writer = csv.DictWriter(stream, fieldnames=fieldnames, lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(csv_row({name: row.get(name) for name in fieldnames}))


# --------------------------------------------------------------------------- terminal

# C0 controls (ESC among them), DEL, C1 controls (0x9b is CSI to some
# terminals), the bidi embeddings, overrides, isolates and marks that reorder
# what a line appears to say, and lone surrogates (undecodable bytes of a file
# name, which a surrogateescape stream would write back as raw bytes).
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_BLOCK = re.compile(f"[{_UNSAFE}]")  # keeps \t and \n
_UNSAFE_LINE = re.compile(f"[\t\n{_UNSAFE}]")


_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_text(text: object, *, multiline: bool = True) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``).

    Args:
        text: what is about to be printed (converted with ``str``).
        multiline: keep ``\\n`` and ``\\t`` as they are (a report, a message of
            several lines). ``False`` shows them too, for a value that must
            stay on its line (a name in a table, a run id).
    """
    pattern = _UNSAFE_BLOCK if multiline else _UNSAFE_LINE
    return pattern.sub(_visible, str(text))


# --------------------------------------------------------------------------- Markdown

_MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# What makes emphasis, code, links, images, table cells or math (Streamlit, GitHub).
_MD_SPECIAL = re.compile(r"([\\`*_~\[\]()!|$])")
_MD_HTML = re.compile(r"[&<>]")


# GitHub-flavoured Markdown (and other renderers that autolink) turns bare URLs
# (``http://``, ``https://``, ``ftp://``, ``www.``, ``mailto:``, ``xmpp:``) and e-mail
# addresses into links, and may look at text whose escapes are already resolved; a
# zero-width space after the scheme, ``www`` or the ``@`` of an address (one followed by
# a domain: ``memory@load=20`` is an arm, not an address) breaks what it looks for.
AUTOLINK = re.compile(
    r"(?i)(?<![a-z0-9])(https?|ftp|www|mailto|xmpp)(?=s?[:.])|(@)(?=[a-z0-9][a-z0-9_-]*\.[a-z0-9])"
)
ZWSP = "\u200b"


def unlinked(text: str) -> str:
    """``text`` with its bare URLs and e-mail addresses broken for autolinkers."""
    return AUTOLINK.sub(lambda m: m.group() + ZWSP, text)


def markdown_text(text: object) -> str:
    """``text`` as plain text inside Markdown: one line, one table cell.

    HTML metacharacters become entities (no raw HTML), the characters of
    links, images, code, emphasis, math and table cells are backslash-escaped,
    bare URLs and e-mail addresses are broken for autolinkers (:func:`unlinked`),
    and control characters, line breaks among them, are shown as escapes, so
    a value cannot end its cell or its line.
    """
    line = unlinked(terminal_text(text, multiline=False))
    line = _MD_SPECIAL.sub(r"\\\1", line)
    return _MD_HTML.sub(lambda m: _MD_ENTITIES[m.group()], line)


def markdown_code(text: object) -> str:
    """``text`` as an inline code span: shown verbatim, never parsed as Markdown or HTML.

    The fence is one backtick longer than the longest run of backticks inside,
    and control characters (line breaks among them) are shown as escapes. Not
    for a table cell: GitHub splits cells on a ``|`` even inside code.
    """
    line = terminal_text(text, multiline=False)
    longest = max((len(run) for run in re.findall(r"`+", line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") or not line.strip() else ""
    return f"{fence}{pad}{line}{pad}{fence}"
