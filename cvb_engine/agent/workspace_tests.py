"""The program ``run_tests`` runs in the sandbox (read as text; never imported by cvb).

It is given the workspace's Python files as data (the argument of
``_cvb_run_tests``, the sandbox's "test"), serves them as importable modules from memory, imports every
``tests/test_*.py`` and calls each of its ``test*`` functions with no
arguments. It prints a summary after a marker line and fails (an
``AssertionError``) when a test failed, so the sandbox's verdict says the same.
Only the standard library is used: the sandbox's interpreter runs it.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import time
import traceback
from types import ModuleType
from typing import Any

_MARK = "@@cvb-run-tests@@"


class _Served(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The workspace's modules, from ``sources`` (path -> text)."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.modules: dict[str, tuple[str | None, str, bool]] = {}
        for path, text in sources.items():
            if not path.endswith(".py"):
                continue
            parts = path[:-3].split("/")
            if parts[-1] == "__init__":
                self.modules[".".join(parts[:-1])] = (path, text, True)
            else:
                self.modules[".".join(parts)] = (path, text, False)
        for name in list(self.modules):
            parts = name.split(".")
            for i in range(1, len(parts)):
                self.modules.setdefault(".".join(parts[:i]), (None, "", True))

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.modules:
            return None
        origin, _, package = self.modules[name]
        return importlib.util.spec_from_loader(name, self, origin=origin, is_package=package)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        origin, text, package = self.modules[module.__name__]
        if package:
            module.__path__ = []  # submodules come from the finder
        if origin:
            module.__file__ = origin
        exec(compile(text, origin or module.__name__, "exec"), module.__dict__)


def _why(exc: BaseException, sources: dict[str, str]) -> str:
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename in sources:  # the innermost frame of a workspace file
            where = f" ({frame.filename}:{frame.lineno})"
    message = str(exc)
    if len(message) > 300:
        message = message[:300] + "..."
    return f"{type(exc).__name__}{': ' + message if message else ''}{where}"


def _cvb_run_tests(sources: dict[str, str]) -> None:
    started = time.monotonic()
    sys.meta_path.insert(0, _Served(sources))
    tests = sorted(
        p
        for p in sources
        if p.startswith("tests/") and p.rsplit("/", 1)[-1].startswith("test") and p.endswith(".py")
    )
    passed = 0
    failures: list[str] = []
    for path in tests:
        name = path[:-3].replace("/", ".")
        try:
            module = importlib.import_module(name)
        except BaseException as exc:
            failures.append(f"ERROR {path}: {_why(exc, sources)}")
            continue
        for attr, fn in list(vars(module).items()):
            if not (attr.startswith("test") and callable(fn)):
                continue
            if getattr(fn, "__module__", None) != name:
                continue
            try:
                fn()
                passed += 1
            except BaseException as exc:
                failures.append(f"FAILED {path}::{attr}: {_why(exc, sources)}")
    took = time.monotonic() - started
    head = f"{passed} passed, {len(failures)} failed ({took:.2f}s)"
    if not tests:
        head = "no test files under tests/"
    summary = "\n".join([head, *failures[:30]])
    if len(failures) > 30:
        summary += f"\n[{len(failures) - 30} more failures not shown]"
    print("\n" + _MARK + "\n" + summary, flush=True)
    if failures:
        raise AssertionError(head)
