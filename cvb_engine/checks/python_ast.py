"""The ``python-ast`` check kind: structural rules on the parsed code.

Five rules, chosen by ``rule``:

- ``forbid-import`` / ``require-import``: an import of a module equal to or
  under one of ``names`` (``import a.b``, ``from a import b``, aliased forms,
  and ``importlib.import_module("a")`` / ``__import__("a")`` with a literal).
- ``forbid-call`` / ``require-call``: a call whose resolved dotted name matches
  one of ``names`` and whose arguments and context meet every condition of
  ``where``.
- ``forbid-construct``: a syntactic construct such as a bare ``except:``;
  with ``outside: [test-function, main-guard]``, one inside a ``def test_*``
  (or any method of a ``Test*`` class; code nested in it and its own defaults
  included) or in the body of ``if __name__ == "__main__":`` does not count.

Names are resolved through the imports of the code, so ``import subprocess as
sp; sp.run(...)`` is a call to ``subprocess.run``. A receiver name that is
never bound anywhere in the code is taken to be a module used without its
import (snippets often omit imports), so ``os.system(...)`` without ``import
os`` is still ``os.system``.

Receivers bound to a known object. A call on a local name (or parameter)
that stands for a known object continues that object's name:

- a name bound once (in the scope it belongs to) to the result of a call of a
  resolved name, awaited or not: ``client = httpx.Client()``, ``conn = await
  aiosqlite.connect(p)``;
- the target of ``with`` / ``async with`` on such a call: ``async with
  aiohttp.ClientSession() as s`` (what ``__enter__`` returns is taken to be
  the object itself, as it is for clients, sessions, files and locks);
- a name annotated once with a resolved name, whatever its bindings (a
  parameter ``client: httpx.Client``, ``s: "requests.Session" = make()``;
  ``Optional[X]``, ``Union[X, None]``, ``X | None`` and ``Annotated[X, ...]``
  declare ``X``; a string annotation is parsed);
- ``self.x`` in a method (or code nested in one) of a class whose methods bind
  ``self.x`` only by assignments of calls of one resolved name:
  ``self.session = requests.Session()`` makes ``self.session.get(u)``, in any
  method of that class, ``requests.Session.get``. Bound to calls of different
  names, to anything else (``self.session = session``), or also by a loop,
  ``+=`` or ``with ... as self.x``, it stays unknown (``*.session.get``).

The object is named by what was called or declared, so ``client.get(u)`` is
``httpx.Client.get``, ``s.get(u)`` is ``requests.Session.get``, and ``cur =
conn.cursor(); cur.execute(q)`` after ``conn = sqlite3.connect(p)`` is
``sqlite3.connect.cursor.execute``. A resolved name is only one that comes from
an import or from a module used without its import: the code's own functions
and classes (``c = make()``) and anything else stay unknown. Any other call on
a receiver that cannot be resolved (``cur.execute`` on a parameter,
``self.conn.execute``) gets a name that starts with ``*.`` followed by the
attribute chain, e.g. ``*.conn.execute``.

Function references. A local name bound once by an assignment (as for values
through names, below) to a resolved dotted name stands for it: ``_sleep =
time.sleep; _sleep(1)`` is a call to ``time.sleep``, ``run = subprocess.run``
makes ``run(cmd, shell=True)`` ``subprocess.run`` with its arguments, and ``sp =
subprocess; sp.run()`` is ``subprocess.run``. A parameter is never followed,
whatever its default (``clock=time.time`` is injected; ``clock()`` stays
unknown), nor is a name bound to the code's own function.

``functools.partial``. A call ``functools.partial(f, *args, **kw)`` (or
``partial`` from functools, or unimported) with ``f`` resolved is also, for the
call rules, a call of ``f`` with partial's other arguments, where the partial
is: ``partial(subprocess.run, shell=True)`` matches ``subprocess.run`` with
``keyword: {shell: true}``, and gives ``missing_keyword: [timeout]`` its
keywords. Where ``f`` will run is not known there, so ``inside``,
``not_inside`` and ``same_function_as`` never hold for it (nor does it count as
another call for ``same_function_as``). A local name bound once to such a
partial and called, ``p = partial(subprocess.run, check=True); p(cmd)``, is a
call of ``f`` where it is called, with the partial's arguments ahead of the
call's own (the call's keywords win, as in functools); once the name is called
somewhere, the partial expression itself no longer counts. So is a call
``self.pause()`` in a method when the class's methods bind ``self.pause`` once,
to such a partial. A partial bound to a
name never called (handed to an executor, say) still counts, so it satisfies a
``require-call`` of ``f``.

Entries of ``names`` are exact dotted names (``subprocess.run``), prefix
wildcards (``requests.*``) or suffix wildcards (``*.execute``). An exact name
matches that name only: ``requests.get`` never matches ``requests.Session.get``
(name it, or ``requests.Session.*``, to mean the method). A prefix wildcard
matches everything under it, methods of known objects included:
``requests.*`` matches ``s.get()`` after ``s = requests.Session()``, and also
``r.json()`` after ``r = requests.get(u)`` (``requests.get.json``); with
argument conditions, prefer exact names. A suffix wildcard matches any call
whose attribute chain ends so, on a known object or not: ``*.execute``
matches ``conn.execute(q)`` whether ``conn`` is unknown or
``sqlite3.connect(p)``.

Values through names. Conditions on an argument's value (``keyword``,
``keyword_in``, ``keyword_not``, ``keyword_none_or_missing``,
``keyword_not_in``) compare the literal a call passes, or, for a plain name,
the literal it is bound to when the name is bound exactly once in its scope
(found as Python finds it: the innermost enclosing scope that binds it, class
bodies not seen from their methods) by an assignment (``use_shell = True``,
module-level ``TIMEOUT = None``, ``VERIFY: bool = False``), followed through
further such names (``A = True; B = A``). For ``keyword_not_in`` a name bound
once to a dotted name stands for it (``loader = yaml.Loader``). A name bound
more than once, or by anything but an assignment (a parameter, a loop, a
``with``, an import, ``:=``), one declared ``global`` / ``nonlocal`` anywhere,
or a module-level name in a module with a star import, stays unknown, as any
other expression: a forbid never fires on a guess.

Dicts unpacked into ``**kwargs``. A splat of a dict that says what it holds
passes its entries as keywords, for every condition (``missing_keyword:
[timeout]`` is not met by ``**{"timeout": 5}``): a dict literal with only
string keys, a call of the builtin ``dict`` with keywords only, or a name
bound once to either that is never mutated — not subscripted as an
assignment target (``opts["shell"] = True``, ``del opts["x"]``), nor called
``update``, ``setdefault``, ``pop``, ``popitem``, ``clear`` on, anywhere in
the code, under that name or a name it was followed through. A dict passed to
a function that changes it, or changed through another alias, is not seen.
Any other splat (``**kwargs`` of a parameter, ``**self.opts``, a dict with a
``**`` of its own) hides what it passes.

Keyword values. ``keyword`` asks for one literal, ``keyword_in`` for one of
several; ``missing_keyword`` counts a keyword as passed whatever its value,
while ``keyword_none_or_missing`` also counts ``timeout=None`` (or a name bound
once to None) as missing, for keywords where None means "no limit".

A call's own function. ``outside_function: [names]`` holds when the call is not
directly in the body of a function with one of these names (at module level,
in another function, or in a function nested in one of them): ``flask.Flask``
outside ``create_app``.

Calls in one function. ``same_function_as: [names]`` ties a call to another:
the function body holding it — the innermost ``def`` or ``lambda``, or the
module's top level; class bodies and comprehensions belong to the body around
them — also holds another call matching one of ``names``; with ``before:
true`` that call comes after it in the source (position order, not flow), so
``require-call os.fsync`` with ``same_function_as: [os.replace], before:
true`` asks for an fsync in the same function as, and ahead of, a replace.

Through the code's own functions. With ``through_calls``, ``inside`` also holds
for a call in a def of the code (or a method called on ``self``) that is called,
directly or through further such defs (at most ``_MAX_CALL_DEPTH`` calls), from
a place where it holds: ``time.sleep`` in a plain helper a coroutine calls is
inside an async def. A function only referenced (``asyncio.to_thread(f)``) is not
called. ``arg_dynamic_string`` then also counts a call of such a def that returns
a dynamically built string, and ``not_after`` a call of one that makes the
earlier call, or one ahead of a call of the def holding the call.

Objects calls make. A method of an object a call has just made is named after
that call, as for a receiver bound to it: ``threading.Event().wait(5)`` is
``threading.Event.wait``. ``on_fresh_object`` asks for such a method call, or one
on a function's local bound once to a call and read nowhere but as the receiver
of method calls (``ev = threading.Event(); ev.wait(5)``). A function handed to
``dataclasses.field(default_factory=f)`` (attrs' and pydantic's fields, or
``collections.defaultdict(f)``), ``f`` resolved, is a call of ``f`` with no
arguments, where context conditions never hold (as for ``partial``).

Where values go. ``result_used``, ``result_unread``, ``result_subtracted`` and
``value_from_call`` follow a call's value through the names (and attributes) it
is assigned to, by name, anywhere in the code: a coarse view that errs towards
"used" / "read", so a forbid does not fire on a guess. ``not_argument_of`` holds
for a call whose value is not handed to another (``asyncio.wait_for(coro, 5)``).
``forbid-construct unread-accumulator`` finds a function's local that is updated
(``n += 1``, ``bad.append(r)``, ``by[k] = v``) but never read.

Only the syntax tree is inspected: names in comments, docstrings and strings
never count, and nothing is evaluated. The tree is walked once per
:class:`Subject`; the result is shared by every ``python-ast`` check of that
subject through ``subject.cache``. The walk sets aside expressions that cannot
bind a name and walks them only when a call rule (or a dynamic import) could
find a call in them (see :class:`_Walker`).
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from operator import attrgetter
from typing import Any, Literal, Self, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, model_validator

from cvb_engine.checks.base import (
    MAX_EVIDENCE,
    CheckResult,
    Span,
    Subject,
    newline_starts,
    register_check,
    span_from_offsets,
)

CACHE_KEY = "python-ast"

Rule: TypeAlias = Literal[
    "forbid-import", "require-import", "forbid-call", "require-call", "forbid-construct"
]
Construct: TypeAlias = Literal[
    "bare-except",
    "broad-except-swallow",
    "star-import",
    "global-statement",
    "mutable-default-arg",
    "assert-statement",
    "unread-accumulator",
]
LiteralValue: TypeAlias = bool | int | float | str | None
Excuse: TypeAlias = Literal["test-function", "main-guard"]

CONSTRUCT_LABELS: dict[str, str] = {
    "bare-except": "bare except",
    "broad-except-swallow": "broad exception swallowed",
    "star-import": "star import",
    "global-statement": "global statement",
    "mutable-default-arg": "mutable default argument",
    "assert-statement": "assert statement",
    "unread-accumulator": "accumulator never read",
}
_CALL_RULES = ("forbid-call", "require-call")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME_PATTERN = re.compile(rf"(?:\*\.)?{_IDENT}(?:\.{_IDENT})*|{_IDENT}(?:\.{_IDENT})*\.\*")
_DYNAMIC_IMPORTS = frozenset({"__import__", "importlib.import_module", "importlib.__import__"})
_MUTABLE_FACTORIES = frozenset({"list", "dict", "set"})
_BROAD_EXCEPTIONS = frozenset({"Exception", "BaseException"})
# Bounds the recursion of the string classifier; deeper expressions are "other".
_MAX_EXPR_DEPTH = 50
# Bounds how far names are followed to a value or an object (a = b; b = c ...),
# which also ends cycles (a = a.b()); and the length of a string annotation parsed.
_MAX_RECEIVER_DEPTH = 8
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
_MAX_LISTED = 3
# The labels of the places forbid-construct's ``outside`` can excuse; "test-class"
# marks the body of a Test* class, whose methods are test functions.
_EXCUSES = frozenset({"test-function", "main-guard"})
_TEST_FUNCTION = frozenset({"test-function"})
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
# How far through_calls follows the code's own functions to their callers.
_MAX_CALL_DEPTH = 4


class Where(BaseModel):
    """Conditions on a call for ``forbid-call`` / ``require-call``.

    A call matches only when every condition given holds. An argument's value
    is what the call passes, or, for a plain name bound once in its scope to a
    literal (``use_shell = True``), that literal (see the module docstring). A
    ``**kwargs`` (or ``*args``) splat hides what it passes, unless it is a dict
    literal or a name bound once to one and never mutated: a condition that
    depends on a hidden argument does not hold, so a forbid never fires on a guess.
    """

    model_config = ConfigDict(extra="forbid")

    keyword: dict[str, LiteralValue] = Field(
        default_factory=dict,
        description="the call passes each keyword with exactly this literal value "
        "(shell: true matches shell=True)",
    )
    keyword_in: dict[str, list[LiteralValue]] = Field(
        default_factory=dict,
        description="the call passes each keyword with one of these literal values "
        "(mode: [w, a] matches mode='a')",
    )
    keyword_not: dict[str, LiteralValue] = Field(
        default_factory=dict,
        description="each keyword is absent, or its value is not this literal",
    )
    missing_keyword: list[str] = Field(
        default_factory=list, description="none of these keywords is passed"
    )
    keyword_none_or_missing: list[str] = Field(
        default_factory=list,
        description="each of these keywords is not passed, or passed as None "
        "(timeout=None counts as no timeout)",
    )
    keyword_not_in: dict[str, list[str]] = Field(
        default_factory=dict,
        description="each keyword is absent, or its value is neither a name matching an "
        "entry (resolved through imports, e.g. yaml.SafeLoader) nor a literal whose repr "
        "(or, for a string, whose text) is an entry",
    )
    positional: dict[str, NonNegativeInt] = Field(
        default_factory=dict,
        description="keyword name -> 0-based positional index at which the same argument "
        "may be passed (Loader: 1 for yaml.load(f, Loader))",
    )
    min_args: NonNegativeInt | None = Field(
        default=None, description="at least this many positional arguments"
    )
    max_args: NonNegativeInt | None = Field(
        default=None, description="at most this many positional arguments"
    )
    inside: Literal["async-def", "function", "loop", "except-handler", "busy-wait"] | None = Field(
        default=None,
        description="the call is inside this construct within its own function body "
        "(async-def: the nearest enclosing function is an async def; busy-wait: the "
        "test of a while loop that does nothing else, its body only pass / continue / "
        "... or only `if <test>: break`)",
    )
    not_inside: Literal["with", "async-with", "main-guard"] | None = Field(
        default=None,
        description="the call is not in the header or body of a with / async with block "
        "of its own function body (main-guard: not in the body of "
        "if __name__ == '__main__', nor in a function defined there)",
    )
    through_calls: bool = Field(
        default=False,
        description="follow the code's own functions: inside also holds when the function "
        "holding the call (a def of the code, or a method called on self) is called from "
        "a place where it holds, directly or through further such calls (at most "
        f"{_MAX_CALL_DEPTH} deep; a function only referenced, as in to_thread(f), is not "
        "called); arg_dynamic_string also counts a call of such a function that returns "
        "a dynamically built string; not_after also counts such functions (see there)",
    )
    on_fresh_object: bool = Field(
        default=False,
        description="the call is a method called on an object nothing else can reach: "
        "one a call has just made (threading.Event().wait(5)), or one bound once in the "
        "function itself to a call, or as a with target, and read nowhere but as the "
        "receiver of method calls (ev = threading.Event(); ev.wait(5)); not "
        "self.stop.wait(5), nor an event handed to a thread",
    )
    value_from_call: dict[str, list[str]] = Field(
        default_factory=dict,
        description="each keyword's value is the result of a call matching one of these "
        "names, an attribute of it, a name bound once to either, or an or / and with "
        "such an operand "
        "(size: [os.path.getsize, '*.stat'] matches read(os.path.getsize(p)), "
        "read(os.stat(p).st_size) and n = os.path.getsize(p); read(n))",
    )
    result_used: bool | None = Field(
        default=None,
        description="true: the call's value is used; false: it is discarded — the call is a "
        "statement of its own (awaited or not), or its value is only assigned to names "
        "(or attributes) that are never read anywhere in the code",
    )
    not_argument_of: list[str] = Field(
        default_factory=list,
        description="the call's value is not handed to a call matching one of these names: "
        "as (or inside) one of its arguments, or through a name bound once to it "
        "(asyncio.wait_for(proc.communicate(), 5), coro = proc.communicate(); "
        "asyncio.wait_for(coro, 5))",
    )
    not_after: list[str] = Field(
        default_factory=list,
        description="no call matching one of these names comes ahead of the call (position "
        "order) in the function body that holds it; with through_calls, nor a call of "
        "the code's own function that makes one, nor one ahead of a call of the function "
        "holding the call (os.replace not after os.fsync: the data is not synced first)",
    )
    result_unread: list[str] = Field(
        default_factory=list,
        description="none of these attributes is read on the object the call makes, "
        "through the name it is assigned to or the with target, anywhere in the code; a "
        "method counts only when its value is used (if proc.wait() != 0 reads wait, "
        "proc.wait() on a line of its own does not); an object passed on, returned, "
        "stored elsewhere or used in place may be read there, so the condition does not "
        "hold for it",
    )
    result_subtracted: bool = Field(
        default=False,
        description="the call's value is an operand of a subtraction (t1 - t0), directly "
        "or through a name (or attribute) it is assigned to, as a duration measured "
        "from two readings is",
    )
    outside_function: list[str] = Field(
        default_factory=list,
        description="the call is not directly in the body of a function with one of these "
        "names (flask.Flask outside create_app: at module level or in any other function)",
    )
    arg_dynamic_string: NonNegativeInt | None = Field(
        default=None,
        description="positional argument N (or a keyword that positional maps to N) is a "
        "dynamically built string: f-string with a placeholder, % format, + with a "
        "non-literal, .format(), or a name assigned one",
    )
    same_function_as: list[str] = Field(
        default_factory=list,
        description="the function body holding the call (the innermost def or lambda, or "
        "the module's top level) also holds another call matching one of these names",
    )
    before: bool = Field(
        default=False,
        description="with same_function_as: that other call comes after this one in the "
        "source (os.fsync before os.replace)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        named = (
            set(self.keyword)
            | set(self.keyword_in)
            | set(self.keyword_not)
            | set(self.missing_keyword)
            | set(self.keyword_none_or_missing)
            | set(self.keyword_not_in)
            | set(self.value_from_call)
        )
        bad = sorted(k for k in named | set(self.positional) if not k.isidentifier())
        if bad:
            raise ValueError(f"not a keyword name: {', '.join(bad)}")
        bad = sorted(n for n in self.result_unread if not n.isidentifier())
        if bad:
            raise ValueError(f"result_unread: not an attribute name: {', '.join(bad)}")
        bad = sorted(n for n in self.outside_function if not n.isidentifier())
        if bad:
            raise ValueError(f"outside_function: not a function name: {', '.join(bad)}")
        empty = sorted(k for k, values in self.keyword_in.items() if not values)
        if empty:
            raise ValueError(f"keyword_in lists no value for {', '.join(empty)}")
        unused = sorted(
            k
            for k, index in self.positional.items()
            if k not in named and index != self.arg_dynamic_string
        )
        if unused:
            raise ValueError(
                f"positional maps {', '.join(unused)}, which no keyword condition "
                "(nor arg_dynamic_string) uses"
            )
        low, high = self.min_args, self.max_args
        if low is not None and high is not None and low > high:
            raise ValueError("min_args is greater than max_args")
        empty = sorted(k for k, values in self.value_from_call.items() if not values)
        if empty:
            raise ValueError(f"value_from_call lists no name for {', '.join(empty)}")
        names = [
            n
            for values in self.value_from_call.values()
            for n in values
            if not _NAME_PATTERN.fullmatch(n)
        ]
        if names:
            raise ValueError(f"value_from_call: not a dotted name or wildcard: {', '.join(names)}")
        names = [
            n
            for n in [*self.same_function_as, *self.not_after, *self.not_argument_of]
            if not _NAME_PATTERN.fullmatch(n)
        ]
        if names:
            raise ValueError(
                "same_function_as / not_after / not_argument_of: not a dotted name or wildcard: "
                + ", ".join(names)
            )
        if self.before and not self.same_function_as:
            raise ValueError("before needs same_function_as")
        return self


class Params(BaseModel):
    """Parameters of a ``python-ast`` check.

    ``names`` serves the import and call rules (at least one entry), ``construct``
    serves ``forbid-construct`` only, ``where`` the call rules only.
    """

    model_config = ConfigDict(extra="forbid")

    rule: Rule = Field(description="what to look for")
    names: list[str] = Field(
        default_factory=list,
        description="dotted names: exact (subprocess.run), prefix wildcard (requests.*) "
        "or suffix wildcard (*.execute)",
    )
    # "construct" would shadow BaseModel.construct; the YAML key stays "construct".
    construct_kind: Construct | None = Field(
        default=None, alias="construct", description="the construct forbid-construct looks for"
    )
    where: Where | None = Field(
        default=None, description="conditions on the call (forbid-call / require-call)"
    )
    outside: list[Excuse] = Field(
        default_factory=list,
        description="forbid-construct only: a construct in one of these places does not "
        "count (test-function: a def named test_* or a method of a Test* class, nested "
        "code and its own defaults included; main-guard: the body of "
        "if __name__ == '__main__')",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.rule == "forbid-construct":
            if self.construct_kind is None:
                raise ValueError("rule forbid-construct needs 'construct'")
            if self.names:
                raise ValueError("rule forbid-construct takes no 'names'")
        else:
            if self.construct_kind is not None:
                raise ValueError(f"'construct' is only for forbid-construct, not {self.rule}")
            if not self.names:
                raise ValueError(f"rule {self.rule} needs at least one entry in 'names'")
            bad = [n for n in self.names if not _NAME_PATTERN.fullmatch(n)]
            if bad:
                raise ValueError(f"not a dotted name or wildcard (a.b, a.*, *.b): {', '.join(bad)}")
        if self.outside and self.rule != "forbid-construct":
            raise ValueError(f"'outside' is only for forbid-construct, not {self.rule}")
        if self.where is not None and self.rule not in _CALL_RULES:
            raise ValueError(f"'where' is only for forbid-call and require-call, not {self.rule}")
        return self


# --- name patterns ----------------------------------------------------------


def _match_call_name(pattern: str, name: str) -> bool:
    """Whether a resolved call (or value) name matches one ``names`` entry."""
    if pattern.startswith("*."):
        return name.endswith(pattern[1:])
    if pattern.endswith(".*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def _match_import_name(pattern: str, module: str) -> bool:
    """Whether an imported module (or ``module.member``) is equal to or under an entry."""
    if pattern.startswith("*."):
        return f".{pattern[2:]}." in f".{module}."
    base = pattern.removesuffix(".*")
    return module == base or module.startswith(base + ".")


# --- the shared analysis ----------------------------------------------------


class _Scope:
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
        parent: _Scope | None,
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
        self.chain: tuple[_Scope, ...]
        self.body: _Scope
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

    def owner(self, name: str) -> _Scope | None:
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
class _Ctx:
    """Where a node sits: the enclosing constructs and the scope (never changed once made)."""

    labels: frozenset[str]
    scope: _Scope

    def plus(self, label: str) -> _Ctx:
        return _Ctx(self.labels | {label}, self.scope)


@dataclass(slots=True)
class _Import:
    module: str
    node: ast.stmt | ast.expr


@dataclass(slots=True)
class _Args:
    """A call's arguments as the ``where`` conditions see them.

    ``pending`` holds the splats (``**opts``, ``**dict(...)``) that are still to
    be looked up (:meth:`_Analysis.arguments` does it, then sets it to None); ``scopes``
    the scope of each keyword that came from a dict bound in another scope, in
    which its value's names are to be looked up.
    """

    plain: list[ast.expr]
    star: bool
    keywords: dict[str, ast.expr]
    kw_splat: bool
    pending: list[ast.expr] | None = None
    scopes: dict[str, _Scope] | None = None


@dataclass(slots=True)
class _Call:
    node: ast.Call
    labels: frozenset[str]
    scope: _Scope
    # The walk's clock when it reached the call (string kinds are looked up as
    # they stood then) and the call's rank in the walk's order.
    clock: int
    rank: tuple[int, int]
    name: str | None = None
    args: _Args | None = None
    # For the call of f that another call stands for, ``partial(f, ...)`` or
    # ``field(default_factory=f)``: that call (where f will run is not known).
    partial: ast.Call | None = None


@dataclass(slots=True)
class _Deferred:
    """A value expression set aside: only the calls in it can matter, and only to
    a rule whose words occur on its lines."""

    node: ast.expr
    ctx: _Ctx
    clock: int
    walked: bool = False


_Task: TypeAlias = tuple[ast.AST, _Ctx] | Callable[[], None]
_SKIPPED = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
_StringLookup: TypeAlias = Callable[[str], str]


def _is_literal(node: ast.expr, depth: int = 0) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if depth > _MAX_EXPR_DEPTH:
        return False
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(_is_literal(e, depth + 1) for e in node.elts)
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


def _string_kind(node: ast.expr, lookup: _StringLookup, depth: int = 0) -> str:
    """Classify an expression: ``"dynamic"`` string, ``"literal"`` string, or ``"other"``.

    ``lookup`` gives the kind a name stands for at the point of the expression.
    """
    if depth > _MAX_EXPR_DEPTH:
        return "other"
    if isinstance(node, ast.Constant):
        return "literal" if isinstance(node.value, str) else "other"
    if isinstance(node, ast.JoinedStr):
        placeholder = any(isinstance(v, ast.FormattedValue) for v in node.values)
        return "dynamic" if placeholder else "literal"
    if isinstance(node, ast.Name):
        return lookup(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        kinds = [(op, _string_kind(op, lookup, depth + 1)) for op in _add_operands(node)]
        if any(k == "dynamic" for _, k in kinds):
            return "dynamic"
        if any(k == "literal" for _, k in kinds):
            if any(k == "other" and not _is_literal(op) for op, k in kinds):
                return "dynamic"
            if all(k == "literal" for _, k in kinds):
                return "literal"
        return "other"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = _string_kind(node.left, lookup, depth + 1)
        if left == "dynamic" or (left == "literal" and not _is_literal(node.right)):
            return "dynamic"
        return left
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        receiver = _string_kind(node.func.value, lookup, depth + 1)
        arguments = [*node.args, *(kw.value for kw in node.keywords)]
        if receiver == "dynamic" or (
            receiver == "literal" and not all(_is_literal(a) for a in arguments)
        ):
            return "dynamic"
    return "other"


def _augmented_kind(old: str, op: ast.operator, value: ast.expr, lookup: _StringLookup) -> str:
    """The string kind of ``name <op>= value`` given the kind ``name`` had."""
    if old == "dynamic" and isinstance(op, ast.Add | ast.Mod):
        return "dynamic"
    new = _string_kind(value, lookup)
    if isinstance(op, ast.Add):
        if new == "dynamic" or (old == "literal" and new == "other" and not _is_literal(value)):
            return "dynamic"
        return "literal" if old == new == "literal" else "other"
    if isinstance(op, ast.Mod) and old == "literal":
        return "literal" if _is_literal(value) else "dynamic"
    return "other"


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _mutable_default(node: ast.expr) -> bool:
    if isinstance(node, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _MUTABLE_FACTORIES
    )


def _broad_exception(node: ast.expr | None) -> bool:
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
        return any(_broad_exception(e) for e in node.elts)
    return False


def _swallows(body: Sequence[ast.stmt]) -> bool:
    return all(
        isinstance(s, ast.Pass | ast.Continue)
        or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value is ...)
        for s in body
    )


_ARG_NAME = attrgetter("arg")
_ANNOTATION = attrgetter("annotation")


def _param_names(args: ast.arguments) -> list[str]:
    if args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg:
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        params += [a for a in (args.vararg, args.kwarg) if a is not None]
        return list(map(_ARG_NAME, params))
    return list(map(_ARG_NAME, args.args))


def _dict_entries(node: ast.expr) -> dict[str, ast.expr] | None:
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


def _dotted_parts(node: ast.expr) -> list[str] | None:
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


def _partial_target(node: ast.expr) -> ast.expr | None:
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


def _method_class(scope: _Scope) -> _Scope | None:
    """The class body whose method (or code nested in one) ``scope`` belongs to."""
    inner = scope
    while inner.parent is not None:
        if inner.parent.is_class:
            return inner.parent if inner.body is inner else None
        inner = inner.parent
    return None


def _is_break_if(node: ast.stmt) -> bool:
    """``if <test>: break`` and nothing else."""
    return (
        isinstance(node, ast.If)
        and not node.orelse
        and len(node.body) == 1
        and isinstance(node.body[0], ast.Break)
    )


def _is_main_guard(node: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (
        isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)
    ):
        return False
    sides = (node.left, node.comparators[0])
    return any(isinstance(a, ast.Name) and a.id == "__name__" for a in sides) and any(
        isinstance(b, ast.Constant) and b.value == "__main__" for b in sides
    )


def _call_args(call: _Call) -> _Args:
    """The arguments of ``call`` as written, sorted out once, when first looked at;
    :meth:`_Analysis.arguments` adds what named splats pass."""
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
        entries = _dict_entries(value) if type(value) is ast.Dict else None
        if entries is not None:
            # A literal dict splat, **{"shell": True}, says what it passes.
            for key, entry in entries.items():
                keywords.setdefault(key, entry)
        elif type(value) is ast.Name or type(value) is ast.Call:
            pending = [value] if pending is None else [*pending, value]
        else:
            kw_splat = True
    call.args = _Args(plain, len(plain) < len(node.args), keywords, kw_splat, pending)
    return call.args


# Words whose presence on a line means that an expression there may bind a
# name (lambda parameters, comprehension targets, ``:=``): such expressions are
# walked in order, never deferred. A false alarm only costs an earlier walk.
_MARKERS = ("lambda", "for", ":=")
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
# "" is the end of the text, after which nothing continues a name.
_NAME_CHARS = _NAME_START | frozenset("0123456789")
_FUNCTION_LABELS = frozenset({"function"})
_ASYNC_FUNCTION_LABELS = frozenset({"function", "async-def"})
_DISPATCH: dict[type, Any] = {ast.Constant: lambda self, node, ctx: []}


class _Walker:
    """One walk over the tree that records imports, bindings, constructs and calls.

    Statements are visited in source order with their context (enclosing
    constructs, scope), so that when the walk ends every import, binding and
    construct is known. An expression in a statement can only add calls unless
    it binds a name, which needs a lambda, a comprehension or ``:=`` on its
    lines (see ``_MARKERS``); given ``markers``, the lines that hold one, the
    other expressions are set aside as :class:`_Deferred` and walked only when a
    rule asks for calls on their lines (:meth:`_Analysis.need`). Everything else
    is walked at once, in order. Without ``markers`` nothing is deferred.

    Expressions are walked with an explicit stack, not recursion, so that very
    deep trees (a long ``a + b + ...`` chain) cannot exhaust the interpreter's
    stack. Statements recurse: the parser allows at most 100 levels of
    indentation.
    """

    def __init__(self, markers: set[int] | None = None, strings: bool = True) -> None:
        self.module_scope = _Scope(parent=None)
        # Whether to follow the string kinds of names (only arg_dynamic_string
        # needs them); without, no assignment's value is classified.
        self.strings = strings
        self.imports: list[_Import] = []
        self.calls: list[_Call] = []
        self.constructs: dict[str, list[ast.AST]] = {c: [] for c in CONSTRUCT_LABELS}
        self.flat_imports: dict[str, str] = {}
        # For each component of a dotted name imported, the local names bound to
        # it (other than the component itself).
        self.aliases: dict[str, list[str]] = {}
        self.bound: set[str] = set()
        # Names declared global or nonlocal somewhere, and names subscripted as an
        # assignment target (opts["shell"] = True) somewhere: their single
        # bindings say nothing (see _Analysis.single).
        self.declared: set[str] = set()
        self.mutated: set[str] = set()
        # For each name assigned a dotted name or a partial(...) of one, the
        # components of that name (see _Analysis.need).
        self.references: dict[str, list[str]] = {}
        # For each (class body, attribute), what ``self.<attribute>`` is assigned in
        # its methods, with the scope of the assignment (None: a binding of
        # another kind, such as a loop target or ``+=``).
        self.self_attrs: dict[tuple[int, str], list[tuple[ast.expr | None, _Scope]]] = {}
        # The constructs that sit in a place forbid-construct's ``outside`` names.
        self.excused: dict[int, frozenset[str]] = {}
        # The function, class and module scopes, in the order they were made.
        self.scopes: list[_Scope] = [self.module_scope]
        # The defs and classes of the code, by (id of the scope that binds the
        # name, name): the def bodies, and each class's bases with their scope.
        self.defs: dict[tuple[int, str], list[_Scope]] = {}
        self.classes: dict[tuple[int, str], list[tuple[list[ast.expr], _Scope]]] = {}
        self.markers = markers
        self.deferred: list[_Deferred] = []
        # The clock orders the walk: it ticks at each call and each deferral, and
        # every change to a scope's strings is logged with the time it was made.
        self.clock = 0
        # For each (scope, name), when its string kind changed and what it was
        # before, in clock order; the entry holds the scope, so that its id stays
        # unique while the walker lives.
        self.log: dict[tuple[int, str], tuple[_Scope, list[int], list[str | None]]] = {}
        self._item: _Deferred | None = None
        self._rank = 0

    def walk(self, tree: ast.Module) -> None:
        self._block(tree.body, _Ctx(frozenset(), self.module_scope))

    def walk_deferred(self, item: _Deferred) -> None:
        """Walk a deferred expression now; its calls rank and look up strings as of its place."""
        item.walked = True
        self._item, self._rank = item, 0
        try:
            self._walk([(item.node, item.ctx)])
        finally:
            self._item = None

    def kind_at(self, scope: _Scope, clock: int, name: str) -> str:
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

    def _block(self, body: list[ast.stmt], ctx: _Ctx) -> None:
        for node in body:
            _STATEMENTS.get(type(node), _Walker._statement)(self, node, ctx)

    def _statement(self, node: ast.stmt, ctx: _Ctx) -> None:
        """A statement without a rule of its own: its children, walked now."""
        self._walk(self._children(node, ctx))

    def _expr(self, node: ast.expr, ctx: _Ctx) -> None:
        """A value expression: set it aside unless it may bind a name (see the class doc)."""
        kind = type(node)
        if kind is ast.Constant or kind is ast.Name:
            return  # nothing to record: a loaded name, a literal
        markers = self.markers
        if markers is not None and (
            not markers
            or markers.isdisjoint(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        ):
            self.deferred.append(_Deferred(node, ctx, self.clock))
            self.clock += 1
            return
        self._walk([(node, ctx)])

    def _target(self, node: ast.expr, ctx: _Ctx) -> None:
        if type(node) is ast.Name:
            self._bind(node.id, ctx.scope)
        else:
            self._walk([(node, ctx)])

    def _expression_statement(self, node: ast.Expr, ctx: _Ctx) -> None:
        self._expr(node.value, ctx)

    def _return(self, node: ast.Return, ctx: _Ctx) -> None:
        if node.value is not None:
            body = ctx.scope.body
            if (
                self.strings
                and not body.returns_dynamic
                and _string_kind(node.value, ctx.scope.string_kind) == "dynamic"
            ):
                body.returns_dynamic = True
            self._expr(node.value, ctx)

    def _raise(self, node: ast.Raise, ctx: _Ctx) -> None:
        if node.exc is not None:
            self._expr(node.exc, ctx)
        if node.cause is not None:
            self._expr(node.cause, ctx)

    def _delete(self, node: ast.Delete, ctx: _Ctx) -> None:
        for target in node.targets:
            self._target(target, ctx)

    def _nothing(self, node: ast.stmt, ctx: _Ctx) -> None:
        pass

    def _if(self, node: ast.If, ctx: _Ctx) -> None:
        self._expr(node.test, ctx)
        self._block(node.body, ctx.plus("main-guard") if _is_main_guard(node.test) else ctx)
        self._block(node.orelse, ctx)

    def _try(self, node: ast.Try | ast.TryStar, ctx: _Ctx) -> None:
        self._block(node.body, ctx)
        for handler in node.handlers:
            self._handler(handler, ctx)
        self._block(node.orelse, ctx)
        self._block(node.finalbody, ctx)

    def _match(self, node: ast.Match, ctx: _Ctx) -> None:
        self._expr(node.subject, ctx)
        for case in node.cases:
            self._walk([(case.pattern, ctx)])
            if case.guard is not None:
                self._expr(case.guard, ctx)
            self._block(case.body, ctx)

    # bindings

    def _bind(self, name: str, scope: _Scope, value: ast.expr | ast.withitem | None = None) -> None:
        """Record a binding of ``name``; ``value``: what an assignment or a ``with``
        binds it to (None for any other binding)."""
        scope.locals.add(name)
        self.bound.add(name)
        single = scope.single
        single[name] = None if name in single else value

    def _write(self, scope: _Scope, name: str, kind: str) -> None:
        if not self.strings:
            return
        strings = scope.strings
        changes = self.log.get((id(scope), name))
        if changes is None:
            changes = self.log[(id(scope), name)] = (scope, [], [])
        changes[1].append(self.clock)
        changes[2].append(strings.get(name))
        strings[name] = kind

    def _forget(self, targets: Sequence[ast.AST], scope: _Scope) -> None:
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

    def _self_store(self, target: ast.Attribute, value: ast.expr | None, scope: _Scope) -> bool:
        """Record a binding of ``self.<attr>`` in a method; whether ``target`` is one."""
        receiver = target.value
        if not (isinstance(receiver, ast.Name) and receiver.id == "self"):
            return False
        owner = _method_class(scope)
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

    def _import_binding(self, local: str, qualified: str, scope: _Scope) -> None:
        scope.imports[local] = qualified
        self.flat_imports[local] = qualified
        if local != qualified:  # a name imported as itself adds nothing to a word
            aliases = self.aliases
            for part in qualified.split("."):
                if part in aliases:
                    aliases[part].append(local)
                else:
                    aliases[part] = [local]

    def _assign(self, node: ast.Assign, ctx: _Ctx) -> None:
        kind = _string_kind(node.value, ctx.scope.string_kind) if self.strings else ""
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
        target = _partial_target(value) if isinstance(value, ast.Call) else value
        parts = _dotted_parts(target) if target is not None else None
        if parts:
            if name in self.references:
                self.references[name].extend(parts)
            else:
                self.references[name] = parts

    def _ann_assign(self, node: ast.AnnAssign, ctx: _Ctx) -> None:
        kind = None
        if self.strings and isinstance(node.target, ast.Name) and node.value is not None:
            kind = _string_kind(node.value, ctx.scope.string_kind)
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

    def _aug_assign(self, node: ast.AugAssign, ctx: _Ctx) -> None:
        target = node.target
        kind = ""
        if self.strings and isinstance(target, ast.Name):
            lookup = ctx.scope.string_kind
            kind = _augmented_kind(lookup(target.id), node.op, node.value, lookup)
        self._target(target, ctx)
        self._expr(node.value, ctx)
        if isinstance(target, ast.Name):
            self._write(ctx.scope, target.id, kind)

    # imports

    def _import(self, node: ast.Import, ctx: _Ctx) -> None:
        for alias in node.names:
            self.imports.append(_Import(alias.name, node))
            if alias.asname:
                self._import_binding(alias.asname, alias.name, ctx.scope)
            else:
                first = alias.name.split(".")[0]
                self._import_binding(first, first, ctx.scope)

    def _import_from(self, node: ast.ImportFrom, ctx: _Ctx) -> None:
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                self.imports.append(_Import(module, node))
                self._construct("star-import", node, ctx.labels)
                continue
            qualified = f"{module}.{alias.name}" if node.module else module + alias.name
            self.imports.append(_Import(qualified, node))
            self._import_binding(alias.asname or alias.name, qualified, ctx.scope)

    # scopes

    def _function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, ctx: _Ctx
    ) -> _Ctx:
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
                if _mutable_default(default):
                    self._construct("mutable-default-arg", default, excused)
        names = _param_names(args)
        self.bound.update(names)
        scope = _Scope(ctx.scope, False, names, function=True)
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
        return _Ctx(labels | excused if excused else labels, scope)

    def _function_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: _Ctx) -> None:
        inner = self._function(node, ctx)
        for decorator in node.decorator_list:
            self._expr(decorator, ctx)
        if node.returns is not None:
            self._expr(node.returns, ctx)
        self._arguments(node.args, ctx, inner.scope)
        self._block(node.body, inner)

    def _arguments(self, args: ast.arguments, ctx: _Ctx, inner: _Scope) -> None:
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

    def _class_def(self, node: ast.ClassDef, ctx: _Ctx) -> None:
        self._bind(node.name, ctx.scope)
        self.classes.setdefault((id(ctx.scope), node.name), []).append((node.bases, ctx.scope))
        labels = ctx.labels | {"test-class"} if node.name.startswith("Test") else ctx.labels
        inner = _Ctx(labels, _Scope(parent=ctx.scope, is_class=True))
        self.scopes.append(inner.scope)
        for expr in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self._expr(expr, ctx)
        self._block(node.body, inner)

    # loops: only what runs on every iteration is "inside" the loop

    def _for(self, node: ast.For | ast.AsyncFor, ctx: _Ctx) -> None:
        self._expr(node.iter, ctx)
        self._target(node.target, ctx)
        self._forget([node.target], ctx.scope)
        self._block(node.body, ctx.plus("loop"))
        self._block(node.orelse, ctx)

    def _while(self, node: ast.While, ctx: _Ctx) -> None:
        loop = ctx.plus("loop")
        body = node.body
        if _swallows(body):  # while time.monotonic() < deadline: pass
            self._expr(node.test, loop.plus("busy-wait"))
            self._block(body, loop)
        else:
            self._expr(node.test, loop)
            exits = [s for s in body if _is_break_if(s)]
            if exits and all(s in exits or _swallows([s]) for s in body):
                # while True: if time.monotonic() >= deadline: break
                spin = loop.plus("busy-wait")
                for statement in body:
                    if isinstance(statement, ast.If):
                        self._expr(statement.test, spin)
            else:
                self._block(body, loop)
        self._block(node.orelse, ctx)

    # blocks

    def _handler(self, node: ast.ExceptHandler, ctx: _Ctx) -> None:
        if node.type is None:
            self._construct("bare-except", node, ctx.labels)
        if _broad_exception(node.type) and _swallows(node.body):
            self._construct("broad-except-swallow", node, ctx.labels)
        if node.name:
            self._bind(node.name, ctx.scope)
            self._write(ctx.scope, node.name, "other")
        if node.type is not None:
            self._expr(node.type, ctx)
        self._block(node.body, ctx.plus("except-handler"))

    def _with(self, node: ast.With | ast.AsyncWith, ctx: _Ctx) -> None:
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

    def _global(self, node: ast.Global, ctx: _Ctx) -> None:
        self._construct("global-statement", node, ctx.labels)
        self.declared.update(node.names)

    def _nonlocal(self, node: ast.Nonlocal, ctx: _Ctx) -> None:
        self.declared.update(node.names)

    def _assert(self, node: ast.Assert, ctx: _Ctx) -> None:
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

    def _generic(self, node: ast.AST, ctx: _Ctx) -> list[_Task]:
        return self._children(node, ctx)

    @staticmethod
    def _children(node: ast.AST, ctx: _Ctx) -> list[_Task]:
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

    def _visit_statement(self, node: ast.stmt, ctx: _Ctx) -> list[_Task]:
        _STATEMENTS.get(type(node), _Walker._statement)(self, node, ctx)
        return []

    def _visit_ExceptHandler(self, node: ast.ExceptHandler, ctx: _Ctx) -> list[_Task]:
        self._handler(node, ctx)
        return []

    def _visit_Call(self, node: ast.Call, ctx: _Ctx) -> list[_Task]:
        item = self._item
        if item is None:
            clock = self.clock
            rank = (clock, 0)
            self.clock += 1
        else:
            clock = item.clock
            rank = (clock, self._rank)
            self._rank += 1
        self.calls.append(_Call(node, ctx.labels, ctx.scope, clock, rank))
        # What _children gives, with each keyword's value in place of the keyword
        # (a keyword node has nothing else to visit).
        return [
            (node.func, ctx),
            *[(arg, ctx) for arg in node.args],
            *[(keyword.value, ctx) for keyword in node.keywords],
        ]

    # The commonest expressions, their children listed directly (as _children would).

    def _visit_Attribute(self, node: ast.Attribute | ast.Starred, ctx: _Ctx) -> list[_Task]:
        if type(node.ctx) is not ast.Load and type(node) is ast.Attribute:
            assert isinstance(node, ast.Attribute)
            self._self_store(node, None, ctx.scope)  # self.x += 1, for self.x in ...
        return [(node.value, ctx)]

    _visit_Starred = _visit_Attribute

    def _visit_BinOp(self, node: ast.BinOp, ctx: _Ctx) -> list[_Task]:
        return [(node.left, ctx), (node.right, ctx)]

    def _visit_Subscript(self, node: ast.Subscript, ctx: _Ctx) -> list[_Task]:
        value = node.value
        if type(node.ctx) is not ast.Load and isinstance(value, ast.Name):
            self.mutated.add(value.id)  # opts["shell"] = True, del opts["check"]
        return [(value, ctx), (node.slice, ctx)]

    def _visit_Tuple(self, node: ast.Tuple | ast.List, ctx: _Ctx) -> list[_Task]:
        return [(elt, ctx) for elt in node.elts]

    _visit_List = _visit_Tuple

    def _visit_JoinedStr(self, node: ast.JoinedStr, ctx: _Ctx) -> list[_Task]:
        return [(value, ctx) for value in node.values]

    def _visit_Lambda(self, node: ast.Lambda, ctx: _Ctx) -> list[_Task]:
        inner = self._function(node, ctx)
        return [(node.args, ctx), (node.body, inner)]

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, ctx: _Ctx
    ) -> tuple[list[_Task], _Ctx]:
        loop = _Ctx(ctx.labels | {"loop"}, _Scope(parent=ctx.scope))
        tasks: list[_Task] = []
        for i, gen in enumerate(node.generators):
            # The first iterable is evaluated once, in the enclosing scope.
            tasks.append((gen.iter, ctx if i == 0 else loop))
            tasks.append((gen.target, loop))
            tasks.extend((c, loop) for c in gen.ifs)
        return tasks, loop

    def _visit_ListComp(self, node: ast.ListComp | ast.SetComp, ctx: _Ctx) -> list[_Task]:
        tasks, loop = self._comprehension(node, ctx)
        return [*tasks, (node.elt, loop)]

    _visit_SetComp = _visit_ListComp

    def _visit_GeneratorExp(self, node: ast.GeneratorExp, ctx: _Ctx) -> list[_Task]:
        tasks, loop = self._comprehension(node, ctx)
        return [*tasks, (node.elt, loop)]

    def _visit_DictComp(self, node: ast.DictComp, ctx: _Ctx) -> list[_Task]:
        tasks, loop = self._comprehension(node, ctx)
        return [*tasks, (node.key, loop), (node.value, loop)]

    def _visit_Name(self, node: ast.Name, ctx: _Ctx) -> list[_Task]:
        if not isinstance(node.ctx, ast.Load):
            self._bind(node.id, ctx.scope)
        return []

    def _visit_NamedExpr(self, node: ast.NamedExpr, ctx: _Ctx) -> list[_Task]:
        kind = _string_kind(node.value, ctx.scope.string_kind) if self.strings else ""
        return [
            (node.value, ctx),
            (node.target, ctx),
            partial(self._write, ctx.scope, node.target.id, kind),
        ]

    def _visit_MatchAs(self, node: ast.MatchAs | ast.MatchStar, ctx: _Ctx) -> list[_Task]:
        if node.name:
            self._bind(node.name, ctx.scope)
        return self._children(node, ctx)

    _visit_MatchStar = _visit_MatchAs

    def _visit_MatchMapping(self, node: ast.MatchMapping, ctx: _Ctx) -> list[_Task]:
        if node.rest:
            self._bind(node.rest, ctx.scope)
        return self._children(node, ctx)


def _visitor_for(cls: type) -> Any:
    if issubclass(cls, ast.stmt):
        return _Walker._visit_statement
    return getattr(_Walker, f"_visit_{cls.__name__}", _Walker._generic)


_STATEMENTS: dict[type, Callable[[_Walker, Any, _Ctx], None]] = {
    ast.FunctionDef: _Walker._function_def,
    ast.AsyncFunctionDef: _Walker._function_def,
    ast.ClassDef: _Walker._class_def,
    ast.Return: _Walker._return,
    ast.Delete: _Walker._delete,
    ast.Assign: _Walker._assign,
    ast.AugAssign: _Walker._aug_assign,
    ast.AnnAssign: _Walker._ann_assign,
    ast.For: _Walker._for,
    ast.AsyncFor: _Walker._for,
    ast.While: _Walker._while,
    ast.If: _Walker._if,
    ast.With: _Walker._with,
    ast.AsyncWith: _Walker._with,
    ast.Match: _Walker._match,
    ast.Raise: _Walker._raise,
    ast.Try: _Walker._try,
    ast.TryStar: _Walker._try,
    ast.Assert: _Walker._assert,
    ast.Import: _Walker._import,
    ast.ImportFrom: _Walker._import_from,
    ast.Global: _Walker._global,
    ast.Nonlocal: _Walker._nonlocal,
    ast.Expr: _Walker._expression_statement,
    ast.Pass: _Walker._nothing,
    ast.Break: _Walker._nothing,
    ast.Continue: _Walker._nothing,
}


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _import_position(imp: _Import) -> tuple[int, int]:
    return _position(imp.node)


def _call_order(call: _Call) -> tuple[int, int, int, int]:
    # Position first; the walk's order breaks ties (an outer call and the call
    # that is its callee, ``f(x)(y)``, start at the same column).
    return (*_position(call.node), *call.rank)


@dataclass(slots=True)
class _Flow:
    """Where values go, for the conditions on a call's result (made by :func:`_flow`).

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


