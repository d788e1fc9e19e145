"""Find the solution in a model reply, and say what kind of answer the reply is.

:func:`extract` returns an :class:`Extraction`: the solution code, the
reply's *outcome* (``answered``: code found and it parses; ``unparseable``:
code found, it does not parse; ``no-code``: nothing that is code) and the
inline reasoning it removed. The rules, in order:

1. **Reasoning is removed, never scored.** Closed pairs (``<think>…</think>``,
   ``<thinking>``, ``<reasoning>``, ``<reflection>``, ``[THINK]…[/THINK]``,
   ``◁think▷…◁/think▷``) are cut out. A lone closing tag with no opening (the
   chat template swallowed it) means that everything before it was
   reasoning. An opening tag never closed means the answer never began: the
   reply has no code, whatever the reasoning sketched. gpt-oss channel text
   keeps only its ``final`` channel, with the ``<|channel|>…<|message|>``
   markers or without them (``analysis…assistantfinal…``); an ``analysis``
   channel with no ``final`` one is an unclosed reasoning block. An API's
   separate reasoning field never reaches this module: the runner stores it
   on the record apart from the reply.
2. **Fences follow CommonMark**: ```` ``` ```` or ``~~~``, three or more, closed
   by a fence of the same character at least as long; a fence indented inside
   a list item loses that indentation from every line of its body; a last
   fence that is never closed (a truncated reply) runs to the end. The
   language is the first word of the info string, read through paths and
   attributes: ``python:app/x.py``, ``py title="x.py"``, ``{.python}``,
   ``app/x.py`` (by its suffix). Beyond CommonMark: a backtick fence glued to
   the last code line (``    return x```"``) or followed by text on its line
   (```` ```<end_code> ````) closes the block; a body whose every line is
   indented is read flush left.
3. **Some blocks are never Python, whatever their tag**: REPL transcripts
   (``>>>`` prompts), shell sessions (``$ `` prompts or lines such as ``pip
   install``), requirements files, and sample output (a block that does not
   parse, or whose statements are only bare values or ``name: value`` labels).
   Notebook ``!pip`` / ``%pip`` lines are dropped from a block that is
   otherwise Python. Blocks tagged with another language (``bash``, ``json``,
   ``text`` …) are not Python either; untagged blocks are Python when they parse
   as code, and not when they read as another language (C-family, SQL). A JSON
   object (raw, or a ``json`` / untagged block) carrying the program as a string
   under a code key (``{"code": ...}``, a tool call's ``arguments``, a list of
   ``{"path": "x.py", "content": ...}`` files, under a key or bare) gives that
   program, each named file headed by its ``# path.py`` line.
4. **The solution is chosen by structure, not position.** With the scenario's
   ``entry_point``, the solution is the block that defines it plus, transitively,
   the blocks that hold what it uses (imports, helpers, constants), the blocks
   named as files it imports (``python:app/settings.py`` for ``from
   app.settings import settings``) and the blocks that define something else of
   their own without calling or testing it (a second function the task asks
   for); blocks that only call it (usage, tests, demos) are left out. When several blocks
   define it, one introduced as a counter-example (``don't do this``,
   ``avoid``, ``bad``, ``before:`` …) or as an alternative (``alternatively``,
   ``another approach`` …) loses to one that is not, and one introduced as
   the final or fixed version wins. Without an entry point, or when no block
   defines it, the Python blocks, tagged and untagged, are joined in order,
   leaving out only the counter-examples. A solution of several blocks named as
   files keeps each name as a ``# path.py`` comment line (see
   :func:`file_sections`).
5. **Unfenced replies**: the code is the longest run of lines (counted in lines
   that hold code) that parses and holds a statement (a definition, an import,
   an assignment, a call …), not the prose around it; a run the reply abandons
   (``Sorry, let me try again``) is left out, imports and all. When no run
   parses, the longest run of code-like lines is the (unparseable) code.
6. **The outcome**: no solution, or one made only of bare values, is
   ``no-code``; otherwise ``answered`` or ``unparseable`` by ``ast.parse``.
7. **Truncated code** (see :func:`longest_prefix`): code that runs to the end of
   the reply and does not parse there is judged on its longest prefix of whole
   lines that parses, and the extraction says it was ``cut``; with the
   ``truncated`` flag (the endpoint stopped at its token limit) a last line cut
   in the middle is left out even when it parses, and without it only an error
   in the last lines counts as a cut. A prefix that lost every definition the
   code began is not taken.
   Scoring (:mod:`cvb_engine.scoring`) does not blame such code for what the
   cut may have taken away (a required call that may have come later).
8. **Sanitizing** (see :func:`sanitize`): ``code`` is the solution without the
   top-level statements the model did not mean as the solution (demos, prints,
   self-check asserts, the main guard), blanked so that line numbers hold;
   ``module`` is the solution whole, for constraints about module-level code.

Every rule works on text: nothing here executes the reply, and every scan is
bounded (no regular expression backtracks over a line more than once).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import json
import re
import textwrap
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Outcome = Literal["answered", "unparseable", "no-code"]
OUTCOMES: tuple[Outcome, ...] = ("answered", "unparseable", "no-code")

PYTHON_TAGS = frozenset(
    {"python", "py", "python3", "py3", "pycon", "ipython", "python2", "py2", "pyi", "sage"}
)
# Tags that say "this is not a program to score", whatever it holds.
_NOT_PYTHON_HINT = frozenset(
    {"pycon", "console", "shell", "sh", "bash", "zsh", "text", "txt", "output", "plaintext"}
)
_SUFFIX_TAGS = {".py": "python", ".pyi": "python", ".txt": "text", ".sh": "bash", ".toml": "toml"}

# --------------------------------------------------------------------------- reasoning

_PAIRS = (
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("<reflection>", "</reflection>"),
    ("[THINK]", "[/THINK]"),
    ("◁think▷", "◁/think▷"),
)
_HARMONY_MARK = re.compile(r"<\|(?:start|end|return|channel|message|call|constrain)\|>")
_HARMONY_MSG = re.compile(
    r"<\|channel\|>\s*(?P<channel>\w+)[^<]*?<\|message\|>(?P<body>.*?)"
    r"(?=<\|end\|>|<\|return\|>|<\|start\|>|<\|channel\|>|\Z)",
    re.DOTALL,
)
# gpt-oss text whose special tokens were dropped: "analysisWe need… assistantfinalHere…"
_BARE_ANALYSIS = re.compile(r"\A\s*(?:<\|start\|>\s*assistant\s*)?analysis(?=[A-Z\"'*`])")
_BARE_FINAL = "assistantfinal"


@dataclass(frozen=True)
class _Answer:
    text: str
    reasoning: str
    open_reasoning: bool  # a reasoning block began and never ended: no answer


def _strip_reasoning(text: str) -> _Answer:
    reasoning: list[str] = []
    if "<|channel|>" in text:
        finals = []
        for m in _HARMONY_MSG.finditer(text):
            if m.group("channel").lower() == "final":
                finals.append(m.group("body"))
            else:
                reasoning.append(m.group("body"))
        if not finals:
            return _Answer("", "\n".join(reasoning), open_reasoning=True)
        text = "\n".join(finals)
        text = _HARMONY_MARK.sub("", text)
    elif _BARE_ANALYSIS.match(text) or (
        _BARE_FINAL in text and text.lstrip().lower().startswith("analysis")
    ):
        at = text.rfind(_BARE_FINAL)
        if at < 0:
            return _Answer("", text, open_reasoning=True)
        reasoning.append(text[:at])
        text = text[at + len(_BARE_FINAL) :]
    lowered = text.lower()
    for opening, closing in _PAIRS:
        o, c = opening.lower(), closing.lower()
        if o not in lowered and c not in lowered:
            continue
        out: list[str] = []
        pos = 0
        first_open = lowered.find(o)
        first_close = lowered.find(c)
        if first_close >= 0 and (first_open < 0 or first_close < first_open):
            # A lone closing tag: what came before it was reasoning.
            reasoning.append(text[:first_close])
            pos = first_close + len(c)
        while True:
            start = lowered.find(o, pos)
            if start < 0:
                out.append(text[pos:])
                break
            out.append(text[pos:start])
            end = lowered.find(c, start + len(o))
            if end < 0:
                reasoning.append(text[start + len(o) :])
                answer = "".join(out)
                # Reasoning that never closed: there is an answer only if one
                # came before it (rare, but then it is the answer).
                return _Answer(answer, "\n".join(reasoning), open_reasoning=not answer.strip())
            reasoning.append(text[start + len(o) : end])
            pos = end + len(c)
        text = "".join(out)
        lowered = text.lower()
    return _Answer(text, "\n".join(r.strip("\n") for r in reasoning if r.strip()), False)


# --------------------------------------------------------------------------- fences

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$", re.MULTILINE)


@dataclass
class Block:
    """One fenced block: its language tag, its body, and the prose before it."""

    tag: str
    body: str
    intro: str
    start: int  # offset of the opening fence in the answer text
    end: int  # offset just past the closing fence (the text's end when unclosed)
    closed: bool = True
    kind: str = ""  # python | other | transcript | shell | requirements | output
    path: str = ""  # the file the block is said to be (``app/settings.py``), when it says


def _tag(info: str) -> str:
    info = info.strip()
    if not info:
        return ""
    if info.startswith("{"):
        m = re.search(r"\.([A-Za-z0-9_+-]+)", info)
        return m.group(1).lower() if m else ""
    word = re.split(r"[\s:{,;]", info, maxsplit=1)[0].lower()
    for suffix, tag in _SUFFIX_TAGS.items():
        if word.endswith(suffix) and len(word) > len(suffix):
            return "text" if word.endswith("requirements.txt") else tag
    if "/" in word:  # a path without a known suffix
        return ""
    return word.strip(".")


def _dedent(body: str, indent: int) -> str:
    if indent == 0:
        return body
    out = []
    for line in body.split("\n"):
        n = len(line) - len(line.lstrip(" "))
        out.append(line[min(n, indent) :])
    return "\n".join(out)


def _flush_left(body: str) -> str:
    """The body without the indentation all its lines share (a block pasted indented,
    or a method body shown alone): Python reads top-level code from column 0."""
    first = body.lstrip("\n")[:1]
    return textwrap.dedent(body) if first in (" ", "\t") else body


def _path(info: str, body: str) -> str:
    """The file a block says it is: a path in its info string (``python:app/x.py``,
    ``py title="app/x.py"``, ``app/x.py``) or in a first-line comment (``# app/x.py``)."""
    m = _INFO_PATH.search(info)
    if m is None:
        first = body.lstrip("\n").split("\n", 1)[0]
        m = _COMMENT_PATH.match(first)
    return m.group("path") if m else ""


_INFO_PATH = re.compile(r"(?P<path>[\w./-]*\w\.py)\b")
_COMMENT_PATH = re.compile(r"^\s*#\s*(?:file(?:name)?:\s*)?(?P<path>[\w./-]*\w\.py)\s*$", re.I)
# A line that ends a backtick block although CommonMark would not: the fence glued to the
# last code line (``    return x```") or followed by text (``"```<end_code>"``). What
# follows the fence must not read as a language tag (that line opens the next block).
_GLUED_CLOSE = re.compile(r"^(?P<code>.*[^`\s].*?)(?P<fence>`{3,})[ \t]*$")
_TRAILED_CLOSE = re.compile(r"^[ \t]*(?P<fence>`{3,})[ \t]*(?P<rest>[^`\s\w{.].*)$")
# ... or by a sentence: words with spaces, the first of them not a language's name.
_PROSE_CLOSE = re.compile(
    r"^[ \t]*(?P<fence>`{3,})[ \t]*(?!(?:python3?|py3?|pycon|ipython|json|bash|sh|shell|text|"
    r"console|yaml|toml|sql|javascript|js|typescript|ts|java|go|rust|c|cpp|csharp|html|"
    r"xml|diff|ini|output)\b)(?i:[a-z]+)[ ,]+[a-z]+[^`]*$",
    re.IGNORECASE,
)


def _closing(text: str, body_start: int, fence: str) -> tuple[int, int, int] | None:
    """Where the block opened by ``fence`` ends: (end of its body, end of the closing
    line, how the block closed: 0 a CommonMark fence, 1 a glued or trailed fence)."""
    closing_re = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
    proper = closing_re.search(text, body_start) if body_start <= len(text) else None
    if fence[0] != "`":
        return (proper.start(), proper.end(), 0) if proper else None
    stop = proper.start() if proper else len(text)
    pos = body_start
    # Only the lines before the first proper closing fence can hold an improper one;
    # scanning them is linear in the block.
    while pos < stop:
        nl = text.find("\n", pos, stop)
        line_end = stop if nl < 0 else nl
        line = text[pos:line_end]
        if "```" in line:
            glued = _GLUED_CLOSE.match(line)
            if (
                glued
                and len(glued.group("fence")) >= len(fence)
                and "`" not in glued.group("code").rstrip()[-1:]
            ):
                return pos + glued.start("fence"), line_end, 1
            trailed = _TRAILED_CLOSE.match(line) or _PROSE_CLOSE.match(line)
            if trailed and len(trailed.group("fence")) >= len(fence):
                return pos, line_end, 1
        if nl < 0:
            break
        pos = nl + 1
    return (proper.start(), proper.end(), 0) if proper else None


def _blocks(text: str) -> list[Block]:
    """Every fenced block, closing a truncated last one at the end of the text."""
    blocks: list[Block] = []
    pos = 0
    prose_from = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            return blocks
        fence = opening.group("fence")
        info = opening.group("info")
        if fence[0] == "`" and "`" in info:  # CommonMark: not a fence
            pos = opening.end()
            continue
        indent = len(opening.group("indent").expandtabs(4))
        body_start = opening.end() + 1
        closing = _closing(text, body_start, fence)
        intro = text[prose_from : opening.start()]
        if closing is None:
            body = _flush_left(_dedent(text[body_start:], indent))
            blocks.append(
                Block(
                    _tag(info),
                    body,
                    intro,
                    opening.start(),
                    len(text),
                    False,
                    "",
                    _path(info, body),
                )
            )
            return blocks
        body = _flush_left(_dedent(text[body_start : closing[0]], indent))
        blocks.append(
            Block(_tag(info), body, intro, opening.start(), closing[1], True, "", _path(info, body))
        )
        pos = closing[1]
        prose_from = pos


# --------------------------------------------------------------------------- what a block is

_REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9_,.-]+\])?"
    r"(\s*(==|>=|<=|~=|!=|>|<|===)\s*[A-Za-z0-9.*+!_-]+(\s*,\s*(==|>=|<=|~=|!=|>|<)\s*[A-Za-z0-9.*+!_-]+)*)?"
    r"(\s*;[^#]*)?\s*(#.*)?$"
)
_SHELL_WORDS = re.compile(
    r"^(\$|#\s*\$|>\s)|^(sudo\s+)?(pip3?|python3?\s+-m\s+pip|uv|poetry|conda|apt(-get)?|brew|npm|"
    r"yarn|pipx|export|cd|ls|mkdir|curl|wget|git|docker|chmod|source|pytest|python3?\s+\S+\.py)"
    r"(\s|$)"
)
_NOTEBOOK_MAGIC = re.compile(r"^[ \t]*[!%]")


