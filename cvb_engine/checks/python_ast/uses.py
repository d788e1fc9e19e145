"""Where a call's value goes: whether it only paces or decides (``Where.not_only_for``),
and whether it reaches a call of some names (``Where.argument_of``).

A value is followed up through the expression that holds it to the statement it
ends in. It is *spent* on a sink when it lands in an argument of a call matching
the sink names (``time.sleep(base + random.uniform(0, 1))``), or in a comparison
that decides something (``if random.random() < rate``). Bound to a local name
(``jitter = ...``, ``delay += ...``), every later read of that name in the same
function is followed the same way, a few names deep. Anything else (returned,
joined into a string, stored on an object, handed to another call) is a use of
the value for its own sake.
"""

from __future__ import annotations

import ast

from cvb_engine.checks.python_ast.analysis import Analysis
from cvb_engine.checks.python_ast.params import call_words, match_call_name, prefix_words
from cvb_engine.checks.python_ast.scope import CallSite

# How many names a value is followed through (jitter -> delay -> sleep).
_MAX_NAMES = 4
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)


class _Uses:
    """The tree's parent links and the sink calls, made once per analysis and rule."""

    def __init__(self, analysis: Analysis, sinks: list[str]) -> None:
        analysis.need(call_words(sinks), prefix_words(sinks))
        self.sinks = {
            id(c.node)
            for c in analysis.calls
            if c.name is not None and any(match_call_name(p, c.name) for p in sinks)
        }
        self.parent: dict[int, ast.AST] = {}
        self.calls: list[ast.Call] = []
        for node in ast.walk(analysis.tree):
            if isinstance(node, ast.Call):
                self.calls.append(node)
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node

    def function_of(self, node: ast.AST) -> ast.AST | None:
        cur: ast.AST | None = node
        while cur is not None and not isinstance(cur, _FUNCTIONS):
            cur = self.parent.get(id(cur))
        return cur

    def spent(self, node: ast.AST, names_left: int, seen: set[str]) -> bool:
        """Whether the value of expression ``node`` only reaches sinks."""
        child, cur = node, self.parent.get(id(node))
        arithmetic = converted = False
        while cur is not None:
            if isinstance(cur, ast.Return):
                return self._returned(cur, names_left, seen, arithmetic and not converted)
            if isinstance(cur, ast.BinOp):
                arithmetic = True
            if isinstance(cur, ast.Call) and isinstance(cur.func, ast.Name):
                converted = converted or cur.func.id in ("int", "round")
            if isinstance(cur, ast.Call):
                if id(cur) in self.sinks and child is not cur.func:
                    return True
                if child is cur.func:
                    return False  # a method called on the value: used for itself
                name = cur.func
                # int(), round(), min(), max(), abs(): still a number on its way
                if not (isinstance(name, ast.Name) and name.id in _NUMERIC):
                    return False
            elif isinstance(cur, ast.Compare):
                return True  # a decision (sampling), not a value kept
            elif isinstance(cur, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = cur.targets if isinstance(cur, ast.Assign) else [cur.target]
                if not all(isinstance(t, ast.Name) for t in targets) or names_left <= 0:
                    return False
                return all(
                    self._name_spent(t.id, cur, names_left - 1, seen)  # type: ignore[attr-defined]
                    for t in targets
                )
            elif isinstance(cur, ast.stmt | ast.keyword | ast.comprehension):
                if isinstance(cur, ast.keyword):
                    child, cur = cur, self.parent.get(id(cur))
                    continue
                return False
            elif not isinstance(cur, ast.BinOp | ast.UnaryOp | ast.IfExp | ast.Tuple):
                return False
            child, cur = cur, self.parent.get(id(cur))
        return False

    def _returned(self, at: ast.Return, names_left: int, seen: set[str], delay_like: bool) -> bool:
        """A value returned by its function (``retry_delay(attempt)``): spent when every
        call of that function spends it; with no call in the code, when it is a float
        computed by arithmetic (a delay), not digits made of it."""
        function = self.function_of(at)
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            return False
        name = function.name
        callers = [
            n
            for n in self.calls
            if (isinstance(n.func, ast.Name) and n.func.id == name)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == name)
        ]
        if not callers:
            return delay_like
        if names_left <= 0 or name in seen:
            return False
        seen.add(name)
        return all(self.spent(c, names_left - 1, seen) for c in callers)

    def _name_spent(self, name: str, binding: ast.AST, names_left: int, seen: set[str]) -> bool:
        if name in seen:
            return True  # followed already (delay += jitter in a loop)
        seen.add(name)
        function = self.function_of(binding)
        if function is None:
            return False
        reads = [
            n
            for n in ast.walk(function)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        ]
        return bool(reads) and all(self.spent(n, names_left, seen) for n in reads)