def _made(node: ast.expr | None) -> ast.expr | None:
    """The call an expression's value comes from when it is one, awaited or not."""
    if type(node) is ast.Await:
        assert isinstance(node, ast.Await)
        node = node.value
    return node if type(node) is ast.Call else None


def _flow(tree: ast.Module) -> _Flow:
    flow = _Flow({}, set(), {}, {}, set(), {}, {}, {}, set(), set(), set())
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
                made = _made(item.context_expr)
                if made is not None and item.optional_vars is not None:
                    flow.with_targets[id(made)] = item.optional_vars
        elif kind is ast.Assign or kind is ast.AnnAssign:
            assert isinstance(node, ast.Assign | ast.AnnAssign)
            made = _made(node.value)
            if made is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                flow.assigned.setdefault(id(made), []).extend(targets)
        elif kind is ast.Expr:
            assert isinstance(node, ast.Expr)
            made = _made(node.value)
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
            if any(_is_literal(side) for side in pair):
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


def _unread_accumulators(tree: ast.Module) -> list[ast.AST]:
    """For each local name of a function that is updated (``skipped += 1``,
    ``rejected.append(row)`` as a statement, ``by_reason[r] += 1``) but never read, by the function or code
    nested in it, the first update. A parameter, or a name declared ``global`` /
    ``nonlocal`` or never bound otherwise in the function, belongs to someone else
    who may read it."""
    out: list[ast.AST] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        updates: dict[str, ast.AST] = {}
        bound: set[str] = set()
        read: set[str] = set()
        declared: set[str] = set(_param_names(function.args))
        receivers: set[int] = set()
        nodes = [n for statement in function.body for n in ast.walk(statement)]
        for node in nodes:
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                updates.setdefault(node.target.id, node)
                receivers.add(id(node.target))
            elif isinstance(node, ast.AugAssign | ast.Assign):
                # by_reason[reason] += 1, bad[line_no] = row
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        updates.setdefault(target.value.id, node)
                        receivers.add(id(target.value))
            elif (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr in _ACCUMULATE
                and isinstance(node.value.func.value, ast.Name)
            ):
                updates.setdefault(node.value.func.value.id, node.value)
                receivers.add(id(node.value.func.value))
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
            if name in bound and name not in read and name not in declared
        )
    return out


