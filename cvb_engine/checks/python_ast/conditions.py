"""Whether a call meets the conditions of ``where`` (:func:`where_holds`): its
arguments and their values, where it sits, what happens to its value, and the
other calls of its function.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from cvb_engine.checks.python_ast.analysis import MAX_RECEIVER_DEPTH, Analysis
from cvb_engine.checks.python_ast.params import (
    MAX_CALL_DEPTH,
    NAME_PATTERN,
    LiteralValue,
    Where,
    call_words,
    match_call_name,
    prefix_words,
)
from cvb_engine.checks.python_ast.scope import CallSite, Scope, call_args, call_order
from cvb_engine.checks.python_ast.syntax import literal_value, made_call
from cvb_engine.checks.python_ast.uses import kept, only_for, reaches

_State: TypeAlias = Literal["present", "absent", "unknown"]


@dataclass(slots=True)
class _Argument:
    """An argument a condition is about: whether it is passed, and its value with the
    scope its names are to be looked up in."""

    state: _State
    node: ast.expr | None = None
    scope: Scope | None = None


_ABSENT_ARGUMENT = _Argument("absent")
_UNKNOWN_ARGUMENT = _Argument("unknown")


def find_argument(call: CallSite, keyword: str, where: Where, analysis: Analysis) -> _Argument:
    """Find an argument passed by keyword (a known dict splat included) or at its
    declared positional index."""
    args = analysis.arguments(call)
    if keyword in args.keywords:
        scopes = args.scopes
        scope = scopes.get(keyword, call.scope) if scopes is not None else call.scope
        return _Argument("present", args.keywords[keyword], scope)
    index = where.positional.get(keyword)
    if index is not None:
        if index < len(args.plain):
            return _Argument("present", args.plain[index], call.scope)
        if args.star:
            return _UNKNOWN_ARGUMENT
    return _UNKNOWN_ARGUMENT if args.kw_splat else _ABSENT_ARGUMENT


def _same_literal(found: LiteralValue, wanted: LiteralValue) -> bool:
    # True == 1 in Python; here shell=1 is not shell=True.
    if isinstance(found, bool) or isinstance(wanted, bool):
        return type(found) is type(wanted) and found == wanted
    if isinstance(found, int | float) and isinstance(wanted, int | float):
        return found == wanted
    return type(found) is type(wanted) and found == wanted


def _is_one_of(arg: _Argument, wanted: Sequence[LiteralValue], analysis: Analysis) -> bool:
    """Whether the argument is passed as one of the literals ``wanted`` (through names)."""
    if arg.node is None or arg.scope is None:
        return False
    ok, value = analysis.constant(arg.node, arg.scope)
    return ok and any(_same_literal(value, w) for w in wanted)


def _in_list(arg: _Argument, entries: list[str], analysis: Analysis) -> bool:
    if arg.node is None or arg.scope is None:
        return False
    return _value_in_list(arg.node, arg.scope, entries, analysis)


def _value_in_list(
    node: ast.expr, scope: Scope, entries: list[str], analysis: Analysis, depth: int = 0
) -> bool:
    """Whether a value is one of ``entries``: a literal, a name matching one (through
    names bound once), a class of the code's own derived from one
    (``class Strict(yaml.SafeLoader)``), or ``getattr(m, "X", default)`` where both
    ``m.X`` and the default are."""
    if depth > MAX_RECEIVER_DEPTH:
        return False
    node, scope = analysis.follow(node, scope)
    ok, value = literal_value(node)
    if ok:
        texts = {repr(value)} | ({value} if isinstance(value, str) else set())
        if texts & set(entries):
            return True
    if isinstance(node, ast.Name | ast.Attribute):
        name = analysis.resolve(node, scope)
        if name is not None and any(
            NAME_PATTERN.fullmatch(e) and match_call_name(e, name) for e in entries
        ):
            return True
        if isinstance(node, ast.Name):
            owner = scope.owner(node.id)
            classes = analysis.classes.get((id(owner), node.id)) if owner is not None else None
            if classes is not None and len(classes) == 1:
                bases, where = classes[0]
                return any(
                    _value_in_list(base, where, entries, analysis, depth + 1) for base in bases
                )
        return False
    if (
        isinstance(node, ast.Call)
        and len(node.args) == 3
        and not node.keywords
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and node.args[1].value.isidentifier()
        and analysis.known_name(node.func, scope) == "getattr"
    ):
        target, attribute, default = node.args
        assert isinstance(attribute, ast.Constant)
        named = ast.Attribute(target, str(attribute.value), ast.Load())
        return _value_in_list(named, scope, entries, analysis, depth + 1) and _value_in_list(
            default, scope, entries, analysis, depth + 1
        )
    return False


def _dynamic_argument(call: CallSite, index: int, where: Where, analysis: Analysis) -> bool:
    args = analysis.arguments(call)
    if index < len(args.plain):
        values = [args.plain[index]]
    else:
        values = [
            args.keywords[keyword]
            for keyword, position in where.positional.items()
            if position == index and keyword in args.keywords
        ]
    return any(
        analysis.string_kind(value, call) == "dynamic"
        or (where.through_calls and _returns_dynamic(value, call.scope, analysis))
        for value in values
    )


def _returns_dynamic(node: ast.expr, scope: Scope, analysis: Analysis) -> bool:
    """Whether a value (through names bound once) is the result of a call of one of the
    code's own defs that returns a dynamically built string."""
    node, scope = analysis.follow(node, scope)
    made = made_call(node)
    if not isinstance(made, ast.Call):
        return False
    return any(body.returns_dynamic for body in analysis.defs_called(made.func, scope))


