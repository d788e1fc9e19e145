"""Extract the Python code from a model response.

Rules, in order:

1. Reasoning blocks (``<think>...</think>``) are dropped first: reasoning
   models emit them before the answer, and code sketched there is not the answer.
2. Fenced blocks (```` ``` ```` or ``~~~``, with or without a language tag) are
   collected. Blocks tagged ``python``/``py``/``python3`` win; when there are
   none, untagged blocks are used; blocks tagged with another language
   (``bash``, ``json``, ``text`` ...) are ignored. Several blocks are joined in
   order, separated by a blank line.
3. A final fence that is opened but never closed (a truncated response) yields
   everything after it.
4. With no fence at all the whole response is the code.
"""

from __future__ import annotations

import re

PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", "pycon", "ipython"})
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
# The info string keeps its leading blanks (the tag is read stripped): a separate
# [ \t]* before it could split a long run of blanks in as many ways as it is
# long, each tried to the end of the line when the line does not qualify.
_FENCE = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$", re.MULTILINE)


def _blocks(text: str) -> list[tuple[str, str]]:
    """Return (language tag, body) for every fenced block, closing a truncated last one."""
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            return blocks
        fence = opening.group("fence")
        tag = opening.group("info").strip().split(" ")[0].lower() if opening.group("info") else ""
        body_start = opening.end() + 1
        closing_re = re.compile(
            rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE
        )
        closing = closing_re.search(text, body_start) if body_start <= len(text) else None
        if closing is None:
            blocks.append((tag, text[body_start:]))
            return blocks
        blocks.append((tag, text[body_start : closing.start()]))
        pos = closing.end()


def extract_code(response: str) -> str:
    """The code a response offers, following the module's rules."""
    text = _THINK.sub("", response).replace("\r\n", "\n")
    blocks = _blocks(text)
    if not blocks:
        return text.strip("\n")
    chosen = [body for tag, body in blocks if tag in PYTHON_TAGS]
    if not chosen:
        chosen = [body for tag, body in blocks if tag == ""]
    return "\n\n".join(body.strip("\n") for body in chosen)
