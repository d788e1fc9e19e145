"""The agent arm's ``budget=``: the rules files cut in reading order the way ``memory_notes.cut``
cuts (line boundary, marker), per-constraint delivered flags in the incentivized arm's record
shape, read flags that agree with the cut, and a budget sweep through the scripted endpoint
whose report split matches what was delivered."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from scripted_agent import ScriptedAgent  # noqa: E402
from sqlmodel import Session  # noqa: E402
from test_runner import (  # noqa: E402, F401 (_isolated_env: the runner tests' autouse fixture)
    _isolated_env,
    execute,
    options,
    query,
    write_scenarios,
)

from cvb_engine.agent.trace import AgentTrace  # noqa: E402
from cvb_engine.agent.workspace import RULES, Workspace, build_workspace  # noqa: E402
from cvb_engine.arms import ArmContext, expand_sweep, parse_arm  # noqa: E402
from cvb_engine.arms.agent import Params  # noqa: E402
from cvb_engine.memory_notes import CUT_MARKER  # noqa: E402
from cvb_engine.memory_trace import read_delivery  # noqa: E402
from cvb_engine.metrics import summarize_rows  # noqa: E402
from cvb_engine.report.markdown_report import markdown as markdown_report  # noqa: E402
from cvb_engine.report.memory_realism import budget_curves  # noqa: E402
from cvb_engine.report.tables import budget_table, delivery_table, has_memory  # noqa: E402
from cvb_engine.results import (  # noqa: E402
    db_summary,
    export_results,
    load_results_file,
    rows_from_results,
    write_json_atomic,
)
from cvb_engine.scenario import Scenario, load_library  # noqa: E402
from cvb_engine.store import get_engine  # noqa: E402

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
MARKER_START = CUT_MARKER.split("{", 1)[0]


@pytest.fixture(scope="module")
def library() -> dict[str, Scenario]:
    return {sid: item.scenario for sid, item in load_library(SCENARIOS).items()}


@pytest.fixture(scope="module")
def pool() -> tuple[object, ...]:
    return tuple(ArmContext().pool)


def _rules_bytes(ws: Workspace) -> list[tuple[str, bytes]]:
    return [(r.path, ws.files[r.path].encode()) for r in ws.rules_files]


def _line_end(text: str, needle: str) -> int:
    """The byte offset just past the line break of the line holding ``needle``."""
    at = text.index(needle)
    end = text.index("\n", at) + 1
    return len(text[:end].encode())


def _line_start(text: str, needle: str) -> int:
    at = text.index(needle)
    return len(text[: text.rindex("\n", 0, at) + 1].encode())


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("stale", [None, "with"])
def test_the_cut_is_deterministic_and_a_prefix_in_reading_order(
    library: dict[str, Scenario], pool: tuple[object, ...], rules: Any, stale: Any
) -> None:
    scenario = library["http-client-choice"]
    plain = build_workspace(scenario, rules, 6, "spread", pool, stale)
    # no budget and a budget above the whole memory change no byte
    assert build_workspace(scenario, rules, 6, "spread", pool, stale, None) == plain
    whole = sum(len(b) for _, b in _rules_bytes(plain))
    assert build_workspace(scenario, rules, 6, "spread", pool, stale, whole).files == plain.files
    for budget in (1, whole // 3, whole // 2, whole - 1):
        one = build_workspace(scenario, rules, 6, "spread", pool, stale, budget)
        two = build_workspace(scenario, rules, 6, "spread", pool, stale, budget)
        assert one == two and one.sha256 == two.sha256 != plain.sha256
        # only the rules files changed, each the start of its text (whole lines) + the marker
        rules_paths = {r.path for r in plain.rules_files}
        assert {p for p in plain.files if plain.files[p] != one.files[p]} <= rules_paths
        kept_total = 0
        cut_seen = False
        for path, original in _rules_bytes(plain):
            got = one.files[path]
            if cut_seen:  # after the first cut file, every later one is the marker alone
                assert got.startswith(MARKER_START) and "\n" not in got
                continue
            if got.encode() == original:
                kept_total += len(original)
                continue
            cut_seen = True
            body, _, marker = got.rpartition("\n")
            kept = (body + "\n").encode() if body or got.startswith("\n") else b""
            assert original.startswith(kept) and marker.startswith(MARKER_START)
            assert f"({budget:,}-byte limit)" in marker
            kept_total += len(kept)
            # the next line did not fit in what was left
            rest = original[len(kept) :]
            assert kept_total + len(rest.split(b"\n", 1)[0]) + 1 > budget
        assert cut_seen and kept_total <= budget
        assert one.delivery["kept_bytes"] == kept_total and one.delivery["cut"] is True
        assert one.delivery["bytes"] == whole


def test_delivered_flags_against_hand_made_expectations(library: dict[str, Scenario]) -> None:
    scenario = library["http-client-choice"]
    first, second = (c.id for c in scenario.constraints)
    agents = build_workspace(scenario).files["AGENTS.md"]
    both_in = _line_end(agents, f"({second})")
    first_in = _line_end(agents, f"({first})")
    none_in = _line_start(agents, f"({first})")
    table = [
        (None, True, True),
        (both_in, True, True),
        (both_in - 1, True, False),  # the second note's line break is cut
        (first_in, True, False),
        (first_in - 1, False, False),
        (none_in, False, False),
        (1, False, False),
    ]
    for budget, want_first, want_second in table:
        ws = build_workspace(scenario, budget=budget)
        flags = {cid: d["delivered"] for cid, d in ws.delivery["constraints"].items()}
        assert flags == {first: want_first, second: want_second}, budget
        assert all(d["superseded_delivered"] is None for d in ws.delivery["constraints"].values())
        # a cut note has no place to be read at, and its text is nowhere in the workspace
        assert {p.constraint_id for p in ws.constraints} == {c for c, ok in flags.items() if ok}
        assert set(ws.rules_files[0].constraints) == {c for c, ok in flags.items() if ok}
        for c in scenario.constraints:
            present = any(c.text.strip() in text for text in ws.files.values())
            assert present == flags[c.id]

    # stale=with: each superseded note sits just before its current one
    stale = build_workspace(scenario, stale="with").files["AGENTS.md"]
    old = next(c.superseded for c in scenario.constraints if c.id == first)
    assert old
    before_current = _line_start(stale, f"({first})")
    ws = build_workspace(scenario, stale="with", budget=before_current)
    got = ws.delivery["constraints"]
    assert got[first] == {"delivered": False, "superseded_delivered": True}
    assert got[second]["delivered"] is False
    # stale=only: the current note is never delivered, whatever the budget
    ws = build_workspace(scenario, stale="only", budget=10**6)
    assert all(d["delivered"] is False for d in ws.delivery["constraints"].values())
    assert all(d["superseded_delivered"] is True for d in ws.delivery["constraints"].values())


def test_nested_and_adr_share_the_budget_in_reading_order(
    library: dict[str, Scenario], pool: tuple[object, ...]
) -> None:
    scenario = library["http-client-choice"]
    ids = [c.id for c in scenario.constraints]
    nested = build_workspace(scenario, "nested", 4, "spread", pool)
    root = len(nested.files["AGENTS.md"].encode())
    inner_text = nested.files["fernhollow/AGENTS.md"]
    # the root file (distractors only) first: a budget it fills leaves the package's cut away
    ws = build_workspace(scenario, "nested", 4, "spread", pool, budget=root)
    assert ws.files["AGENTS.md"] == nested.files["AGENTS.md"]
    assert ws.files["fernhollow/AGENTS.md"].startswith(MARKER_START)
    assert not any(d["delivered"] for d in ws.delivery["constraints"].values())
    assert ws.constraints == ()
    ws = build_workspace(
        scenario, "nested", 4, "spread", pool, budget=root + _line_end(inner_text, f"({ids[0]})")
    )
    assert {c: d["delivered"] for c, d in ws.delivery["constraints"].items()} == {
        ids[0]: True,
        ids[1]: False,
    }
    # adr: one record per note, by number; a budget of exactly the first record keeps it alone
    adr = build_workspace(scenario, "adr")
    records = [r.path for r in adr.rules_files]
    size = len(adr.files[records[0]].encode())
    ws = build_workspace(scenario, "adr", budget=size)
    assert ws.files[records[0]] == adr.files[records[0]]
    assert ws.files[records[1]].startswith(MARKER_START)
    assert ws.delivery["constraints"][ids[0]]["delivered"] is True
    assert ws.delivery["constraints"][ids[1]]["delivered"] is False


def test_preload_delivers_the_cut_file_and_the_record_stores_flags(
    library: dict[str, Scenario],
) -> None:
    scenario = library["http-client-choice"]
    first, second = (c.id for c in scenario.constraints)
    agents = build_workspace(scenario).files["AGENTS.md"]
    budget = _line_end(agents, f"({first})")
    variant = parse_arm(f"agent@preload=true,budget={budget}")
    system = variant.build(scenario, ArmContext())[0]["content"]
    text = next(c.text.strip() for c in scenario.constraints if c.id == second)
    assert text not in system and MARKER_START in system
    assert next(c.text.strip() for c in scenario.constraints if c.id == first) in system
    memory = variant.memory(scenario, ArmContext())
    assert memory is not None and memory["arm"] == "agent" and memory["channel"] == "agents-md"
    assert read_delivery(json.dumps(memory)) is not None
    # the default stores nothing and builds the same messages as ever
    assert parse_arm("agent@budget=none").name == "agent"
    assert parse_arm("agent").memory(scenario, ArmContext()) is None
    with pytest.raises(ValueError, match="budget"):
        Params(budget=0)


@pytest.fixture
def scenarios(tmp_path: Path, valid_text: str) -> Path:
    root = tmp_path / "scenarios"
    write_scenarios(root, valid_text, per_category=1, categories=["library-choice"])
    return root


def test_a_budget_sweep_through_the_reader_splits_the_report_by_delivery(
    tmp_path: Path, scenarios: Path
) -> None:
    scenario = next(item.scenario for item in load_library(scenarios).values())
    first, _second = (c.id for c in scenario.constraints)
    agents = build_workspace(scenario).files["AGENTS.md"]
    budgets = [_line_end(agents, f"({first})"), _line_start(agents, f"({first})")]
    sweep = expand_sweep(
        ["arm=agent", "rules=agents-md,adr,nested", f"budget=none,{budgets[0]},{budgets[1]}"]
    )
    assert len(sweep) == 9 and all(a.startswith("agent") for a in sweep)
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    with ScriptedAgent() as agent:
        outcome = execute(options(agent.base_url, scenarios, db, models=["reader"], arms=sweep))
    assert outcome.progress.done == len(sweep)
    rows = query(db, "SELECT id, arm, status, memory_json, agent_json FROM record")
    expected: dict[str, dict[str, list[int]]] = {}
    cut = 0
    for rid, arm, status, memory_json, agent_json in rows:
        assert status == "ok", arm
        params: Any = parse_arm(arm).params
        honored = dict(
            query(
                db,
                "SELECT constraint_id, honored FROM constraintresult WHERE record_id = :r",
                r=rid,
            )
        )
        if params.budget is None:
            assert memory_json is None  # a variant without budget or stale stores nothing
            continue
        delivery = read_delivery(memory_json)
        assert delivery is not None and delivery.arm == "agent" and delivery.channel == params.rules
        ws = build_workspace(scenario, params.rules, budget=params.budget)
        assert json.loads(memory_json) == json.loads(json.dumps(ws.delivery))
        flags = {cid: d.delivered for cid, d in delivery.constraints.items()}
        trace = AgentTrace.from_json(agent_json)
        # the reader opened every rules file: it read exactly what was delivered, and
        # follows exactly what it read
        assert trace.read == flags, arm
        assert {cid: bool(h) for cid, h in honored.items()} == flags, arm
        cut += delivery.cut
        sides = expected.setdefault(arm, {"in": [0, 0], "out": [0, 0]})
        for cid, got in flags.items():
            side = sides["in" if got else "out"]
            side[0] += bool(honored[cid])
            side[1] += 1
    assert cut == 6  # every budgeted variant was cut
    with Session(get_engine(db)) as session:
        summary = db_summary(session, ["r1"])
        exported = export_results(session, "r1")
    path = tmp_path / "results.json"
    write_json_atomic(path, exported)
    from_file = summarize_rows(rows_from_results(load_results_file(path)))
    got = {d.arm: d for d in summary.delivery}
    assert set(got) == set(expected)
    for arm, sides in expected.items():
        assert [got[arm].delivered.k, got[arm].delivered.n] == sides["in"], arm
        assert [got[arm].not_delivered.k, got[arm].not_delivered.n] == sides["out"], arm
    # the results file gives the same split, and the report's table shows every variant
    assert from_file.delivery == summary.delivery
    table = delivery_table(summary)
    assert {row[1].text for row in table.rows} >= set(expected)
    # at the smaller budget nothing was delivered, at the larger the first note only
    small = got[f"agent@budget={budgets[1]}"]
    assert small.delivered.n == 0 and small.not_delivered.n == 2
    large = got[f"agent@budget={budgets[0]}"]
    assert (large.delivered.k, large.delivered.n) == (1, 1)
    assert (large.not_delivered.k, large.not_delivered.n) == (0, 1)
    # The budget curves: one per rules placement, its points the variants' strict accuracy
    # (the reader follows what it read: nothing at the smaller budget), drawn by every view.
    by_arm = {a.arm: a for a in summary.agent}
    curves = dict(budget_curves(summary))
    assert set(curves) == {
        "reader · agent",
        "reader · agent@rules=adr",
        "reader · agent@rules=nested",
    }
    for label, points in curves.items():
        assert set(points) == {None, *budgets}, label
        for budget, point in points.items():
            assert point is by_arm[point.arm], label
            assert (getattr(parse_arm(point.arm).params, "budget", None)) == budget
    assert curves["reader · agent"][budgets[1]].strict.k == 0
    assert curves["reader · agent"][None].strict.k == 1
    table = budget_table(summary)
    assert [row[1].text for row in table.rows] == [
        "agent",
        "agent@rules=adr",
        "agent@rules=nested",
    ]
    assert has_memory(summary)  # an agent-only run's report shows its memory section
    assert "Adherence versus delivery budget" in markdown_report(summary)


@pytest.mark.parametrize("stale", [None, "with", "only"])
def test_delivered_means_the_whole_note_is_in_the_workspace_for_every_scenario(
    library: dict[str, Scenario], pool: tuple[object, ...], stale: Any
) -> None:
    """An oracle apart from the spans: over every shipped scenario, placement and a spread of
    budgets, a note is delivered exactly when its whole text is in a rules file as cut."""
    checked = cut = 0
    for scenario in library.values():
        for rules in RULES:
            plain = build_workspace(scenario, rules, 3, "spread", pool, stale)
            whole = sum(len(b) for _, b in _rules_bytes(plain))
            for budget in (whole // 5, whole // 2, (4 * whole) // 5):
                ws = build_workspace(scenario, rules, 3, "spread", pool, stale, max(budget, 1))
                bodies = [
                    ws.files[r.path].rpartition(MARKER_START)[0] or ws.files[r.path]
                    for r in ws.rules_files
                ]
                flags = ws.delivery["constraints"]
                for c in scenario.constraints:
                    present = any(c.text.strip() in body for body in bodies)
                    # stale=only: the superseded note stands instead, where there is one
                    shown = stale != "only" or not c.superseded
                    assert flags[c.id]["delivered"] == (present and shown), (
                        scenario.id,
                        rules,
                        budget,
                        c.id,
                    )
                    if stale and c.superseded:
                        old = " ".join(c.superseded.split())
                        assert flags[c.id]["superseded_delivered"] == any(
                            old in body for body in bodies
                        )
                    checked += 1
                cut += ws.delivery["cut"]
    assert checked > 500 and cut > 100
