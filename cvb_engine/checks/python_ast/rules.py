"""The five rules of ``python-ast`` and the prepared check (:class:`PreparedAst`):
what a rule looks for, the reasons and evidence of its verdicts, and what is
decided once from the parameters and siblings of a check.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cvb_engine.checks.base import (
    MAX_EVIDENCE,
    CheckResult,
    Sibling,
    Span,
    Subject,
)
from cvb_engine.checks.python_ast.analysis import DYNAMIC_IMPORTS, Analysis, analysis_for
from cvb_engine.checks.python_ast.conditions import find_argument, find_others, where_holds
from cvb_engine.checks.python_ast.params import (
    CONSTRUCT_LABELS,
    Params,
    Where,
    call_words,
    match_call_name,
    match_import_name,
    prefix_words,
)
from cvb_engine.checks.python_ast.scope import CallSite, ImportSite
from cvb_engine.checks.python_ast.syntax import NAME_CHARS, NAME_START, position_of

_MAX_LISTED = 3


def _listing(messages: list[str], total: int) -> str:
    """The first messages (at most ``_MAX_LISTED`` are shown) of ``total``."""
    shown = "; ".join(messages[:_MAX_LISTED])
    more = total - _MAX_LISTED
    return f"{shown}; and {more} more" if more > 0 else shown


def _unique_spans(analysis: Analysis, nodes: Iterable[ast.AST]) -> tuple[Span, ...]:
    """The spans of the first ``MAX_EVIDENCE`` distinct nodes."""
    seen: dict[int, Span] = {}
    for node in nodes:
        if id(node) not in seen:
            if len(seen) == MAX_EVIDENCE:
                break
            seen[id(node)] = analysis.span(node)
    return tuple(seen.values())


_DYNAMIC_IMPORT_WORDS = tuple(sorted({name.rsplit(".", 1)[-1] for name in DYNAMIC_IMPORTS}))


def _import_hits(params: Params, analysis: Analysis) -> list[ImportSite]:
    analysis.need(_DYNAMIC_IMPORT_WORDS)
    return [
        imp
        for imp in analysis.imports
        if any(match_import_name(p, imp.module) for p in params.names)
    ]


def _forbid_import(check: PreparedAst, analysis: Analysis) -> CheckResult:
    hits = _import_hits(check.params, analysis)
    if not hits:
        return check.none_found
    spans = _unique_spans(analysis, (h.node for h in hits))
    messages = [
        f"forbidden import {h.module} at line {analysis.span(h.node).line}"
        for h in hits[:_MAX_LISTED]
    ]
    return CheckResult(passed=False, reason=_listing(messages, len(hits)), evidence=spans)


def _require_import(check: PreparedAst, analysis: Analysis) -> CheckResult:
    hits = _import_hits(check.params, analysis)
    if hits:
        span = analysis.span(hits[0].node)
        return CheckResult(
            passed=True, reason=f"imports {hits[0].module} at line {span.line}", evidence=(span,)
        )
    return check.none_found


def _call_hits(check: PreparedAst, analysis: Analysis) -> list[CallSite]:
    params = check.params
    analysis.need(check.words, check.prefixes)
    where = params.where
    others = find_others(where, analysis) if where is not None else None
    # The list as it stands: a condition may make the analysis walk more (the
    # calls it finds then cannot match this rule: they lie on other lines).
    calls = analysis.calls
    called = analysis.called_partials
    return [
        call
        for call in calls
        if call.name is not None
        and (call.partial is None or id(call.partial) not in called)
        and any(match_call_name(p, call.name) for p in params.names)
        and (where is None or where_holds(where, call, analysis, others))
    ]


def _describe_call(call: CallSite, where: Where | None, analysis: Analysis) -> str:
    """``subprocess.run(shell=True)``: the name and the arguments the conditions are about;
    a call on an unresolved receiver as written, one on a known object as written
    followed by the object (``client.get() on httpx.Client``)."""
    name = call.name or ""
    on = ""
    if name.startswith("*."):
        name = analysis.snippet(call.node.func)
    else:
        func, depth = call.node.func, 0
        while isinstance(func, ast.Attribute):
            func, depth = func.value, depth + 1
        if depth and isinstance(func, ast.Name) and call.scope.binding(func.id)[1]:
            if func.id == "self" and analysis.receiver("self", call.scope) is None:
                depth -= 1  # self.session.get() on requests.Session; self.pause(), a partial
            if depth:
                on = f" on {name.rsplit('.', depth)[0]}"
                name = analysis.snippet(call.node.func)
    parts: list[str] = []
    if where is not None:
        if where.arg_dynamic_string is not None:
            parts.append("<dynamic string>")
        keywords = [
            *where.keyword,
            *where.keyword_in,
            *where.keyword_not,
            *where.keyword_none_or_missing,
            *where.keyword_not_in,
        ]
        for keyword in dict.fromkeys(keywords):
            arg = find_argument(call, keyword, where, analysis)
            if arg.state == "present" and arg.node is not None:
                parts.append(f"{keyword}={analysis.snippet(arg.node)}")
    return f"{name}({', '.join(parts)}){on}"


def _describe_conditions(conditions: dict[str, Any]) -> str:
    """``where`` conditions as a reader writes them, not as Python prints a dict:
    ``missing keyword timeout``, ``keyword shell=True``, ``keyword in mode=w or a``."""

    def value(v: Any) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, list | tuple):
            return " or ".join(value(x) for x in v)
        return repr(v)

    parts = []
    for key, given in conditions.items():
        label = key.replace("_", " ")
        if isinstance(given, dict):
            parts.append(f"{label} " + ", ".join(f"{k}={value(v)}" for k, v in given.items()))
        elif isinstance(given, list):
            parts.append(f"{label} " + ", ".join(value(v) for v in given))
        elif given is True:
            parts.append(label)
        else:
            parts.append(f"{label} {value(given)}")
    return "; ".join(parts)


def _describe_names(params: Params) -> str:
    names = ", ".join(params.names)
    if params.where is not None:
        conditions = params.where.model_dump(exclude_defaults=True)
        names = f"{names} where {_describe_conditions(conditions)}"
    return names


def _forbid_call(check: PreparedAst, analysis: Analysis) -> CheckResult:
    hits = _call_hits(check, analysis)
    if not hits:
        return check.none_found
    params = check.params
    messages = [
        f"forbidden call {_describe_call(c, params.where, analysis)} "
        f"at line {analysis.span(c.node).line}"
        for c in hits[:_MAX_LISTED]
    ]
    spans = _unique_spans(analysis, (c.node for c in hits))
    return CheckResult(passed=False, reason=_listing(messages, len(hits)), evidence=spans)


def _require_call(check: PreparedAst, analysis: Analysis) -> CheckResult:
    hits = _call_hits(check, analysis)
    if hits:
        span = analysis.span(hits[0].node)
        described = _describe_call(hits[0], check.params.where, analysis)
        return CheckResult(
            passed=True, reason=f"calls {described} at line {span.line}", evidence=(span,)
        )
    return check.none_found


def _forbid_construct(check: PreparedAst, analysis: Analysis) -> CheckResult:
    params = check.params
    construct = params.construct_kind or ""
    label = CONSTRUCT_LABELS.get(construct, construct)
    found = analysis.constructs.get(construct, ())
    if construct == "unread-accumulator":
        found = analysis.unread_accumulators
    elif construct == "unguarded-state":
        found = analysis.unguarded_state
    nodes = sorted(found, key=position_of)
    if params.outside and nodes:
        excused = analysis.excused
        outside = set(params.outside)
        nodes = [n for n in nodes if outside.isdisjoint(excused.get(id(n), ()))]
    if not nodes:
        return check.none_found
    unique = list({id(node): node for node in nodes}.values())
    spans = _unique_spans(analysis, unique)
    messages = [f"{label} at line {s.line}" for s in spans[:_MAX_LISTED]]
    return CheckResult(passed=False, reason=_listing(messages, len(unique)), evidence=spans)


_CONSTRUCT_WORDS: dict[str, tuple[str, ...]] = {
    "bare-except": ("except",),
    "broad-except-swallow": ("except",),
    "star-import": ("*",),
    "global-statement": ("global",),
    "mutable-default-arg": ("def", "lambda"),
    "assert-statement": ("assert",),
    "unread-accumulator": (
        *(f"{op}=" for op in ("+", "-", "*", "/", "%", "|", "&", "^", "<<", ">>", "@")),
        "[",
        *sorted({"append", "add", "extend", "insert", "appendleft", "update", "setdefault"}),
    ),
    "unguarded-state": ("Lock", "Condition", "Semaphore"),
}


def _occurs(word: str, code: str) -> bool:
    """Whether ``word`` occurs in ``code``; a word that is a name, only where it is
    not part of a longer name (``run`` in ``return`` is not the name ``run``).

    The parser reads a name that follows a digit as a name of its own, so that
    occurrence counts.
    """
    index = code.find(word)
    if index == -1 or not word.isidentifier():
        return index != -1
    size = len(word)
    while index != -1:
        if (index == 0 or code[index - 1] not in NAME_START) and code[
            index + size : index + size + 1
        ] not in NAME_CHARS:
            return True
        index = code.find(word, index + 1)
    return False


def _none_found(params: Params) -> CheckResult:
    """The verdict of the rule when nothing in the code matches it (no hit of a forbid
    rule, no hit of a require rule): it depends on ``params`` only."""
    rule = params.rule
    if rule == "forbid-construct":
        construct = params.construct_kind or ""
        return CheckResult(passed=True, reason=f"no {CONSTRUCT_LABELS.get(construct, construct)}")
    which = "" if len(params.names) == 1 else " (any of)"
    if rule == "forbid-import":
        return CheckResult(passed=True, reason=f"no import of {', '.join(params.names)}")
    if rule == "require-import":
        return CheckResult(
            passed=False, reason=f"missing required import{which}: {', '.join(params.names)}"
        )
    if rule == "forbid-call":
        return CheckResult(passed=True, reason=f"no call to {_describe_names(params)}")
    return CheckResult(
        passed=False, reason=f"missing required call{which}: {_describe_names(params)}"
    )


def _words(params: Params) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Words at least one of which the source text contains whenever the rule can
    match, and the words of its ``a.*`` names (see :meth:`Analysis.need`).

    Every spelling the analysis resolves — aliases, ``from`` imports, dynamic
    ``import_module("x")`` — still names the module (import rules) or the
    called attribute (call rules) somewhere in the text, so when none of these
    words occurs the tree walk can be skipped: the rule cannot match. (In ASCII
    text: the parser NFKC-normalises identifiers, so ``ｒequests`` is ``requests``.)
    For the call rules these are also the words :meth:`Analysis.need` looks for.
    (A call on a known object, ``s.get()`` after ``s = requests.Session()``,
    names its module where the object is bound or annotated.)
    """
    if params.rule == "forbid-construct":
        return _CONSTRUCT_WORDS.get(str(params.construct_kind), ()), ()
    if params.rule in ("forbid-import", "require-import"):
        words = tuple(n.removeprefix("*.").removesuffix(".*").split(".")[0] for n in params.names)
        return words, ()
    return call_words(params.names), prefix_words(params.names)


