"""What the walk records: scopes (a function, class, comprehension or module body
and the names bound in it), the context of a node, and the imports and calls
found, with a call's arguments as the ``where`` conditions see them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from cvb_engine.checks.python_ast.syntax import dict_entries, position_of


class Scope:
    """A function, class, comprehension or module body.

    ``imports`` and ``locals`` hold every binding of the body, whatever its
    position; ``strings`` follows the walk, so it describes the names as they
    stand at the point being visited (the walker logs every change, so that
    the state at an earlier point can be recovered).

    ``single`` maps each local name to what its one binding binds it to: the
    value of its only assignment (``x = ...``, ``x: T = ...``) or the
    ``with``-item whose target it is; None when the name is bound more than
    once or by anything else (a parameter, a loop, an import...). ``annotated``
    holds the annotation of a name annotated once (parameters included).
    ``body`` is the function body the scope belongs to: itself for a function
    or the module, the enclosing one for a class body or a comprehension.
    ``name`` is a def's name; its ``parent`` is the scope that binds it.
    """

    __slots__ = (
        "annotated",
        "body",
        "chain",
        "imports",
        "is_class",
        "locals",
        "name",
        "parent",
        "returns_dynamic",
        "single",
        "strings",
    )

    def __init__(
        self,
        parent: Scope | None,
        is_class: bool = False,
        local_names: Iterable[str] = (),
        function: bool = False,
    ) -> None:
        self.parent = parent
        self.is_class = is_class
        self.imports: dict[str, str] = {}
        self.locals = set(local_names)
        self.strings = dict.fromkeys(self.locals, "other")
        self.single: dict[str, ast.expr | ast.withitem | None] = dict.fromkeys(self.locals)
        self.annotated: dict[str, ast.expr | None] | None = None
        # A def's name (None for other scopes), and whether one of its return
        # statements returns a dynamically built string (when string kinds are followed).
        self.name: str | None = None
        self.returns_dynamic = False
        # The scopes a name is looked up in, innermost first. Python's rule: a
        # class body is visible to itself, not to what it encloses.
        self.chain: tuple[Scope, ...]
        self.body: Scope
        if parent is None:
            self.chain = (self,)
            self.body = self
        else:
            self.chain = (self, *(parent.chain[1:] if parent.is_class else parent.chain))
            self.body = self if function else parent.body

    def binding(self, name: str) -> tuple[str | None, bool]:
        """The dotted name ``name`` is imported as, and whether a local binding hides it."""
        for scope in self.chain:
            if name in scope.imports:
                return scope.imports[name], False
            if name in scope.locals:
                return None, True
        return None, False

    def owner(self, name: str) -> Scope | None:
        """The scope whose local binding ``name`` refers to here (None: an import or unbound)."""
        for scope in self.chain:
            if name in scope.imports:
                return None
            if name in scope.locals:
                return scope
        return None

    def annotate(self, name: str, annotation: ast.expr) -> None:
        annotated = self.annotated
        if annotated is None:
            self.annotated = {name: annotation}
        else:
            annotated[name] = None if name in annotated else annotation

    def string_kind(self, name: str) -> str:
        for scope in self.chain:
            if name in scope.strings:
                return scope.strings[name]
        return "other"


@dataclass(slots=True, eq=False)
class Ctx:
    """Where a node sits: the enclosing constructs and the scope (never changed once made)."""

    labels: frozenset[str]
    scope: Scope

    def plus(self, label: str) -> Ctx:
        return Ctx(self.labels | {label}, self.scope)


@dataclass(slots=True)
class ImportSite:
    module: str
    node: ast.stmt | ast.expr


@dataclass(slots=True)
class CallArgs:
    """A call's arguments as the ``where`` conditions see them.

    ``pending`` holds the splats (``**opts``, ``**dict(...)``) that are still to
    be looked up (:meth:`Analysis.arguments` does it, then sets it to None); ``scopes``
    the scope of each keyword that came from a dict bound in another scope, in
    which its value's names are to be looked up.
    """

    plain: list[ast.expr]
    star: bool
    keywords: dict[str, ast.expr]
    kw_splat: bool
    pending: list[ast.expr] | None = None
    scopes: dict[str, Scope] | None = None


@dataclass(slots=True)
class CallSite:
    node: ast.Call
    labels: frozenset[str]
    scope: Scope
    # The walk's clock when it reached the call (string kinds are looked up as
    # they stood then) and the call's rank in the walk's order.
    clock: int
    rank: tuple[int, int]
    name: str | None = None
    args: CallArgs | None = None
    # For the call of f that another call stands for, ``partial(f, ...)`` or
    # ``field(default_factory=f)``: that call (where f will run is not known).
    partial: ast.Call | None = None


@dataclass(slots=True)
class Deferred:
    """A value expression set aside: only the calls in it can matter, and only to
    a rule whose words occur on its lines."""

    node: ast.expr
    ctx: Ctx
    clock: int
    walked: bool = False


def method_class(scope: Scope) -> Scope | None:
    """The class body whose method (or code nested in one) ``scope`` belongs to."""
    inner = scope
    while inner.parent is not None:
        if inner.parent.is_class:
            return inner.parent if inner.body is inner else None
        inner = inner.parent
    return None


def call_args(call: CallSite) -> CallArgs:
    """The arguments of ``call`` as written, sorted out once, when first looked at;
    :meth:`Analysis.arguments` adds what named splats pass."""
    if call.args is not None:
        return call.args
    node = call.node
    plain: list[ast.expr] = []
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            break
        plain.append(arg)
    keywords: dict[str, ast.expr] = {}
    kw_splat = False
    pending: list[ast.expr] | None = None
    for kw in node.keywords:
        if kw.arg is not None:
            keywords[kw.arg] = kw.value
            continue
        value = kw.value
        entries = dict_entries(value) if type(value) is ast.Dict else None
        if entries is not None:
            # A literal dict splat, **{"shell": True}, says what it passes.
            for key, entry in entries.items():
                keywords.setdefault(key, entry)
        elif type(value) is ast.Name or type(value) is ast.Call:
            pending = [value] if pending is None else [*pending, value]
        else:
            kw_splat = True
    call.args = CallArgs(plain, len(plain) < len(node.args), keywords, kw_splat, pending)
    return call.args


def import_position(imp: ImportSite) -> tuple[int, int]:
    return position_of(imp.node)


def call_order(call: CallSite) -> tuple[int, int, int, int]:
    # Position first; the walk's order breaks ties (an outer call and the call
    # that is its callee, ``f(x)(y)``, start at the same column).
    return (*position_of(call.node), *call.rank)