# A reply's block is parsed to classify it, to choose the solution and to judge
# the outcome: the same text, so the last few parses are remembered (the trees
# are only read, never changed, by extraction and by the checks).
@functools.lru_cache(maxsize=32)
def _parses(code: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning on odd escapes in model code
            return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


_STATEMENTS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Import,
    ast.ImportFrom,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.If,
    ast.Try,
    ast.Return,
    ast.Raise,
    ast.Delete,
    ast.Global,
    ast.Nonlocal,
    ast.Assert,
    ast.Match,
)


def _meaningful(tree: ast.Module) -> bool:
    """Whether a parsed text holds a statement, not only bare values (``Done``, ``[1, 2]``)."""
    for node in tree.body:
        if isinstance(node, _STATEMENTS):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call | ast.Await):
            return True
    return False


def _classify(block: Block) -> str:
    lines = [ln for ln in block.body.split("\n") if ln.strip()]
    if not lines:
        return "output"
    first = lines[0].lstrip()
    if first.startswith(">>>") or block.tag == "pycon":
        return "transcript"
    if block.tag in PYTHON_TAGS or block.tag == "":
        pass
    elif block.tag in _NOT_PYTHON_HINT or block.tag:
        return "other"
    magic = [ln for ln in lines if _NOTEBOOK_MAGIC.match(ln)]
    if magic and len(magic) == len(lines):
        return "shell"
    shell_lines = all(
        _SHELL_WORDS.match(ln.lstrip()) or ln.lstrip().startswith("#") for ln in lines
    )
    if shell_lines and (
        not _parses(block.body) or any(ln.lstrip().startswith("$") for ln in lines)
    ):
        return "shell"
    if all(_REQUIREMENT.match(ln.strip()) for ln in lines):
        tree = _parses(block.body)
        if tree is None or not _meaningful(tree):
            return "requirements"
    code = _without_magic(block.body).strip("\n")  # as _from_blocks parses it
    tree = _parses(code)
    if tree is None:
        # A tagged block that does not parse is still the model's (broken) code;
        # an untagged one is output unless it reads like code, and another
        # language's code (C#, JavaScript, SQL …) is not Python at all.
        if block.tag in PYTHON_TAGS:
            return "python"
        if _foreign(lines):
            return "other"
        if _code_like_share(lines) >= 0.5:
            return "python"
        return "output"
    if not _meaningful(tree) or (block.tag == "" and _only_labels(tree)):
        return "output"
    return "python"