class _Analysis:
    """Everything the rules need about one subject's code.

    The tree is walked once, when the analysis is made; the expressions the
    walk set aside are walked when a rule needs the calls that may be in them
    (:meth:`need`).
    """

    def __init__(self, code: str, tree: ast.Module, strings: bool = True) -> None:
        self.code = code
        # The parser NFKC-normalises identifiers, so only in ASCII code does every
        # name of the tree occur verbatim in the text, which :meth:`need` relies on.
        markers = self.lines_with(_MARKERS, keywords=True) if code.isascii() else None
        walker = _Walker(markers, strings)
        walker.walk(tree)
        self._walker = walker
        self.flat_imports = walker.flat_imports
        self.bound = walker.bound
        self.constructs = walker.constructs
        self.excused = walker.excused
        self.classes = walker.classes
        self._static_imports = walker.imports
        self._dynamic_imports: list[tuple[tuple[int, int], _Import]] = []
        self.imports: list[_Import] = []
        self.calls: list[_Call] = []
        self._needed: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
        self._by_line: dict[int, list[_Deferred]] | None = None
        # Spans by node id; holding the tree keeps the ids unique.
        self._tree = tree
        self._spans: dict[int, Span] = {}
        # The partial(...) calls (by id) whose name is called: those calls stand for them.
        self.called_partials: set[int] = set()
        # For through_calls: the calls of each def (by id of its scope), and whether a
        # def is reached from inside a construct (by id of its scope and the label).
        self._callers: dict[int, list[_Call]] = {}
        self._index: tuple[int, dict[int, list[_Call]], dict[str, list[_Call]]] | None = None
        self._def_words: tuple[str, ...] | None = None
        self._reached: dict[tuple[int, str], bool] = {}
        self.imports = sorted(self._static_imports, key=_import_position)
        self._add_calls(list(walker.calls))

    def _add_calls(self, calls: list[_Call]) -> None:
        """Resolve newly walked calls; keep ``calls`` and ``imports`` sorted by position."""
        dynamic = len(self._dynamic_imports)
        extra: list[_Call] = []
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
            if call.name in _DYNAMIC_IMPORTS:
                args = _call_args(call)
                target = args.plain[0] if args.plain else args.keywords.get("name")
                if isinstance(target, ast.Constant) and isinstance(target.value, str):
                    self._dynamic_imports.append((call.rank, _Import(target.value, call.node)))
        # A new list, not the old one extended: a rule that holds the old one while
        # a condition makes the analysis walk more (see :meth:`mutated`) iterates on.
        merged = [*self.calls, *calls, *extra]
        merged.sort(key=_call_order)
        self.calls = merged
        if len(self._dynamic_imports) > dynamic:
            self._dynamic_imports.sort(key=lambda pair: pair[0])
            imports = [*self._static_imports, *(imp for _, imp in self._dynamic_imports)]
            self.imports = sorted(imports, key=_import_position)

    def _wrapped_call(self, call: _Call) -> _Call | None:
        """For ``partial(f, *args, **kw)`` with ``f`` resolved: the call of ``f`` with
        partial's other arguments, placed where the partial call is."""
        node = call.node
        target = _partial_target(node)
        if target is None or self.known_name(node.func, call.scope) not in _PARTIALS:
            return None
        name = self.known_name(target, call.scope)
        if name is None:
            return None
        wrapped = ast.copy_location(ast.Call(target, node.args[1:], node.keywords), node)
        return _Call(
            wrapped, call.labels, call.scope, call.clock, call.rank, name=name, partial=node
        )

    def _factory_call(self, call: _Call, where: str | int) -> _Call | None:
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
        return _Call(made, call.labels, call.scope, call.clock, call.rank, name=name, partial=node)

    def _bound_partial(
        self, name: str, scope: _Scope, depth: int = 0
    ) -> tuple[ast.Call, str, _Scope] | None:
        """For a local ``name`` bound once to ``partial(f, ...)`` with ``f`` resolved:
        that call, ``f``'s name and the scope of the binding."""
        found = self.single(name, scope)
        if found is None:
            return None
        value, owner = found
        if not isinstance(value, ast.Call):
            return None
        target = _partial_target(value)
        if target is None or self.known_name(value.func, owner, depth + 1) not in _PARTIALS:
            return None
        wrapped = self.known_name(target, owner, depth + 1)
        return None if wrapped is None else (value, wrapped, owner)

    def _self_partial(self, attr: str, scope: _Scope) -> tuple[ast.Call, str, _Scope] | None:
        """For ``self.<attr>`` bound once in the methods of the class to
        ``partial(f, ...)`` with ``f`` resolved: that call, ``f``'s name, its scope."""
        owner = _method_class(scope)
        bindings = self._walker.self_attrs.get((id(owner), attr)) if owner is not None else None
        if bindings is None or len(bindings) != 1:
            return None
        value, where = bindings[0]
        target = _partial_target(value) if value is not None else None
        if (
            target is None
            or not isinstance(value, ast.Call)
            or self.known_name(value.func, where) not in _PARTIALS
        ):
            return None
        wrapped = self.known_name(target, where)
        return None if wrapped is None else (value, wrapped, where)

    def _through_partial(self, call: _Call, found: tuple[ast.Call, str, _Scope] | None) -> None:
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
        args = _call_args(_Call(merged, call.labels, call.scope, call.clock, call.rank))
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
            for _ in range(_MAX_RECEIVER_DEPTH):
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
        """The first update of each unread accumulator (see :func:`_unread_accumulators`)."""
        return _unread_accumulators(self._tree)

    @cached_property
    def flow(self) -> _Flow:
        """Where the values of calls go (see :class:`_Flow`), found when first asked for."""
        return _flow(self._tree)

    def defs_called(self, node: ast.expr, scope: _Scope) -> list[_Scope]:
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
            owner = _method_class(scope)
            return walker.defs.get((id(owner), node.attr), []) if owner is not None else []
        return []

    def _walk_def_calls(self) -> None:
        """Walk every expression that may call one of the code's own defs."""
        if self._def_words is None:
            self._def_words = tuple(sorted({name for _, name in self._walker.defs}))
        if self._def_words:
            self.need(self._def_words)

    def _indexes(self) -> tuple[dict[int, list[_Call]], dict[str, list[_Call]]]:
        """The calls by function body (id) and by the name they call (``f`` for ``f()``
        and ``self.f()``), made again when the analysis has walked more calls."""
        self._walk_def_calls()
        index = self._index
        if index is None or index[0] != len(self.calls):
            by_body: dict[int, list[_Call]] = {}
            by_callee: dict[str, list[_Call]] = {}
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

    def callers(self, body: _Scope) -> list[_Call]:
        """The calls of the def whose body is ``body`` (see :meth:`defs_called`)."""
        found = self._callers.get(id(body))
        if found is not None:
            return found
        name = body.name
        out: list[_Call] = []
        if name is not None:
            for call in self._indexes()[1].get(name, ()):
                if any(b is body for b in self.defs_called(call.node.func, call.scope)):
                    out.append(call)
        self._callers[id(body)] = out
        return out

    def calls_in(self, body: _Scope) -> list[_Call]:
        """The calls whose function body is ``body`` (every call of a def of the code walked)."""
        return self._indexes()[0].get(id(body), [])

    def makers(self, wanted: dict[_Scope, list[_Call]]) -> set[int]:
        """The function bodies (by id) that hold a call of ``wanted`` or a call of one of
        the code's own defs that leads to one (at most ``_MAX_CALL_DEPTH`` calls deep)."""
        made = {id(body) for body, calls in wanted.items() if calls}
        self._walk_def_calls()
        for _ in range(_MAX_CALL_DEPTH):
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

    def reached_inside(self, body: _Scope, label: str) -> bool:
        """Whether the def whose body is ``body`` is called from inside ``label``,
        directly or through further defs of the code (at most ``_MAX_CALL_DEPTH``)."""
        key = (id(body), label)
        hit = self._reached.get(key)
        if hit is not None:
            return hit
        seen = {id(body)}
        frontier = [body]
        hit = False
        for _ in range(_MAX_CALL_DEPTH):
            after: list[_Scope] = []
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
                        (index == 0 or code[index - 1] not in _NAME_START)
                        and code[index + len(word) : index + len(word) + 1] not in _NAME_CHARS
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

    def string_kind(self, node: ast.expr, call: _Call) -> str:
        """The string kind of an argument of ``call``, as the names stood at the call."""
        assert self._walker.strings, "an analysis made without string kinds"
        return _string_kind(node, partial(self._walker.kind_at, call.scope, call.clock))

    @cached_property
    def line_starts(self) -> list[int]:
        # The parser also ends lines at a lone "\r"; spans are then re-expressed
        # in the "\n"-counted lines the studio shows.
        return [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", self.code))]

    def resolve(self, expr: ast.expr, scope: _Scope, depth: int = 0) -> str | None:
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

    def reference(self, name: str, scope: _Scope, depth: int = 0) -> str | None:
        """The resolved dotted name a local ``name`` stands for when it is bound once to
        one (``sleep = time.sleep``) or to ``functools.partial`` of one; None otherwise
        (a parameter, whatever its default, included)."""
        if depth > _MAX_RECEIVER_DEPTH or name not in self._walker.references:
            return None
        found = self.single(name, scope)
        if found is None:
            return None
        value, owner = found
        if isinstance(value, ast.Name | ast.Attribute):
            return self.known_name(value, owner, depth + 1)
        bound = self._bound_partial(name, scope, depth + 1)
        return None if bound is None else bound[1]

    def self_attribute(self, attr: str, scope: _Scope, depth: int = 0) -> str | None:
        """The dotted name of the object ``self.<attr>`` stands for in a method: every
        binding of it in the methods of the class is an assignment of a call of the
        same resolved name (``self.session = requests.Session()``)."""
        owner = _method_class(scope)
        if owner is None or depth > _MAX_RECEIVER_DEPTH:
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

    def known_name(self, expr: ast.expr, scope: _Scope, depth: int = 0) -> str | None:
        """The resolved dotted name of ``expr`` when it names something imported (or a
        module or builtin never bound in the code); None for anything local or unknown."""
        if depth > _MAX_RECEIVER_DEPTH:
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

    def single(self, name: str, scope: _Scope) -> tuple[ast.expr | ast.withitem, _Scope] | None:
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
        self, node: ast.expr, scope: _Scope, names: list[str] | None = None
    ) -> tuple[ast.expr, _Scope]:
        """``node``, or, for a plain name bound once by an assignment, the value it
        was assigned (followed through further such names), with its scope; the
        names followed are added to ``names``."""
        for _ in range(_MAX_RECEIVER_DEPTH):
            if not isinstance(node, ast.Name):
                break
            found = self.single(node.id, scope)
            if found is None or isinstance(found[0], ast.withitem):
                break
            if names is not None:
                names.append(node.id)
            node, scope = found[0], found[1]
        return node, scope

    def constant(self, node: ast.expr, scope: _Scope) -> tuple[bool, LiteralValue]:
        """The scalar literal ``node`` passes, directly or through names (see :meth:`follow`)."""
        if type(node) is ast.Name:
            node, scope = self.follow(node, scope)
        return _literal(node)

    def receiver(self, name: str, scope: _Scope, depth: int = 0) -> str | None:
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
        if depth > _MAX_RECEIVER_DEPTH:
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

    def _annotation_name(self, node: ast.expr, scope: _Scope, depth: int) -> str | None:
        """The resolved name an annotation declares: ``X``, ``"X"``, ``Optional[X]``,
        ``Union[X, None]``, ``X | None``, ``Annotated[X, ...]``; None otherwise."""
        for _ in range(_MAX_RECEIVER_DEPTH):
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
                parts = [p for p in (node.left, node.right) if not _is_none(p)]
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
                parts = [p for p in elts if not _is_none(p)]
                if len(parts) != 1:
                    return None
                node = parts[0]
            elif kind is ast.Name or kind is ast.Attribute:
                return self.known_name(node, scope, depth)
            else:
                return None
        return None

    def arguments(self, call: _Call) -> _Args:
        """The arguments of ``call``, splats of known dicts (``**opts`` where ``opts`` is
        bound once to a dict literal or ``dict(...)`` and never mutated) included."""
        args = _call_args(call)
        pending = args.pending
        if pending is None:
            return args
        args.pending = None
        for splat in pending:
            names: list[str] = []
            node, scope = self.follow(splat, call.scope, names)
            entries = _dict_entries(node)
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
        lineno, col = _position(node)
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
            lineno, col = _position(node)
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


