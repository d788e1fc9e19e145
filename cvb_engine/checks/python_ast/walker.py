"""The one walk over a tree that records imports, bindings, constructs and calls
(:class:`Walker`); expressions that cannot bind a name are set aside for later.
"""

from __future__ import annotations

import ast
from bisect import bisect_right
from collections.abc import Callable, Sequence
from functools import partial
from operator import attrgetter
from typing import Any, TypeAlias

from cvb_engine.checks.python_ast.params import CONSTRUCT_LABELS
from cvb_engine.checks.python_ast.scope import (
    CallSite,
    Ctx,
    Deferred,
    ImportSite,
    Scope,
    method_class,
)
from cvb_engine.checks.python_ast.syntax import (
    augmented_kind,
    broad_exception,
    dotted_parts,
    is_break_if,
    is_main_guard,
    mutable_default,
    param_names,
    partial_target,
    string_kind_of,
    swallows,
)

# The labels of the places forbid-construct's ``outside`` can excuse; "test-class"
# marks the body of a Test* class, whose methods are test functions.
_EXCUSES = frozenset({"test-function", "main-guard"})
_TEST_FUNCTION = frozenset({"test-function"})

_Task: TypeAlias = tuple[ast.AST, Ctx] | Callable[[], None]
_SKIPPED = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)

_ANNOTATION = attrgetter("annotation")

# Words whose presence on a line means that an expression there may bind a
# name (lambda parameters, comprehension targets, ``:=``): such expressions are
# walked in order, never deferred. A false alarm only costs an earlier walk.
MARKERS = ("lambda", "for", ":=")

_FUNCTION_LABELS = frozenset({"function"})
_ASYNC_FUNCTION_LABELS = frozenset({"function", "async-def"})
_DISPATCH: dict[type, Any] = {ast.Constant: lambda self, node, ctx: []}