def _only_labels(tree: ast.Module) -> bool:
    """Sample output such as ``example.com: reachable`` parses as bare annotations."""
    return all(
        (isinstance(n, ast.AnnAssign) and n.value is None)
        or (isinstance(n, ast.Expr) and not isinstance(n.value, ast.Call | ast.Await))
        for n in tree.body
    )


# Lines that mark another language: C-family braces and semicolons, declarations of
# JavaScript / C# / Java / Go / Rust, preprocessor lines, and SQL statements.
_FOREIGN_LINE = re.compile(
    r"^\s*(?:[{}]\s*;?|}\s*(?:else|catch|finally)\b.*|.*[;{]\s*(?://.*)?|//.*|/\*.*|\*.*|"
    r"(?:using|namespace|package|public|private|protected|static|void|const|let|var|function|"
    r"func|fn|interface|struct|enum|impl|int|string|echo)\b.*|#include\b.*|<\?php.*|"
    r"(?:SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|FROM|WHERE|JOIN|LEFT|INNER|"
    r"VALUES|GROUP|ORDER|BEGIN|COMMIT)\b.*)$"
)
_PYTHON_LINE = re.compile(
    r"^\s*(?:(?:def|class|if|elif|for|while|with|try|except|async def)\b.*:\s*(?:#.*)?|"
    r"else:|finally:|(?:import|from)\s+\w.*|return\b.*|@\w.*)$"
)