def _analysis_for(subject: Subject, strings: bool = True) -> _Analysis | CheckResult:
    """The memoised analysis of ``subject``, or the failed result that replaces it;
    ``strings``: one that follows string kinds (see :func:`_strings_needed`)."""
    cached = subject.cache.get(CACHE_KEY)
    if isinstance(cached, CheckResult) or (
        isinstance(cached, _Analysis) and (cached._walker.strings or not strings)
    ):
        return cached
    result: _Analysis | CheckResult
    tree = subject.tree
    if isinstance(tree, SyntaxError):
        result = _parse_failure(subject.code, tree)
    else:
        try:
            result = _Analysis(subject.code, tree, strings)
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


# --- the rules --------------------------------------------------------------


_CONSTANT: dict[int, tuple[Params, CheckResult]] = {}


def _constant(params: Params, make: Callable[[], CheckResult]) -> CheckResult:
    """The verdict a rule gives whenever nothing in the code is to blame (no hit of a
    forbid rule, no hit of a require rule): it depends on ``params`` only, so it is
    made once per parameters object and shared (results are immutable)."""
    hit = _CONSTANT.get(id(params))
    if hit is not None and hit[0] is params:
        return hit[1]
    result = make()
    if len(_CONSTANT) > 4096:
        _CONSTANT.clear()
    _CONSTANT[id(params)] = (params, result)
    return result


