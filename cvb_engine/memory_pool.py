"""The project-memory pool (README: Memory arms): distractor entries for the memory arms.

``scenarios/memory/pool.yaml`` holds past decisions, incidents and conventions
of one imaginary product, none of which touches a shipped constraint::

    version: 1
    entries:
      - id: deploy-017
        kind: deployment
        text: The team moved the nightly export to 02:00 UTC after the March load spike.

The file is read through the scenarios' hardened YAML reader, so every problem
names the file and the line. :func:`load_pool` checks the shape only; what the
entries say (no orders, no checked names, no duplicates, sensible lengths) is
for ``cvb lint`` (codes E020–E023 in :mod:`cvb_engine.lint`).

:func:`draw` picks distractors deterministically from a seed string, the same
on every machine, process and Python version.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from cvb_engine.scenario import (
    NON_SCENARIO_DIRS,
    Problem,
    ScenarioError,
    field_name,
    line_for,
    read_yaml,
)

POOL_VERSION = 1
ENTRY_ID_PATTERN = re.compile(r"^[a-z]+(?:-[a-z]+)*-[0-9]{3,}$")


class EntryKind(StrEnum):
    """What an entry is about; the pool keeps the kinds roughly balanced."""

    DEPENDENCIES = "dependencies"
    DEPLOYMENT = "deployment"
    NAMING = "naming"
    DATA = "data"
    OPS = "ops"
    PEOPLE = "people"
    PROCESS = "process"


class PoolError(ScenarioError):
    """A pool file that cannot be loaded; ``problems`` say where and why."""


class PoolEntry(BaseModel):
    """One project-memory note: the shape an external memory layer ingests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=ENTRY_ID_PATTERN.pattern, description="stable, e.g. deploy-017")
    kind: EntryKind
    text: str = Field(min_length=1, description="one or two declarative sentences")


class Pool(BaseModel):
    """The pool file; :func:`load_pool` also records its path, line map and sha256."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1]
    entries: list[PoolEntry] = Field(min_length=1)

    _path: Path = PrivateAttr(default=Path("<pool>"))
    _sha256: str = PrivateAttr(default="")
    _lines: dict[tuple[str | int, ...], int] = PrivateAttr(default_factory=dict)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def sha256(self) -> str:
        """The sha256 of the file's bytes: the provenance a record can keep."""
        return self._sha256

    def line_of(self, *loc: str | int) -> int:
        """The line of the deepest known node on ``loc``, e.g. ``("entries", 3, "text")``."""
        return line_for(self._lines, loc)


def _problems(
    path: str, exc: ValidationError, lines: dict[tuple[str | int, ...], int]
) -> list[Problem]:
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        # A kind outside the list is a content rule of the pool (E023), reported
        # with the other lint codes rather than as a generic schema error.
        code = "E023" if loc and loc[-1] == "kind" and len(loc) == 3 else "E002"
        message = str(err["msg"])
        if code == "E023":
            message = f"unknown kind {err['input']!r}; expected one of {', '.join(k.value for k in EntryKind)}"
        out.append(Problem(path, line_for(lines, loc), message, field_name(loc), code))
    return out


def load_pool(path: str | Path) -> Pool:
    """Load and validate the shape of a pool file.

    Raises:
        PoolError: the file cannot be read as safe YAML, or does not have the
            shape above; every problem carries the file and its line.
    """
    p = Path(path)
    try:
        data, lines, raw = read_yaml(p)
    except ScenarioError as exc:
        raise PoolError(exc.problems) from None
    if not isinstance(data, dict):
        found = type(data).__name__
        raise PoolError(
            [
                Problem(
                    str(p),
                    1,
                    f"expected a mapping with version and entries, found {found}",
                    code="E002",
                )
            ]
        )
    try:
        pool = Pool.model_validate(data)
    except ValidationError as exc:
        raise PoolError(_problems(str(p), exc, lines)) from None
    pool._path = p
    pool._sha256 = hashlib.sha256(raw).hexdigest()
    pool._lines = lines
    return pool


def discover_pools(paths: Iterable[str | Path]) -> list[Path]:
    """Pool files among ``paths``: files named in a memory folder, and the YAML files
    in the memory folders of the directories given."""
    found: dict[Path, Path] = {}
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for q in sorted(p.rglob("*")):
                parents = q.relative_to(p).parts[:-1]
                if q.suffix in (".yaml", ".yml") and parents and parents[-1] in NON_SCENARIO_DIRS:
                    found.setdefault(q.resolve(), q)
        elif p.parent.name in NON_SCENARIO_DIRS and p.suffix in (".yaml", ".yml"):
            found.setdefault(p.resolve(), p)
    return list(found.values())


def seed_of(seed_text: str) -> int:
    """A 256-bit integer from ``seed_text``: sha256, so the same on every process
    (Python's ``hash()`` of a string changes with PYTHONHASHSEED)."""
    return int.from_bytes(hashlib.sha256(seed_text.encode("utf-8")).digest(), "big")


def draw(pool: Pool, n: int, seed_text: str) -> list[PoolEntry]:
    """``n`` distinct entries of ``pool``, chosen and ordered by ``seed_text``.

    The same pool, ``n`` and seed give the same list on every machine. Of
    ``random.Random`` only seeding with an int and ``random()`` are promised to
    stay the same across Python versions (``sample`` and ``randrange`` are not),
    so the draw is a partial Fisher–Yates shuffle driven by ``random()`` alone.

    Args:
        pool: The loaded pool.
        n: How many entries, 0 ≤ n ≤ the pool's size.
        seed_text: What the draw depends on, e.g. ``f"{scenario_id}|{params}"``.

    Raises:
        ValueError: ``n`` is negative or larger than the pool.
    """
    size = len(pool.entries)
    if n < 0 or n > size:
        raise ValueError(
            f"cannot draw {n} entries from the memory pool {pool.path} of {size}; "
            f"expected 0 ≤ n ≤ {size}"
        )
    rng = random.Random(seed_of(seed_text))
    order = list(range(size))
    for i in range(n):
        j = i + min(int(rng.random() * (size - i)), size - i - 1)
        order[i], order[j] = order[j], order[i]
    return [pool.entries[k] for k in order[:n]]
