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
