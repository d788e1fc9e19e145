"""Whether a constraint applies to a solution at all (``Constraint.applies_when``).

Some constraints are about something the code may not have: "shared mutable state
is guarded by a lock" says nothing about code whose threads share no mutable
state (results handed back through a queue or through futures' return values).
Such code honors the constraint, and its checks, which look for the lock, are not
asked. Each condition here is a pure function of the parsed solution.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from cvb_engine.checks.base import Subject

# Methods that change the object they are called on (list, dict, set, deque).
_MUTATORS = frozenset(
    {
        "append", "extend", "insert", "remove", "pop", "popitem", "clear", "update",
        "setdefault", "add", "discard", "appendleft", "extendleft", "popleft", "sort",
        "reverse", "__setitem__", "__delitem__", "__iadd__",
    }
)  # fmt: skip
# Methods where an object is set up, before other threads can see it.
_SETUP = frozenset({"__init__", "__new__", "__post_init__", "setUp", "__set_name__"})
# Calls that run a function in another thread: the function is their first argument
# (run_in_executor: second), or their target= keyword.
_RUNNERS = frozenset({"submit", "map", "apply_async", "to_thread", "start_new_thread"})
_FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef


def _root(node: ast.expr) -> ast.expr:
    """The object an attribute or item chain starts from (``self`` of ``self.a[k].b``)."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node


def _changed(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[ast.expr, bool]]:
    """The expressions a function's own body changes, and whether in place (an item, an
    attribute, a mutating method) rather than by rebinding a name (``n += 1``)."""
    out: list[tuple[ast.expr, bool]] = []
    todo: list[ast.AST] = list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, _FUNCTIONS | ast.ClassDef | ast.Lambda):
            continue  # judged on its own
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    # self.result = value rebinds an attribute in one step (a worker handing
                    # back its result); an item set, a deletion or a += is a change in place.
                    plain = isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(
                        sub, ast.Attribute
                    )
                    if (
                        isinstance(sub, ast.Attribute | ast.Subscript)
                        and isinstance(sub.ctx, ast.Store | ast.Del)
                        and not plain
                    ):
                        out.append((sub, True))
                    elif isinstance(sub, ast.Name) and isinstance(node, ast.AugAssign):
                        out.append((sub, False))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
        ):
            out.append((node.func.value, True))
        todo.extend(ast.iter_child_nodes(node))
    return out


def _local_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[set[str], set[str]]:
    """(names bound in the function's own body or as its parameters, names it declares
    global or nonlocal)."""
    args = function.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    bound, declared = set(params), set()
    todo: list[ast.AST] = list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, _FUNCTIONS | ast.ClassDef):
            bound.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Global | ast.Nonlocal):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return bound - declared, declared


def _thread_functions(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if kw.arg == "target" and isinstance(kw.value, ast.Name):
                names.add(kw.value.id)
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        args = node.args[1:] if called == "run_in_executor" else node.args
        if (called in _RUNNERS or called == "run_in_executor") and args:
            first = args[0]
            if isinstance(first, ast.Name):
                names.add(first.id)
    return names


def shares_mutable_state(tree: ast.Module) -> bool:
    """Whether the code keeps mutable state that concurrent callers could share.

    Shared: an attribute of ``self`` / ``cls`` changed in place (an item set, ``+=``, a
    mutating method) outside the set-up methods, a plain ``self.x = value`` rebinding
    being one atomic step; a
    module-level name, or a name of an enclosing function, changed from inside a
    function (``CACHE[k] = v``, ``results.append(x)`` in a closure, ``global`` or
    ``nonlocal`` rebinding); a parameter changed by a function that is run in threads
    (``Thread(target=work, args=(results,))``). Not shared: locals, including the
    lists a function fills from ``future.result()`` or ``queue.get()``.
    """
    module_names = {
        sub.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        for sub in ast.walk(target)
        if isinstance(sub, ast.Name)
    }
    threaded = _thread_functions(tree)
    for function, method in _functions(tree):
        local, declared = _local_names(function)
        args = function.args
        params = [a.arg for a in [*args.posonlyargs, *args.args]]
        owner = params[0] if method and params else None
        for changed, in_place in _changed(function):
            root = _root(changed)
            if not isinstance(root, ast.Name):
                continue
            name = root.id
            if name == owner:
                if function.name not in _SETUP:
                    return True
            elif name in declared:
                return True
            elif name not in local:
                return True  # a module-level name or one of an enclosing function
            elif name in params and function.name in threaded and in_place:
                return True
        if declared & module_names and any(
            isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in declared
            for n in ast.walk(function)
        ):
            return True
    return False


def _functions(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every function of the code, and whether it is a method (defined in a class body)."""
    out: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]] = []
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, in_class = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _FUNCTIONS):
                out.append((child, in_class))
                todo.append((child, False))
            elif isinstance(child, ast.ClassDef):
                todo.append((child, True))
            else:
                todo.append((child, False if isinstance(node, _FUNCTIONS) else in_class))
    return out


#: The conditions a constraint may apply under, by name, and the reason given when a
#: solution does not meet one (the constraint is then honored without its checks).
CONDITIONS: dict[str, tuple[Callable[[ast.Module], bool], str]] = {
    "shared-mutable-state": (
        shares_mutable_state,
        "the code keeps no mutable state that threads share (results go through locals, "
        "queues or futures): there is nothing to guard",
    ),
}


def applies(condition: str, subject: Subject) -> bool:
    """Whether ``subject`` meets ``condition``; code that does not parse always does
    (its checks say what is wrong with it)."""
    tree = subject.tree
    if not isinstance(tree, ast.Module):
        return True
    test, _ = CONDITIONS[condition]
    try:
        return test(tree)
    except RecursionError:  # absurd nesting: the checks judge it
        return True
