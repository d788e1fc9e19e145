"""The agent's workspace: deterministic per scenario and parameters, the incentivized arm's
own draw of notes, placed where ``rules=`` says; the task names the file and nothing else;
``run_tests`` runs the workspace's tests in the sandbox."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from cvb_engine.agent.run import NO_TESTS, run_workspace_tests
from cvb_engine.agent.workspace import RULES, build_workspace, task_message
from cvb_engine.arms import ArmContext, parse_arm
from cvb_engine.arms.incentivized import Params as IncentivizedParams
from cvb_engine.arms.incentivized import notes_of
from cvb_engine.scenario import Scenario, load_library

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.fixture(scope="module")
def library() -> dict[str, Scenario]:
    return {sid: item.scenario for sid, item in load_library(SCENARIOS).items()}


@pytest.fixture(scope="module")
def pool() -> tuple[object, ...]:
    return tuple(ArmContext().pool)


@pytest.mark.parametrize("rules", RULES)
def test_the_same_parameters_give_the_same_workspace(
    library: dict[str, Scenario], pool: tuple[object, ...], rules: str, tmp_path: Path
) -> None:
    scenario = library["http-client-choice"]
    one = build_workspace(scenario, rules, 8, "middle", pool)  # type: ignore[arg-type]
    two = build_workspace(scenario, rules, 8, "middle", pool)  # type: ignore[arg-type]
    assert one == two and one.sha256 == two.sha256
    other = build_workspace(scenario, rules, 8, "start", pool)  # type: ignore[arg-type]
    # nested keeps constraints and distractors in two files: position has nothing to place
    assert (other.sha256 == one.sha256) == (rules == "nested")
    # written to disk, byte for byte
    one.write(tmp_path)
    on_disk = {
        p.relative_to(tmp_path).as_posix(): p.read_text(encoding="utf-8")
        for p in tmp_path.rglob("*")
        if p.is_file()
    }
    assert on_disk == one.files
    # every constraint sits where the workspace says, once
    ids = [c.id for c in scenario.constraints]
    assert sorted(p.constraint_id for p in one.constraints) == sorted(ids)
    for place in one.constraints:
        lines = one.files[place.path].splitlines()[place.line - 1 : place.end_line]
        text = next(c.text for c in scenario.constraints if c.id == place.constraint_id)
        assert " ".join(text.split()) in " ".join(" ".join(lines).split())
    assert one.targets == ("fernhollow/fetch_json.py",)


EXPECTED_FILES = {
    "agents-md": ({"AGENTS.md"}, "AGENTS.md"),
    "claude-md": ({"CLAUDE.md"}, "CLAUDE.md"),
    "readme": ({"README.md"}, "README.md"),
    "nested": ({"AGENTS.md", "fernhollow/AGENTS.md"}, "AGENTS.md"),
    "adr": (None, None),
}


@pytest.mark.parametrize("rules", RULES)
def test_where_the_memory_lives(
    library: dict[str, Scenario], pool: tuple[object, ...], rules: str
) -> None:
    scenario = library["http-client-choice"]
    ws = build_workspace(scenario, rules, 5, "spread", pool)  # type: ignore[arg-type]
    files, root = EXPECTED_FILES[rules]
    paths = {r.path for r in ws.rules_files}
    if files is None:  # adr: one record per note
        assert len(paths) == 5 + len(scenario.constraints)
        assert all(re.match(r"^docs/decisions/\d{4}-[a-z0-9-]+\.md$", p) for p in paths)
    else:
        assert paths == files
    assert ws.root_rules == root
    if rules == "nested":  # the package's file holds the rules, the root one distractors only
        places = {p.path for p in ws.constraints}
        assert places == {"fernhollow/AGENTS.md"}
        assert [r.notes for r in ws.rules_files if r.path == "AGENTS.md"] == [5]
    # no rules file, no constraint id, in the README (unless it is the rules file)
    if rules != "readme":
        assert "Decision" not in ws.files["README.md"]


@pytest.mark.parametrize("load", [0, 3, 20])
@pytest.mark.parametrize("position", ["start", "middle", "end", "spread"])
def test_the_notes_are_the_incentivized_arms_draw(
    library: dict[str, Scenario], load: int, position: str
) -> None:
    context = ArmContext()
    scenario = library["http-client-choice"]
    notes = notes_of(
        scenario,
        IncentivizedParams(load=load, position=position),
        context,  # type: ignore[arg-type]
    )
    ws = build_workspace(scenario, "agents-md", load, position, context.pool)
    assert notes in ws.files["AGENTS.md"]
    # and the adr records hold the same notes, in the same order
    adr = build_workspace(scenario, "adr", load, position, context.pool)
    texts = [adr.files[r.path].split("\n\n", 3)[-1].strip() for r in adr.rules_files]
    assert texts == [line.split("): ", 1)[1] for line in notes.splitlines()]


def test_a_larger_load_extends_a_smaller_one(
    library: dict[str, Scenario], pool: tuple[object, ...]
) -> None:
    scenario = library["http-client-choice"]
    small = build_workspace(scenario, "adr", 5, "end", pool)
    big = build_workspace(scenario, "adr", 15, "end", pool)
    small_notes = {small.files[r.path].split("\n\n")[-1] for r in small.rules_files}
    big_notes = {big.files[r.path].split("\n\n")[-1] for r in big.rules_files}
    assert small_notes < big_notes


def test_the_task_names_the_file_and_no_rule(library: dict[str, Scenario]) -> None:
    for scenario in library.values():
        ws = build_workspace(scenario)
        task = task_message(scenario, ws.targets)
        assert task.startswith(scenario.task.strip())
        assert task.endswith(f"Write the solution in `{ws.targets[0]}`.")
        for word in ("AGENTS", "CLAUDE", "decision", "Decision", "Conventions", "rules"):
            assert word not in task.replace(scenario.task, ""), (scenario.id, word)
        for c in scenario.constraints:
            assert c.text.strip() not in task


def test_ivr_workspaces_have_the_stated_tests(library: dict[str, Scenario]) -> None:
    scenario = library["he-003-below-zero"]
    ws = build_workspace(scenario)
    assert ws.has_tests
    test = ws.files["tests/test_below_zero.py"]
    assert test.startswith("from fernhollow.below_zero import below_zero")
    for line in (scenario.stated_tests or "").strip().splitlines():
        assert "    " + line in test
    assert not build_workspace(library["http-client-choice"]).has_tests


def test_preload_puts_the_root_rules_file_in_the_system_message(
    library: dict[str, Scenario],
) -> None:
    scenario = library["http-client-choice"]
    context = ArmContext()
    plain = parse_arm("agent").build(scenario, context)
    preloaded = parse_arm("agent@preload=true,rules=claude-md").build(scenario, context)
    ws = build_workspace(scenario, "claude-md")
    assert ws.files["CLAUDE.md"].strip() in preloaded[0]["content"]
    assert "CLAUDE.md" not in plain[0]["content"] and "Decision" not in plain[0]["content"]
    assert plain[1] == preloaded[1]  # the same task
    command = parse_arm("agent@command=./x.sh").build(scenario, context)
    assert command == [plain[1]]  # a command gets the task alone
    with pytest.raises(ValueError, match="no root rules file"):
        parse_arm("agent@rules=adr,preload=true")
    with pytest.raises(ValueError, match="variable names"):
        parse_arm("agent@command=./x.sh,env=NOT-A-NAME")


def test_run_tests_runs_the_workspace_tests_in_the_sandbox(
    library: dict[str, Scenario], tmp_path: Path
) -> None:
    scenario = library["he-003-below-zero"]
    ws = build_workspace(scenario)
    ws.write(tmp_path)
    target = tmp_path / ws.targets[0]
    target.write_text("def below_zero(ops):\n    return sum(ops) < 0\n", encoding="utf-8")
    assert asyncio.run(run_workspace_tests(tmp_path)).startswith("1 passed, 0 failed")
    target.write_text("def below_zero(ops):\n    return False\n", encoding="utf-8")
    summary = asyncio.run(run_workspace_tests(tmp_path))
    assert summary.startswith("0 passed, 1 failed")
    assert "FAILED tests/test_below_zero.py::test_stated: AssertionError" in summary
    assert "(tests/test_below_zero.py:5)" in summary
    # model code that tries to reach the host runs in the sandbox, not here
    marker = tmp_path.parent / "host-marker.txt"
    target.write_text(
        f"open({str(marker)!r}, 'w').write('x')\ndef below_zero(ops):\n    return True\n",
        encoding="utf-8",
    )
    summary = asyncio.run(run_workspace_tests(tmp_path))
    assert not marker.exists()
    assert "ERROR tests/test_below_zero.py" in summary
    target.write_text("import time\ntime.sleep(60)\n", encoding="utf-8")
    assert "did not finish" in asyncio.run(run_workspace_tests(tmp_path))


def test_run_tests_without_tests_says_so(library: dict[str, Scenario], tmp_path: Path) -> None:
    build_workspace(library["http-client-choice"]).write(tmp_path)
    assert asyncio.run(run_workspace_tests(tmp_path)) == NO_TESTS


@pytest.mark.parametrize("stale", ["with", "only"])
def test_stale_notes_sit_in_the_rules_file_and_are_not_the_rule(
    library: dict[str, Scenario], pool: tuple[object, ...], stale: str
) -> None:
    scenario = library["http-client-choice"]
    with_old = [c for c in scenario.constraints if c.superseded]
    assert with_old, "the shipped scenario has a superseded note"
    ws = build_workspace(scenario, "agents-md", 4, "spread", pool, stale)  # type: ignore[arg-type]
    text = ws.files["AGENTS.md"]
    for c in with_old:
        assert " ".join((c.superseded or "").split()) in text
    placed = {p.constraint_id for p in ws.constraints}
    if stale == "with":  # the current note is there too, and it is the one placed
        assert placed == {c.id for c in scenario.constraints}
        for p in ws.constraints:
            assert "2026-01:" in text.splitlines()[p.line - 1] or p.constraint_id not in {
                c.id for c in with_old
            }
    else:  # only the old decision: reading it is not reading the rule
        assert placed == {c.id for c in scenario.constraints if not c.superseded}
    assert parse_arm(f"agent@stale={stale}").name == f"agent@stale={stale}"
