"""The check registry checks itself: every kind has parameters, a description and tests."""

from __future__ import annotations

from pathlib import Path

from cvb_engine.checks import registry

TESTS = Path(__file__).parent / "checks"


def test_every_kind_is_documented_and_tested() -> None:
    kinds = registry()
    assert {"regex", "python-ast"} <= set(kinds)
    for name, kind in kinds.items():
        assert kind.description.strip(), name
        assert kind.params.model_json_schema()["properties"], name
        module = kind.run.__module__.rsplit(".", 1)[-1]
        assert (TESTS / f"test_{module}.py").exists(), f"no tests for check kind {name!r}"