def _from_call(arg: _Argument, names: list[str], analysis: Analysis) -> bool:
    """Whether an argument is the result of a call matching ``names``, an attribute of
    it (``os.stat(p).st_size``), a name bound once to either, or an ``or`` / ``and`` of
    which one operand is."""
    if arg.node is None or arg.scope is None:
        return False
    todo = [(arg.node, arg.scope)]
    for _ in range(MAX_RECEIVER_DEPTH):
        if not todo:
            break
        node, scope = todo.pop()
        node, scope = analysis.follow(node, scope)
        while isinstance(node, ast.Attribute):
            node = node.value
        if isinstance(node, ast.Name):
            todo.append((node, scope))  # st = os.stat(p); st.st_size
            continue
        if isinstance(node, ast.BoolOp):  # len(urls) or 1: either operand may be the value
            todo.extend((value, scope) for value in node.values)
            continue
        made = made_call(node)
        if isinstance(made, ast.Call):
            name = analysis.resolve(made.func, scope)
            if name is not None and any(match_call_name(p, name) for p in names):
                return True
    return False


def _on_fresh_object(call: CallSite, analysis: Analysis) -> bool:
    """Whether ``call`` is a method called on an object that nothing else can reach: one
    a call has just made (``threading.Event().wait(5)``), or one bound once, in the
    function itself, to a call (or as the target of ``with`` on one) and read nowhere
    but as the receiver of method calls (``cv = threading.Condition(); cv.wait(5)``)."""
    func = call.node.func
    if not isinstance(func, ast.Attribute):
        return False
    if made_call(func.value) is not None:
        return True
    if not isinstance(func.value, ast.Name):
        return False
    name = func.value.id
    found = analysis.single(name, call.scope)
    if found is None:
        return False
    value, owner = found
    if owner.parent is None or owner.is_class or owner.body is not owner:
        return False  # a module's or a class's object can be reached from elsewhere
    made = made_call(value.context_expr if isinstance(value, ast.withitem) else value)
    flow = analysis.flow
    return made is not None and flow.loads.get(name, 0) == flow.receivers.get(name, 0)


def _result_used(call: CallSite, analysis: Analysis) -> bool:
    """Whether the value of ``call`` is used (see ``Where.result_used``)."""
    flow = analysis.flow
    key = id(call.node)
    if key in flow.discarded:
        return False
    targets = flow.assigned.get(key)
    if targets is None:
        return True  # an argument, a with item, returned, compared...
    for target in targets:
        if isinstance(target, ast.Name):
            if target.id in flow.loads:
                return True
        elif isinstance(target, ast.Attribute):
            if target.attr in flow.attributes:
                return True
        else:
            return True  # unpacked, subscripted: not followed
    return False


def _result_unread(call: CallSite, attributes: list[str], analysis: Analysis) -> bool:
    """Whether none of ``attributes`` is read on the object ``call`` makes (see
    ``Where.result_unread``)."""
    flow = analysis.flow
    key = id(call.node)
    if key in flow.discarded:
        return True
    targets = list(flow.assigned.get(key, ()))
    if key in flow.with_targets:
        targets.append(flow.with_targets[key])
    if not targets:
        return False  # used in place: not followed
    for target in targets:
        if not isinstance(target, ast.Name):
            return False
        name = target.id
        if flow.loads.get(name, 0) > flow.bases.get(name, 0):
            return False  # handed on: it may be read there
        if not flow.read_on.get(name, set()).isdisjoint(attributes):
            return False
    return True


