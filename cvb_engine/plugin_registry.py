"""One registry mechanism for every plugin kind: checks, arms, memory layers and
transports, CLI commands.

A plugin module registers what it defines by a decorator when it is imported; a
:class:`Registry` loads its built-in modules the first time it is listed or asked
(``load``), so that listing and lookup always see the same set. (The module is not
called ``registry``: that public name of :mod:`cvb_engine` is the check kinds' listing,
which a submodule of that name would shadow.) A name registered
twice by two different definitions is an error wherever it happens (the second
would silently win otherwise, depending on import order); the same definition
registered again (its module imported a second time) just replaces itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class RegistryError(ValueError):
    """A plugin name registered twice, or looked up and not found."""


def origin_of(obj: object) -> str:
    """``module.qualname`` of a function or class: what makes two registrations the same."""
    module = getattr(obj, "__module__", None) or "?"
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return f"{module}.{name}"


def import_plugins(package: str, modules: Iterable[str]) -> Callable[[], None]:
    """A ``load`` that imports ``package.module`` for each of ``modules``.

    By name: a plugin module imports its registry to register itself, so the registry
    naming its built-in plugins in an import statement would make the two import each
    other.
    """

    def load() -> None:
        for module in modules:
            importlib.import_module(f"{package}.{module}")

    return load


class Registry(Generic[T]):
    """Named plugins of one kind.

    Args:
        kind: What a plugin is called in messages (``"check kind"``, ``"command"``).
        load: Imports the modules that register the built-in plugins; called once,
            before the first listing or lookup.
    """

    def __init__(self, kind: str, load: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self._load = load
        self._loaded = load is None
        self._loading = False
        self._items: dict[str, T] = {}
        self._origins: dict[str, str] = {}

    def add(self, name: str, item: T, origin: str) -> None:
        """Register ``item`` under ``name``; ``origin`` names its definition (:func:`origin_of`).

        Raises:
            RegistryError: ``name`` is taken by another definition.
        """
        known = self._origins.get(name)
        if known is not None and known != origin:
            raise RegistryError(f"{self.kind} {name!r} registered twice: by {known} and {origin}")
        self._items[name] = item
        self._origins[name] = origin

    def remove(self, name: str) -> None:
        """Forget ``name`` (a test's own plugin, once the test is done)."""
        self._items.pop(name, None)
        self._origins.pop(name, None)

    def _ensure_loaded(self) -> None:
        # The flag goes up before loading: a plugin module that lists the registry
        # while it is being imported sees what is registered so far, not a recursion.
        if self._loaded or self._loading or self._load is None:
            return
        self._loading = True
        try:
            self._load()
            self._loaded = True
        finally:
            self._loading = False

    def items(self) -> Mapping[str, T]:
        """Every registered plugin by name, in registration order (a copy)."""
        self._ensure_loaded()
        return dict(self._items)

    def names(self) -> list[str]:
        self._ensure_loaded()
        return list(self._items)

    def get(self, name: str) -> T | None:
        """The plugin ``name``, or None."""
        self._ensure_loaded()
        return self._items.get(name)

    def lookup(self, name: str) -> T:
        """The plugin ``name``.

        Raises:
            RegistryError: no such plugin; the message lists the known names.
        """
        found = self.get(name)
        if found is None:
            raise RegistryError(f"unknown {self.kind} {name!r}; known: {', '.join(self._items)}")
        return found

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._items)


__all__ = ["Registry", "RegistryError", "import_plugins", "origin_of"]