def _foreign(lines: list[str]) -> bool:
    """Whether lines that do not parse as Python read as another language's code: most
    of them look like C-family or SQL lines and almost none like Python's own."""
    foreign = sum(bool(_FOREIGN_LINE.match(ln)) for ln in lines)
    # a ``return x;`` or ``if (x) {`` line is C-family's, though it starts as Python's would
    python = sum(
        bool(_PYTHON_LINE.match(ln)) and not ln.rstrip().endswith((";", "{")) for ln in lines
    )
    return foreign * 2 >= len(lines) and python * 5 <= len(lines)


def _without_magic(body: str) -> str:
    if "!" not in body and "%" not in body:
        return body
    return "\n".join(ln for ln in body.split("\n") if not _NOTEBOOK_MAGIC.match(ln))


_CODE_START = re.compile(
    r"^\s*(def |async def |class |import |from \S+ import|return\b|if |elif |else:|for |while |"
    r"with |async with |try:|except\b|finally:|raise\b|@|#|[A-Za-z_][\w.]*\s*(=|\+=|-=|\()|"
    r"[)\]}]|pass$|break$|continue$|yield\b|await\b)"
)


_STRONG_CODE = re.compile(
    r"^\s*(def |async def |class |import |from \S+ import |return\b|@\w|try:|except\b|"
    r"(if|elif|for|while|with|async with) .*:\s*(#.*)?$|[A-Za-z_][\w.]*(\[[^\]]*\])?\s*=[^=])"
)


def _code_like(line: str) -> bool:
    return bool(_CODE_START.match(line)) or line.startswith((" ", "\t"))


def _code_like_share(lines: list[str]) -> float:
    return sum(_code_like(ln) for ln in lines) / len(lines) if lines else 0.0


# --------------------------------------------------------------------------- choosing the solution

_REJECTED = re.compile(
    r"\b(don'?t|do not|never|avoid|bad|wrong|incorrect|insecure|unsafe|vulnerable|anti-?pattern|"
    r"not recommended|instead of|naive|problematic|what not to|has (a |two |several )?bugs?|"
    r"why not|tempting|pitfall|mistake|common error|gotcha|"
    r"(original|old|previous|first|buggy|broken) (version|code|implementation|attempt|draft)|"
    r"^\W*before)\b|❌|🚫",
    re.IGNORECASE | re.MULTILINE,
)
_ALTERNATIVE = re.compile(
    r"\b(alternative(ly)?|another (approach|option|way|version)|if you prefer|you could also|"
    r"or,? if|optionally|variant|simpler version|less robust|without \w+ you)\b",
    re.IGNORECASE,
)
_PREFERRED = re.compile(
    r"\b(final|updated|improved|fixed|corrected|complete|full|refactored|recommended|better|"
    r"after|correct|secure|safe)\b|✅",
    re.IGNORECASE,
)
_USAGE = re.compile(
    r"(^|\n)\W*(example usage|usage|example|examples|demo|sample run|quick test|try it|"
    r"how to use( it)?|to use it|you can (use|call) (it|this)|for example|calling it)\b[^\n]*$",
    re.IGNORECASE,
)
_INTRO_CHARS = 240
_BUILTINS = frozenset(dir(builtins))


_HEADING = re.compile(r"^[ \t]*(?:#{1,6}[ \t]+.+|\*\*[^*\n]+\*\*:?)[ \t]*$", re.MULTILINE)


def _intro_tail(intro: str) -> str:
    """The prose just before a block: its last paragraph (at most a few lines), led
    by the heading of its section when one stands between it and the block before."""
    tail = intro.strip()[-_INTRO_CHARS:]
    paragraphs = re.split(r"\n\s*\n", tail)
    last = paragraphs[-1] if paragraphs else ""
    headings = _HEADING.findall(intro)
    if headings and headings[-1].strip() not in last:
        return f"{headings[-1].strip()}\n{last}"
    return last


def _stance(block: Block) -> str:
    """``rejected`` | ``alternative`` | ``preferred`` | ``plain``, from the prose before a block."""
    intro = _intro_tail(block.intro)
    # "Instead of X, do Y:" introduces the good version: judge the last clause.
    last = re.split(r"[,;:—–]\s*(?=[^,;:—–]*$)", intro)[-1] if intro else ""
    if _PREFERRED.search(last) and not _REJECTED.search(last):
        return "preferred"
    if _REJECTED.search(intro) and not _PREFERRED.search(last):
        return "rejected"
    if _ALTERNATIVE.search(intro):
        return "alternative"
    if _USAGE.search(intro):
        return "usage"
    if _PREFERRED.search(intro):
        return "preferred"
    return "plain"


