"""State a lock guards, read or changed without it (``forbid-construct unguarded-state``).

A class that makes a lock in one of its attributes (``self._lock = threading.Lock()``)
guards with it the attributes it changes while holding it, and those it reads while
holding it that are changed somewhere (a reader that takes the lock says the state
needs it); a module that binds a lock at its top level guards its module-level
names the same way. Held means inside ``with <lock>:`` (``async with`` too), or after a
blocking ``<lock>.acquire()`` statement until ``<lock>.release()``, the
``try``/``finally`` around the work included; a method the class calls only while
holding the lock runs under it. Every read or change of guarded state elsewhere
(outside the set-up methods, where no other thread sees the object yet) is found:
``summary()`` iterating the dict that ``track()`` fills under the lock.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

_LOCKS = frozenset({"Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore"})
_SETUP = frozenset({"__init__", "__new__", "__post_init__", "__set_name__", "setUp"})
_MUTATORS = frozenset(
    {
        "append", "extend", "insert", "remove", "pop", "popitem", "clear", "update",
        "setdefault", "add", "discard", "appendleft", "extendleft", "popleft", "sort",
        "reverse",
    }
)  # fmt: skip
_FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef

_Key = Callable[[ast.expr], str | None]


def _is_lock_call(node: ast.expr | None) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in _LOCKS


class _Scan:
    """One pass over the functions of a class (or of the module) with a lock."""

    def __init__(self, key: _Key, locks: set[str], lockers: frozenset[str] = frozenset()) -> None:
        self.key = key
        self.locks = locks
        # Methods that hold the lock around a yield (``with self._locked():``).
        self.lockers = lockers
        self.changed_held: set[str] = set()
        self.changed: set[str] = set()  # changed anywhere, held or not
        self.accesses: list[tuple[str, ast.AST, bool]] = []  # (key, node, held)
        self.calls_held: dict[str, list[bool]] = {}

    def _lock_of(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Call) and self.key(node.func) in self.lockers:
            return True
        return self.key(node) in self.locks

    def _lock_call(self, stmt: ast.stmt, method: str) -> bool:
        return (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr == method
            and (method == "release" or not stmt.value.args)
            and self._lock_of(stmt.value.func.value)
        )

    def body(self, stmts: list[ast.stmt], held: bool) -> None:
        for stmt in stmts:
            if self._lock_call(stmt, "acquire"):
                held = True
                continue
            if self._lock_call(stmt, "release"):
                held = False
                continue
            if isinstance(stmt, _FUNCTIONS | ast.ClassDef):
                continue  # runs elsewhere, judged on its own
            if isinstance(stmt, ast.With | ast.AsyncWith):
                inner = held or any(self._lock_of(item.context_expr) for item in stmt.items)
                for item in stmt.items:
                    self.expr(item.context_expr, held)
                self.body(stmt.body, inner)
                continue
            if isinstance(stmt, ast.Try | ast.TryStar):
                self.body(stmt.body, held)
                for handler in stmt.handlers:
                    self.body(handler.body, held)
                self.body(stmt.orelse, held)
                self.body(stmt.finalbody, held)
                continue
            for name, value in ast.iter_fields(stmt):
                if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                    self.body(value, held)
                elif isinstance(value, list):
                    for item in value:
                        if isinstance(item, ast.expr):
                            self.expr(item, held, changes=name == "targets")
                elif isinstance(value, ast.expr):
                    self.expr(value, held, changes=name == "target" or name == "targets")

    def _changed(self, key: str, held: bool) -> None:
        self.changed.add(key)
        if held:
            self.changed_held.add(key)

    def guarded(self) -> set[str]:
        """What this scan shows the lock guards: state changed while holding it, and
        state read while holding it that is changed somewhere (see :func:`_guarded`)."""
        return self.changed_held | {k for k, _, held in self.accesses if held}

    def expr(self, node: ast.expr, held: bool, changes: bool = False) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Lambda):
                continue
            key = self.key(sub) if isinstance(sub, ast.Attribute | ast.Name) else None
            if key is not None and key not in self.locks:
                self.accesses.append((key, sub, held))
                if changes or isinstance(getattr(sub, "ctx", None), ast.Store):
                    self._changed(key, held)
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                receiver = sub.func.value
                while (
                    isinstance(receiver, ast.Subscript | ast.Attribute)
                    and self.key(receiver) is None
                ):
                    receiver = receiver.value
                target = self.key(receiver)
                if target is not None and sub.func.attr in _MUTATORS:
                    self._changed(target, held)
                if sub.func.attr and self.key(sub.func) is not None:
                    self.calls_held.setdefault(sub.func.attr, []).append(held)
            if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store | ast.Del):
                base = sub.value
                while isinstance(base, ast.Subscript):
                    base = base.value
                target = self.key(base)
                if target is not None:
                    self._changed(target, held)


def _self_key(owner: str) -> _Key:
    def key(node: ast.expr) -> str | None:
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == owner
        ):
            return node.attr
        return None

    return key


def _class_findings(cls: ast.ClassDef) -> list[ast.AST]:
    methods = [n for n in cls.body if isinstance(n, _FUNCTIONS)]
    locks: set[str] = set()
    owners: dict[str, str] = {}
    for method in methods:
        params = method.args.posonlyargs + method.args.args
        if not params:
            continue
        owners[method.name] = params[0].arg
        key = _self_key(params[0].arg)
        for node in ast.walk(method):
            if isinstance(node, ast.Assign) and _is_lock_call(node.value):
                locks.update(k for t in node.targets if (k := key(t)) is not None)
    for node in cls.body:  # a lock made in the class body: _lock = threading.Lock()
        if isinstance(node, ast.Assign) and _is_lock_call(node.value):
            locks.update(t.id for t in node.targets if isinstance(t, ast.Name))
    if not locks:
        return []
    names = {m.name for m in methods}
    lockers = frozenset(
        m.name
        for m in methods
        if m.name in owners and _holds_around_yield(m, owners[m.name], locks)
    )
    scans: dict[str, _Scan] = {}
    for method in methods:
        if method.name not in owners or method.name in _SETUP or method.name in lockers:
            continue
        scan = _Scan(_self_key(owners[method.name]), locks, lockers)
        scan.body(method.body, False)
        scans[method.name] = scan
    guarded: set[str] = set()
    calls: dict[str, list[bool]] = {}
    changed: set[str] = set()
    for scan in scans.values():
        guarded |= scan.guarded()
        changed |= scan.changed
        for name, marks in scan.calls_held.items():
            calls.setdefault(name, []).extend(marks)
    # A helper the class calls only while holding the lock runs under it.
    under = {name for name, marks in calls.items() if marks and all(marks)}
    found: list[ast.AST] = []
    for name, scan in scans.items():
        if name in under:
            continue
        found.extend(
            node
            for key, node, held in scan.accesses
            if not held and key in (guarded & changed) - names
        )
    return found


def _holds_around_yield(
    method: ast.FunctionDef | ast.AsyncFunctionDef, owner: str, locks: set[str]
) -> bool:
    """A context-manager method that yields while holding the lock."""
    key = _self_key(owner)
    for node in ast.walk(method):
        if isinstance(node, ast.With | ast.AsyncWith) and any(
            key(item.context_expr) in locks for item in node.items
        ):
            return any(isinstance(n, ast.Yield) for n in ast.walk(node))
    return False


def _module_findings(tree: ast.Module) -> list[ast.AST]:
    locks = {
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign) and _is_lock_call(node.value)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    if not locks:
        return []
    module_names = {
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        for t in ast.walk(target)
        if isinstance(t, ast.Name)
    }

    def key(node: ast.expr) -> str | None:
        return node.id if isinstance(node, ast.Name) and node.id in module_names else None

    scans = []
    for function in tree.body:
        if isinstance(function, _FUNCTIONS):
            scan = _Scan(key, locks)
            scan.body(function.body, False)
            scans.append(scan)
    guarded = set().union(*(s.guarded() for s in scans)) if scans else set()
    guarded &= set().union(*(s.changed for s in scans)) if scans else set()
    return [node for s in scans for k, node, held in s.accesses if not held and k in guarded]


def find_unguarded_state(tree: ast.Module) -> list[ast.AST]:
    """Each read or change of lock-guarded state made without the lock (module docstring)."""
    found = _module_findings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            found.extend(_class_findings(node))
    return found
