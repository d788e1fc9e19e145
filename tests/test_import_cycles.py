"""The engine's modules import each other in one direction: no import cycle in cvb_engine.

Read from the source (``ast``): every import a module makes, at its top or inside a
function (a lazy import is still a dependency), except those under ``if TYPE_CHECKING``
(types only, never run). Plugin discovery by name (``importlib.import_module`` of a
string) is not an import of the plugin: the plugin depends on its registry, not the
other way round.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "cvb_engine"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from (n for child in node.orelse for n in _imports_of(child))
            continue
        yield from _imports_of(node)


def _imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _imports(node)


def imported_by(name: str, is_package: bool, source: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports (with their parent packages)."""
    out: set[str] = set()

    def add(target: str) -> None:
        # The module itself, or the nearest package of it that is ours. (Its parent
        # packages run first too, but a package that imports its own submodules is
        # only partly initialised then, by design: not a cycle.)
        parts = target.split(".")
        for i in range(len(parts), 0, -1):
            candidate = ".".join(parts[:i])
            if candidate in known:
                if candidate != name:
                    out.add(candidate)
                return

    here = name if is_package else name.rpartition(".")[0]
    for node in _imports(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
            continue
        if node.level:
            base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
            module = f"{base}.{node.module}" if node.module else base
        else:
            module = node.module or ""
        for alias in node.names:
            # A submodule by name needs that module (its package is being set up
            # already when one of its own modules asks); any other name, the module.
            sub = f"{module}.{alias.name}"
            add(sub if sub in known else module)
    return out


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    paths = sorted((root / PACKAGE).rglob("*.py"))
    names = {module_name(p, root): p for p in paths}
    known = set(names)
    return {
        name: imported_by(name, path.name == "__init__.py", path.read_text(), known)
        for name, path in names.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        pytest.param({"a": {"b"}, "b": set()}, [], id="one-way"),
        pytest.param({"a": {"b"}, "b": {"a"}}, [["a", "b"]], id="two"),
        pytest.param(
            {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]], id="ring"
        ),
        pytest.param({"a": {"b", "c"}, "b": {"c"}, "c": set()}, [], id="diamond"),
    ],
)
def test_cycles_finds(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(edges) == expected


@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        pytest.param("p.a", "from p import b\n", {"p.b"}, id="submodule-by-from"),
        pytest.param("p.a", "from p import name\n", {"p"}, id="name-of-package"),
        pytest.param("p.a", "import p.b\n", {"p.b"}, id="import-dotted"),
        pytest.param("p.a", "from . import b\n", {"p.b"}, id="relative"),
        pytest.param("p.a", "def f():\n    import p.b\n", {"p.b"}, id="lazy-counts"),
        pytest.param(
            "p.a",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import b\n",
            set(),
            id="type-checking-does-not",
        ),
        pytest.param(
            "p.a", "import importlib\nimportlib.import_module('p.b')\n", set(), id="by-name"
        ),
    ],
)
def test_imported_by(name: str, source: str, expected: set[str]) -> None:
    assert imported_by(name, False, source, {"p", "p.a", "p.b"}) == expected


def test_the_engine_has_no_import_cycle() -> None:
    edges = graph()
    assert edges.get("cvb_engine.run.execute")
    found = cycles(edges)
    assert not found, "modules of cvb_engine that import each other:\n" + "\n".join(
        " ⇄ ".join(c) for c in found
    )
