"""The shipped library: 35 scenarios, 7 × 5, lint-clean with the shipped-set rules."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from cvb_engine.lint import lint_paths
from cvb_engine.scenario import CANARY, CVB_CATEGORIES, load_library

ROOT = Path(__file__).resolve().parent.parent


def cvb_library() -> list:
    return [i for i in load_library(ROOT / "scenarios").values() if i.scenario.category != "ivr"]


def test_shipped_set_lints_clean_with_shipped_rules() -> None:
    findings = lint_paths([ROOT / "scenarios"], shipped=True)
    assert [str(f) for f in findings] == []


def test_seven_categories_of_five() -> None:
    counts = Counter(i.scenario.category for i in cvb_library())
    assert counts == dict.fromkeys(CVB_CATEGORIES, 5)


def test_each_scenario_has_two_to_four_constraints_with_samples_and_canary() -> None:
    for item in cvb_library():
        sc = item.scenario
        assert 2 <= len(sc.constraints) <= 4, sc.id
        assert sc.canary == CANARY, sc.id
        assert CANARY in item.path.read_text(encoding="utf-8")
        assert item.path.parent.name == sc.category and item.path.stem == sc.id
        for c in sc.constraints:
            assert len(c.samples.violating) >= 3 and len(c.samples.compliant) >= 3, (sc.id, c.id)


def test_readme_table_is_up_to_date() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "scenarios_readme.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_scenario_file_reads_only_inside_the_library(tmp_path: Path) -> None:
    """An id goes to a file through one function: rule-checked, never a pattern, and the
    file found must lie inside the library even through a link."""
    import pytest as _pytest

    from cvb_engine.run_ids import RunIdError
    from cvb_engine.scenario import scenario_file

    library = tmp_path / "library"
    (library / "security").mkdir(parents=True)
    (library / "security" / "in-here.yaml").write_text("id: in-here\n", encoding="utf-8")
    outside = tmp_path / "secret.yaml"
    outside.write_text("id: secret\n", encoding="utf-8")
    (library / "security" / "linked-out.yaml").symlink_to(outside)
    assert scenario_file(library, "in-here") == (library / "security" / "in-here.yaml").resolve()
    assert scenario_file(library, "linked-out") is None
    assert scenario_file(library, "missing") is None
    for bad in ("../secret", "*", "in-*", "security/in-here", ""):
        with _pytest.raises(RunIdError):
            scenario_file(library, bad)