def _listing(messages: list[str], total: int) -> str:
    """The first messages (at most ``_MAX_LISTED`` are shown) of ``total``."""
    shown = "; ".join(messages[:_MAX_LISTED])
    more = total - _MAX_LISTED
    return f"{shown}; and {more} more" if more > 0 else shown


def _unique_spans(analysis: _Analysis, nodes: Iterable[ast.AST]) -> tuple[Span, ...]:
    """The spans of the first ``MAX_EVIDENCE`` distinct nodes."""
    seen: dict[int, Span] = {}
    for node in nodes:
        if id(node) not in seen:
            if len(seen) == MAX_EVIDENCE:
                break
            seen[id(node)] = analysis.span(node)
    return tuple(seen.values())


_DYNAMIC_IMPORT_WORDS = tuple(sorted({name.rsplit(".", 1)[-1] for name in _DYNAMIC_IMPORTS}))


def _import_hits(params: Params, analysis: _Analysis) -> list[_Import]:
    analysis.need(_DYNAMIC_IMPORT_WORDS)
    return [
        imp
        for imp in analysis.imports
        if any(_match_import_name(p, imp.module) for p in params.names)
    ]


def _forbid_import(params: Params, analysis: _Analysis) -> CheckResult:
    hits = _import_hits(params, analysis)
    if not hits:
        return _constant(
            params,
            lambda: CheckResult(passed=True, reason=f"no import of {', '.join(params.names)}"),
        )
    spans = _unique_spans(analysis, (h.node for h in hits))
    messages = [
        f"forbidden import {h.module} at line {analysis.span(h.node).line}"
        for h in hits[:_MAX_LISTED]
    ]
    return CheckResult(passed=False, reason=_listing(messages, len(hits)), evidence=spans)


