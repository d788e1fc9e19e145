"""The parameters of a ``python-ast`` check (``Params``, ``Where``) and the syntax of
their ``names``: exact dotted names, ``a.*`` and ``*.b`` wildcards, and how a
resolved name (or an imported module) matches one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal, Self, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, model_validator

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
    "unguarded-state",
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
    "unguarded-state": "lock-guarded state used without the lock",
}
_CALL_RULES = ("forbid-call", "require-call")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
NAME_PATTERN = re.compile(rf"(?:\*\.)?{_IDENT}(?:\.{_IDENT})*|{_IDENT}(?:\.{_IDENT})*\.\*")

# How far through_calls follows the code's own functions to their callers.
MAX_CALL_DEPTH = 4


class Where(BaseModel):
    """Conditions on a call for ``forbid-call`` / ``require-call``.

    A call matches only when every condition given holds. An argument's value
    is what the call passes, or, for a plain name bound once in its scope to a
    literal (``use_shell = True``), that literal (see the docstring of
    :mod:`cvb_engine.checks.python_ast`). A ``**kwargs`` (or ``*args``) splat
    hides what it passes, unless it is a dict literal or a name bound once to
    one and never mutated: a condition that depends on a hidden argument does
    not hold, so a forbid never fires on a guess.
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
        f"{MAX_CALL_DEPTH} deep; a function only referenced, as in to_thread(f), is not "
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
    result_kept: bool | None = Field(
        default=None,
        description="true: the call's value outlives the function that makes it, or is "
        "awaited there: awaited, returned, handed to another call, stored on an object, in a "
        "module-level (or global, or parameter) collection, or in a local one that is kept "
        "in turn; false: it is dropped, or held only by locals of the function (a list or "
        "set made there) that end with it",
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
    argument_of: list[str] = Field(
        default_factory=list,
        description="the call's value reaches a call matching one of these names: as (or "
        "inside) one of its arguments, through a name or with target bound to it, through "
        "a wrapper call around it (io.TextIOWrapper, codecs.iterdecode, gzip.open; one that "
        "passes a keyword this where judges, such as newline=, decides it and stops the "
        "value), or by leaving the code's hands where it may reach one (returned or yielded "
        "by a wrapper function, stored on an object, handed to a function of the code); a "
        "value only used for itself (open(p).read(), f.write() on the with target) or "
        "consumed by another call (json.load(f)) does not match",
    )
    not_only_for: list[str] = Field(
        default_factory=list,
        description="the call's value is used for itself, not only spent on calls matching "
        "these names: a value that only lands in their arguments (directly, inside "
        "arithmetic, or through local names bound to it, augmented assignments included) "
        "or in a comparison that decides something does not match (random.uniform jitter "
        "passed to time.sleep, random.random() < rate)",
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
            if not NAME_PATTERN.fullmatch(n)
        ]
        if names:
            raise ValueError(f"value_from_call: not a dotted name or wildcard: {', '.join(names)}")
        names = [
            n
            for n in [
                *self.same_function_as,
                *self.not_after,
                *self.not_argument_of,
                *self.not_only_for,
                *self.argument_of,
            ]
            if not NAME_PATTERN.fullmatch(n)
        ]
        if names:
            raise ValueError(
                "same_function_as / not_after / not_argument_of / not_only_for / argument_of: "
                "not a dotted name or wildcard: " + ", ".join(names)
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
            bad = [n for n in self.names if not NAME_PATTERN.fullmatch(n)]
            if bad:
                raise ValueError(f"not a dotted name or wildcard (a.b, a.*, *.b): {', '.join(bad)}")
        if self.outside and self.rule != "forbid-construct":
            raise ValueError(f"'outside' is only for forbid-construct, not {self.rule}")
        if self.where is not None and self.rule not in _CALL_RULES:
            raise ValueError(f"'where' is only for forbid-call and require-call, not {self.rule}")
        return self


# --- name patterns ----------------------------------------------------------


def match_call_name(pattern: str, name: str) -> bool:
    """Whether a resolved call (or value) name matches one ``names`` entry."""
    if pattern.startswith("*."):
        return name.endswith(pattern[1:])
    if pattern.endswith(".*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def match_import_name(pattern: str, module: str) -> bool:
    """Whether an imported module (or ``module.member``) is equal to or under an entry."""
    if pattern.startswith("*."):
        return f".{pattern[2:]}." in f".{module}."
    base = pattern.removesuffix(".*")
    return module == base or module.startswith(base + ".")


def call_words(names: Sequence[str]) -> tuple[str, ...]:
    """The words of call patterns: each one's last component (for ``a.*``, ``a``'s)."""
    return tuple(n.removesuffix(".*").rsplit(".", 1)[-1] for n in names)


def prefix_words(names: Sequence[str]) -> tuple[str, ...]:
    """The words of the ``a.*`` patterns among ``names`` (see :meth:`Analysis.need`)."""
    return tuple(n[:-2].rsplit(".", 1)[-1] for n in names if n.endswith(".*"))
