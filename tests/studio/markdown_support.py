"""Reading what a Streamlit Markdown body shows, and checking that outside text stays inert.

AppTest hands back an element's Markdown *source*. ``shown`` resolves the
backslash escapes and zero-width breaks that ``studio.components.text.plain``
adds, which is what a reader sees; ``assert_inert`` checks the source itself:
no image, link, raw HTML or directive survives from a hostile string.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: What a hostile reply or error message tries: a remote image, a link, raw HTML.
HOSTILE = (
    "![x](http://evil.test/a.png) [click](http://evil.test) "
    "<img src=x onerror=alert(1)> <b>bold</b> :red[red] $x^2$"
)
# Source that would render as something other than its text: a construct whose
# opening character is not backslash-escaped, or a bare URL that GitHub-flavoured
# Markdown turns into a link once escapes are resolved.
DANGEROUS = tuple(
    re.compile(p)
    for p in (
        r"(?<!\\)!(?<!\\)\[",
        r"(?<!\\)\[click",
        r"(?<!\\)<img",
        r"(?<!\\)<b>",
        r"(?<!\\):red(?<!\\)\[",
        r"(?<!\\)\$x",
    )
)

_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def shown(markdown: str) -> str:
    """``markdown`` with CommonMark backslash escapes resolved and zero-width spaces dropped."""
    return _ESCAPE.sub(r"\1", markdown).replace("\u200b", "")


def assert_inert(bodies: Iterable[str], payload: str = HOSTILE, *, required: bool = True) -> None:
    """No Markdown body holds live Markdown; one shows ``payload`` literally (if ``required``)."""
    found = False
    for body in bodies:
        for pattern in DANGEROUS:
            assert not pattern.search(body), f"live Markdown {pattern.pattern!r} in {body!r}"
        resolved = _ESCAPE.sub(r"\1", body)  # what the autolinker sees
        assert "http://evil" not in resolved, f"a bare link in {body!r}"
        found = found or payload in shown(body)
    assert found or not required, f"{payload!r} is not shown anywhere"
