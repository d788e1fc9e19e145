"""The check protocol and its registry.

A check kind is one module (or package) here with one decorated function::

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        forbid: str | None = None

    class PreparedRegex:                      # a Prepared
        def __init__(self, params: Params, siblings: Sequence[Sibling] = ()) -> None: ...
        def run(self, subject: Subject) -> CheckResult: ...

    @register_check("regex", params=Params, prepare=PreparedRegex, description="...")
    def run_regex(params: Params, subject: Subject) -> CheckResult:
        return PreparedRegex(params).run(subject)

A check is prepared once and run many times: :attr:`CheckKind.prepare` takes
the validated parameters and the *siblings* (every check that runs on the same
subjects, as scoring knows them) and returns a :class:`Prepared` holding all
that they decide (compiled patterns, word lists, the verdicts that blame
nothing); its ``run`` judges one :class:`Subject` (the code extracted from one
model response, plus the response itself). :attr:`CheckKind.run` does both for
one subject (lint, tests). Scoring prepares a scenario's checks once per
scenario object (see :func:`cvb_engine.scoring.plan`).

Running must never raise on model output: a problem in the code under test is
a failed :class:`CheckResult` with a reason. Problems in the *author's*
parameters are caught earlier, by pydantic validation at load/lint time.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from cvb_engine.plugin_registry import Registry, origin_of

# The most spans a result carries as evidence; its reason still counts every hit.
MAX_EVIDENCE = 20


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of the checked text: 1-based line, 0-based column, length in characters."""

    line: int
    col: int
    length: int

    def as_dict(self) -> dict[str, int]:
        return {"line": self.line, "col": self.col, "length": self.length}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict of one check on one subject.

    ``evidence`` holds the spans that triggered the verdict (the forbidden
    match, the offending call); it is empty when nothing specific is to blame,
    e.g. a required call that is absent. ``scope`` tells which text the spans
    point into: ``"code"`` (the extracted code) or ``"response"``.
    """

    passed: bool
    reason: str
    evidence: tuple[Span, ...] = ()
    scope: str = "code"
    # True when the check gave up on time (a regex timeout, an exec timeout):
    # lint treats that as the author's problem, scoring as a failed check.
    timed_out: bool = False


@dataclass
class Subject:
    """What checks look at: one response and the code extracted from it.

    Parsing is done lazily and at most once per subject, however many checks
    ask for the tree; kinds may memoise their own derived analyses in
    ``cache`` under a key of their own so that the work is shared between the
    checks of one record.
    """

    code: str
    response: str | None = None
    cache: dict[str, Any] = field(default_factory=dict)
    _tree: ast.Module | SyntaxError | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def tree(self) -> ast.Module | SyntaxError:
        """The parsed module, or the SyntaxError that prevented parsing (parsed once)."""
        tree = self._tree
        if tree is None:
            tree = self._tree = _parse(self.code)
        return tree

    def use_tree(self, tree: ast.Module) -> None:
        """Take ``tree``, a parse of :attr:`code` the caller already made, instead of parsing."""
        self._tree = tree

    def text(self, scope: str) -> str:
        return self.response if scope == "response" and self.response is not None else self.code


def newline_starts(text: str) -> list[int]:
    """The offsets at which the ``"\\n"``-separated lines of ``text`` start (index 0 = line 1)."""
    return [0, *(m.end() for m in re.finditer("\n", text))]


def _parse(code: str) -> ast.Module | SyntaxError:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        err = SyntaxError(f"{type(exc).__name__}: {exc}")
        err.lineno = 1
        return err


def span_from_offsets(
    text: str, start: int, end: int, line_starts: Sequence[int] | None = None
) -> Span:
    """Convert a character range of ``text`` into a :class:`Span` anchored at its start line.

    Leading whitespace of the range is skipped (a ``(?m)^\\s*import x`` match
    starts on the blank line above the import), so the span lands on the text
    that matched. ``line_starts``, the offsets at which the ``"\\n"``-separated
    lines of ``text`` start (see :func:`newline_starts`), saves scanning the text
    when many spans are made in one long text.
    """
    while start < end and start < len(text) and text[start].isspace():
        start += 1
    if line_starts is None:
        line = text.count("\n", 0, start) + 1
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        if line_end == -1:
            line_end = len(text)
    else:
        line = bisect_right(line_starts, start)
        line_start = line_starts[line - 1]
        line_end = line_starts[line] - 1 if line < len(line_starts) else len(text)
    # A span never runs past its own line: the studio marks it on that line.
    length = max(1, min(end, line_end) - start) if end > start else 0
    return Span(line=line, col=start - line_start, length=length)


#: A check as its siblings see it: (kind name, validated parameters).
Sibling = tuple[str, BaseModel]


class Prepared(Protocol):
    """A check made ready for its parameters and siblings, to be run on many subjects.

    ``shared`` holds the results ``run`` returns whenever nothing in the code is
    to blame (a forbidden pattern absent): the same objects every time, so that
    a caller may make one verdict for each.
    """

    @property
    def shared(self) -> tuple[CheckResult, ...]: ...

    def run(self, subject: Subject, /) -> CheckResult: ...


class PrepareFunction(Protocol):
    def __call__(self, params: Any, siblings: Sequence[Sibling], /) -> Prepared: ...


class CheckFunction(Protocol):
    def __call__(self, params: Any, subject: Subject, /) -> CheckResult: ...


@dataclass(frozen=True)
class CheckKind:
    """A registered check kind: its name, parameter model, description and functions.

    ``prepare(params, siblings)`` makes a :class:`Prepared` from validated
    parameters; ``run(params, subject)`` prepares for one subject and runs.
    """

    name: str
    params: type[BaseModel]
    description: str
    run: CheckFunction
    prepare: PrepareFunction
    # Kinds that execute code are slower and need the sandbox; the runner and
    # the studio use this to decide what to run inline.
    executes_code: bool = False


def _load_kinds() -> None:
    """Import every module of this package so that their decorators run."""
    package = importlib.import_module("cvb_engine.checks")
    for info in pkgutil.iter_modules(package.__path__):
        if info.name != "base" and not info.name.startswith("_"):
            importlib.import_module(f"cvb_engine.checks.{info.name}")


_REGISTRY: Registry[CheckKind] = Registry("check kind", load=_load_kinds)


def register_check(
    name: str,
    *,
    params: type[BaseModel],
    prepare: PrepareFunction,
    description: str,
    executes_code: bool = False,
) -> Callable[[CheckFunction], CheckFunction]:
    """Register a check kind under ``name`` (the ``kind:`` value in scenario files).

    Decorates the kind's one-subject ``run``; ``prepare`` is what scoring uses.
    """

    def decorate(fn: CheckFunction) -> CheckFunction:
        kind = CheckKind(name, params, description, fn, prepare, executes_code)
        _REGISTRY.add(name, kind, origin_of(fn))
        return fn

    return decorate


def registry() -> dict[str, CheckKind]:
    """All registered check kinds by name."""
    return dict(_REGISTRY.items())


def get_kind(name: str) -> CheckKind | None:
    """The check kind ``name``, or None."""
    return _REGISTRY.get(name)
