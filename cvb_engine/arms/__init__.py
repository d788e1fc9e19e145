"""Arms: how a scenario's constraints reach the model (README: Memory arms).

An arm kind is a plugin: one module in this package, registered with
:func:`register_arm`, with a pydantic ``Params`` model and a version of its
own. A *variant* is a kind with parameters, and has one canonical, stable
name: the kind alone when every parameter has its default, else
``kind@key=value,...`` with the non-default parameters in the order ``Params``
declares them (``incentivized@load=50,position=middle``). That name is what
``--arms`` takes, what every record stores and what the matrix hash covers;
the three seed arms (``cold``, ``mandated``, ``incentivized``) keep their names
and their PROMPT_VERSION 2.0 messages byte for byte
(``tests/test_arm_pins.py``).

Messages are built from the scenario, the variant and, for variants that add
project memory, the memory pool (``scenarios/memory/pool.yaml``): never by a
model, and deterministically (distractors are ordered by a hash of the
scenario id and the entry id, so a larger load extends a smaller one).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from cvb_engine import prompts
from cvb_engine.kinds import SeedArm
from cvb_engine.library import shipped_pool
from cvb_engine.plugin_registry import Registry, import_plugins, origin_of
from cvb_engine.scenario import Scenario

__all__ = [
    "DEFAULT_POOL",
    "ArmContext",
    "ArmError",
    "ArmKind",
    "ArmVariant",
    "arm_kind",
    "arm_kinds",
    "arm_order",
    "build_messages",
    "canonical_arm",
    "expand_sweep",
    "join_arm_items",
    "parse_arm",
    "parse_arms",
    "register_arm",
]

#: The shipped project-memory pool that memory variants draw distractors from.
DEFAULT_POOL = shipped_pool()

Message = dict[str, str]


class ArmError(ValueError):
    """An arm name or parameter that does not parse; the message says what is expected."""


@dataclass(frozen=True)
class ArmContext:
    """What a variant may read besides its scenario: the memory pool (loaded once, on use)."""

    pool_path: Path = DEFAULT_POOL

    @functools.cached_property
    def pool(self) -> Sequence[Any]:
        """The pool's entries (objects with ``id``, ``kind`` and ``text``)."""
        from cvb_engine.memory_pool import load_pool

        return tuple(load_pool(self.pool_path).entries)

    def pool_sha256(self) -> str:
        return hashlib.sha256(self.pool_path.read_bytes()).hexdigest()


#: Builds a variant's messages: ``(scenario, params, context)``; a live kind's builder
#: also takes the memory layer's answer for the cell (``recall``, None when there is none
#: yet, e.g. in a preview).
Builder = Callable[..., list[Message]]


@dataclass(frozen=True)
class ArmKind:
    """A registered arm kind: its parameters, version and message builder."""

    name: str
    params: type[BaseModel]
    version: str
    description: str
    build: Builder
    #: whether some parameter values draw on the memory pool
    uses_pool: Callable[[Any], bool] = field(default=lambda _params: False)
    #: a live kind asks a memory layer for each cell while the run sends (memory,
    #: memory-tool): its messages are known only then
    live: bool = False
    #: what a record of a variant stores about the memory it was given
    #: (``Record.memory_json``: per constraint whether its note was delivered), or None
    memory_of: Callable[..., dict[str, Any] | None] | None = None


# The built-in kinds register when their modules are imported, on first use.
_REGISTRY: Registry[ArmKind] = Registry(
    "arm kind", load=import_plugins("cvb_engine.arms", ("agent", "incentivized", "layered", "seed"))
)


