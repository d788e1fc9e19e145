"""The engine never imports a UI package."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import cvb_engine

UI_PACKAGES = ("streamlit", "plotly", "pygments", "studio")


def test_every_engine_module_imports_without_ui_packages() -> None:
    # cvb_engine.integrations.* are optional extras loaded by another harness, never by
    # the engine: inspect_ai itself draws rich, hence pygments (the test below keeps
    # inspect_ai off every other module).
    modules = sorted(
        m.name
        for m in pkgutil.walk_packages(cvb_engine.__path__, prefix="cvb_engine.")
        if not m.name.startswith("cvb_engine.integrations.")
    )
    assert "cvb_engine.checks.regex_check" in modules
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {UI_PACKAGES!r}:\n"
        "            raise ImportError('UI package imported by the engine: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import importlib\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "print('ok', len(sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", blocker], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def test_inspect_ai_is_never_imported_on_the_default_path() -> None:
    """inspect_ai is an optional extra: only cvb_engine.integrations needs it at import
    time (cvb_engine.export_inspect imports it when a log is written)."""
    modules = sorted(
        m.name
        for m in pkgutil.walk_packages(cvb_engine.__path__, prefix="cvb_engine.")
        if not m.name.startswith("cvb_engine.integrations.")
    )
    assert "cvb_engine.export_inspect" in modules
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'inspect_ai':\n"
        "            raise ImportError('inspect_ai imported: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import importlib\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "from cvb_engine import cli\n"
        "try:\n"
        "    cli.main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", blocker], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr


def _engine_imports() -> dict[str, set[str]]:
    """Module -> the cvb_engine modules it imports at module level (not inside functions,
    not under TYPE_CHECKING): the graph whose cycles make the read side hard to change."""
    import ast
    from pathlib import Path

    root = Path(cvb_engine.__file__).resolve().parent
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        graph[name] = {m for m in found if m.startswith("cvb_engine") and m != name}
    return graph


def test_no_import_cycle_on_the_read_side() -> None:
    """store → tallies → metrics → table models → renderers, one way: no module of the
    read side imports one that (through others) imports it back."""
    graph = _engine_imports()
    read_side = {
        m
        for m in graph
        if m.startswith("cvb_engine.report")
        or m in {"cvb_engine.queries", "cvb_engine.results", "cvb_engine.metrics"}
        or m in {"cvb_engine.reference", "cvb_engine.results_format"}
    }
    assert "cvb_engine.report.tables" in read_side

    def reaches(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    cycles = sorted(m for m in read_side if m in reaches(m))
    assert cycles == []
