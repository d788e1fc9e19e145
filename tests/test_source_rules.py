"""Rules about the source itself that no behaviour test would notice being broken."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from cvb_engine.metrics import BOOTSTRAP_RESAMPLES

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for package in ("cvb_engine", "studio") for p in (ROOT / package).rglob("*.py"))


def private_imports(source: str) -> list[tuple[int, str]]:
    """``(line, "module.name")`` for each ``from first-party import _private``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        if node.level == 0 and module.split(".")[0] not in ("cvb_engine", "studio"):
            continue  # another library's private name is that library's business
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                out.append((node.lineno, f"{'.' * node.level}{module}.{alias.name}"))
    return out


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            "from cvb_engine.scenario import _line_for\n",
            [(1, "cvb_engine.scenario._line_for")],
            id="private",
        ),
        pytest.param("from .harness import _run\n", [(1, ".harness._run")], id="relative"),
        pytest.param("from cvb_engine import __version__\n", [], id="dunder"),
        pytest.param("from argparse import _SubParsersAction\n", [], id="other-library"),
        pytest.param("from cvb_engine.scenario import line_for\n", [], id="public"),
    ],
)
def test_private_imports_finds(source: str, expected: list[tuple[int, str]]) -> None:
    assert private_imports(source) == expected


def test_no_module_imports_another_modules_private_names() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in SOURCES
        for line, name in private_imports(path.read_text())
    ]
    assert len(SOURCES) > 100
    assert not found, "a private name used from another module; make it public:\n" + "\n".join(
        found
    )


def test_the_resample_count_is_the_constant_not_text() -> None:
    # "10,000 resamples" typed into a note goes stale when the constant changes.
    shown = f"{BOOTSTRAP_RESAMPLES:,}"
    pattern = re.compile(rf"\b({re.escape(shown)}|{BOOTSTRAP_RESAMPLES})\s+resamples")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in SOURCES
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, f"write {{BOOTSTRAP_RESAMPLES:,}} instead of the number: {found}"