def register_arm(
    name: str,
    *,
    params: type[BaseModel],
    version: str,
    description: str,
    uses_pool: Callable[[Any], bool] | None = None,
    live: bool = False,
    memory_of: Callable[..., dict[str, Any] | None] | None = None,
) -> Callable[[Builder], Builder]:
    """Register the decorated function as the message builder of arm kind ``name``."""
    if "@" in name or "," in name or "=" in name:
        raise ValueError(f"arm kind name {name!r} may not contain '@', ',' or '='")

    def decorate(fn: Builder) -> Builder:
        kind = ArmKind(
            name,
            params,
            version,
            description,
            fn,
            uses_pool or (lambda _p: False),
            live,
            memory_of,
        )
        _REGISTRY.add(name, kind, origin_of(fn))
        return fn

    return decorate


def arm_kinds() -> Mapping[str, ArmKind]:
    """Every registered arm kind, by name."""
    return _REGISTRY.items()


def arm_kind(name: str) -> ArmKind:
    """The arm kind ``name``.

    Raises:
        ArmError: no such kind; the message lists the known ones.
    """
    found = _REGISTRY.get(name)
    if found is None:
        raise ArmError(f"unknown arm {name!r}; arm kinds: {', '.join(_REGISTRY.names())}")
    return found


@dataclass(frozen=True)
class ArmVariant:
    """An arm kind with validated parameters."""

    kind: ArmKind
    params: BaseModel

    @property
    def name(self) -> str:
        """The canonical name: the kind, then the non-default parameters in declared order."""
        defaults = self.kind.params()
        parts = [
            f"{key}={_text(getattr(self.params, key))}"
            for key in type(self.params).model_fields
            if getattr(self.params, key) != getattr(defaults, key)
        ]
        return self.kind.name + ("@" + ",".join(parts) if parts else "")

    @property
    def uses_pool(self) -> bool:
        return self.kind.uses_pool(self.params)

    @property
    def live(self) -> bool:
        return self.kind.live

    def memory(
        self, scenario: Scenario, context: ArmContext | None = None
    ) -> dict[str, Any] | None:
        """What a record of this variant stores about its memory (``Record.memory_json``),
        e.g. per constraint whether its note was delivered; None when there is nothing."""
        if self.kind.memory_of is None:
            return None
        return self.kind.memory_of(scenario, self.params, context or ArmContext())

    def build(
        self, scenario: Scenario, context: ArmContext | None = None, recall: Any = None
    ) -> list[Message]:
        """The variant's messages; a live variant's with the layer's ``recall`` for the cell
        (without it, a placeholder stands where the layer's context will go)."""
        if self.kind.live:
            return self.kind.build(scenario, self.params, context or ArmContext(), recall)
        return self.kind.build(scenario, self.params, context or ArmContext())


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_arm(text: str) -> ArmVariant:
    """A variant from its name (canonical or not: ``incentivized@position=end,load=50``).

    Raises:
        ArmError: unknown kind, unknown parameter, or a value its ``Params`` refuses.
    """
    kind_name, _, rest = text.strip().partition("@")
    kind = arm_kind(kind_name.strip())
    raw: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))) if rest else ():
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ArmError(f"arm {text!r}: expected key=value, got {item!r}")
        if key.strip() in raw:
            raise ArmError(f"arm {text!r}: {key.strip()} given twice")
        raw[key.strip()] = value.strip()
    try:
        params = kind.params.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or kind.name}: {e['msg']}" for e in exc.errors()
        )
        fields = ", ".join(kind.params.model_fields) or "none"
        raise ArmError(f"arm {text!r}: {problems} (parameters of {kind.name}: {fields})") from None
    return ArmVariant(kind, params)


SEED_ARMS: tuple[str, ...] = tuple(a.value for a in SeedArm)


def arm_order(names: Iterable[str]) -> list[str]:
    """Arms in the one order a matrix keeps, whatever order they were given in: the seed
    arms first, then variants by kind and by their parameters' values in declared order
    (``load=10`` before ``load=50``), so one set of arms is one matrix."""

    def key(name: str) -> tuple[int, str, tuple[Any, ...]]:
        if name in SEED_ARMS:
            return SEED_ARMS.index(name), "", ()
        variant = parse_arm(name)
        values = tuple(
            _sortable(getattr(variant.params, f)) for f in type(variant.params).model_fields
        )
        return len(SEED_ARMS), variant.kind.name, values

    return sorted(dict.fromkeys(names), key=key)


