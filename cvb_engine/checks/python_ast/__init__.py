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
directly or through further such defs (at most ``MAX_CALL_DEPTH`` calls), from
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
find a call in them (see :class:`~cvb_engine.checks.python_ast.walker.Walker`).

Layout: :mod:`.params` (the parameters and name patterns), :mod:`.syntax`
(questions asked of single nodes), :mod:`.scope` (what the walk records),
:mod:`.walker` (the walk), :mod:`.flow` (where values go), :mod:`.analysis`
(the shared analysis), :mod:`.conditions` (``where``), :mod:`.rules` (the rules
and the prepared check); this module registers the kind.
"""

from __future__ import annotations

from cvb_engine.checks.base import CheckResult, Subject, register_check
from cvb_engine.checks.python_ast.analysis import CACHE_KEY
from cvb_engine.checks.python_ast.params import (
    CONSTRUCT_LABELS,
    Construct,
    Excuse,
    LiteralValue,
    Params,
    Rule,
    Where,
)
from cvb_engine.checks.python_ast.rules import PreparedAst

__all__ = [
    "CACHE_KEY",
    "CONSTRUCT_LABELS",
    "Construct",
    "Excuse",
    "LiteralValue",
    "Params",
    "PreparedAst",
    "Rule",
    "Where",
    "run_python_ast",
]


@register_check(
    "python-ast",
    params=Params,
    prepare=PreparedAst,
    description="Structural rules on the parsed Python code: forbidden or required imports "
    "and calls (names resolved through imports, optional conditions on arguments and "
    "context), and forbidden constructs. Comments and strings never count.",
)
def run_python_ast(params: Params, subject: Subject) -> CheckResult:
    """Evaluate one ``python-ast`` check on one subject (prepared for it alone).

    Args:
        params: The validated check parameters.
        subject: The code under test; its parse and analysis are shared through
            ``subject.cache`` with the other ``python-ast`` checks of the subject.

    Returns:
        The verdict. Code that does not parse, or is too deeply nested to
        analyse, is a failed result with a reason; this function does not raise
        on model output.
    """
    return PreparedAst(params).run(subject)
