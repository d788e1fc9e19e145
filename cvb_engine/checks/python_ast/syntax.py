"""Small questions asked of syntax nodes, answered without evaluating anything:
literals, the string kind of an expression, dict literals, dotted names,
``partial(...)``, exception handlers that swallow, main guards, positions.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import TypeAlias

from cvb_engine.checks.python_ast.params import LiteralValue

_MUTABLE_FACTORIES = frozenset({"list", "dict", "set"})
_BROAD_EXCEPTIONS = frozenset({"Exception", "BaseException"})
# Bounds the recursion of the string classifier; deeper expressions are "other".
_MAX_EXPR_DEPTH = 50

_StringLookup: TypeAlias = Callable[[str], str]


def is_literal(node: ast.expr, depth: int = 0) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if depth > _MAX_EXPR_DEPTH:
        return False
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(is_literal(e, depth + 1) for e in node.elts)
    return False


def _add_operands(node: ast.BinOp) -> list[ast.expr]:
    """The operands of a chain ``a + b + c``, flattened without recursion."""
    out: list[ast.expr] = []
    todo: list[ast.expr] = [node]
    while todo:
        cur = todo.pop()
        if isinstance(cur, ast.BinOp) and isinstance(cur.op, ast.Add):
            todo.append(cur.right)
            todo.append(cur.left)
        else:
            out.append(cur)
    return out


def string_kind_of(node: ast.expr, lookup: _StringLookup, depth: int = 0) -> str:
    """Classify an expression: ``"dynamic"`` string, ``"literal"`` string, or ``"other"``.

    ``lookup`` gives the kind a name stands for at the point of the expression.
    """
    if depth > _MAX_EXPR_DEPTH:
        return "other"
    if isinstance(node, ast.Constant):
        return "literal" if isinstance(node.value, str) else "other"
    if isinstance(node, ast.JoinedStr):
        # An f-string is built from its values: one that only splices in literal
        # text, such as the placeholder list of an IN (...) clause, is literal.
        dynamic = any(
            isinstance(v, ast.FormattedValue)
            and string_kind_of(v.value, lookup, depth + 1) != "literal"
            for v in node.values
        )
        return "dynamic" if dynamic else "literal"
    if isinstance(node, ast.Call | ast.BinOp | ast.Subscript) and placeholder_list(node, depth):
        return "literal"
    if isinstance(node, ast.Tuple | ast.List) and node.elts:
        # a fixed sequence of texts (column names): literal text once joined or spliced;
        # a list of arguments holding a built string is not itself one (["tar", f"{p}"])
        literal = all(string_kind_of(e, lookup, depth + 1) == "literal" for e in node.elts)
        return "literal" if literal else "other"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and not node.keywords
    ):
        # ", ".join(COLUMNS): literal text joined by a literal separator is literal
        sep = string_kind_of(node.func.value, lookup, depth + 1)
        items = string_kind_of(node.args[0], lookup, depth + 1)
        if sep == items == "literal":
            return "literal"
    if isinstance(node, ast.Name):
        return lookup(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        kinds = [(op, string_kind_of(op, lookup, depth + 1)) for op in _add_operands(node)]
        if any(k == "dynamic" for _, k in kinds):
            return "dynamic"
        if any(k == "literal" for _, k in kinds):
            if any(k == "other" and not is_literal(op) for op, k in kinds):
                return "dynamic"
            if all(k == "literal" for _, k in kinds):
                return "literal"
        return "other"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = string_kind_of(node.left, lookup, depth + 1)
        if left == "dynamic" or (
            left == "literal" and not _literal_text(node.right, lookup, depth + 1)
        ):
            return "dynamic"
        return left
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        receiver = string_kind_of(node.func.value, lookup, depth + 1)
        arguments = [*node.args, *(kw.value for kw in node.keywords)]
        if receiver == "dynamic" or (
            receiver == "literal"
            and not all(_literal_text(a, lookup, depth + 1) for a in arguments)
        ):
            return "dynamic"
    return "other"


def _literal_text(node: ast.expr, lookup: _StringLookup, depth: int) -> bool:
    """Whether a value spliced into a string is literal: a literal, literal text (a
    placeholder list, a name bound to literal text), or a tuple of those."""
    if is_literal(node):
        return True
    if isinstance(node, ast.Tuple):
        return all(_literal_text(e, lookup, depth + 1) for e in node.elts)
    return string_kind_of(node, lookup, depth) == "literal"


# The text of a list of query placeholders: ?, %s, $1, :name, @p, joined by commas.
_PLACEHOLDERS = re.compile(r"[\s,()]*(?:(?:\?|%s|\$\d*|[:@]\w*|%\(\w*\)s)[\s,()]*)+")
_PLACEHOLDER_SIGIL = re.compile(r"[\s,]*(?:[:@$]\w*|%\(\w*)$")
_TRIMS = frozenset({"strip", "rstrip", "lstrip", "removesuffix", "removeprefix"})


def _placeholder_text(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(_PLACEHOLDERS.fullmatch(node.value))
    if isinstance(node, ast.JoinedStr):  # f":p{i}", f"%(v{i})s", f"${i + 1}": a named one
        first = node.values[0] if node.values else None
        return (
            isinstance(first, ast.Constant)
            and isinstance(first.value, str)
            and bool(_PLACEHOLDER_SIGIL.fullmatch(first.value))
            and all(
                isinstance(v, ast.FormattedValue)
                or (
                    isinstance(v, ast.Constant)
                    and isinstance(v.value, str)
                    and _PLACEHOLDERS.fullmatch("?" + v.value) is not None
                )
                for v in node.values[1:]
            )
        )
    return False


def placeholder_list(node: ast.expr, depth: int = 0) -> bool:
    """Whether ``node`` builds only a list of query placeholders from literal text: the
    ``?, ?, ?`` of an ``IN (...)`` clause made by ``", ".join("?" * len(ids))``,
    ``",".join(["%s"] * n)``, ``",".join(f":p{i}" for i in ...)``, ``"?," * n`` (trimmed,
    sliced or not), or ``"?" + ", ?" * (n - 1)``. The values themselves are bound apart."""
    if depth > _MAX_EXPR_DEPTH:
        return False
    if _placeholder_text(node):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _placeholder_text(node.left) or _placeholder_text(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return placeholder_list(node.left, depth + 1) and placeholder_list(node.right, depth + 1)
    if isinstance(node, ast.Subscript):  # ("?, " * n)[:-2]
        return placeholder_list(node.value, depth + 1)
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    receiver, method = node.func.value, node.func.attr
    if method in _TRIMS:
        return placeholder_list(receiver, depth + 1) and all(
            isinstance(a, ast.Constant) for a in node.args
        )
    if method != "join" or len(node.args) != 1 or not _placeholder_text_or_sep(receiver):
        return False
    items = node.args[0]
    if isinstance(items, ast.BinOp) and isinstance(items.op, ast.Mult):  # ["?"] * n, "?" * n
        items = (
            items.left
            if isinstance(items.left, ast.List | ast.Tuple | ast.Constant)
            else (items.right)
        )
    if isinstance(items, ast.List | ast.Tuple | ast.Set):
        return bool(items.elts) and all(_placeholder_text(e) for e in items.elts)
    if isinstance(items, ast.GeneratorExp | ast.ListComp):
        return _placeholder_text(items.elt)
    if isinstance(items, ast.Call) and isinstance(items.func, ast.Name | ast.Attribute):
        called = items.func.id if isinstance(items.func, ast.Name) else items.func.attr
        return called == "repeat" and bool(items.args) and _placeholder_text(items.args[0])
    return _placeholder_text(items)


def _placeholder_text_or_sep(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (not node.value.strip(" ,\n") or bool(_PLACEHOLDERS.fullmatch(node.value)))
    )


def augmented_kind(old: str, op: ast.operator, value: ast.expr, lookup: _StringLookup) -> str:
    """The string kind of ``name <op>= value`` given the kind ``name`` had."""
    if old == "dynamic" and isinstance(op, ast.Add | ast.Mod):
        return "dynamic"
    new = string_kind_of(value, lookup)
    if isinstance(op, ast.Add):
        if new == "dynamic" or (old == "literal" and new == "other" and not is_literal(value)):
            return "dynamic"
        return "literal" if old == new == "literal" else "other"
    if isinstance(op, ast.Mod) and old == "literal":
        return "literal" if is_literal(value) else "dynamic"
    return "other"


def is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def mutable_default(node: ast.expr) -> bool:
    if isinstance(node, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _MUTABLE_FACTORIES
    )


def broad_exception(node: ast.expr | None) -> bool:
    if node is None:
        return True
    if isinstance(node, ast.Name):
        return node.id in _BROAD_EXCEPTIONS
    if isinstance(node, ast.Attribute):
        return (
            node.attr in _BROAD_EXCEPTIONS
            and isinstance(node.value, ast.Name)
            and node.value.id == "builtins"
        )
    if isinstance(node, ast.Tuple):
        return any(broad_exception(e) for e in node.elts)
    return False


def swallows(body: Sequence[ast.stmt]) -> bool:
    return all(
        isinstance(s, ast.Pass | ast.Continue)
        or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value is ...)
        for s in body
    )


_ARG_NAME = attrgetter("arg")


def param_names(args: ast.arguments) -> list[str]:
    if args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg:
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        params += [a for a in (args.vararg, args.kwarg) if a is not None]
        return list(map(_ARG_NAME, params))
    return list(map(_ARG_NAME, args.args))


def dict_entries(node: ast.expr) -> dict[str, ast.expr] | None:
    """The entries of a dict that says what it holds: a literal with only string keys
    (``{"shell": True}``) or ``dict(shell=True)``; None for any other expression.

    Whether ``dict`` is the builtin is for the caller to say.
    """
    kind = type(node)
    if kind is ast.Dict:
        assert isinstance(node, ast.Dict)
        entries: dict[str, ast.expr] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                return None
            entries[key.value] = value  # a later duplicate key wins, as in Python
        return entries
    if kind is ast.Call:
        assert isinstance(node, ast.Call)
        if (
            type(node.func) is ast.Name
            and node.func.id == "dict"
            and not node.args
            and all(kw.arg is not None for kw in node.keywords)
        ):
            return {str(kw.arg): kw.value for kw in node.keywords}
    return None


def dotted_parts(node: ast.expr) -> list[str] | None:
    """The components of a Name/Attribute chain (in any order), None for anything else."""
    parts: list[str] = []
    while type(node) is ast.Attribute:
        assert isinstance(node, ast.Attribute)
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    assert isinstance(node, ast.Name)
    parts.append(node.id)
    return parts


def partial_target(node: ast.expr) -> ast.expr | None:
    """The first argument of a call that reads ``partial(f, ...)`` or ``x.partial(f, ...)``
    (whether it is ``functools.partial`` is for the caller to say)."""
    if not isinstance(node, ast.Call) or not node.args or isinstance(node.args[0], ast.Starred):
        return None
    func = node.func
    if (isinstance(func, ast.Name) and func.id == "partial") or (
        isinstance(func, ast.Attribute) and func.attr == "partial"
    ):
        return node.args[0]
    return None


def is_break_if(node: ast.stmt) -> bool:
    """``if <test>: break`` and nothing else."""
    return (
        isinstance(node, ast.If)
        and not node.orelse
        and len(node.body) == 1
        and isinstance(node.body[0], ast.Break)
    )


def is_main_guard(node: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (
        isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)
    ):
        return False
    sides = (node.left, node.comparators[0])
    return any(isinstance(a, ast.Name) and a.id == "__name__" for a in sides) and any(
        isinstance(b, ast.Constant) and b.value == "__main__" for b in sides
    )


NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
# "" is the end of the text, after which nothing continues a name.
NAME_CHARS = NAME_START | frozenset("0123456789")


def position_of(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def made_call(node: ast.expr | None) -> ast.expr | None:
    """The call an expression's value comes from when it is one, awaited or not."""
    if type(node) is ast.Await:
        assert isinstance(node, ast.Await)
        node = node.value
    return node if type(node) is ast.Call else None


def literal_value(node: ast.expr) -> tuple[bool, LiteralValue]:
    """The value of a scalar literal (``True``, ``-1``, ``"r"``), without evaluating code."""
    if not isinstance(node, ast.Constant | ast.UnaryOp):
        return False, None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    if value is None or isinstance(value, bool | int | float | str):
        return True, value
    return False, None