class Walker:
    """One walk over the tree that records imports, bindings, constructs and calls.

    Statements are visited in source order with their context (enclosing
    constructs, scope), so that when the walk ends every import, binding and
    construct is known. An expression in a statement can only add calls unless
    it binds a name, which needs a lambda, a comprehension or ``:=`` on its
    lines (see ``MARKERS``); given ``markers``, the lines that hold one, the
    other expressions are set aside as :class:`Deferred` and walked only when a
    rule asks for calls on their lines (:meth:`Analysis.need`). Everything else
    is walked at once, in order. Without ``markers`` nothing is deferred.

    Expressions are walked with an explicit stack, not recursion, so that very
    deep trees (a long ``a + b + ...`` chain) cannot exhaust the interpreter's
    stack. Statements recurse: the parser allows at most 100 levels of
    indentation.
    """

    def __init__(self, markers: set[int] | None = None, strings: bool = True) -> None:
        self.module_scope = Scope(parent=None)
        # Whether to follow the string kinds of names (only arg_dynamic_string
        # needs them); without, no assignment's value is classified.
        self.strings = strings
        self.imports: list[ImportSite] = []
        self.calls: list[CallSite] = []
        self.constructs: dict[str, list[ast.AST]] = {c: [] for c in CONSTRUCT_LABELS}
        self.flat_imports: dict[str, str] = {}
        # For each component of a dotted name imported, the local names bound to
        # it (other than the component itself).
        self.aliases: dict[str, list[str]] = {}
        self.bound: set[str] = set()
        # Names declared global or nonlocal somewhere, and names subscripted as an
        # assignment target (opts["shell"] = True) somewhere: their single
        # bindings say nothing (see Analysis.single).
        self.declared: set[str] = set()
        self.mutated: set[str] = set()
        # For each name assigned a dotted name or a partial(...) of one, the
        # components of that name (see Analysis.need).
        self.references: dict[str, list[str]] = {}
        # For each (class body, attribute), what ``self.<attribute>`` is assigned in
        # its methods, with the scope of the assignment (None: a binding of
        # another kind, such as a loop target or ``+=``).
        self.self_attrs: dict[tuple[int, str], list[tuple[ast.expr | None, Scope]]] = {}
        # The constructs that sit in a place forbid-construct's ``outside`` names.
        self.excused: dict[int, frozenset[str]] = {}
        # The function, class and module scopes, in the order they were made.
        self.scopes: list[Scope] = [self.module_scope]
        # The defs and classes of the code, by (id of the scope that binds the
        # name, name): the def bodies, and each class's bases with their scope.
        self.defs: dict[tuple[int, str], list[Scope]] = {}
        self.classes: dict[tuple[int, str], list[tuple[list[ast.expr], Scope]]] = {}
        self.markers = markers
        self.deferred: list[Deferred] = []
        # The clock orders the walk: it ticks at each call and each deferral, and
        # every change to a scope's strings is logged with the time it was made.
        self.clock = 0
        # For each (scope, name), when its string kind changed and what it was
        # before, in clock order; the entry holds the scope, so that its id stays
        # unique while the walker lives.
        self.log: dict[tuple[int, str], tuple[Scope, list[int], list[str | None]]] = {}
        self._item: Deferred | None = None
        self._rank = 0

    def walk(self, tree: ast.Module) -> None:
        self._block(tree.body, Ctx(frozenset(), self.module_scope))

    def walk_deferred(self, item: Deferred) -> None:
        """Walk a deferred expression now; its calls rank and look up strings as of its place."""
        item.walked = True
        self._item, self._rank = item, 0
        try:
            self._walk([(item.node, item.ctx)])
        finally:
            self._item = None

    def kind_at(self, scope: Scope, clock: int, name: str) -> str:
        """The string kind ``name`` stood for in ``scope`` when the clock read ``clock``."""
        for inner in scope.chain:
            kind = inner.strings.get(name)
            changes = self.log.get((id(inner), name))
            if changes is not None:
                _, whens, befores = changes
                first_later = bisect_right(whens, clock)
                if first_later < len(whens):
                    kind = befores[first_later]
            if kind is not None:
                return kind
        return "other"

    # statements

    def _block(self, body: list[ast.stmt], ctx: Ctx) -> None:
        for node in body:
            _STATEMENTS.get(type(node), Walker._statement)(self, node, ctx)

    def _statement(self, node: ast.stmt, ctx: Ctx) -> None:
        """A statement without a rule of its own: its children, walked now."""
        self._walk(self._children(node, ctx))

    def _expr(self, node: ast.expr, ctx: Ctx) -> None:
        """A value expression: set it aside unless it may bind a name (see the class doc)."""
        kind = type(node)
        if kind is ast.Constant or kind is ast.Name:
            return  # nothing to record: a loaded name, a literal
        markers = self.markers
        if markers is not None and (
            not markers
            or markers.isdisjoint(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        ):
            self.deferred.append(Deferred(node, ctx, self.clock))
            self.clock += 1
            return
        self._walk([(node, ctx)])

    def _target(self, node: ast.expr, ctx: Ctx) -> None:
        if type(node) is ast.Name:
            self._bind(node.id, ctx.scope)
        else:
            self._walk([(node, ctx)])

    def _expression_statement(self, node: ast.Expr, ctx: Ctx) -> None:
        self._expr(node.value, ctx)

    def _return(self, node: ast.Return, ctx: Ctx) -> None:
        if node.value is not None:
            body = ctx.scope.body
            if (
                self.strings
                and not body.returns_dynamic
                and string_kind_of(node.value, ctx.scope.string_kind) == "dynamic"
            ):
                body.returns_dynamic = True
            self._expr(node.value, ctx)

    def _raise(self, node: ast.Raise, ctx: Ctx) -> None:
        if node.exc is not None:
            self._expr(node.exc, ctx)
        if node.cause is not None:
            self._expr(node.cause, ctx)

    def _delete(self, node: ast.Delete, ctx: Ctx) -> None:
        for target in node.targets:
            self._target(target, ctx)

    def _nothing(self, node: ast.stmt, ctx: Ctx) -> None:
        pass

    def _if(self, node: ast.If, ctx: Ctx) -> None:
        self._expr(node.test, ctx)
        self._block(node.body, ctx.plus("main-guard") if is_main_guard(node.test) else ctx)
        self._block(node.orelse, ctx)

    def _try(self, node: ast.Try | ast.TryStar, ctx: Ctx) -> None:
        self._block(node.body, ctx)
        for handler in node.handlers:
            self._handler(handler, ctx)
        self._block(node.orelse, ctx)
        self._block(node.finalbody, ctx)

    def _match(self, node: ast.Match, ctx: Ctx) -> None:
        self._expr(node.subject, ctx)
        for case in node.cases:
            self._walk([(case.pattern, ctx)])
            if case.guard is not None:
                self._expr(case.guard, ctx)
            self._block(case.body, ctx)

    # bindings

    def _bind(self, name: str, scope: Scope, value: ast.expr | ast.withitem | None = None) -> None:
        """Record a binding of ``name``; ``value``: what an assignment or a ``with``
        binds it to (None for any other binding)."""
        scope.locals.add(name)
        self.bound.add(name)
        single = scope.single
        single[name] = None if name in single else value

    def _write(self, scope: Scope, name: str, kind: str) -> None:
        if not self.strings:
            return
        strings = scope.strings
        changes = self.log.get((id(scope), name))
        if changes is None:
            changes = self.log[(id(scope), name)] = (scope, [], [])
        changes[1].append(self.clock)
        changes[2].append(strings.get(name))
        strings[name] = kind

    def _forget(self, targets: Sequence[ast.AST], scope: Scope) -> None:
        if not self.strings:
            return
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    self._write(scope, sub.id, "other")

    def _construct(self, kind: str, node: ast.AST, labels: frozenset[str]) -> None:
        self.constructs[kind].append(node)
        if not _EXCUSES.isdisjoint(labels):
            self.excused[id(node)] = labels & _EXCUSES

    def _self_store(self, target: ast.Attribute, value: ast.expr | None, scope: Scope) -> bool:
        """Record a binding of ``self.<attr>`` in a method; whether ``target`` is one."""
        receiver = target.value
        if not (isinstance(receiver, ast.Name) and receiver.id == "self"):
            return False
        owner = method_class(scope)
        if owner is None:
            return False
        key = (id(owner), target.attr)
        if isinstance(value, ast.Call):
            self._reference(target.attr, value)  # self.pause = partial(time.sleep, 1)
        if key in self.self_attrs:
            self.self_attrs[key].append((value, scope))
        else:
            self.self_attrs[key] = [(value, scope)]
        return True

    def _import_binding(self, local: str, qualified: str, scope: Scope) -> None:
        scope.imports[local] = qualified
        self.flat_imports[local] = qualified
        if local != qualified:  # a name imported as itself adds nothing to a word
            aliases = self.aliases
            for part in qualified.split("."):
                if part in aliases:
                    aliases[part].append(local)
                else:
                    aliases[part] = [local]

    def _assign(self, node: ast.Assign, ctx: Ctx) -> None:
        kind = string_kind_of(node.value, ctx.scope.string_kind) if self.strings else ""
        value = node.value
        self._expr(value, ctx)
        for target in node.targets:
            if isinstance(target, ast.Name):
                self._bind(target.id, ctx.scope, value)
                if isinstance(value, ast.Name | ast.Attribute | ast.Call):
                    self._reference(target.id, value)
            elif not (
                isinstance(target, ast.Attribute) and self._self_store(target, value, ctx.scope)
            ):
                self._target(target, ctx)
        for target in node.targets:
            if isinstance(target, ast.Name):
                self._write(ctx.scope, target.id, kind)
            else:
                self._forget([target], ctx.scope)

    def _reference(self, name: str, value: ast.Name | ast.Attribute | ast.Call) -> None:
        """Note the words of what ``name = value`` may make it stand for (a function
        reference ``f = time.sleep`` or ``f = partial(subprocess.run, ...)``)."""
        target = partial_target(value) if isinstance(value, ast.Call) else value
        parts = dotted_parts(target) if target is not None else None
        if parts:
            if name in self.references:
                self.references[name].extend(parts)
            else:
                self.references[name] = parts

    def _ann_assign(self, node: ast.AnnAssign, ctx: Ctx) -> None:
        kind = None
        if self.strings and isinstance(node.target, ast.Name) and node.value is not None:
            kind = string_kind_of(node.value, ctx.scope.string_kind)
        target = node.target
        if isinstance(target, ast.Name):
            scope = ctx.scope
            scope.annotate(target.id, node.annotation)
            if node.value is not None:
                self._bind(target.id, scope, node.value)
            else:  # a declaration, not a binding: the name is local all the same
                scope.locals.add(target.id)
                self.bound.add(target.id)
        elif isinstance(target, ast.Attribute) and (
            isinstance(target.value, ast.Name) and target.value.id == "self"
        ):
            if node.value is not None and not self._self_store(target, node.value, ctx.scope):
                self._target(target, ctx)
        else:
            self._target(target, ctx)
        self._expr(node.annotation, ctx)
        if node.value is not None:
            self._expr(node.value, ctx)
        if kind is not None and isinstance(node.target, ast.Name):
            self._write(ctx.scope, node.target.id, kind)

    def _aug_assign(self, node: ast.AugAssign, ctx: Ctx) -> None:
        target = node.target
        kind = ""
        if self.strings and isinstance(target, ast.Name):
            lookup = ctx.scope.string_kind
            kind = augmented_kind(lookup(target.id), node.op, node.value, lookup)
        self._target(target, ctx)
        self._expr(node.value, ctx)
        if isinstance(target, ast.Name):
            self._write(ctx.scope, target.id, kind)

    # imports

    def _import(self, node: ast.Import, ctx: Ctx) -> None:
        for alias in node.names:
            self.imports.append(ImportSite(alias.name, node))
            if alias.asname:
                self._import_binding(alias.asname, alias.name, ctx.scope)
            else:
                first = alias.name.split(".")[0]
                self._import_binding(first, first, ctx.scope)

    def _import_from(self, node: ast.ImportFrom, ctx: Ctx) -> None:
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                self.imports.append(ImportSite(module, node))
                self._construct("star-import", node, ctx.labels)
                continue
            qualified = f"{module}.{alias.name}" if node.module else module + alias.name
            self.imports.append(ImportSite(qualified, node))
            self._import_binding(alias.asname or alias.name, qualified, ctx.scope)

    # scopes

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, ctx: Ctx) -> Ctx:
        """Record defaults and bind the parameters; return the body's context."""
        args = node.args
        excused = ctx.labels & _EXCUSES
        if not isinstance(node, ast.Lambda) and (
            node.name.startswith("test_") or ("test-class" in ctx.labels and ctx.scope.is_class)
        ):
            excused |= _TEST_FUNCTION
        if args.defaults or args.kw_defaults:
            defaults = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
            for default in defaults:
                if mutable_default(default):
                    self._construct("mutable-default-arg", default, excused)
        names = param_names(args)
        self.bound.update(names)
        scope = Scope(ctx.scope, False, names, function=True)
        if not isinstance(node, ast.Lambda):
            self.scopes.append(scope)
            self._bind(node.name, ctx.scope)
            scope.name = node.name
            self.defs.setdefault((id(ctx.scope), node.name), []).append(scope)
        labels = (
            _ASYNC_FUNCTION_LABELS if isinstance(node, ast.AsyncFunctionDef) else _FUNCTION_LABELS
        )
        if not isinstance(node, ast.Lambda):
            # The function's own name, for `outside_function` (its body only, not nested defs).
            labels = labels | {f"def:{node.name}"}
        return Ctx(labels | excused if excused else labels, scope)

    def _function_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Ctx) -> None:
        inner = self._function(node, ctx)
        for decorator in node.decorator_list:
            self._expr(decorator, ctx)
        if node.returns is not None:
            self._expr(node.returns, ctx)
        self._arguments(node.args, ctx, inner.scope)
        self._block(node.body, inner)

    def _arguments(self, args: ast.arguments, ctx: Ctx, inner: Scope) -> None:
        """Annotations and defaults, in the order of the fields of ``ast.arguments``;
        the annotations of the parameters are recorded in the body's scope ``inner``."""
        if not (
            args.defaults
            or args.kw_defaults
            or args.posonlyargs
            or args.kwonlyargs
            or args.vararg
            or args.kwarg
            or any(map(_ANNOTATION, args.args))
        ):
            return  # plain parameters: nothing to walk
        for arg in (*args.posonlyargs, *args.args):
            if arg.annotation is not None:
                inner.annotate(arg.arg, arg.annotation)
                self._expr(arg.annotation, ctx)
        if args.vararg is not None and args.vararg.annotation is not None:
            self._expr(args.vararg.annotation, ctx)
        for arg in args.kwonlyargs:
            if arg.annotation is not None:
                inner.annotate(arg.arg, arg.annotation)
                self._expr(arg.annotation, ctx)
        for default in args.kw_defaults:
            if default is not None:
                self._expr(default, ctx)
        if args.kwarg is not None and args.kwarg.annotation is not None:
            self._expr(args.kwarg.annotation, ctx)
        for default in args.defaults:
            self._expr(default, ctx)

    def _class_def(self, node: ast.ClassDef, ctx: Ctx) -> None:
        self._bind(node.name, ctx.scope)
        self.classes.setdefault((id(ctx.scope), node.name), []).append((node.bases, ctx.scope))
        labels = ctx.labels | {"test-class"} if node.name.startswith("Test") else ctx.labels
        inner = Ctx(labels, Scope(parent=ctx.scope, is_class=True))
        self.scopes.append(inner.scope)
        for expr in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self._expr(expr, ctx)
        self._block(node.body, inner)

    # loops: only what runs on every iteration is "inside" the loop

    def _for(self, node: ast.For | ast.AsyncFor, ctx: Ctx) -> None:
        self._expr(node.iter, ctx)
        self._target(node.target, ctx)
        self._forget([node.target], ctx.scope)
        self._block(node.body, ctx.plus("loop"))
        self._block(node.orelse, ctx)

    def _while(self, node: ast.While, ctx: Ctx) -> None:
        loop = ctx.plus("loop")
        body = node.body
        if swallows(body):  # while time.monotonic() < deadline: pass
            self._expr(node.test, loop.plus("busy-wait"))
            self._block(body, loop)
        else:
            self._expr(node.test, loop)
            exits = [s for s in body if is_break_if(s)]
            if exits and all(s in exits or swallows([s]) for s in body):
                # while True: if time.monotonic() >= deadline: break
                spin = loop.plus("busy-wait")
                for statement in body:
                    if isinstance(statement, ast.If):
                        self._expr(statement.test, spin)
            else:
                self._block(body, loop)
        self._block(node.orelse, ctx)

    # blocks

    def _handler(self, node: ast.ExceptHandler, ctx: Ctx) -> None:
        if node.type is None:
            self._construct("bare-except", node, ctx.labels)
        if broad_exception(node.type) and swallows(node.body):
            self._construct("broad-except-swallow", node, ctx.labels)
        if node.name:
            self._bind(node.name, ctx.scope)
            self._write(ctx.scope, node.name, "other")
        if node.type is not None:
            self._expr(node.type, ctx)
        self._block(node.body, ctx.plus("except-handler"))

    def _with(self, node: ast.With | ast.AsyncWith, ctx: Ctx) -> None:
        inner = ctx.plus("async-with" if isinstance(node, ast.AsyncWith) else "with")
        targets = []
        for item in node.items:
            self._expr(item.context_expr, inner)
            target = item.optional_vars
            if target is not None:
                if isinstance(target, ast.Name):
                    self._bind(target.id, inner.scope, item)
                else:
                    self._target(target, inner)
                targets.append(target)
        self._forget(targets, ctx.scope)
        self._block(node.body, inner)

    # plain constructs

    def _global(self, node: ast.Global, ctx: Ctx) -> None:
        self._construct("global-statement", node, ctx.labels)
        self.declared.update(node.names)

    def _nonlocal(self, node: ast.Nonlocal, ctx: Ctx) -> None:
        self.declared.update(node.names)

    def _assert(self, node: ast.Assert, ctx: Ctx) -> None:
        self._construct("assert-statement", node, ctx.labels)
        self._expr(node.test, ctx)
        if node.msg is not None:
            self._expr(node.msg, ctx)

    # expressions, walked with an explicit stack

    def _walk(self, tasks: list[_Task]) -> None:
        stack = tasks[::-1]
        while stack:
            task = stack.pop()
            if isinstance(task, tuple):
                node, ctx = task
                visitor = _DISPATCH.get(type(node))
                if visitor is None:
                    visitor = _DISPATCH[type(node)] = _visitor_for(type(node))
                children = visitor(self, node, ctx)
                if children:
                    stack.extend(reversed(children))
            else:
                task()

    def _generic(self, node: ast.AST, ctx: Ctx) -> list[_Task]:
        return self._children(node, ctx)

    @staticmethod
    def _children(node: ast.AST, ctx: Ctx) -> list[_Task]:
        out: list[_Task] = []
        for field_name in node._fields:
            value = getattr(node, field_name, None)
            if isinstance(value, ast.AST):
                if not isinstance(value, _SKIPPED):
                    out.append((value, ctx))
            elif isinstance(value, list):
                out.extend(
                    (item, ctx)
                    for item in value
                    if isinstance(item, ast.AST) and not isinstance(item, _SKIPPED)
                )
        return out

    def _visit_statement(self, node: ast.stmt, ctx: Ctx) -> list[_Task]:
        _STATEMENTS.get(type(node), Walker._statement)(self, node, ctx)
        return []

    def _visit_ExceptHandler(self, node: ast.ExceptHandler, ctx: Ctx) -> list[_Task]:
        self._handler(node, ctx)
        return []

    def _visit_Call(self, node: ast.Call, ctx: Ctx) -> list[_Task]:
        item = self._item
        if item is None:
            clock = self.clock
            rank = (clock, 0)
            self.clock += 1
        else:
            clock = item.clock
            rank = (clock, self._rank)
            self._rank += 1
        self.calls.append(CallSite(node, ctx.labels, ctx.scope, clock, rank))
        # What _children gives, with each keyword's value in place of the keyword
        # (a keyword node has nothing else to visit).
        return [
            (node.func, ctx),
            *[(arg, ctx) for arg in node.args],
            *[(keyword.value, ctx) for keyword in node.keywords],
        ]

    # The commonest expressions, their children listed directly (as _children would).

    def _visit_Attribute(self, node: ast.Attribute | ast.Starred, ctx: Ctx) -> list[_Task]:
        if type(node.ctx) is not ast.Load and type(node) is ast.Attribute:
            assert isinstance(node, ast.Attribute)
            self._self_store(node, None, ctx.scope)  # self.x += 1, for self.x in ...
        return [(node.value, ctx)]

    _visit_Starred = _visit_Attribute

    def _visit_BinOp(self, node: ast.BinOp, ctx: Ctx) -> list[_Task]:
        return [(node.left, ctx), (node.right, ctx)]

    def _visit_Subscript(self, node: ast.Subscript, ctx: Ctx) -> list[_Task]:
        value = node.value
        if type(node.ctx) is not ast.Load and isinstance(value, ast.Name):
            self.mutated.add(value.id)  # opts["shell"] = True, del opts["check"]
        return [(value, ctx), (node.slice, ctx)]

    def _visit_Tuple(self, node: ast.Tuple | ast.List, ctx: Ctx) -> list[_Task]:
        return [(elt, ctx) for elt in node.elts]

    _visit_List = _visit_Tuple

    def _visit_JoinedStr(self, node: ast.JoinedStr, ctx: Ctx) -> list[_Task]:
        return [(value, ctx) for value in node.values]

    def _visit_Lambda(self, node: ast.Lambda, ctx: Ctx) -> list[_Task]:
        inner = self._function(node, ctx)
        return [(node.args, ctx), (node.body, inner)]

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, ctx: Ctx
    ) -> tuple[list[_Task], Ctx]:
        loop = Ctx(ctx.labels | {"loop"}, Scope(parent=ctx.scope))
        tasks: list[_Task] = []
        for i, gen in enumerate(node.generators):
            # The first iterable is evaluated once, in the enclosing scope.
            tasks.append((gen.iter, ctx if i == 0 else loop))
            tasks.append((gen.target, loop))
            tasks.extend((c, loop) for c in gen.ifs)
        return tasks, loop

    def _visit_ListComp(self, node: ast.ListComp | ast.SetComp, ctx: Ctx) -> list[_Task]:
        tasks, loop = self._comprehension(node, ctx)
        return [*tasks, (node.elt, loop)]

    _visit_SetComp = _visit_ListComp

    def _visit_GeneratorExp(self, node: ast.GeneratorExp, ctx: Ctx) -> list[_Task]:
        tasks, loop = self._comprehension(node, ctx)
        return [*tasks, (node.elt, loop)]

    def _visit_DictComp(self, node: ast.DictComp, ctx: Ctx) -> list[_Task]:
        tasks, loop = self._comprehension(node, ctx)
        return [*tasks, (node.key, loop), (node.value, loop)]

    def _visit_Name(self, node: ast.Name, ctx: Ctx) -> list[_Task]:
        if not isinstance(node.ctx, ast.Load):
            self._bind(node.id, ctx.scope)
        return []

    def _visit_NamedExpr(self, node: ast.NamedExpr, ctx: Ctx) -> list[_Task]:
        kind = string_kind_of(node.value, ctx.scope.string_kind) if self.strings else ""
        return [
            (node.value, ctx),
            (node.target, ctx),
            partial(self._write, ctx.scope, node.target.id, kind),
        ]

    def _visit_MatchAs(self, node: ast.MatchAs | ast.MatchStar, ctx: Ctx) -> list[_Task]:
        if node.name:
            self._bind(node.name, ctx.scope)
        return self._children(node, ctx)

    _visit_MatchStar = _visit_MatchAs

    def _visit_MatchMapping(self, node: ast.MatchMapping, ctx: Ctx) -> list[_Task]:
        if node.rest:
            self._bind(node.rest, ctx.scope)
        return self._children(node, ctx)