def _result_subtracted(call: CallSite, analysis: Analysis) -> bool:
    """Whether the value of ``call`` is an operand of a subtraction, directly or through
    a name or attribute it is assigned to."""
    flow = analysis.flow
    if id(call.node) in flow.subtracted:
        return True
    for target in flow.assigned.get(id(call.node), ()):
        if isinstance(target, ast.Name) and target.id in flow.subtracted_names:
            return True
        if isinstance(target, ast.Attribute) and target.attr in flow.subtracted_attributes:
            return True
    return False


_Companions: TypeAlias = dict[Scope, list[CallSite]]


def _companions(names: list[str], analysis: Analysis) -> _Companions:
    """The calls matching ``names`` (of ``same_function_as`` or ``not_after``), by the
    function body that holds them."""
    analysis.need(call_words(names), prefix_words(names))
    out: _Companions = {}
    for call in analysis.calls:
        name = call.name
        if (
            name is not None
            and call.partial is None
            and any(match_call_name(p, name) for p in names)
        ):
            body = call.scope.body
            if body in out:
                out[body].append(call)
            else:
                out[body] = [call]
    return out


@dataclass(slots=True)
class _Earlier:
    """The calls of ``not_after`` by function body; with through_calls, the bodies (by
    id) that lead to one, and what is known of the defs' callers (by body id)."""

    companions: _Companions
    makers: set[int] | None
    synced_callers: dict[int, bool] = field(default_factory=dict)
    synced_sites: dict[int, bool] = field(default_factory=dict)


def _ahead(
    inner: Scope, at: tuple[int, int, int, int], earlier: _Earlier, analysis: Analysis
) -> bool:
    """Whether a call of ``earlier`` (or, with makers, a call of a def that leads to one)
    comes ahead of the position ``at`` in the function body ``inner``."""
    if any(call_order(other) < at for other in earlier.companions.get(inner, ())):
        return True
    makers = earlier.makers
    return makers is not None and any(
        call_order(call) < at
        and any(id(d) in makers for d in analysis.defs_called(call.node.func, call.scope))
        for call in analysis.calls_in(inner)
        if type(call.node.func) is ast.Name or type(call.node.func) is ast.Attribute
    )


def _comes_after(
    body: Scope, order: tuple[int, int, int, int], earlier: _Earlier, analysis: Analysis
) -> bool:
    """Whether a call of ``earlier`` comes ahead of the position ``order`` in ``body``;
    with makers (through_calls), also a call of one of the code's own defs that leads to
    one, and, where the def ``body`` is called, one ahead of that call (followed to the
    callers' callers, at most ``MAX_CALL_DEPTH`` deep)."""
    if _ahead(body, order, earlier, analysis):
        return True
    if earlier.makers is None:
        return False
    known = earlier.synced_callers.get(id(body))
    if known is not None:
        return known
    seen: set[int] = set()
    frontier = [body]
    hit = False
    for _ in range(MAX_CALL_DEPTH):
        after: list[Scope] = []
        for inner in frontier:
            for site in analysis.callers(inner):
                if id(site) in seen:
                    continue
                seen.add(id(site))
                synced = earlier.synced_sites.get(id(site))
                if synced is None:
                    synced = _ahead(site.scope.body, call_order(site), earlier, analysis)
                    earlier.synced_sites[id(site)] = synced
                if synced:
                    hit = True
                    break
                after.append(site.scope.body)
            if hit:
                break
        if hit or not after:
            break
        frontier = after
    earlier.synced_callers[id(body)] = hit
    return hit


def _beside(call: CallSite, where: Where, companions: _Companions) -> bool:
    """Whether another call of ``companions`` shares the body of ``call`` (and, with
    ``before``, comes after it in the source)."""
    others = companions.get(call.scope.body, ())
    if where.before:
        order = call_order(call)
        return any(call_order(other) > order for other in others)
    return any(other is not call for other in others)


@dataclass(slots=True)
class _Others:
    """What the conditions about other calls need, found once per rule: the calls of
    ``same_function_as`` and of ``not_after`` by function body (with, for through_calls,
    the bodies that lead to the latter), and the calls whose value is handed to a call
    of ``not_argument_of`` (by node id)."""

    companions: _Companions | None = None
    earlier: _Earlier | None = None
    handed: set[int] | None = None


