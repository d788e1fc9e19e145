"""Where values go, for the conditions on a call's result (:func:`find_flow`), and the
accumulators a function updates but never reads (:func:`find_unread_accumulators`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from cvb_engine.checks.python_ast.syntax import is_literal, made_call, param_names


@dataclass(slots=True)
class Flow:
    """Where values go, for the conditions on a call's result (made by :func:`find_flow`).

    ``assigned`` maps a call (by node id) to the targets its value is assigned to
    (``t0 = time.time()``, ``self.sem = Semaphore(5)``, ``t = await f()``);
    ``discarded`` holds the calls that are statements of their own; ``loads`` counts
    the reads of each name anywhere, ``receivers`` those that are the receiver of a
    method call (``ev`` in ``ev.wait()``) and ``bases`` those that are the base of an
    attribute (``proc`` in ``proc.stdout``); ``attributes`` holds the attribute names
    read anywhere and ``read_on`` those read on each name, a method counting only
    when its value is used (not ``proc.wait()`` on a line of its own);
    ``with_targets`` maps a call to the target of the ``with`` it opens; ``subtracted`` the
    calls (by id), ``subtracted_names`` the names and ``subtracted_attributes`` the
    attribute names that are operands of a subtraction.
    """

    assigned: dict[int, list[ast.expr]]
    discarded: set[int]
    loads: dict[str, int]
    receivers: dict[str, int]
    attributes: set[str]
    bases: dict[str, int]
    read_on: dict[str, set[str]]
    with_targets: dict[int, ast.expr]
    subtracted: set[int]
    subtracted_names: set[str]
    subtracted_attributes: set[str]


def find_flow(tree: ast.Module) -> Flow:
    flow = Flow({}, set(), {}, {}, set(), {}, {}, {}, set(), set(), set())
    loads, receivers, bases = flow.loads, flow.receivers, flow.bases
    on_names: list[tuple[ast.Attribute, str]] = []
    dropped_methods: set[int] = set()
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Name:
            assert isinstance(node, ast.Name)
            if type(node.ctx) is ast.Load:
                loads[node.id] = loads.get(node.id, 0) + 1
        elif kind is ast.Call:
            assert isinstance(node, ast.Call)
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                receivers[func.value.id] = receivers.get(func.value.id, 0) + 1
        elif kind is ast.Attribute:
            assert isinstance(node, ast.Attribute)
            if type(node.ctx) is ast.Load:
                flow.attributes.add(node.attr)
            if isinstance(node.value, ast.Name):
                bases[node.value.id] = bases.get(node.value.id, 0) + 1
                if type(node.ctx) is ast.Load:
                    on_names.append((node, node.value.id))
        elif kind is ast.With or kind is ast.AsyncWith:
            assert isinstance(node, ast.With | ast.AsyncWith)
            for item in node.items:
                made = made_call(item.context_expr)
                if made is not None and item.optional_vars is not None:
                    flow.with_targets[id(made)] = item.optional_vars
        elif kind is ast.Assign or kind is ast.AnnAssign:
            assert isinstance(node, ast.Assign | ast.AnnAssign)
            made = made_call(node.value)
            if made is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                flow.assigned.setdefault(id(made), []).extend(targets)
        elif kind is ast.Expr:
            assert isinstance(node, ast.Expr)
            made = made_call(node.value)
            if made is not None:
                flow.discarded.add(id(made))
                assert isinstance(made, ast.Call)
                dropped_methods.add(id(made.func))
        elif kind is ast.BinOp or kind is ast.AugAssign:
            assert isinstance(node, ast.BinOp | ast.AugAssign)
            if type(node.op) is not ast.Sub:
                continue
            pair = (
                (node.left, node.right)
                if isinstance(node, ast.BinOp)
                else (node.target, node.value)
            )
            if any(is_literal(side) for side in pair):
                continue  # a reading less a constant is a reading, not a duration
            operands = list(pair)
            while operands:
                operand = operands.pop()
                if isinstance(operand, ast.BinOp):  # (time.time() * 1000) - t0_ms
                    operands += (operand.left, operand.right)
                elif type(operand) is ast.Call:
                    flow.subtracted.add(id(operand))
                elif isinstance(operand, ast.Name):
                    flow.subtracted_names.add(operand.id)
                elif isinstance(operand, ast.Attribute):
                    flow.subtracted_attributes.add(operand.attr)
    for attribute, name in on_names:
        if id(attribute) not in dropped_methods:
            flow.read_on.setdefault(name, set()).add(attribute.attr)
    return flow


# Methods that add to a collection in place: a name only ever updated so is unread.
_ACCUMULATE = frozenset({"append", "add", "extend", "insert", "appendleft", "update", "setdefault"})
# Log record methods (logger.warning(...), logging.error(...), log.log(level, ...)).
_LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}
)


def _logs(stmt: ast.stmt) -> bool:
    """A statement of its own that writes a log record (``log.warning("line %d", n)``)."""
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr in _LOG_METHODS
        and isinstance(stmt.value.func.value, ast.Name | ast.Attribute)
        and bool(stmt.value.args)
    )


def _beside_a_log(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    """The statements (by id) of the function's blocks that also write a log record: an
    update made there is a second record of something the log reports already."""
    out: set[int] = set()
    for node in ast.walk(function):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(isinstance(s, ast.stmt) and _logs(s) for s in block):
                out.update(id(s) for s in block)
    return out


def find_unread_accumulators(tree: ast.Module) -> list[ast.AST]:
    """For each local name of a function that is updated (``skipped += 1``,
    ``rejected.append(row)`` as a statement, ``by_reason[r] += 1``) but never read, by the function or code
    nested in it, the first update. A parameter, or a name declared ``global`` /
    ``nonlocal`` or never bound otherwise in the function, belongs to someone else
    who may read it. An update every one of which sits in a block that also writes a
    log record (``log.warning("line %d: %s", n, exc); bad.append(n)``) is not unread
    state: the log reports what it records."""
    out: list[ast.AST] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        updates: dict[str, ast.AST] = {}
        # names with an update that no log record stands beside (the rest are reported)
        unlogged: set[str] = set()
        logged = _beside_a_log(function)
        bound: set[str] = set()
        read: set[str] = set()
        declared: set[str] = set(param_names(function.args))
        receivers: set[int] = set()
        nodes = [n for statement in function.body for n in ast.walk(statement)]
        for node in nodes:
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                updates.setdefault(node.target.id, node)
                receivers.add(id(node.target))
                if id(node) not in logged:
                    unlogged.add(node.target.id)
            elif isinstance(node, ast.AugAssign | ast.Assign):
                # by_reason[reason] += 1, bad[line_no] = row
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        updates.setdefault(target.value.id, node)
                        receivers.add(id(target.value))
                        if id(node) not in logged:
                            unlogged.add(target.value.id)
            elif (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr in _ACCUMULATE
                and isinstance(node.value.func.value, ast.Name)
            ):
                updates.setdefault(node.value.func.value.id, node.value)
                receivers.add(id(node.value.func.value))
                if id(node) not in logged:
                    unlogged.add(node.value.func.value.id)
            elif isinstance(node, ast.Global | ast.Nonlocal):
                declared.update(node.names)
        if not updates:
            continue
        for node in nodes:
            if isinstance(node, ast.Name) and id(node) not in receivers:
                (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        out.extend(
            node
            for name, node in updates.items()
            if name in bound and name not in read and name not in declared and name in unlogged
        )
    return out