def strings_needed(params: Params, siblings: Sequence[Sibling]) -> bool:
    """Whether the analysis serving ``params`` must follow string kinds: unless its
    ``siblings`` are known and neither it nor any of their python-ast checks asks for
    ``arg_dynamic_string``, one analysis that does serves them all."""
    if not siblings:
        return True
    return any(
        isinstance(p, Params) and p.where is not None and p.where.arg_dynamic_string is not None
        for p in (params, *(p for kind, p in siblings if kind == "python-ast"))
    )


class PreparedAst:
    """A ``python-ast`` check made ready: its rule, the words without which the rule
    cannot match (see :func:`_words`), its verdict when nothing matches, and whether
    its analysis must follow string kinds (which its siblings decide)."""

    __slots__ = ("none_found", "params", "prefixes", "rule", "shared", "strings", "words")

    def __init__(self, params: Params, siblings: Sequence[Sibling] = ()) -> None:
        self.params = params
        self.rule = _RULES[params.rule]
        self.words, self.prefixes = _words(params)
        self.none_found = _none_found(params)
        self.shared = (self.none_found,)
        self.strings = strings_needed(params, siblings)

    def run(self, subject: Subject) -> CheckResult:
        """Evaluate the check on one subject.

        The subject's parse and analysis are shared through ``subject.cache`` with
        the other ``python-ast`` checks of the subject. Code that does not parse,
        or is too deeply nested to analyse, is a failed result with a reason;
        this does not raise on model output.
        """
        if isinstance(subject.tree, SyntaxError):
            failure = analysis_for(subject)
            assert isinstance(failure, CheckResult)
            return failure
        code, words = subject.code, self.words
        if words and code.isascii():
            for word in words:
                if _occurs(word, code):
                    break
            else:
                # None of the rule's words occurs: it cannot match; no walk needed.
                return self.none_found
        analysis = analysis_for(subject, self.strings)
        if isinstance(analysis, CheckResult):
            return analysis
        try:
            return self.rule(self, analysis)
        except (RecursionError, MemoryError) as exc:
            return CheckResult(passed=False, reason=f"code too complex to analyse: {exc!r}")


_RULES: dict[str, Callable[[PreparedAst, Analysis], CheckResult]] = {
    "forbid-import": _forbid_import,
    "require-import": _require_import,
    "forbid-call": _forbid_call,
    "require-call": _require_call,
    "forbid-construct": _forbid_construct,
}