def _require_import(params: Params, analysis: _Analysis) -> CheckResult:
    hits = _import_hits(params, analysis)
    if hits:
        span = analysis.span(hits[0].node)
        return CheckResult(
            passed=True, reason=f"imports {hits[0].module} at line {span.line}", evidence=(span,)
        )
    which = "" if len(params.names) == 1 else " (any of)"
    return CheckResult(
        passed=False, reason=f"missing required import{which}: {', '.join(params.names)}"
    )


_State: TypeAlias = Literal["present", "absent", "unknown"]


@dataclass(slots=True)
class _Argument:
    """An argument a condition is about: whether it is passed, and its value with the
    scope its names are to be looked up in."""

    state: _State
    node: ast.expr | None = None
    scope: _Scope | None = None


_ABSENT_ARGUMENT = _Argument("absent")
_UNKNOWN_ARGUMENT = _Argument("unknown")


def _argument(call: _Call, keyword: str, where: Where, analysis: _Analysis) -> _Argument:
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


def _literal(node: ast.expr) -> tuple[bool, LiteralValue]:
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


def _same_literal(found: LiteralValue, wanted: LiteralValue) -> bool:
    # True == 1 in Python; here shell=1 is not shell=True.
    if isinstance(found, bool) or isinstance(wanted, bool):
        return type(found) is type(wanted) and found == wanted
    if isinstance(found, int | float) and isinstance(wanted, int | float):
        return found == wanted
    return type(found) is type(wanted) and found == wanted