def find_others(where: Where, analysis: Analysis) -> _Others:
    others = _Others()
    if where.same_function_as:
        others.companions = _companions(where.same_function_as, analysis)
    if where.not_after:
        found = _companions(where.not_after, analysis)
        others.earlier = _Earlier(found, analysis.makers(found) if where.through_calls else None)
    if where.not_argument_of:
        others.handed = _handed(where.not_argument_of, analysis)
    return others


def _handed(names: list[str], analysis: Analysis) -> set[int]:
    """The calls (by node id) whose value is an argument of a call matching ``names``, or
    lies in one, or is bound once to a name that does (coro = f(); wait_for(coro, 5))."""
    analysis.need(call_words(names), prefix_words(names))
    out: set[int] = set()
    for call in analysis.calls:
        name = call.name
        if name is None or not any(match_call_name(p, name) for p in names):
            continue
        for arg in [*call.node.args, *(kw.value for kw in call.node.keywords)]:
            for node in ast.walk(arg):
                if isinstance(node, ast.Call):
                    out.add(id(node))
                elif isinstance(node, ast.Name):
                    value, _ = analysis.follow(node, call.scope)
                    made = made_call(value)
                    if made is not None:
                        out.add(id(made))
    return out


def where_holds(
    where: Where, call: CallSite, analysis: Analysis, others: _Others | None = None
) -> bool:
    """Whether ``call`` meets every condition of ``where``."""
    others = others or _Others()
    for keyword, wanted in where.keyword.items():
        arg = find_argument(call, keyword, where, analysis)
        if arg.state != "present" or not _is_one_of(arg, (wanted,), analysis):
            return False
    for keyword, values in where.keyword_in.items():
        arg = find_argument(call, keyword, where, analysis)
        if arg.state != "present" or not _is_one_of(arg, values, analysis):
            return False
    for keyword, unwanted in where.keyword_not.items():
        arg = find_argument(call, keyword, where, analysis)
        if arg.state == "unknown" or _is_one_of(arg, (unwanted,), analysis):
            return False
    for keyword in where.missing_keyword:
        if find_argument(call, keyword, where, analysis).state != "absent":
            return False
    for keyword in where.keyword_none_or_missing:
        arg = find_argument(call, keyword, where, analysis)
        if arg.state == "unknown" or (
            arg.state == "present" and not _is_one_of(arg, (None,), analysis)
        ):
            return False
    for keyword, entries in where.keyword_not_in.items():
        arg = find_argument(call, keyword, where, analysis)
        if arg.state == "unknown" or _in_list(arg, entries, analysis):
            return False
    if where.min_args is not None or where.max_args is not None:
        args = call_args(call)
        if where.min_args is not None and len(args.plain) < where.min_args:
            return False
        if where.max_args is not None and (args.star or len(args.plain) > where.max_args):
            return False
    if call.partial is not None and (
        where.inside is not None
        or where.not_inside is not None
        or where.same_function_as
        or where.outside_function
    ):
        return False  # where f will run is not known where partial(f, ...) is
    for keyword, names in where.value_from_call.items():
        arg = find_argument(call, keyword, where, analysis)
        if arg.state != "present" or not _from_call(arg, names, analysis):
            return False
    if where.on_fresh_object and not _on_fresh_object(call, analysis):
        return False
    if (
        where.inside is not None
        and where.inside not in call.labels
        and not (
            where.through_calls
            and call.partial is None
            and analysis.reached_inside(call.scope.body, where.inside)
        )
    ):
        return False
    if where.not_inside is not None and where.not_inside in call.labels:
        return False
    if where.outside_function and any(f"def:{n}" in call.labels for n in where.outside_function):
        return False
    if where.arg_dynamic_string is not None and not _dynamic_argument(
        call, where.arg_dynamic_string, where, analysis
    ):
        return False
    if where.result_used is not None and _result_used(call, analysis) is not where.result_used:
        return False
    earlier = others.earlier
    if earlier is not None and (
        call.partial is not None
        or _comes_after(call.scope.body, call_order(call), earlier, analysis)
    ):
        return False
    if others.handed is not None and id(call.node) in others.handed:
        return False
    if where.result_unread and not _result_unread(call, where.result_unread, analysis):
        return False
    if where.result_subtracted and not _result_subtracted(call, analysis):
        return False
    if where.not_only_for and only_for(call, where.not_only_for, analysis):
        return False
    if where.result_kept is not None and kept(call, analysis) is not where.result_kept:
        return False
    if where.argument_of and not reaches(
        call,
        where.argument_of,
        analysis,
        frozenset([*where.keyword_not, *where.keyword, *where.missing_keyword]),
    ):
        return False
    return others.companions is None or _beside(call, where, others.companions)