_NUMERIC = frozenset({"int", "float", "round", "min", "max", "abs"})


def only_for(call: CallSite, sinks: list[str], analysis: Analysis) -> bool:
    """Whether the value of ``call`` is only spent on calls matching ``sinks`` (or on
    decisions), as the module docstring says."""
    return _uses(analysis, sinks).spent(call.node, _MAX_NAMES, set())


# Calls that hand back the object they are given, wrapped: the value goes on through them.
_WRAPPERS = frozenset(
    {
        "TextIOWrapper", "BufferedReader", "BufferedWriter", "iterdecode", "closing",
        "nullcontext", "enter_context", "getreader", "getwriter", "StreamReader",
        "StreamWriter", "open",
    }
)  # fmt: skip


class _Reach:
    """What :func:`reaches` needs, made once per analysis and rule."""

    def __init__(self, analysis: Analysis, targets: list[str], decided: frozenset[str]) -> None:
        self.uses = _uses(analysis, targets)
        # Keywords the checked call is judged on: a wrapper passing one decides it.
        self.decided = decided
        self.own = {
            n.name
            for n in ast.walk(analysis.tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }

    def reaches(self, node: ast.AST, names_left: int, seen: set[str]) -> bool:
        parent = self.uses.parent
        child, cur = node, parent.get(id(node))
        while cur is not None:
            if isinstance(cur, ast.Call):
                if child is cur.func:
                    return False  # open(p).read(): used for itself
                if id(cur) in self.uses.sinks:
                    return True
                func = cur.func
                if isinstance(func, ast.Name) and func.id in self.own:
                    return True  # handed to a helper of the code: it may reach them there
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called not in _WRAPPERS:
                    return False  # consumed there (json.load(f), yaml.safe_load(f))
                if any(kw.arg in self.decided for kw in cur.keywords):
                    return False  # the wrapper decides what the check is about itself
                # wrapped (io.TextIOWrapper(f), codecs.iterdecode(f)): follow the wrapper
            elif isinstance(cur, ast.Return | ast.Yield | ast.YieldFrom):
                return True  # a wrapper: its caller may hand the value on
            elif isinstance(cur, ast.withitem):
                target = cur.optional_vars
                return isinstance(target, ast.Name) and self._name_reaches(
                    target.id, cur, names_left, seen
                )
            elif isinstance(cur, ast.Assign | ast.AnnAssign):
                targets = cur.targets if isinstance(cur, ast.Assign) else [cur.target]
                if any(not isinstance(t, ast.Name) for t in targets):
                    return True  # stored on an object or in a container: not followed
                return names_left > 0 and any(
                    self._name_reaches(t.id, cur, names_left - 1, seen)  # type: ignore[attr-defined]
                    for t in targets
                )
            elif not isinstance(cur, ast.keyword | ast.Await | ast.IfExp | ast.BoolOp):
                return False  # an item, a subscript, a comprehension...: not the value itself
            child, cur = cur, parent.get(id(cur))
        return False

    def _name_reaches(self, name: str, binding: ast.AST, names_left: int, seen: set[str]) -> bool:
        if name in seen:
            return False
        seen.add(name)
        function = self.uses.function_of(binding)
        if function is None:
            return False
        return any(
            self.reaches(n, names_left, seen)
            for n in ast.walk(function)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        )


def _uses(analysis: Analysis, sinks: list[str]) -> _Uses:
    key = ("uses", tuple(sinks))
    uses = analysis.derived.get(key)
    if uses is None:
        uses = analysis.derived[key] = _Uses(analysis, sinks)
    return uses


def reaches(
    call: CallSite, targets: list[str], analysis: Analysis, decided: frozenset[str] = frozenset()
) -> bool:
    """Whether the value of ``call`` reaches a call matching ``targets`` (see
    ``Where.argument_of``); a wrapper on the way that passes one of the keywords
    ``decided`` itself (``io.TextIOWrapper(raw, newline="")``) stops it."""
    key = ("reach", tuple(targets), decided)
    found = analysis.derived.get(key)
    if found is None:
        found = analysis.derived[key] = _Reach(analysis, targets, decided)
    return found.reaches(call.node, _MAX_NAMES, set())


# Methods that put a value into the collection they are called on.
_PUTS = frozenset({"append", "add", "extend", "insert", "appendleft", "put", "put_nowait"})
_FRESH = frozenset({"list", "set", "dict", "deque", "WeakSet"})
_LOOKS = frozenset({"len", "bool", "any", "all", "print", "repr", "str", "isinstance", "id"})
_COPIES = frozenset({"list", "tuple", "set", "sorted", "frozenset"})


class _Keep:
    """Whether a value outlives the function that makes it (:func:`kept`)."""

    def __init__(self, analysis: Analysis) -> None:
        self.uses = _uses(analysis, [])

    def kept(self, node: ast.AST, names_left: int, seen: set[str]) -> bool:
        parent = self.uses.parent
        child, cur = node, parent.get(id(node))
        while cur is not None:
            if isinstance(cur, ast.Await | ast.Return | ast.Yield | ast.YieldFrom):
                return True  # awaited (it lives until done) or handed to the caller
            if isinstance(cur, ast.Attribute):
                return False  # t.add_done_callback(...), pending.append(...): not kept by that
            if isinstance(cur, ast.Call):
                func = cur.func
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr in _PUTS
                    and isinstance(func.value, ast.Name)
                ):
                    return self._collection_kept(func.value.id, cur, names_left, seen)
                called = func.id if isinstance(func, ast.Name) else None
                if called in _LOOKS:
                    return False  # len(pending): looked at, not kept
                if called not in _COPIES:
                    return True  # handed to another call (gather, a helper, a registry)
                # list(pending), tuple(...): a copy holding the same values, followed
            if isinstance(cur, ast.NamedExpr):
                # (t := create_task(...)) is both a name and a value that goes on
                if names_left > 0 and self._name_kept(cur.target.id, cur, names_left - 1, seen):
                    return True
                child, cur = cur, parent.get(id(cur))
                continue
            if isinstance(cur, ast.Assign | ast.AnnAssign):
                targets: list[ast.expr] = (
                    cur.targets if isinstance(cur, ast.Assign) else [cur.target]
                )
                if any(not isinstance(t, ast.Name) for t in targets):
                    return True  # stored on an object or in a container
                return names_left > 0 and any(
                    self._name_kept(t.id, cur, names_left - 1, seen)  # type: ignore[attr-defined]
                    for t in targets
                )
            if isinstance(cur, ast.stmt):
                return False  # a statement of its own: dropped
            if isinstance(cur, ast.comprehension) and child is cur.iter:
                return True  # iterated over: not followed
            child, cur = cur, parent.get(id(cur))
        return False

    def _collection_kept(self, name: str, at: ast.AST, names_left: int, seen: set[str]) -> bool:
        """A value put into the collection ``name``: kept when that collection is not a
        fresh local of the function, or is itself kept."""
        function = self.uses.function_of(at)
        if function is None or isinstance(function, ast.Module):
            return True
        local = [
            n
            for n in ast.walk(function)
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
        ]
        fresh = len(local) == 1 and _fresh_collection(local[0].value)
        if not fresh or _declared(function, name):
            return True  # a module-level, global or parameter collection
        return names_left > 0 and self._name_kept(name, local[0], names_left - 1, seen)

    def _name_kept(self, name: str, binding: ast.AST, names_left: int, seen: set[str]) -> bool:
        if name in seen:
            return False
        seen.add(name)
        function = self.uses.function_of(binding)
        if function is None or isinstance(function, ast.Module):
            return True  # a module-level name lives on
        reads = [
            n
            for n in ast.walk(function)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        ]
        return any(self.kept(n, names_left, seen) for n in reads)


def _fresh_collection(value: ast.expr) -> bool:
    if isinstance(value, ast.List | ast.Set | ast.Dict) and not getattr(value, "elts", None):
        return True
    return (
        isinstance(value, ast.Call)
        and not value.args
        and (
            (isinstance(value.func, ast.Name) and value.func.id in _FRESH)
            or (isinstance(value.func, ast.Attribute) and value.func.attr in _FRESH)
        )
    )


def _declared(function: ast.AST, name: str) -> bool:
    return any(
        isinstance(n, ast.Global | ast.Nonlocal) and name in n.names for n in ast.walk(function)
    )


def kept(call: CallSite, analysis: Analysis) -> bool:
    """Whether the value of ``call`` outlives its function (see ``Where.result_kept``)."""
    found = analysis.derived.get("keep")
    if found is None:
        found = analysis.derived["keep"] = _Keep(analysis)
    return found.kept(call.node, _MAX_NAMES, set())