def _is_one_of(arg: _Argument, wanted: Sequence[LiteralValue], analysis: _Analysis) -> bool:
    """Whether the argument is passed as one of the literals ``wanted`` (through names)."""
    if arg.node is None or arg.scope is None:
        return False
    ok, value = analysis.constant(arg.node, arg.scope)
    return ok and any(_same_literal(value, w) for w in wanted)


def _in_list(arg: _Argument, entries: list[str], analysis: _Analysis) -> bool:
    if arg.node is None or arg.scope is None:
        return False
    return _value_in_list(arg.node, arg.scope, entries, analysis)


def _value_in_list(
    node: ast.expr, scope: _Scope, entries: list[str], analysis: _Analysis, depth: int = 0
) -> bool:
    """Whether a value is one of ``entries``: a literal, a name matching one (through
    names bound once), a class of the code's own derived from one
    (``class Strict(yaml.SafeLoader)``), or ``getattr(m, "X", default)`` where both
    ``m.X`` and the default are."""
    if depth > _MAX_RECEIVER_DEPTH:
        return False
    node, scope = analysis.follow(node, scope)
    ok, value = _literal(node)
    if ok:
        texts = {repr(value)} | ({value} if isinstance(value, str) else set())
        if texts & set(entries):
            return True
    if isinstance(node, ast.Name | ast.Attribute):
        name = analysis.resolve(node, scope)
        if name is not None and any(
            _NAME_PATTERN.fullmatch(e) and _match_call_name(e, name) for e in entries
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


def _dynamic_argument(call: _Call, index: int, where: Where, analysis: _Analysis) -> bool:
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


def _returns_dynamic(node: ast.expr, scope: _Scope, analysis: _Analysis) -> bool:
    """Whether a value (through names bound once) is the result of a call of one of the
    code's own defs that returns a dynamically built string."""
    node, scope = analysis.follow(node, scope)
    made = _made(node)
    if not isinstance(made, ast.Call):
        return False
    return any(body.returns_dynamic for body in analysis.defs_called(made.func, scope))


def _from_call(arg: _Argument, names: list[str], analysis: _Analysis) -> bool:
    """Whether an argument is the result of a call matching ``names``, an attribute of
    it (``os.stat(p).st_size``), a name bound once to either, or an ``or`` / ``and`` of
    which one operand is."""
    if arg.node is None or arg.scope is None:
        return False
    todo = [(arg.node, arg.scope)]
    for _ in range(_MAX_RECEIVER_DEPTH):
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
        made = _made(node)
        if isinstance(made, ast.Call):
            name = analysis.resolve(made.func, scope)
            if name is not None and any(_match_call_name(p, name) for p in names):
                return True
    return False


def _on_fresh_object(call: _Call, analysis: _Analysis) -> bool:
    """Whether ``call`` is a method called on an object that nothing else can reach: one
    a call has just made (``threading.Event().wait(5)``), or one bound once, in the
    function itself, to a call (or as the target of ``with`` on one) and read nowhere
    but as the receiver of method calls (``cv = threading.Condition(); cv.wait(5)``)."""
    func = call.node.func
    if not isinstance(func, ast.Attribute):
        return False
    if _made(func.value) is not None:
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
    made = _made(value.context_expr if isinstance(value, ast.withitem) else value)
    flow = analysis.flow
    return made is not None and flow.loads.get(name, 0) == flow.receivers.get(name, 0)


def _result_used(call: _Call, analysis: _Analysis) -> bool:
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


def _result_unread(call: _Call, attributes: list[str], analysis: _Analysis) -> bool:
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


def _result_subtracted(call: _Call, analysis: _Analysis) -> bool:
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


_Companions: TypeAlias = dict[_Scope, list[_Call]]


def _companions(names: list[str], analysis: _Analysis) -> _Companions:
    """The calls matching ``names`` (of ``same_function_as`` or ``not_after``), by the
    function body that holds them."""
    analysis.need(_call_words(names), _prefix_words(names))
    out: _Companions = {}
    for call in analysis.calls:
        name = call.name
        if (
            name is not None
            and call.partial is None
            and any(_match_call_name(p, name) for p in names)
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
    inner: _Scope, at: tuple[int, int, int, int], earlier: _Earlier, analysis: _Analysis
) -> bool:
    """Whether a call of ``earlier`` (or, with makers, a call of a def that leads to one)
    comes ahead of the position ``at`` in the function body ``inner``."""
    if any(_call_order(other) < at for other in earlier.companions.get(inner, ())):
        return True
    makers = earlier.makers
    return makers is not None and any(
        _call_order(call) < at
        and any(id(d) in makers for d in analysis.defs_called(call.node.func, call.scope))
        for call in analysis.calls_in(inner)
        if type(call.node.func) is ast.Name or type(call.node.func) is ast.Attribute
    )


def _comes_after(
    body: _Scope, order: tuple[int, int, int, int], earlier: _Earlier, analysis: _Analysis
) -> bool:
    """Whether a call of ``earlier`` comes ahead of the position ``order`` in ``body``;
    with makers (through_calls), also a call of one of the code's own defs that leads to
    one, and, where the def ``body`` is called, one ahead of that call (followed to the
    callers' callers, at most ``_MAX_CALL_DEPTH`` deep)."""
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
    for _ in range(_MAX_CALL_DEPTH):
        after: list[_Scope] = []
        for inner in frontier:
            for site in analysis.callers(inner):
                if id(site) in seen:
                    continue
                seen.add(id(site))
                synced = earlier.synced_sites.get(id(site))
                if synced is None:
                    synced = _ahead(site.scope.body, _call_order(site), earlier, analysis)
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


def _beside(call: _Call, where: Where, companions: _Companions) -> bool:
    """Whether another call of ``companions`` shares the body of ``call`` (and, with
    ``before``, comes after it in the source)."""
    others = companions.get(call.scope.body, ())
    if where.before:
        order = _call_order(call)
        return any(_call_order(other) > order for other in others)
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


def _others(where: Where, analysis: _Analysis) -> _Others:
    others = _Others()
    if where.same_function_as:
        others.companions = _companions(where.same_function_as, analysis)
    if where.not_after:
        found = _companions(where.not_after, analysis)
        others.earlier = _Earlier(found, analysis.makers(found) if where.through_calls else None)
    if where.not_argument_of:
        others.handed = _handed(where.not_argument_of, analysis)
    return others


def _handed(names: list[str], analysis: _Analysis) -> set[int]:
    """The calls (by node id) whose value is an argument of a call matching ``names``, or
    lies in one, or is bound once to a name that does (coro = f(); wait_for(coro, 5))."""
    analysis.need(_call_words(names), _prefix_words(names))
    out: set[int] = set()
    for call in analysis.calls:
        name = call.name
        if name is None or not any(_match_call_name(p, name) for p in names):
            continue
        for arg in [*call.node.args, *(kw.value for kw in call.node.keywords)]:
            for node in ast.walk(arg):
                if isinstance(node, ast.Call):
                    out.add(id(node))
                elif isinstance(node, ast.Name):
                    value, _ = analysis.follow(node, call.scope)
                    made = _made(value)
                    if made is not None:
                        out.add(id(made))
    return out


def _where_holds(
    where: Where, call: _Call, analysis: _Analysis, others: _Others | None = None
) -> bool:
    """Whether ``call`` meets every condition of ``where``."""
    others = others or _Others()
    for keyword, wanted in where.keyword.items():
        arg = _argument(call, keyword, where, analysis)
        if arg.state != "present" or not _is_one_of(arg, (wanted,), analysis):
            return False
    for keyword, values in where.keyword_in.items():
        arg = _argument(call, keyword, where, analysis)
        if arg.state != "present" or not _is_one_of(arg, values, analysis):
            return False
    for keyword, unwanted in where.keyword_not.items():
        arg = _argument(call, keyword, where, analysis)
        if arg.state == "unknown" or _is_one_of(arg, (unwanted,), analysis):
            return False
    for keyword in where.missing_keyword:
        if _argument(call, keyword, where, analysis).state != "absent":
            return False
    for keyword in where.keyword_none_or_missing:
        arg = _argument(call, keyword, where, analysis)
        if arg.state == "unknown" or (
            arg.state == "present" and not _is_one_of(arg, (None,), analysis)
        ):
            return False
    for keyword, entries in where.keyword_not_in.items():
        arg = _argument(call, keyword, where, analysis)
        if arg.state == "unknown" or _in_list(arg, entries, analysis):
            return False
    if where.min_args is not None or where.max_args is not None:
        args = _call_args(call)
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
        arg = _argument(call, keyword, where, analysis)
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
        or _comes_after(call.scope.body, _call_order(call), earlier, analysis)
    ):
        return False
    if others.handed is not None and id(call.node) in others.handed:
        return False
    if where.result_unread and not _result_unread(call, where.result_unread, analysis):
        return False
    if where.result_subtracted and not _result_subtracted(call, analysis):
        return False
    return others.companions is None or _beside(call, where, others.companions)


def _call_hits(params: Params, analysis: _Analysis) -> list[_Call]:
    _, words, prefixes = _needle_entry(params)
    analysis.need(words, prefixes)
    where = params.where
    others = _others(where, analysis) if where is not None else None
    # The list as it stands: a condition may make the analysis walk more (the
    # calls it finds then cannot match this rule: they lie on other lines).
    calls = analysis.calls
    called = analysis.called_partials
    return [
        call
        for call in calls
        if call.name is not None
        and (call.partial is None or id(call.partial) not in called)
        and any(_match_call_name(p, call.name) for p in params.names)
        and (where is None or _where_holds(where, call, analysis, others))
    ]


