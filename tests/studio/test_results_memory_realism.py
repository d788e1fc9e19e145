"""The Results page over a memory-realism run (README: Memory realism): the Memory view draws
the stale drop and delivered versus not delivered, and Side by side marks the constraints
whose notes were cut from the memory the model saw."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_results_page import decode, figures, html, run, start
from test_run_page import SCENARIOS, open_page, studio, texts  # noqa: F401 (studio: a fixture)
from test_run_page import run as run_page

from cvb_engine.store import dispose_engines


@pytest.fixture(scope="module")
def realism(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    from test_memory_realism_run import _run
    from test_runner import KEY, KEY_VAR

    tmp = tmp_path_factory.mktemp("realism-studio")
    mp = pytest.MonkeyPatch()
    mp.setenv("CVB_ENDPOINTS", str(tmp / "no-endpoints.json"))
    mp.setenv("NO_PROXY", "127.0.0.1,localhost")
    mp.delenv("CVB_DATABASE_URL", raising=False)
    mp.setenv(KEY_VAR, KEY)
    mp.setenv("CVB_LAYER_STATE", str(tmp / "layers"))
    try:
        db, _stub = _run(tmp, "last")
    finally:
        mp.undo()
    dispose_engines()
    return db, tmp / "scenarios"


@pytest.fixture
def env(realism: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    db, scenarios = realism
    monkeypatch.setenv("CVB_DATABASE_URL", db)
    monkeypatch.setenv("CVB_SCENARIOS", str(scenarios))
    yield
    dispose_engines()


def test_memory_view_draws_the_stale_drop_and_delivered_versus_not(env: None) -> None:
    at = start(("r1",), view="Memory")
    figs = {f["layout"]["title"]["text"]: f for f in figures(at)}
    drop = figs["Outdated notes: drop in strict accuracy (95% CI)"]
    bars = {t["name"]: t for t in drop["data"]}
    only = dict(zip(bars["stale=only"]["x"], decode(bars["stale=only"]["y"]), strict=True))
    assert only["m-a · incentivized"] == 1.0  # the stub followed what it saw
    assert set(only) == {"m-a · incentivized", "m-a · memory"}  # the layer's too
    split = figs["Delivered versus not delivered: constraints honored (95% CI)"]
    delivered, missed = split["data"]
    # None: a variant with no pair on that side (nothing cut, or nothing delivered)
    assert set(decode(delivered["y"])) - {None} == {1.0}
    assert set(decode(missed["y"])) - {None} == {0.0}
    went = figs["Delivered versus ignored: where each constraint went"]
    parts = {t["name"]: decode(t["y"]) for t in went["data"]}
    # the stub ignores nothing it was given and follows nothing it was not
    assert set(parts["delivered, ignored"]) == {0.0}
    assert set(parts["not delivered, honored anyway"]) == {0.0}
    for shares in zip(*parts.values(), strict=True):
        assert abs(sum(shares) - 1.0) < 1e-9
    budget = figs["Strict accuracy against the delivery budget (bytes; 95% CI)"]
    inline0 = next(t for t in budget["data"] if t["name"] == "m-a · inline · load 0")
    assert list(inline0["x"]) == ["260", "520", "900", "none"]
    assert decode(inline0["y"]) == [0.0, 0.5, 1.0, 1.0]  # more delivered, more followed
    assert "Strict accuracy against unrelated exchanges since the memory (95% CI)" in figs
    headers = [list(d.value.columns) for d in at.dataframe]
    assert any("honored: not delivered" in h for h in headers)
    assert any("no budget" in h for h in headers)


def test_side_by_side_marks_the_constraints_cut_from_memory(env: None, realism) -> None:
    db, _ = realism
    from sqlmodel import Session, select

    from cvb_engine.memory_trace import read_delivery
    from cvb_engine.store import Record, get_engine

    with Session(get_engine(db)) as session:
        rec = next(
            r
            for r in session.exec(select(Record).where(Record.arm == "incentivized@budget=260"))
            if (d := read_delivery(r.memory_json)) is not None and d.cut_ids()
        )
        cut = read_delivery(rec.memory_json).cut_ids()  # type: ignore[union-attr]
        kept = [c for c in json.loads(rec.memory_json or "{}")["constraints"] if c not in cut]
    at = start(("r1",), view="Side by side")
    at.selectbox(key="results_sbs_scenario").select(rec.scenario_id)
    at.selectbox(key="results_sbs_model").select("m-a")
    at.selectbox(key="results_sbs_rep").select(0)
    run(at)
    # the badges of the budget=260 column: each arm's badges are one html element, in the
    # matrix's arm order (load 0 before load=6,budget=260)
    badges = next(h.value for h in at.html if "(budget 260 bytes)" in h.value)
    assert sorted(re.findall(r'data-cut="([^"]+)"', badges)) == sorted(cut)
    assert kept and all(f'data-constraint="{cid}"' in badges for cid in kept)
    assert 'data-stale="' in html(at)  # stale=only: the outdated note alone


@pytest.mark.usefixtures("studio")
def test_the_run_pages_sweep_builder_offers_stale_budget_and_turns() -> None:
    at = open_page()
    at.radio(key="run_pick_mode").set_value("One by one")
    run_page(at)
    at.multiselect(key="run_only").set_value(sorted(SCENARIOS))
    at.number_input(key="run_runs").set_value(1)
    at.multiselect(key="run_arms").set_value(["mandated"])
    at.multiselect(key="run_sweep_channels").set_value(["inline", "history"])
    at.multiselect(key="run_sweep_stale").set_value(["none", "only"])
    at.multiselect(key="run_sweep_budgets").set_value([1000])
    at.multiselect(key="run_sweep_turns").set_value([0, 4])
    run_page(at)
    page = texts(at)
    # mandated + inline (stale none/only × budget 1000) + history (stale none/only × turns 0/4)
    assert "2 scenarios × 7 arms × 1 repetition" in page
    for arm in (
        "incentivized@stale=only,budget=1000",
        "incentivized@channel=history,turns=4,stale=only",
    ):
        assert arm in page, arm
