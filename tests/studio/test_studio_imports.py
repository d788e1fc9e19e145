"""The studio reaches the engine only through its declared surface, ``cvb_engine.__all__``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cvb_engine

STUDIO = Path(__file__).resolve().parents[2] / "studio"
FILES = sorted(STUDIO.rglob("*.py"))


def engine_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for every import of the engine that is not a name of ``__all__``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, f"import {a.name}")
                for a in node.names
                if a.name.startswith("cvb_engine.")
            ]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("cvb_engine."):
                found.append((node.lineno, f"from {node.module} import ..."))
            elif node.module == "cvb_engine":
                found += [
                    (node.lineno, f"from cvb_engine import {a.name} (not in __all__)")
                    for a in node.names
                    if a.name not in cvb_engine.__all__
                ]
    return found


def test_the_scan_sees_the_studio() -> None:
    assert STUDIO / "app_pages" / "run.py" in FILES and STUDIO / "cache.py" in FILES


@pytest.mark.parametrize(
    ("source", "bad"),
    [
        pytest.param("from cvb_engine import ARMS", 0, id="public-name"),
        pytest.param("from cvb_engine.store import Run", 1, id="submodule-from"),
        pytest.param("import cvb_engine.monitor as mon", 1, id="submodule-import"),
        pytest.param("from cvb_engine import store", 1, id="submodule-as-name"),
        pytest.param(
            "def f():\n    from cvb_engine.runner import DEFAULTS", 1, id="inside-a-function"
        ),
    ],
)
def test_the_rule(source: str, bad: int) -> None:
    assert len(engine_imports(ast.parse(source))) == bad


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(STUDIO)) for p in FILES])
def test_studio_modules_import_only_the_engine_surface(path: Path) -> None:
    found = engine_imports(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    assert found == [], "\n".join(f"{path}:{line}: {what}" for line, what in found)


def test_every_public_name_resolves() -> None:
    for name in cvb_engine.__all__:
        assert getattr(cvb_engine, name) is not None, name