def _defines(tree: ast.Module, name: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Assign):  # fetch_json = functools.partial(...)
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    return True
    return False


def _top_bindings(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
    return names


def _used(tree: ast.Module) -> set[str]:
    """Names the code reads but binds nowhere (what another block would have to provide)."""
    loaded: set[str] = set()
    bound: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            (loaded if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(n.name)
        elif isinstance(n, ast.alias):
            bound.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
    return loaded - bound - _BUILTINS


@dataclass
class _Candidate:
    block: Block
    code: str
    tree: ast.Module | None
    stance: str


def _select(candidates: list[_Candidate], entry_point: str | None) -> list[_Candidate]:
    if not candidates:
        return []
    if entry_point:
        defining = [c for c in candidates if c.tree is not None and _defines(c.tree, entry_point)]
        if defining:
            chosen = _choose_definition(defining)
            return _with_dependencies(chosen, candidates, entry_point)
    # Joined in order, tagged and untagged Python alike, and a block the reply
    # itself rejects is left out (unless nothing else is left).
    pool = candidates
    kept = [c for c in pool if c.stance != "rejected"] or pool[-1:]
    # A block introduced as usage that defines nothing is a demo of the solution.
    solution = [c for c in kept if not (c.stance == "usage" and not _defines_any(c.tree))]
    return solution or kept


def _defines_any(tree: ast.Module | None) -> bool:
    return tree is not None and any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in tree.body
    )


def _choose_definition(defining: list[_Candidate]) -> _Candidate:
    for stance in ("preferred", "plain", "alternative"):
        found = [c for c in defining if c.stance == stance]
        if found:
            # Several "final" versions: the last one is the most final.
            return found[-1] if stance == "preferred" else found[0]
    return defining[-1]


def _with_dependencies(
    chosen: _Candidate, candidates: list[_Candidate], entry_point: str
) -> list[_Candidate]:
    assert chosen.tree is not None
    needed = _used(chosen.tree) - _top_bindings(chosen.tree)
    included = [chosen]
    pool = [
        c
        for c in candidates
        if c is not chosen
        and c.tree is not None
        and c.stance != "rejected"
        and not _defines(c.tree, entry_point)
    ]
    # Sibling definitions: a task that asks for two functions may get them in two
    # blocks. A block that defines something of its own, neither calls nor tests
    # the entry point and is not offered as an alternative or a demo belongs to
    # the solution.
    for c in pool:
        if (
            c.stance in ("plain", "preferred")
            and _defines_any(c.tree)
            and c.tree is not None
            and not _is_usage(c.tree, entry_point)
        ):
            included.append(c)
            needed |= _used(c.tree) - _top_bindings(c.tree)
    needed -= set().union(*(_top_bindings(c.tree) for c in included if c.tree is not None))
    changed = True
    while changed:
        changed = False
        imported = set().union(*(_imported_modules(c.tree) for c in included if c.tree))
        for c in pool:
            if c in included or c.tree is None:
                continue
            provides = _top_bindings(c.tree) & needed
            # A solution split over files: the module imports the block that is its
            # settings (``from app.settings import settings``), named by its path.
            if (provides or _is_imported(c.block.path, imported)) and not _is_usage(
                c.tree, entry_point
            ):
                included.append(c)
                needed = (needed - _top_bindings(c.tree)) | (_used(c.tree) - _top_bindings(c.tree))
                changed = True
    return sorted(included, key=lambda c: c.block.start)


def _imported_modules(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom | ast.Import):  # also ``from . import settings``
            names.update(a.name for a in node.names)
    return names


def _is_imported(path: str, imported: set[str]) -> bool:
    """Whether the file at ``path`` is one of the ``imported`` modules (by its dotted
    path, or its last parts: ``app/settings.py`` is ``app.settings`` and ``settings``)."""
    if not path or not imported:
        return False
    parts = path.removesuffix(".pyi").removesuffix(".py").replace("\\", "/").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    parts = [p for p in parts if p not in ("", ".", "src")]
    dotted = {".".join(parts[i:]) for i in range(len(parts))}
    return bool(dotted & imported)


def _is_usage(tree: ast.Module, entry_point: str) -> bool:
    """A block that calls the entry point or tests it: it uses, it does not provide."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == entry_point
        ):
            return True
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            return True
    return False


# --------------------------------------------------------------------------- unfenced replies

_MAX_TRIM = 12


def _unfenced(text: str, entry_point: str | None = None) -> str:
    lines = text.split("\n")
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for i, line in enumerate(lines):
        code = bool(line.strip()) and (_code_like(line) or not _prose(line))
        blank = not line.strip()
        if code or (blank and start is not None):
            if start is None:
                start = i
        else:
            if start is not None:
                runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(lines)))
    parsed: list[_Candidate] = []
    fallback = ""
    for a, b in runs:
        while b > a and not lines[b - 1].strip():
            b -= 1
        found = _longest_parsing(lines, a, b)
        if found is not None:
            run_code = textwrap.dedent("\n".join(lines[found[0] : found[1]]))
            block = Block("python", run_code, "\n".join(lines[:a]), found[0], found[1])
            parsed.append(_Candidate(block, run_code, _parses(run_code), "plain"))
        elif not parsed:
            chunk = lines[a:b]
            strong = sum(bool(_STRONG_CODE.match(ln)) for ln in chunk)
            if strong >= 2 and len(chunk) > len(fallback.split("\n")):
                fallback = "\n".join(chunk)
    if not parsed:
        return fallback
    # A run the reply abandons ("Sorry, let me try again") is not offered any more:
    # its imports are not pulled in with the next attempt.
    for i, c in enumerate(parsed[1:]):
        between = "\n".join(lines[parsed[i].block.end : c.block.start])
        if _RETRY.search(between):
            for earlier in parsed[: i + 1]:
                earlier.stance = "rejected"
    offered = [c for c in parsed if c.stance != "rejected"] or parsed[-1:]
    # The longest run (in lines that hold code) is the solution, or the one defining
    # the entry point, with the runs that hold what it uses: an import set apart by prose.
    defining = [c for c in offered if entry_point and c.tree and _defines(c.tree, entry_point)]
    chosen = defining[0] if defining else max(offered, key=lambda c: _code_lines(c.code))
    kept = _with_dependencies(chosen, parsed, entry_point or "")
    return "\n\n".join(c.code for c in kept)


_RETRY = re.compile(
    r"\b(sorry|apolog(y|ies|i[sz]e)|my (mistake|bad)|oops|let me (try|fix|correct|redo|rewrite|"
    r"reconsider|start over)|try(ing)? again|that('s| is| was) (wrong|incorrect|not right)|"
    r"that (won't|will not|doesn't|does not) work|scratch that|correction|on second thought|"
    r"made an? (mistake|error)|(corrected|revised|fixed) (version|code)|wait[,!.])",
    re.IGNORECASE,
)


def _code_lines(code: str) -> int:
    return sum(1 for ln in code.split("\n") if ln.strip())


def _prose(line: str) -> bool:
    """A line of prose: not indented, not the start of a statement, and not Python alone."""
    return not _code_like(line) and _parses(line.strip()) is None


def _longest_parsing(lines: list[str], a: int, b: int) -> tuple[int, int] | None:
    """The longest sub-run of lines[a:b] that parses as meaningful code, trimming at most a
    few lines from either end (bounded work on any reply)."""
    best: tuple[int, int] | None = None
    for trim_end in range(min(_MAX_TRIM, b - a)):
        for trim_start in range(min(_MAX_TRIM, b - a - trim_end)):
            lo, hi = a + trim_start, b - trim_end
            if best is not None and hi - lo <= best[1] - best[0]:
                break
            tree = _parses(textwrap.dedent("\n".join(lines[lo:hi])))
            if tree is not None and _meaningful(tree):
                best = (lo, hi)
                break
    return best


# --------------------------------------------------------------------------- the entry points


@dataclass(frozen=True)
class Extraction:
    """What a reply offers: the solution, its outcome and the reasoning that was removed.

    ``module`` is the code the reply offers as its solution, whole; ``code`` is the same
    code sanitized (see :func:`sanitize`: demos, prints, self-checks and the main guard
    blanked out, line numbers kept), what checks read unless a constraint is about
    module-level code. ``cut`` says the code ended where the reply was cut off, so it was
    judged on its longest prefix that parses.
    """

    code: str
    outcome: Outcome
    reasoning: str | None = None
    answer: str = ""  # the reply without its reasoning (what ``scope: response`` checks read)
    # The parsed solution when it parses (scoring reuses it rather than parse again).
    tree: ast.Module | None = field(default=None, repr=False, compare=False)
    module: str = ""
    cut: bool = False
    module_tree: ast.Module | None = field(default=None, repr=False, compare=False)


def extract(
    response: str, entry_point: str | None = None, *, truncated: bool = False
) -> Extraction:
    """The solution of ``response`` and its outcome, following the module's rules.

    ``truncated``: the endpoint stopped the reply at its token limit, so code that does
    not parse is judged on its longest prefix that does (rule 7).
    """
    text = response.replace("\r\n", "\n").replace("\r", "\n")
    stripped = _strip_reasoning(text)
    reasoning = stripped.reasoning or None
    if stripped.open_reasoning:
        return Extraction("", "no-code", reasoning, "")
    answer = stripped.text
    blocks = _blocks(answer)
    runs_to_end = not blocks or not blocks[-1].closed
    if blocks:
        code = _from_blocks(blocks, entry_point)
        if not code.strip():
            # Fences held nothing Python: code may still sit in the prose.
            outside = _outside_blocks(answer, blocks)
            code = _unfenced(outside, entry_point)
    else:
        inner = _json_code(answer) if answer.lstrip().startswith(("{", "[")) else None
        code = inner if inner is not None else _unfenced(answer, entry_point)
    code = code.strip("\n")
    tree = _parses(code) if code.strip() else None
    cut = False
    # The code ends where the reply does: an unfenced run at its end, or the last block,
    # never closed, as the last part of the solution.
    tail = blocks[-1].body.strip() if blocks else answer.strip()
    at_end = bool(code.strip()) and runs_to_end and bool(tail) and code.rstrip().endswith(tail)
    # Cut at the token limit in the middle of a line: that line is not a whole statement,
    # even when what is left of it parses (``time.sle``).
    partial = truncated and at_end and not text.endswith("\n") and "\n" in code.strip()
    if (tree is None or partial) and at_end:
        # The code runs to the end of the reply and does not parse there: the reply was
        # cut off (or ends inside its last statement). What was written is judged.
        prefix = longest_prefix(code, partial_last_line=partial, only_near_end=not truncated)
        if prefix is not None:
            code, tree, cut = prefix[0], prefix[1], True
    outcome = outcome_from(code, tree)
    if tree is None or outcome != "answered":
        return Extraction(code, outcome, reasoning, answer, tree, code, cut, tree)
    solution, solution_tree = sanitize(code, tree, entry_point)
    return Extraction(solution, outcome, reasoning, answer, solution_tree, code, cut, tree)


# --------------------------------------------------------------------------- truncated code

_MAX_PREFIX_TRIES = 64
_DEF_LINE = re.compile(r"^(?:async[ \t]+)?(?:def|class)[ \t]+\w", re.MULTILINE)


def longest_prefix(
    code: str, *, partial_last_line: bool = False, only_near_end: bool = False
) -> tuple[str, ast.Module] | None:
    """The longest prefix of whole lines of ``code`` that parses as meaningful code, or None.

    ``partial_last_line``: the last line was cut in the middle (the reply stopped at its
    token limit), so it is left out even when what remains of it parses (``time.sle``).
    ``only_near_end``: give up unless the code fails to parse in its last lines (an error
    earlier is the model's, not a cut). Each try starts before the line the parser blamed,
    so the work is a few parses, bounded.
    """
    lines = code.split("\n")
    hi = len(lines) - 1 if partial_last_line and len(lines) > 1 else len(lines)
    for attempt in range(_MAX_PREFIX_TRIES):
        while hi > 0 and not lines[hi - 1].strip():
            hi -= 1
        if hi <= 0:
            return None
        text = "\n".join(lines[:hi])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except SyntaxError as exc:
            blamed = exc.lineno or hi
            if only_near_end and attempt == 0 and blamed < hi - 1:
                return None
            # The statement holding the error starts at or before the blamed line.
            hi = min(hi - 1, max(blamed, 1)) if blamed >= hi else min(hi - 1, blamed - 1)
            continue
        except (ValueError, RecursionError, MemoryError, OverflowError):
            return None
        # A prefix that lost every definition the code began (cut in the first
        # signature) is not what the reply offered: it stays unparseable.
        if not _meaningful(tree) or (_DEF_LINE.search(code) and not _defines_any(tree)):
            return None
        return text, tree
    return None


# --------------------------------------------------------------------------- sanitizing

_MAIN_GUARD = ("__main__", "__name__")
_PRINTS = frozenset({"print", "pprint", "pp", "display"})


def sanitize(code: str, tree: ast.Module, entry_point: str | None = None) -> tuple[str, ast.Module]:
    """The solution without what the model did not mean as the solution (rule 8).

    Left out, statement by statement at the top level: ``if __name__ == "__main__":``
    blocks; ``assert`` self-checks; ``print(...)`` demos and calls of what the code
    itself defines (the entry point, ``main()``, ``asyncio.run(main())``), with loops
    and ``with``/``try`` blocks made only of those; assignments of such a call that no
    definition reads (``result = solve(data)``); bare names and values echoed as in a
    notebook; and an earlier, undecorated definition of a name defined again (Python
    keeps the last). Imports, definitions and every other top-level statement (constants,
    configuration, loggers, registrations) stay, and code that defines nothing is a
    script whose statements are the solution. The dropped lines are blanked, so line
    numbers still point into the whole code. Returns ``code`` and ``tree`` themselves
    when nothing is dropped.
    """
    body = tree.body
    # Most solutions are imports and definitions only: one cheap pass tells.
    defined: set[str] = set()
    others = duplicate = False
    for node in body:
        kind = type(node)
        if kind is ast.Import or kind is ast.ImportFrom:
            continue
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
            name = node.name  # type: ignore[attr-defined]
            duplicate = duplicate or name in defined
            defined.add(name)
        else:
            others = True
    if not defined or not (others or duplicate):
        return code, tree  # a script (its statements are the solution), or nothing to drop
    if entry_point:
        defined.add(entry_point)
    drop: list[ast.stmt] = []
    assigns: list[ast.Assign | ast.AnnAssign] = []
    last_def: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            earlier = last_def.get(node.name)
            if (
                earlier is not None
                and not node.decorator_list
                and not getattr(earlier, "decorator_list", ())
            ):
                drop.append(earlier)
            last_def[node.name] = node
        elif _is_main_guard(node) or _is_demo(node, defined):
            drop.append(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and _calls_defined(node.value, defined):
            assigns.append(node)
    if assigns:
        read = _names_read(n for n in body if n not in assigns and n not in drop)
        for node in assigns:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = {t.id for tgt in targets for t in ast.walk(tgt) if isinstance(t, ast.Name)}
            if bound and not bound & read:
                drop.append(node)
    if not drop:
        return code, tree
    lines = code.split("\n")
    for node in drop:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        last = node.end_lineno or node.lineno
        for i in range(first - 1, min(last, len(lines))):
            lines[i] = ""
    dropped = {id(n) for n in drop}
    kept = ast.Module(body=[n for n in body if id(n) not in dropped], type_ignores=[])
    return "\n".join(lines).rstrip("\n"), kept


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    sides = [node.test.left, *node.test.comparators]
    names = {s.id for s in sides if isinstance(s, ast.Name)}
    values = {s.value for s in sides if isinstance(s, ast.Constant)}
    return "__name__" in names and "__main__" in values


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and func.attr in ("pprint", "pp"):
        return func.attr
    return None


def _calls_defined(value: ast.expr | None, defined: set[str]) -> bool:
    """Whether ``value`` is (or awaits) a call of something the code defines, or of a
    method of such a call's result (``Solution().solve(...)``)."""
    while isinstance(value, ast.Await):
        value = value.value
    if not isinstance(value, ast.Call):
        return False
    for sub in ast.walk(value):
        if isinstance(sub, ast.Call) and _called_name(sub) in defined:
            return True
    return False


def _is_demo(node: ast.stmt, defined: set[str]) -> bool:
    """A top-level statement that only shows, runs or tests what the code defines."""
    if isinstance(node, ast.Assert | ast.Pass):
        return True
    if isinstance(node, ast.Expr):
        value = node.value
        if isinstance(value, ast.Constant):
            return False  # a docstring or a stray string: harmless, kept
        if isinstance(value, ast.Await):
            value = value.value
        if isinstance(value, ast.Call):
            return _called_name(value) in _PRINTS or _calls_defined(value, defined)
        # a bare name or expression echoed as in a notebook
        return isinstance(value, ast.Name | ast.Attribute | ast.Subscript | ast.Compare)
    if isinstance(node, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith | ast.Try):
        inner = [*node.body, *getattr(node, "orelse", ()), *getattr(node, "finalbody", ())]
        for handler in getattr(node, "handlers", ()):
            inner.extend(handler.body)
        return bool(inner) and all(
            _is_demo(n, defined) or (isinstance(n, ast.Assign) and _calls_defined(n.value, defined))
            for n in inner
        )
    return False


def file_sections(code: str) -> list[tuple[str, int, int]]:
    """The files a solution split over files is made of: (path, first line, last line),
    1-based, each starting at a comment line naming it (``# app/settings.py``) at the top
    level; empty when the code names no file."""
    if ".py" not in code:
        return []
    heads = [
        (m.group("path"), code.count("\n", 0, m.start()) + 1) for m in _FILE_HEAD.finditer(code)
    ]
    total = code.count("\n") + 1
    return [
        (path, line, (heads[i + 1][1] - 1) if i + 1 < len(heads) else total)
        for i, (path, line) in enumerate(heads)
    ]


_FILE_HEAD = re.compile(
    r"^#[ \t]*(?:file(?:name)?:[ \t]*)?(?P<path>[\w./-]*\w\.py)[ \t]*$", re.MULTILINE | re.I
)


def without_files(code: str, tree: ast.Module, paths: Iterable[str]) -> tuple[str, ast.Module]:
    """``code`` with the files named by ``paths`` blanked out (a path matches a file
    whose path equals it or ends with ``/`` + it, either way round); ``code`` and ``tree``
    themselves when no such file is in it."""
    wanted = [p.strip("/") for p in paths]
    ranges = [
        (first, last)
        for path, first, last in file_sections(code)
        if any(path == w or path.endswith("/" + w) or w.endswith("/" + path) for w in wanted)
    ]
    if not ranges:
        return code, tree
    lines = code.split("\n")
    for first, last in ranges:
        for i in range(first - 1, last):
            lines[i] = ""
    kept = [n for n in tree.body if not any(first <= n.lineno <= last for first, last in ranges)]
    return "\n".join(lines), ast.Module(body=kept, type_ignores=[])


def _names_read(nodes: Iterable[ast.stmt]) -> set[str]:
    read: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                read.add(sub.id)
            elif isinstance(sub, ast.Global | ast.Nonlocal):
                read.update(sub.names)
    return read


def outcome_from(code: str, tree: ast.Module | None) -> Outcome:
    """The outcome of ``code`` given its parse (None: it does not parse)."""
    if not code.strip():
        return "no-code"
    if tree is None:
        return "unparseable"
    return "answered" if _meaningful(tree) else "no-code"


# Keys under which structured replies carry the program (``{"code": "..."}``, tool-call
# arguments, ``{"files": [{"path": ..., "content": ...}]}``), in order of preference.
_CODE_KEYS = ("code", "python", "python_code", "solution", "source", "program", "content", "answer")


def _json_code(text: str) -> str | None:
    """The Python program a JSON object carries as a string, or None (not JSON, or no
    string in it under a code key that parses as code)."""
    try:
        data = json.loads(text.strip())
    except (ValueError, RecursionError):
        return None
    found: list[str] = []
    _collect_code(data, found, 0)
    return "\n\n".join(found) if found else None


def _collect_code(value: object, found: list[str], depth: int) -> None:
    if depth > 6:
        return
    if isinstance(value, list):
        for item in value[:32]:
            _collect_code(item, found, depth + 1)
        return
    if not isinstance(value, dict):
        return
    if isinstance(value.get("arguments"), str):  # a tool call's arguments, as JSON text
        with contextlib.suppress(ValueError, RecursionError):
            value = {**value, "arguments": json.loads(value["arguments"])}
    for key in _CODE_KEYS:
        text = value.get(key)
        if isinstance(text, str) and "```" in text:  # a fenced block inside the string
            text = "\n\n".join(b.body for b in _blocks(text) if b.tag in PYTHON_TAGS | {""})
        if isinstance(text, str) and text.strip():
            path = value.get("path") or value.get("filename") or value.get("file") or ""
            if isinstance(path, str) and path and not path.endswith((".py", ".pyi")):
                return  # a file the reply names, not a Python one
            tree = _parses(text.strip("\n"))
            if tree is not None and _meaningful(tree):
                code = text.strip("\n")
                if (
                    isinstance(path, str)
                    and path
                    and not _COMMENT_PATH.match(code.split("\n", 1)[0])
                ):
                    # the file keeps its name, as a solution split over named blocks does
                    # (see file_sections), so a constraint about the pair can tell them apart
                    code = f"# {path}\n{code}"
                found.append(code)
                return
    for key, item in value.items():
        if key not in _CODE_KEYS and isinstance(item, dict | list):
            _collect_code(item, found, depth + 1)


def _outside_blocks(text: str, blocks: Iterable[Block]) -> str:
    """The reply with every fenced block cut out (their bodies are judged already)."""
    out, pos = [], 0
    for block in blocks:
        out.append(text[pos : block.start])
        pos = block.end
    out.append(text[pos:])
    return "\n".join(out)


def _from_blocks(blocks: list[Block], entry_point: str | None) -> str:
    candidates: list[_Candidate] = []
    for block in blocks:
        # an object, or a list of them (files: [{"path": "app/x.py", "content": ...}, ...])
        if block.tag in ("json", "jsonc", "") and block.body.lstrip().startswith(("{", "[")):
            inner = _json_code(block.body)
            if inner is not None:
                block.body, block.tag = inner, "python"
        block.kind = _classify(block)
        if block.kind != "python":
            continue
        code = _without_magic(block.body).strip("\n")
        candidates.append(_Candidate(block, code, _parses(code), _stance(block)))
    chosen = _select(candidates, entry_point)
    if len(chosen) > 1:
        # A solution split over files: the file each block is, named in its fence,
        # stays with its code as a comment line, so that scoring reads the files
        # from the code alone (see file_sections).
        return "\n\n".join(
            f"# {c.block.path}\n{c.code}"
            if c.block.path and not _COMMENT_PATH.match(c.code.split("\n", 1)[0])
            else c.code
            for c in chosen
        )
    return "\n\n".join(c.code for c in chosen)


def extract_code(response: str, entry_point: str | None = None) -> str:
    """The solution code of ``response``, sanitized (empty when it has none)."""
    return extract(response, entry_point).code