def _visitor_for(cls: type) -> Any:
    if issubclass(cls, ast.stmt):
        return Walker._visit_statement
    return getattr(Walker, f"_visit_{cls.__name__}", Walker._generic)


_STATEMENTS: dict[type, Callable[[Walker, Any, Ctx], None]] = {
    ast.FunctionDef: Walker._function_def,
    ast.AsyncFunctionDef: Walker._function_def,
    ast.ClassDef: Walker._class_def,
    ast.Return: Walker._return,
    ast.Delete: Walker._delete,
    ast.Assign: Walker._assign,
    ast.AugAssign: Walker._aug_assign,
    ast.AnnAssign: Walker._ann_assign,
    ast.For: Walker._for,
    ast.AsyncFor: Walker._for,
    ast.While: Walker._while,
    ast.If: Walker._if,
    ast.With: Walker._with,
    ast.AsyncWith: Walker._with,
    ast.Match: Walker._match,
    ast.Raise: Walker._raise,
    ast.Try: Walker._try,
    ast.TryStar: Walker._try,
    ast.Assert: Walker._assert,
    ast.Import: Walker._import,
    ast.ImportFrom: Walker._import_from,
    ast.Global: Walker._global,
    ast.Nonlocal: Walker._nonlocal,
    ast.Expr: Walker._expression_statement,
    ast.Pass: Walker._nothing,
    ast.Break: Walker._nothing,
    ast.Continue: Walker._nothing,
}
