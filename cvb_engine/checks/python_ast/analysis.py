"""The analysis of one subject's code that every ``python-ast`` check of the subject
shares (:class:`Analysis`): made by one walk, extended when a rule needs the calls
set aside, and kept in ``subject.cache`` under :data:`CACHE_KEY`.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections.abc import Iterable
from functools import cached_property, partial
from typing import Any

from cvb_engine.checks.base import (
    CheckResult,
    Span,
    Subject,
    newline_starts,
    span_from_offsets,
)
from cvb_engine.checks.python_ast.flow import Flow, find_flow, find_unread_accumulators
from cvb_engine.checks.python_ast.locking import find_unguarded_state
from cvb_engine.checks.python_ast.params import MAX_CALL_DEPTH, LiteralValue
from cvb_engine.checks.python_ast.scope import (
    CallArgs,
    CallSite,
    Deferred,
    ImportSite,
    Scope,
    call_args,
    call_order,
    import_position,
    method_class,
)
from cvb_engine.checks.python_ast.syntax import (
    NAME_CHARS,
    NAME_START,
    dict_entries,
    is_none,
    literal_value,
    partial_target,
    position_of,
    string_kind_of,
)
from cvb_engine.checks.python_ast.walker import MARKERS, Walker

CACHE_KEY = "python-ast"

DYNAMIC_IMPORTS = frozenset({"__import__", "importlib.import_module", "importlib.__import__"})

# Bounds how far names are followed to a value or an object (a = b; b = c ...),
# which also ends cycles (a = a.b()); and the length of a string annotation parsed.
MAX_RECEIVER_DEPTH = 8
_MAX_ANNOTATION_TEXT = 200
# What a name's single binding must be for the name to stand for a known object.
_RECEIVER_VALUES = (ast.Call, ast.Await, ast.withitem)
_TYPE_WRAPPERS = frozenset(
    f"{module}.{name}"
    for module in ("typing", "typing_extensions")
    for name in ("Optional", "Union", "Annotated")
) | frozenset({"Optional", "Union", "Annotated"})
# Methods that change a dict in place; a dict splatted through a name on which one
# is called anywhere is not known (nor one subscripted as an assignment target).
_DICT_MUTATORS = frozenset(
    {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"}
)
_MUTATOR_WORDS = tuple(sorted(_DICT_MUTATORS))

_PARTIALS = frozenset({"functools.partial", "partial"})
# Calls that take a function and call it themselves: the keyword that names it (an int:
# the position), e.g. field(default_factory=threading.Lock) calls threading.Lock.
_FACTORY_TAKERS: dict[str, str | int] = {
    "dataclasses.field": "default_factory",
    "pydantic.Field": "default_factory",
    "pydantic.fields.Field": "default_factory",
    "attrs.field": "factory",
    "attr.ib": "factory",
    "attr.attrib": "factory",
    "attr.field": "factory",
    "collections.defaultdict": 0,
}


class Analysis:
    """Everything the rules need about one subject's code.

    The tree is walked once, when the analysis is made; the expressions the
    walk set aside are walked when a rule needs the calls that may be in them
    (:meth:`need`).
    """

    def __init__(self, code: str, tree: ast.Module, strings: bool = True) -> None:
        self.code = code
        # The parser NFKC-normalises identifiers, so only in ASCII code does every
        # name of the tree occur verbatim in the text, which :meth:`need` relies on.
        markers = self.lines_with(MARKERS, keywords=True) if code.isascii() else None
        walker = Walker(markers, strings)
        walker.walk(tree)
        self._walker = walker
        self.flat_imports = walker.flat_imports
        self.bound = walker.bound
        self.constructs = walker.constructs
        self.excused = walker.excused
        self.classes = walker.classes
        self._static_imports = walker.imports
        self._dynamic_imports: list[tuple[tuple[int, int], ImportSite]] = []
        self.imports: list[ImportSite] = []
        self.calls: list[CallSite] = []
        self._needed: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
        self._by_line: dict[int, list[Deferred]] | None = None
        # Spans by node id; holding the tree keeps the ids unique.
        self._tree = tree
        # What other modules derive from this analysis (uses.py: parent links, where a
        # value goes), made once per subject, by a key of theirs.
        self.derived: dict[object, Any] = {}
        self._spans: dict[int, Span] = {}
        # The partial(...) calls (by id) whose name is called: those calls stand for them.
        self.called_partials: set[int] = set()
        # For through_calls: the calls of each def (by id of its scope), and whether a
        # def is reached from inside a construct (by id of its scope and the label).
        self._callers: dict[int, list[CallSite]] = {}
        self._index: tuple[int, dict[int, list[CallSite]], dict[str, list[CallSite]]] | None = None
        self._def_words: tuple[str, ...] | None = None
        self._reached: dict[tuple[int, str], bool] = {}
        self.imports = sorted(self._static_imports, key=import_position)
        self._add_calls(list(walker.calls))

    def _add_calls(self, calls: list[CallSite]) -> None:
        """Resolve newly walked calls; keep ``calls`` and ``imports`` sorted by position."""
        dynamic = len(self._dynamic_imports)
        extra: list[CallSite] = []
        for call in calls:
            func = call.node.func
            call.name = self.resolve(func, call.scope)
            if call.name in _PARTIALS:
                wrapped = self._wrapped_call(call)
                if wrapped is not None:
                    extra.append(wrapped)
            elif call.name in _FACTORY_TAKERS:
                made = self._factory_call(call, _FACTORY_TAKERS[call.name])
                if made is not None:
                    extra.append(made)
            elif isinstance(func, ast.Name) and func.id in self._walker.references:
                self._through_partial(call, self._bound_partial(func.id, call.scope))
            elif (
                isinstance(func, ast.Attribute)
                and func.attr in self._walker.references
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
            ):
                found = self._self_partial(func.attr, call.scope)
                if found is not None:
                    call.name = found[1]
                    self._through_partial(call, found)
            if call.name in DYNAMIC_IMPORTS:
                args = call_args(call)
                target = args.plain[0] if args.plain else args.keywords.get("name")
                if isinstance(target, ast.Constant) and isinstance(target.value, str):
                    self._dynamic_imports.append((call.rank, ImportSite(target.value, call.node)))
        # A new list, not the old one extended: a rule that holds the old one while
        # a condition makes the analysis walk more (see :meth:`mutated`) iterates on.
        merged = [*self.calls, *calls, *extra]
        merged.sort(key=call_order)
        self.calls = merged
        if len(self._dynamic_imports) > dynamic:
            self._dynamic_imports.sort(key=lambda pair: pair[0])
            imports = [*self._static_imports, *(imp for _, imp in self._dynamic_imports)]
            self.imports = sorted(imports, key=import_position)

    def _wrapped_call(self, call: CallSite) -> CallSite | None:
        """For ``partial(f, *args, **kw)`` with ``f`` resolved: the call of ``f`` with
        partial's other arguments, placed where the partial call is."""
        node = call.node
        target = partial_target(node)
        if target is None or self.known_name(node.func, call.scope) not in _PARTIALS:
            return None
        name = self.known_name(target, call.scope)
        if name is None:
            return None
        wrapped = ast.copy_location(ast.Call(target, node.args[1:], node.keywords), node)
        return CallSite(
            wrapped, call.labels, call.scope, call.clock, call.rank, name=name, partial=node
        )

    def _factory_call(self, call: CallSite, where: str | int) -> CallSite | None:
        """For ``field(default_factory=f)`` (``defaultdict(f)``...) with ``f`` resolved:
        the call of ``f`` it will make, without arguments, placed where ``f`` is named."""
        node = call.node
        if isinstance(where, int):
            target = node.args[where] if len(node.args) > where else None
        else:
            target = next((kw.value for kw in node.keywords if kw.arg == where), None)
        if target is None or isinstance(target, ast.Starred):
            return None
        name = self.known_name(target, call.scope)
        if name is None:
            return None
        made = ast.copy_location(ast.Call(target, [], []), target)
        return CallSite(
            made, call.labels, call.scope, call.clock, call.rank, name=name, partial=node
        )

    def _bound_partial(
        self, name: str, scope: Scope, depth: int = 0
    ) -> tuple[ast.Call, str, Scope] | None:
        """For a local ``name`` bound once to ``partial(f, ...)`` with ``f`` resolved:
        that call, ``f``'s name and the scope of the binding."""
        found = self.single(name, scope)
        if found is None:
            return None
        value, owner = found
        if not isinstance(value, ast.Call):
            return None
        target = partial_target(value)
        if target is None or self.known_name(value.func, owner, depth + 1) not in _PARTIALS:
            return None
        wrapped = self.known_name(target, owner, depth + 1)
        return None if wrapped is None else (value, wrapped, owner)

    def _self_partial(self, attr: str, scope: Scope) -> tuple[ast.Call, str, Scope] | None:
        """For ``self.<attr>`` bound once in the methods of the class to
        ``partial(f, ...)`` with ``f`` resolved: that call, ``f``'s name, its scope."""
        owner = method_class(scope)
        bindings = self._walker.self_attrs.get((id(owner), attr)) if owner is not None else None
        if bindings is None or len(bindings) != 1:
            return None
        value, where = bindings[0]
        target = partial_target(value) if value is not None else None
        if (
            target is None
            or not isinstance(value, ast.Call)
            or self.known_name(value.func, where) not in _PARTIALS
        ):
            return None
        wrapped = self.known_name(target, where)
        return None if wrapped is None else (value, wrapped, where)

    def _through_partial(self, call: CallSite, found: tuple[ast.Call, str, Scope] | None) -> None:
        """Give a call of a name (or ``self.<attr>``) bound once to ``partial(f, ...)``
        the partial's arguments ahead of its own (its own keywords win, as in functools)."""
        if found is None:
            return
        bound, _, owner = found
        node = call.node
        self.called_partials.add(id(bound))
        merged = ast.Call(
            node.func, [*bound.args[1:], *node.args], [*bound.keywords, *node.keywords]
        )
        args = call_args(CallSite(merged, call.labels, call.scope, call.clock, call.rank))
        if owner is not call.scope:
            own = {kw.arg for kw in node.keywords}
            args.scopes = {kw.arg: owner for kw in bound.keywords if kw.arg and kw.arg not in own}
        call.args = args

    def need(self, words: tuple[str, ...], prefixes: tuple[str, ...] = ()) -> None:
        """Walk the deferred expressions that may hold a call whose resolved name has
        one of ``words`` as its last component (or, for ``a.*``, its first).

        Such a call names the word itself, as an attribute or a name, or calls a
        name imported as something with that word in it (``from subprocess
        import run as r; r()``); either way a word of the call's own text,
        which lies on the lines of the expression that holds it. A call on a
        receiver bound to a known object (``s = requests.Session(); s.get()``)
        names its object's words only where the receiver is bound: for the
        words of ``a.*`` patterns, ``prefixes``, the lines that name such a
        receiver are walked too.
        """
        walker = self._walker
        key = (words, prefixes)
        if key in self._needed or not walker.deferred:
            return
        self._needed.add(key)
        names = set(words)
        aliases = walker.aliases
        for word in words:
            if word in aliases:
                names.update(aliases[word])
        lines = self.lines_with(names)
        references = walker.references
        if references:
            # Names bound to a dotted name (or a partial of one) with one of the
            # words, followed through names bound to those names in turn.
            found: set[str] = set()
            for _ in range(MAX_RECEIVER_DEPTH):
                more = {
                    name
                    for name, parts in references.items()
                    if name not in found and not names.isdisjoint(parts)
                }
                if not more:
                    break
                found |= more
                names |= more
            if found:
                lines |= self.lines_with(found, keywords=True)
        if prefixes:
            receivers = self._receivers_of(frozenset(prefixes))
            if receivers:
                lines |= self.lines_with(receivers, keywords=True)
        if not lines:
            return
        by_line = self._by_line
        if by_line is None:
            by_line = self._by_line = {}
            for item in walker.deferred:
                node = item.node
                for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    if line in by_line:
                        by_line[line].append(item)
                    else:
                        by_line[line] = [item]
        start = len(walker.calls)
        for line in lines:
            for item in by_line.get(line, ()):
                if not item.walked:
                    walker.walk_deferred(item)
        if len(walker.calls) > start:
            self._add_calls(walker.calls[start:])

    @cached_property
    def unread_accumulators(self) -> list[ast.AST]:
        """The first update of each unread accumulator (see :func:`find_unread_accumulators`)."""
        return find_unread_accumulators(self._tree)

    @property
    def tree(self) -> ast.Module:
        """The parsed code this analysis is of (only read)."""
        return self._tree

    @cached_property
    def unguarded_state(self) -> list[ast.AST]:
        """Lock-guarded state used without the lock (see :func:`find_unguarded_state`)."""
        return find_unguarded_state(self._tree)

    @cached_property
    def flow(self) -> Flow:
        """Where the values of calls go (see :class:`Flow`), found when first asked for."""
        return find_flow(self._tree)

    def defs_called(self, node: ast.expr, scope: Scope) -> list[Scope]:
        """The bodies of the code's own defs a call's callee names: a def bound to the
        name where it is looked up, or, for ``self.f`` in a method, a method ``f``."""
        walker = self._walker
        if type(node) is ast.Name:
            assert isinstance(node, ast.Name)
            owner = scope.owner(node.id)
            return walker.defs.get((id(owner), node.id), []) if owner is not None else []
        if (
            type(node) is ast.Attribute
            and isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            owner = method_class(scope)
            return walker.defs.get((id(owner), node.attr), []) if owner is not None else []
        return []

    def _walk_def_calls(self) -> None:
        """Walk every expression that may call one of the code's own defs."""
        if self._def_words is None:
            self._def_words = tuple(sorted({name for _, name in self._walker.defs}))
        if self._def_words:
            self.need(self._def_words)

    def _indexes(self) -> tuple[dict[int, list[CallSite]], dict[str, list[CallSite]]]:
        """The calls by function body (id) and by the name they call (``f`` for ``f()``
        and ``self.f()``), made again when the analysis has walked more calls."""
        self._walk_def_calls()
        index = self._index
        if index is None or index[0] != len(self.calls):
            by_body: dict[int, list[CallSite]] = {}
            by_callee: dict[str, list[CallSite]] = {}
            for call in self.calls:
                if call.partial is not None:
                    continue
                by_body.setdefault(id(call.scope.body), []).append(call)
                func = call.node.func
                if isinstance(func, ast.Name):
                    by_callee.setdefault(func.id, []).append(call)
                elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                    by_callee.setdefault(func.attr, []).append(call)
            index = self._index = (len(self.calls), by_body, by_callee)
        return index[1], index[2]

    def callers(self, body: Scope) -> list[CallSite]:
        """The calls of the def whose body is ``body`` (see :meth:`defs_called`)."""
        found = self._callers.get(id(body))
        if found is not None:
            return found
        name = body.name
        out: list[CallSite] = []
        if name is not None:
            for call in self._indexes()[1].get(name, ()):
                if any(b is body for b in self.defs_called(call.node.func, call.scope)):
                    out.append(call)
        self._callers[id(body)] = out
        return out

    def calls_in(self, body: Scope) -> list[CallSite]:
        """The calls whose function body is ``body`` (every call of a def of the code walked)."""
        return self._indexes()[0].get(id(body), [])

    def makers(self, wanted: dict[Scope, list[CallSite]]) -> set[int]:
        """The function bodies (by id) that hold a call of ``wanted`` or a call of one of
        the code's own defs that leads to one (at most ``MAX_CALL_DEPTH`` calls deep)."""
        made = {id(body) for body, calls in wanted.items() if calls}
        self._walk_def_calls()
        for _ in range(MAX_CALL_DEPTH):
            more: set[int] = set()
            for call in self.calls:
                body = id(call.scope.body)
                if body in made or body in more or call.partial is not None:
                    continue
                func = call.node.func
                if (type(func) is ast.Name or type(func) is ast.Attribute) and any(
                    id(d) in made for d in self.defs_called(func, call.scope)
                ):
                    more.add(body)
            if not more:
                break
            made |= more
        return made

    def reached_inside(self, body: Scope, label: str) -> bool:
        """Whether the def whose body is ``body`` is called from inside ``label``,
        directly or through further defs of the code (at most ``MAX_CALL_DEPTH``)."""
        key = (id(body), label)
        hit = self._reached.get(key)
        if hit is not None:
            return hit
        seen = {id(body)}
        frontier = [body]
        hit = False
        for _ in range(MAX_CALL_DEPTH):
            after: list[Scope] = []
            for inner in frontier:
                for call in self.callers(inner):
                    if label in call.labels:
                        hit = True
                        break
                    outer = call.scope.body
                    if id(outer) not in seen:
                        seen.add(id(outer))
                        after.append(outer)
                if hit:
                    break
            if hit or not after:
                break
            frontier = after
        self._reached[key] = hit
        return hit

    def _receivers_of(self, words: frozenset[str]) -> set[str]:
        """The local names bound to a known object whose dotted name has one of ``words``
        as a component (``s`` for ``requests`` when ``s = requests.Session()``)."""
        out: set[str] = set()
        for scope in self._walker.scopes:
            candidates = [n for n, v in scope.single.items() if type(v) in _RECEIVER_VALUES]
            if scope.annotated:
                candidates.extend(scope.annotated)
            for name in candidates:
                if name not in out:
                    known = self.receiver(name, scope)
                    if known is not None and not words.isdisjoint(known.split(".")):
                        out.add(name)
        classes = {id(scope): scope for scope in self._walker.scopes if scope.is_class}
        for (owner, attr), bindings in self._walker.self_attrs.items():
            if attr not in out:
                # Looked up from one of the methods that bind it.
                known = self.self_attribute(attr, bindings[0][1]) if owner in classes else None
                if known is not None and not words.isdisjoint(known.split(".")):
                    out.add(attr)
        return out

    def lines_with(self, words: Iterable[str], keywords: bool = False) -> set[int]:
        """The lines (1-based, as the parser counts them) on which any of ``words`` occurs.

        With ``keywords``, an occurrence of a word that is a name inside a longer
        name (``for`` in ``isoformat``) does not count; one after a digit (``1for``)
        does, as the tokenizer splits it. Other words (``:=``) always count.
        """
        code = self.code
        # Without "\r" the parser's lines are the "\n"-separated ones.
        starts = self.line_starts if "\r" in code else None
        lines: set[int] = set()
        for word in words:
            index = code.find(word)
            # Occurrences come in order: count the newlines since the last one
            # (counting from the start each time is quadratic in a long text).
            line, counted = 1, 0
            while index != -1:
                if (
                    not keywords
                    or not word.isidentifier()
                    or (
                        (index == 0 or code[index - 1] not in NAME_START)
                        and code[index + len(word) : index + len(word) + 1] not in NAME_CHARS
                    )
                ):
                    if starts is None:
                        line += code.count("\n", counted, index)
                        counted = index
                        lines.add(line)
                    else:
                        lines.add(bisect_right(starts, index))
                index = code.find(word, index + 1)
        return lines

    def string_kind(self, node: ast.expr, call: CallSite) -> str:
        """The string kind of an argument of ``call``, as the names stood at the call."""
        assert self._walker.strings, "an analysis made without string kinds"
        return string_kind_of(node, partial(self._walker.kind_at, call.scope, call.clock))

    @cached_property
    def line_starts(self) -> list[int]:
        # The parser also ends lines at a lone "\r"; spans are then re-expressed
        # in the "\n"-counted lines the studio shows.
        return [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", self.code))]

    def resolve(self, expr: ast.expr, scope: Scope, depth: int = 0) -> str | None:
        """The dotted name of a Name/Attribute chain, resolved through the imports.

        A chain on a local name bound to a known object (see :meth:`receiver`)
        continues that object's name: ``client.get`` is ``httpx.Client.get``
        when ``client = httpx.Client()``.
        """
        attrs: list[str] = []
        while isinstance(expr, ast.Attribute):
            attrs.append(expr.attr)
            expr = expr.value
        attrs.reverse()
        if not isinstance(expr, ast.Name):
            if not attrs:
                return None
            made = expr.value if type(expr) is ast.Await else expr
            if type(made) is ast.Call:
                # A method of an object a call has just made: threading.Event().wait
                # is threading.Event.wait, as it is after ev = threading.Event().
                assert isinstance(made, ast.Call)
                known = self.known_name(made.func, scope, depth + 1)
                if known is not None:
                    return ".".join([known, *attrs])
            return "*." + ".".join(attrs)
        qualified, hidden = scope.binding(expr.id)
        if qualified is None and not hidden:
            qualified = self.flat_imports.get(expr.id)
        if qualified is None:
            if attrs and (hidden or expr.id in self.bound):
                known = None
                if hidden:
                    known = self.receiver(expr.id, scope, depth) or self.reference(
                        expr.id, scope, depth
                    )
                    if known is None and expr.id == "self" and len(attrs) > 1:
                        known = self.self_attribute(attrs[0], scope, depth)
                        if known is not None:
                            return ".".join([known, *attrs[1:]])
                if known is not None:
                    return ".".join([known, *attrs])
                return "*." + ".".join(attrs)
            if hidden:
                known = self.reference(expr.id, scope, depth)
                if known is not None:
                    return known
            qualified = expr.id
        return ".".join([qualified, *attrs])

    def reference(self, name: str, scope: Scope, depth: int = 0) -> str | None:
        """The resolved dotted name a local ``name`` stands for when it is bound once to
        one (``sleep = time.sleep``) or to ``functools.partial`` of one; None otherwise
        (a parameter, whatever its default, included)."""
        if depth > MAX_RECEIVER_DEPTH or name not in self._walker.references:
            return None
        found = self.single(name, scope)
        if found is None:
            return None
        value, owner = found
        if isinstance(value, ast.Name | ast.Attribute):
            return self.known_name(value, owner, depth + 1)
        bound = self._bound_partial(name, scope, depth + 1)
        return None if bound is None else bound[1]

    def self_attribute(self, attr: str, scope: Scope, depth: int = 0) -> str | None:
        """The dotted name of the object ``self.<attr>`` stands for in a method: every
        binding of it in the methods of the class is an assignment of a call of the
        same resolved name (``self.session = requests.Session()``)."""
        owner = method_class(scope)
        if owner is None or depth > MAX_RECEIVER_DEPTH:
            return None
        bindings = self._walker.self_attrs.get((id(owner), attr))
        if not bindings:
            return None
        known: str | None = None
        for value, where in bindings:
            if type(value) is ast.Await:
                assert isinstance(value, ast.Await)
                value = value.value
            if not isinstance(value, ast.Call):
                return None
            name = self.known_name(value.func, where, depth + 1)
            if name is None or (known is not None and name != known):
                return None
            known = name
        return known

    def known_name(self, expr: ast.expr, scope: Scope, depth: int = 0) -> str | None:
        """The resolved dotted name of ``expr`` when it names something imported (or a
        module or builtin never bound in the code); None for anything local or unknown."""
        if depth > MAX_RECEIVER_DEPTH:
            return None
        if isinstance(expr, ast.Name):
            qualified, hidden = scope.binding(expr.id)
            if qualified is None and hidden:
                # A function reference (f = time.sleep), else something of the code's own.
                return self.reference(expr.id, scope, depth + 1)
            if qualified is None and expr.id in self.bound and expr.id not in self.flat_imports:
                return None  # a function or class of the code itself, or a variable
        name = self.resolve(expr, scope, depth)
        if name is None or name.startswith("*."):
            return None
        return name

    def single(self, name: str, scope: Scope) -> tuple[ast.expr | ast.withitem, Scope] | None:
        """What the one binding of the local ``name`` (as seen from ``scope``) binds it
        to, and the scope that holds it; None when that is not known.

        Not known: a name bound more than once in its scope, or by anything but
        an assignment or a ``with``; a name declared ``global`` / ``nonlocal``
        anywhere (another function may rebind it); a module-level name when the
        module has a star import.
        """
        owner = scope.owner(name)
        if owner is None:
            return None
        value = owner.single.get(name)
        if value is None or name in self._walker.declared:
            return None
        if owner.parent is None and self.constructs["star-import"]:
            return None
        return value, owner

    def follow(
        self, node: ast.expr, scope: Scope, names: list[str] | None = None
    ) -> tuple[ast.expr, Scope]:
        """``node``, or, for a plain name bound once by an assignment, the value it
        was assigned (followed through further such names), with its scope; the
        names followed are added to ``names``."""
        for _ in range(MAX_RECEIVER_DEPTH):
            if not isinstance(node, ast.Name):
                break
            found = self.single(node.id, scope)
            if found is None or isinstance(found[0], ast.withitem):
                break
            if names is not None:
                names.append(node.id)
            node, scope = found[0], found[1]
        return node, scope

    def constant(self, node: ast.expr, scope: Scope) -> tuple[bool, LiteralValue]:
        """The scalar literal ``node`` passes, directly or through names (see :meth:`follow`)."""
        if type(node) is ast.Name:
            node, scope = self.follow(node, scope)
        return literal_value(node)

    def receiver(self, name: str, scope: Scope, depth: int = 0) -> str | None:
        """The dotted name of the object the local ``name`` stands for, if known.

        Known: a name annotated once in its scope with a resolved name
        (``client: httpx.Client``, ``"requests.Session"``, ``Optional[X]``,
        ``X | None``), else a name bound once to the result of a call of a
        resolved name (``s = requests.Session()``, ``conn = await
        aiosqlite.connect(p)``) or as the target of ``with`` / ``async with``
        on such a call (the object ``__enter__`` gives is taken to be the one
        called). The object is named by what was called: ``sqlite3.connect``
        for ``conn = sqlite3.connect(p)``.
        """
        if depth > MAX_RECEIVER_DEPTH:
            return None
        owner = scope.owner(name)
        if owner is None or name in self._walker.declared:
            return None
        annotated = owner.annotated
        if annotated is not None:
            annotation = annotated.get(name)
            if annotation is not None:
                known = self._annotation_name(annotation, owner, depth + 1)
                if known is not None:
                    return known
        found = self.single(name, owner)
        if found is None:
            return None
        value = found[0]
        if isinstance(value, ast.withitem):
            value = value.context_expr
        if type(value) is ast.Await:
            assert isinstance(value, ast.Await)
            value = value.value
        if type(value) is not ast.Call:
            return None
        assert isinstance(value, ast.Call)
        return self.known_name(value.func, owner, depth + 1)

    def _annotation_name(self, node: ast.expr, scope: Scope, depth: int) -> str | None:
        """The resolved name an annotation declares: ``X``, ``"X"``, ``Optional[X]``,
        ``Union[X, None]``, ``X | None``, ``Annotated[X, ...]``; None otherwise."""
        for _ in range(MAX_RECEIVER_DEPTH):
            kind = type(node)
            if kind is ast.Constant:
                assert isinstance(node, ast.Constant)
                text = node.value
                if not isinstance(text, str) or len(text) > _MAX_ANNOTATION_TEXT:
                    return None
                try:
                    node = ast.parse(text.strip(), mode="eval").body
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    return None
            elif kind is ast.BinOp:
                assert isinstance(node, ast.BinOp)
                if not isinstance(node.op, ast.BitOr):
                    return None
                parts = [p for p in (node.left, node.right) if not is_none(p)]
                if len(parts) != 1:
                    return None
                node = parts[0]
            elif kind is ast.Subscript:
                assert isinstance(node, ast.Subscript)
                wrapper = self.known_name(node.value, scope, depth)
                if wrapper is None or wrapper not in _TYPE_WRAPPERS:
                    return None
                inner = node.slice
                elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
                if wrapper.endswith("Annotated"):
                    elts = elts[:1]
                parts = [p for p in elts if not is_none(p)]
                if len(parts) != 1:
                    return None
                node = parts[0]
            elif kind is ast.Name or kind is ast.Attribute:
                return self.known_name(node, scope, depth)
            else:
                return None
        return None

    def arguments(self, call: CallSite) -> CallArgs:
        """The arguments of ``call``, splats of known dicts (``**opts`` where ``opts`` is
        bound once to a dict literal or ``dict(...)`` and never mutated) included."""
        args = call_args(call)
        pending = args.pending
        if pending is None:
            return args
        args.pending = None
        for splat in pending:
            names: list[str] = []
            node, scope = self.follow(splat, call.scope, names)
            entries = dict_entries(node)
            if (
                entries is None
                or (isinstance(node, ast.Call) and self.known_name(node.func, scope) != "dict")
                or not self.mutated.isdisjoint(names)
            ):
                args.kw_splat = True
                continue
            for key, value in entries.items():
                if key not in args.keywords:
                    args.keywords[key] = value
                    if scope is not call.scope:
                        if args.scopes is None:
                            args.scopes = {}
                        args.scopes[key] = scope
        return args

    @cached_property
    def mutated(self) -> set[str]:
        """Names that may hold a mutated dict: subscripted as an assignment target, or
        whose ``update`` / ``setdefault`` / ``pop`` / ... method is called, anywhere."""
        self.need(_MUTATOR_WORDS)
        names = set(self._walker.mutated)
        for call in self.calls:
            func = call.node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in _DICT_MUTATORS
                and isinstance(func.value, ast.Name)
            ):
                names.add(func.value.id)
        return names

    def _line_bounds(self, lineno: int) -> tuple[int, int]:
        """Start offset and end offset (terminator excluded) of a parser line."""
        index = min(max(lineno, 1), len(self.line_starts)) - 1
        start = self.line_starts[index]
        end = self.line_starts[index + 1] if index + 1 < len(self.line_starts) else len(self.code)
        while end > start and self.code[end - 1] in "\r\n":
            end -= 1
        return start, end

    def _offset(self, lineno: int, byte_col: int) -> int:
        start, end = self._line_bounds(lineno)
        line = self.code[start:end]
        if not line.isascii():
            # ast columns count UTF-8 bytes; spans count characters.
            prefix = line.encode("utf-8", "surrogatepass")[:byte_col]
            byte_col = len(prefix.decode("utf-8", "ignore"))
        return start + min(byte_col, len(line))

    def _range(self, node: ast.AST) -> tuple[int, int, bool]:
        """Character range of ``node`` clipped to its first line, and whether it was clipped."""
        lineno, col = position_of(node)
        start = self._offset(lineno, col)
        end_lineno = getattr(node, "end_lineno", None) or lineno
        end_col = getattr(node, "end_col_offset", None)
        if end_lineno != lineno or end_col is None:
            return start, self._line_bounds(lineno)[1], end_lineno != lineno
        return start, self._offset(end_lineno, end_col), False

    @cached_property
    def newline_offsets(self) -> list[int]:
        """Where the ``"\\n"``-separated lines (the studio's) start; see :attr:`line_starts`."""
        return newline_starts(self.code)

    @cached_property
    def plain_lines(self) -> list[str] | None:
        """The lines of ASCII code without ``"\r"``, in which columns are characters and
        the parser's lines are the ``"\n"``-separated ones; None for other code."""
        code = self.code
        return code.split("\n") if code.isascii() and "\r" not in code else None

    def span(self, node: ast.AST) -> Span:
        span = self._spans.get(id(node))
        if span is None:
            lines = self.plain_lines
            lineno, col = position_of(node)
            if lines is not None and 0 < lineno <= len(lines):
                # What span_from_offsets makes of _range, read off the line itself.
                text = lines[lineno - 1]
                start = min(col, len(text))
                end_col = getattr(node, "end_col_offset", None)
                end = len(text)
                if end_col is not None and (getattr(node, "end_lineno", None) or lineno) == lineno:
                    end = min(end_col, end)
                while start < end and text[start].isspace():
                    start += 1
                span = Span(lineno, start, max(1, end - start) if end > start else 0)
            else:
                start, end, _ = self._range(node)
                span = span_from_offsets(self.code, start, end, self.newline_offsets)
            self._spans[id(node)] = span
        return span

    def snippet(self, node: ast.AST, limit: int = 40) -> str:
        """The source text of ``node`` on its first line, shortened for a reason string."""
        start, end, clipped = self._range(node)
        text = self.code[start:end]
        if len(text) > limit:
            return text[: limit - 1] + "…"
        return text + "…" if clipped else text


def analysis_for(subject: Subject, strings: bool = True) -> Analysis | CheckResult:
    """The memoised analysis of ``subject``, or the failed result that replaces it;
    ``strings``: one that follows string kinds (see :func:`.rules.strings_needed`)."""
    cached = subject.cache.get(CACHE_KEY)
    if isinstance(cached, CheckResult) or (
        isinstance(cached, Analysis) and (cached._walker.strings or not strings)
    ):
        return cached
    result: Analysis | CheckResult
    tree = subject.tree
    if isinstance(tree, SyntaxError):
        result = _parse_failure(subject.code, tree)
    else:
        try:
            result = Analysis(subject.code, tree, strings)
        except (RecursionError, MemoryError) as exc:
            result = CheckResult(passed=False, reason=f"code too complex to analyse: {exc!r}")
    subject.cache[CACHE_KEY] = result
    return result


def _parse_failure(code: str, error: SyntaxError) -> CheckResult:
    lineno = error.lineno or 1
    starts = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", code))]
    index = min(max(lineno, 1), len(starts)) - 1
    line_end = code.find("\n", starts[index])
    line_end = len(code) if line_end == -1 else line_end
    start = min(starts[index] + max((error.offset or 1) - 1, 0), line_end)
    if start == line_end or code[start].isspace():
        # The parser points past the text of the line ("def f()" lacks its
        # colon): the span marks the line's last visible character, or nothing
        # on a blank line, so that it stays on the line.
        last = start
        while last > starts[index] and code[last - 1].isspace():
            last -= 1
        span = span_from_offsets(code, last - 1, last) if last > starts[index] else None
        if span is None:
            line = code.count("\n", 0, starts[index]) + 1
            span = Span(line, 0, 0)
    else:
        span = span_from_offsets(code, start, start + 1)
    return CheckResult(
        passed=False,
        reason=f"code does not parse: {error.msg} (line {span.line})",
        evidence=(span,),
    )