def _describe_call(call: _Call, where: Where | None, analysis: _Analysis) -> str:
    """``subprocess.run(shell=True)``: the name and the arguments the conditions are about;
    a call on an unresolved receiver as written, one on a known object as written
    followed by the object (``client.get() on httpx.Client``)."""
    name = call.name or ""
    on = ""
    if name.startswith("*."):
        name = analysis.snippet(call.node.func)
    else:
        func, depth = call.node.func, 0
        while isinstance(func, ast.Attribute):
            func, depth = func.value, depth + 1
        if depth and isinstance(func, ast.Name) and call.scope.binding(func.id)[1]:
            if func.id == "self" and analysis.receiver("self", call.scope) is None:
                depth -= 1  # self.session.get() on requests.Session; self.pause(), a partial
            if depth:
                on = f" on {name.rsplit('.', depth)[0]}"
                name = analysis.snippet(call.node.func)
    parts: list[str] = []
    if where is not None:
        if where.arg_dynamic_string is not None:
            parts.append("<dynamic string>")
        keywords = [
            *where.keyword,
            *where.keyword_in,
            *where.keyword_not,
            *where.keyword_none_or_missing,
            *where.keyword_not_in,
        ]
        for keyword in dict.fromkeys(keywords):
            arg = _argument(call, keyword, where, analysis)
            if arg.state == "present" and arg.node is not None:
                parts.append(f"{keyword}={analysis.snippet(arg.node)}")
    return f"{name}({', '.join(parts)}){on}"


def _describe_conditions(conditions: dict[str, Any]) -> str:
    """``where`` conditions as a reader writes them, not as Python prints a dict:
    ``missing keyword timeout``, ``keyword shell=True``, ``keyword in mode=w or a``."""

    def value(v: Any) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, list | tuple):
            return " or ".join(value(x) for x in v)
        return repr(v)

    parts = []
    for key, given in conditions.items():
        label = key.replace("_", " ")
        if isinstance(given, dict):
            parts.append(f"{label} " + ", ".join(f"{k}={value(v)}" for k, v in given.items()))
        elif isinstance(given, list):
            parts.append(f"{label} " + ", ".join(value(v) for v in given))
        elif given is True:
            parts.append(label)
        else:
            parts.append(f"{label} {value(given)}")
    return "; ".join(parts)


_DESCRIBED: dict[int, tuple[Params, str]] = {}


def _describe_names(params: Params) -> str:
    hit = _DESCRIBED.get(id(params))
    if hit is not None and hit[0] is params:
        return hit[1]
    names = ", ".join(params.names)
    if params.where is not None:
        conditions = params.where.model_dump(exclude_defaults=True)
        names = f"{names} where {_describe_conditions(conditions)}"
    if len(_DESCRIBED) > 4096:
        _DESCRIBED.clear()
    _DESCRIBED[id(params)] = (params, names)
    return names


def _forbid_call(params: Params, analysis: _Analysis) -> CheckResult:
    hits = _call_hits(params, analysis)
    if not hits:
        return _constant(
            params, lambda: CheckResult(passed=True, reason=f"no call to {_describe_names(params)}")
        )
    messages = [
        f"forbidden call {_describe_call(c, params.where, analysis)} "
        f"at line {analysis.span(c.node).line}"
        for c in hits[:_MAX_LISTED]
    ]
    spans = _unique_spans(analysis, (c.node for c in hits))
    return CheckResult(passed=False, reason=_listing(messages, len(hits)), evidence=spans)


def _require_call(params: Params, analysis: _Analysis) -> CheckResult:
    hits = _call_hits(params, analysis)
    if hits:
        span = analysis.span(hits[0].node)
        described = _describe_call(hits[0], params.where, analysis)
        return CheckResult(
            passed=True, reason=f"calls {described} at line {span.line}", evidence=(span,)
        )
    which = "" if len(params.names) == 1 else " (any of)"
    return CheckResult(
        passed=False, reason=f"missing required call{which}: {_describe_names(params)}"
    )


def _forbid_construct(params: Params, analysis: _Analysis) -> CheckResult:
    construct = params.construct_kind or ""
    label = CONSTRUCT_LABELS.get(construct, construct)
    found = analysis.constructs.get(construct, ())
    if construct == "unread-accumulator":
        found = analysis.unread_accumulators
    nodes = sorted(found, key=_position)
    if params.outside and nodes:
        excused = analysis.excused
        outside = set(params.outside)
        nodes = [n for n in nodes if outside.isdisjoint(excused.get(id(n), ()))]
    if not nodes:
        return _constant(params, lambda: CheckResult(passed=True, reason=f"no {label}"))
    unique = list({id(node): node for node in nodes}.values())
    spans = _unique_spans(analysis, unique)
    messages = [f"{label} at line {s.line}" for s in spans[:_MAX_LISTED]]
    return CheckResult(passed=False, reason=_listing(messages, len(unique)), evidence=spans)


_CONSTRUCT_WORDS: dict[str, tuple[str, ...]] = {
    "bare-except": ("except",),
    "broad-except-swallow": ("except",),
    "star-import": ("*",),
    "global-statement": ("global",),
    "mutable-default-arg": ("def", "lambda"),
    "assert-statement": ("assert",),
    "unread-accumulator": (
        *(f"{op}=" for op in ("+", "-", "*", "/", "%", "|", "&", "^", "<<", ">>", "@")),
        "[",
        *sorted({"append", "add", "extend", "insert", "appendleft", "update", "setdefault"}),
    ),
}
_NEEDLES: dict[int, tuple[Params, tuple[str, ...], tuple[str, ...]]] = {}


def _needles(params: Params) -> tuple[str, ...]:
    """Words at least one of which the source text contains whenever the rule can match.

    Every spelling the analysis resolves — aliases, ``from`` imports, dynamic
    ``import_module("x")`` — still names the module (import rules) or the
    called attribute (call rules) somewhere in the text, so when none of these
    words occurs the tree walk can be skipped: the rule cannot match. (In ASCII
    text: the parser NFKC-normalises identifiers, so ``ｒequests`` is ``requests``.)
    For the call rules these are also the words :meth:`_Analysis.need` looks for.
    (A call on a known object, ``s.get()`` after ``s = requests.Session()``,
    names its module where the object is bound or annotated.)
    """
    return _needle_entry(params)[1]


def _needle_entry(params: Params) -> tuple[Params, tuple[str, ...], tuple[str, ...]]:
    """The parameters, their words (see :func:`_needles`) and the words of their
    ``a.*`` names (see :meth:`_Analysis.need`), made once per parameters object."""
    hit = _NEEDLES.get(id(params))
    if hit is not None and hit[0] is params:
        return hit
    prefixes: tuple[str, ...] = ()
    if params.rule == "forbid-construct":
        words = _CONSTRUCT_WORDS.get(str(params.construct_kind), ())
    elif params.rule in ("forbid-import", "require-import"):
        words = tuple(n.removeprefix("*.").removesuffix(".*").split(".")[0] for n in params.names)
    else:
        words = _call_words(params.names)
        prefixes = _prefix_words(params.names)
    if len(_NEEDLES) > 4096:
        _NEEDLES.clear()
    hit = _NEEDLES[id(params)] = (params, words, prefixes)
    return hit


def _call_words(names: Sequence[str]) -> tuple[str, ...]:
    """The words of call patterns: each one's last component (for ``a.*``, ``a``'s)."""
    return tuple(n.removesuffix(".*").rsplit(".", 1)[-1] for n in names)


def _prefix_words(names: Sequence[str]) -> tuple[str, ...]:
    """The words of the ``a.*`` patterns among ``names`` (see :meth:`_Analysis.need`)."""
    return tuple(n[:-2].rsplit(".", 1)[-1] for n in names if n.endswith(".*"))


def _occurs(word: str, code: str) -> bool:
    """Whether ``word`` occurs in ``code``; a word that is a name, only where it is
    not part of a longer name (``run`` in ``return`` is not the name ``run``).

    The parser reads a name that follows a digit as a name of its own, so that
    occurrence counts.
    """
    index = code.find(word)
    if index == -1 or not word.isidentifier():
        return index != -1
    size = len(word)
    while index != -1:
        if (index == 0 or code[index - 1] not in _NAME_START) and code[
            index + size : index + size + 1
        ] not in _NAME_CHARS:
            return True
        index = code.find(word, index + 1)
    return False


_EMPTY: list[_Analysis] = []
_ABSENT: dict[int, tuple[Params, tuple[str, ...], CheckResult]] = {}


def _absent_result(params: Params, code: str) -> CheckResult | None:
    """The verdict when none of the rule's words occurs in ``code``: the rule's own
    verdict on an empty module (same reasons), without walking the tree."""
    hit = _ABSENT.get(id(params))
    if hit is None or hit[0] is not params:
        if not _EMPTY:
            _EMPTY.append(_Analysis("", ast.parse("")))
        if len(_ABSENT) > 4096:
            _ABSENT.clear()
        hit = (params, _needles(params), _RULES[params.rule](params, _EMPTY[0]))
        _ABSENT[id(params)] = hit
    words = hit[1]
    if not words or not code.isascii():
        return None
    for word in words:
        if _occurs(word, code):
            return None
    return hit[2]


_STRINGS: dict[int, tuple[tuple[tuple[str, Any], ...], bool, frozenset[int]]] = {}


def _strings_needed(params: Params, checks: tuple[tuple[str, Any], ...]) -> bool:
    """Whether the analysis serving ``params`` must follow string kinds: unless its
    sibling ``checks`` are known and none of their python-ast checks asks for
    ``arg_dynamic_string``, one analysis that does serves them all."""
    hit = _STRINGS.get(id(checks))
    if hit is None or hit[0] is not checks:
        mine = [p for kind, p in checks if kind == "python-ast" and isinstance(p, Params)]
        needed = any(p.where is not None and p.where.arg_dynamic_string is not None for p in mine)
        if len(_STRINGS) > 1024:
            _STRINGS.clear()
        hit = _STRINGS[id(checks)] = (checks, needed, frozenset(map(id, mine)))
    return hit[1] or id(params) not in hit[2]


_RULES: dict[str, Callable[[Params, _Analysis], CheckResult]] = {
    "forbid-import": _forbid_import,
    "require-import": _require_import,
    "forbid-call": _forbid_call,
    "require-call": _require_call,
    "forbid-construct": _forbid_construct,
}


@register_check(
    "python-ast",
    params=Params,
    description="Structural rules on the parsed Python code: forbidden or required imports "
    "and calls (names resolved through imports, optional conditions on arguments and "
    "context), and forbidden constructs. Comments and strings never count.",
)
def run_python_ast(params: Params, subject: Subject) -> CheckResult:
    """Evaluate a ``python-ast`` check on one subject.

    Args:
        params: The validated check parameters.
        subject: The code under test; its parse and analysis are shared through
            ``subject.cache`` with the other ``python-ast`` checks of the subject.

    Returns:
        The verdict. Code that does not parse, or is too deeply nested to
        analyse, is a failed result with a reason; this function does not raise
        on model output.
    """
    if isinstance(subject.tree, SyntaxError):
        analysis = _analysis_for(subject)
        assert isinstance(analysis, CheckResult)
        return analysis
    absent = _absent_result(params, subject.code)
    if absent is not None:
        return absent
    analysis = _analysis_for(subject, _strings_needed(params, subject.checks))
    if isinstance(analysis, CheckResult):
        return analysis
    try:
        return _RULES[params.rule](params, analysis)
    except (RecursionError, MemoryError) as exc:
        return CheckResult(passed=False, reason=f"code too complex to analyse: {exc!r}")
