"""The registries check themselves: every check kind has parameters, a description and
tests; every plugin kind refuses a name registered twice (cvb_engine.plugin_registry)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from cvb_engine.arms import arm_kinds, register_arm
from cvb_engine.checks import registry
from cvb_engine.checks.base import register_check
from cvb_engine.cli import command
from cvb_engine.memory_layers.base import MemoryLayer, register_transport, transports
from cvb_engine.memory_layers.builtin import builtin_layers, register_layer
from cvb_engine.plugin_registry import Registry, RegistryError

TESTS = Path(__file__).parent / "checks"


def test_every_kind_is_documented_and_tested() -> None:
    kinds = registry()
    assert {"regex", "python-ast"} <= set(kinds)
    for name, kind in kinds.items():
        assert kind.description.strip(), name
        assert kind.params.model_json_schema()["properties"], name
        module = kind.run.__module__.rsplit(".", 1)[-1]
        assert (TESTS / f"test_{module}.py").exists(), f"no tests for check kind {name!r}"


# --------------------------------------------------------------------------- one mechanism


def test_a_registry_refuses_a_second_definition_and_lists_as_it_looks_up() -> None:
    loads: list[int] = []
    reg: Registry[str] = Registry("widget", load=lambda: loads.append(1))
    reg.add("a", "first", "pkg.mod.a")
    reg.add("a", "again", "pkg.mod.a")  # the same definition, its module imported twice
    with pytest.raises(
        RegistryError, match=r"widget .a. registered twice: by pkg\.mod\.a and x\.b"
    ):
        reg.add("a", "other", "x.b")
    assert reg.lookup("a") == "again" and reg.get("a") == "again"
    assert reg.names() == ["a"] and dict(reg.items()) == {"a": "again"} and "a" in reg
    assert reg.get("b") is None
    with pytest.raises(RegistryError, match="unknown widget 'b'; known: a"):
        reg.lookup("b")
    assert loads == [1]  # loaded once, before the first listing or lookup


def _second(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("never called")


@pytest.mark.parametrize(
    ("kind", "register"),
    [
        pytest.param(
            "check kind",
            lambda: register_check(
                "regex", params=BaseModel, prepare=_second, description="a second regex"
            )(_second),
            id="check",
        ),
        pytest.param(
            "arm kind",
            lambda: register_arm("cold", params=BaseModel, version="9", description="x")(_second),
            id="arm",
        ),
        pytest.param(
            "built-in memory layer",
            lambda: register_layer("bm25", "a second bm25")(_second),
            id="memory-layer",
        ),
        pytest.param(
            "memory layer transport",
            lambda: register_transport("builtin")(type("Second", (MemoryLayer,), {})),
            id="transport",
        ),
        pytest.param(
            "command",
            lambda: command("run", lambda _p: None)(_second),
            id="cli-command",
        ),
    ],
)
def test_every_plugin_kind_refuses_a_duplicate_name(kind: str, register: Callable[[], Any]) -> None:
    # The built-in plugin of that name is registered first (listing loads them all).
    registry()
    arm_kinds()
    builtin_layers()
    transports()
    importlib.import_module("cvb_engine.cli.run")
    with pytest.raises(RegistryError, match=f"{kind} '[a-z0-9-]+' registered twice"):
        register()