def _sortable(value: Any) -> tuple[int, Any]:
    """A parameter value as a key any two values of one field compare by (None last)."""
    if value is None:
        return 2, ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return 0, value
    return 1, str(value)


@functools.lru_cache(maxsize=4096)
def canonical_arm(text: str) -> str:
    """The canonical name of the variant ``text`` names."""
    return parse_arm(text).name


def join_arm_items(tokens: Iterable[str]) -> list[str]:
    """The arms written in ``--arms`` items, as given (not made canonical).

    ``--arms`` is comma-separated and so are a variant's parameters: an item
    ``key=value`` without ``@`` continues the variant before it, so that
    ``cold,incentivized@load=50,position=end`` is two arms.
    """
    joined: list[str] = []
    for token in (t.strip() for t in tokens):
        if not token:
            continue
        if "=" in token and "@" not in token and joined:
            joined[-1] += "," + token
        else:
            joined.append(token)
    return joined


def parse_arms(tokens: Iterable[str]) -> list[str]:
    """Canonical variant names from ``--arms`` items (:func:`join_arm_items`), in order,
    without repeats."""
    return list(dict.fromkeys(canonical_arm(t) for t in join_arm_items(tokens)))


def expand_sweep(specs: Sequence[str], kind: str = "incentivized") -> list[str]:
    """The variants of a sweep: every combination of ``key=v1,v2`` specs (``--memory-sweep``).

    ``["load=0,50", "channel=inline,system"]`` gives four variants of ``kind``,
    in order (the first key varies slowest). A spec ``arm=incentivized,memory``
    sweeps those kinds instead of ``kind`` (each with every combination of the
    others), so one sweep sets a memory layer's load curve beside the prompt's.
    """
    if not specs:
        return []
    kinds = [kind]
    rest = []
    for spec in specs:
        key, eq, values = spec.partition("=")
        if eq and key.strip() == "arm":
            kinds = [v.strip() for v in values.split(",") if v.strip()]
            if not kinds:
                raise ArmError(f"sweep {spec!r}: expected arm=kind1,kind2,...")
        else:
            rest.append(spec)
    if kinds != [kind]:
        names = [n for k in kinds for n in expand_sweep(rest, k)] if rest else kinds
        return list(dict.fromkeys(canonical_arm(n) for n in names))
    axes: list[tuple[str, list[str]]] = []
    for spec in specs:
        key, eq, values = spec.partition("=")
        options = [v.strip() for v in values.split(",") if v.strip()]
        if not eq or not key.strip() or not options:
            raise ArmError(f"sweep {spec!r}: expected key=value1,value2,...")
        axes.append((key.strip(), options))
    keys = [k for k, _ in axes]
    if len(set(keys)) != len(keys):
        raise ArmError(f"sweep: a key is given twice ({', '.join(keys)})")
    names = []
    for combo in itertools.product(*(values for _, values in axes)):
        text = kind + "@" + ",".join(f"{k}={v}" for k, v in zip(keys, combo, strict=True))
        names.append(canonical_arm(text))
    return list(dict.fromkeys(names))


def build_messages(
    scenario: Scenario, arm: str, context: ArmContext | None = None
) -> list[prompts.Message]:
    """The chat messages for ``scenario`` under ``arm``: a seed arm (cold, mandated,
    incentivized) or any variant name (``incentivized@load=50,channel=system``).

    Raises:
        ValueError: an unknown arm or a parameter its kind refuses (:class:`ArmError`).
    """
    return [
        prompts.Message(role=m["role"], content=m["content"])
        for m in parse_arm(arm).build(scenario, context)
    ]
