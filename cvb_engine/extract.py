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
   ``app/x.py`` (by its suffix).
3. **Some blocks are never Python, whatever their tag**: REPL transcripts
   (``>>>`` prompts), shell sessions (``$ `` prompts or lines such as ``pip
   install``), requirements files, and sample output (a block that does not
   parse, or whose statements are only bare values). Notebook ``!pip`` /
   ``%pip`` lines are dropped from a block that is otherwise Python.
   Blocks tagged with another language (``bash``, ``json``, ``text`` …) are
   not Python either; untagged blocks are Python when they parse as code.
4. **The solution is chosen by structure, not position.** With the scenario's
   ``entry_point``, the solution is the block that defines it plus, transitively,
   the blocks that hold what it uses (imports, helpers, constants) and the
   blocks that define something else of their own without calling or testing
   it (a second function the task asks for); blocks that only call it (usage,
   tests, demos) are left out. When several blocks
   define it, one introduced as a counter-example (``don't do this``,
   ``avoid``, ``bad``, ``before:`` …) or as an alternative (``alternatively``,
   ``another approach`` …) loses to one that is not, and one introduced as
   the final or fixed version wins. Without an entry point, or when no block
   defines it, the Python blocks are joined in order, leaving out only the
   counter-examples.
5. **Unfenced replies**: the code is the longest run of lines that parses and
   holds a statement (a definition, an import, an assignment, a call …), not
   the prose around it. When no run parses, the longest run of code-like lines
   is the (unparseable) code.
6. **The outcome**: no solution, or one made only of bare values, is
   ``no-code``; otherwise ``answered`` or ``unparseable`` by ``ast.parse``.

Every rule works on text: nothing here executes the reply, and every scan is
bounded (no regular expression backtracks over a line more than once).
"""

from __future__ import annotations

import ast
import builtins
import functools
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
        closing_re = re.compile(
            rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE
        )
        closing = closing_re.search(text, body_start) if body_start <= len(text) else None
        intro = text[prose_from : opening.start()]
        if closing is None:
            body = text[body_start:]
            blocks.append(
                Block(_tag(info), _dedent(body, indent), intro, opening.start(), len(text), False)
            )
            return blocks
        body = text[body_start : closing.start()]
        blocks.append(
            Block(_tag(info), _dedent(body, indent), intro, opening.start(), closing.end())
        )
        pos = closing.end()
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
        # an untagged one is output unless it reads like code.
        if block.tag in PYTHON_TAGS or _code_like_share(lines) >= 0.5:
            return "python"
        return "output"
    if not _meaningful(tree):
        return "output"
    return "python"


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
    # Joined in order: blocks tagged Python win over untagged ones, and a block
    # the reply itself rejects is left out (unless nothing else is left).
    tagged = [c for c in candidates if c.block.tag in PYTHON_TAGS]
    pool = tagged or candidates
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
    while changed and needed:
        changed = False
        for c in pool:
            if c in included or c.tree is None:
                continue
            provides = _top_bindings(c.tree) & needed
            if provides and not _is_usage(c.tree, entry_point):
                included.append(c)
                needed = (needed - _top_bindings(c.tree)) | (_used(c.tree) - _top_bindings(c.tree))
                changed = True
    return sorted(included, key=lambda c: c.block.start)


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
            block = Block("python", run_code, "", found[0], found[1])
            parsed.append(_Candidate(block, run_code, _parses(run_code), "plain"))
        elif not parsed:
            chunk = lines[a:b]
            strong = sum(bool(_STRONG_CODE.match(ln)) for ln in chunk)
            if strong >= 2 and len(chunk) > len(fallback.split("\n")):
                fallback = "\n".join(chunk)
    if not parsed:
        return fallback
    # The longest run is the solution (or the one defining the entry point), with
    # the runs that hold what it uses: an import line set apart by prose.
    defining = [c for c in parsed if entry_point and c.tree and _defines(c.tree, entry_point)]
    chosen = defining[0] if defining else max(parsed, key=lambda c: c.block.end - c.block.start)
    kept = _with_dependencies(chosen, parsed, entry_point or "")
    return "\n\n".join(c.code for c in kept)


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
    """What a reply offers: the solution, its outcome and the reasoning that was removed."""

    code: str
    outcome: Outcome
    reasoning: str | None = None
    answer: str = ""  # the reply without its reasoning (what ``scope: response`` checks read)
    # The parsed solution when it parses (scoring reuses it rather than parse again).
    tree: ast.Module | None = field(default=None, repr=False, compare=False)


def extract(response: str, entry_point: str | None = None) -> Extraction:
    """The solution of ``response`` and its outcome, following the module's rules."""
    text = response.replace("\r\n", "\n").replace("\r", "\n")
    stripped = _strip_reasoning(text)
    reasoning = stripped.reasoning or None
    if stripped.open_reasoning:
        return Extraction("", "no-code", reasoning, "")
    answer = stripped.text
    blocks = _blocks(answer)
    if blocks:
        code = _from_blocks(blocks, entry_point)
        if not code.strip():
            # Fences held nothing Python: code may still sit in the prose.
            outside = _outside_blocks(answer, blocks)
            code = _unfenced(outside, entry_point)
    else:
        code = _unfenced(answer, entry_point)
    code = code.strip("\n")
    tree = _parses(code) if code.strip() else None
    return Extraction(code, outcome_from(code, tree), reasoning, answer, tree)


def outcome_from(code: str, tree: ast.Module | None) -> Outcome:
    """The outcome of ``code`` given its parse (None: it does not parse)."""
    if not code.strip():
        return "no-code"
    if tree is None:
        return "unparseable"
    return "answered" if _meaningful(tree) else "no-code"


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
        block.kind = _classify(block)
        if block.kind != "python":
            continue
        code = _without_magic(block.body).strip("\n")
        candidates.append(_Candidate(block, code, _parses(code), _stance(block)))
    chosen = _select(candidates, entry_point)
    return "\n\n".join(c.code for c in chosen)


def extract_code(response: str, entry_point: str | None = None) -> str:
    """The solution code of ``response`` (empty when it has none)."""
    return extract(response, entry_point).code
