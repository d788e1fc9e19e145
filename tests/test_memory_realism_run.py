"""Memory realism end to end (README: Memory realism): a run through the fake endpoint with a
stub model that follows the decision it sees last (or first), with stale=with / stale=only and
a budget sweep; the stored delivered flags and every report's split match what the stub saw."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from decision_stub import DecisionStub, write_library
from fake_openai import FakeOpenAI
from sqlmodel import Session, select
from test_runner import (  # noqa: F401 (_isolated_env: the runner tests' autouse fixture)
    _isolated_env,
    execute,
    options,
)

from cvb_engine import cli
from cvb_engine.arms import expand_sweep
from cvb_engine.memory_trace import read_delivery
from cvb_engine.metrics import summarize_rows
from cvb_engine.report.tables import delivery_table
from cvb_engine.results import db_summary, load_results_file, rows_from_results
from cvb_engine.scenario import load_library
from cvb_engine.store import ConstraintResult, Record, get_engine

BUDGET_SWEEP = expand_sweep(["load=0,6", "budget=none,260,520,900"])
ARMS = [
    "incentivized",
    "incentivized@stale=with",
    "incentivized@stale=only",
    "incentivized@load=6,budget=700",
    "incentivized@load=6,stale=with,budget=700",
    "incentivized@channel=file,stale=with,budget=450",
    "incentivized@channel=system,budget=300",
    "incentivized@channel=history,turns=0",
    "incentivized@channel=history,turns=4",
    *BUDGET_SWEEP,
    "memory",
    "memory@stale=with",
    "memory@stale=only",
]


def _realistic(arm: str) -> bool:
    """An incentivized variant that stores delivery flags."""
    return arm.startswith("incentivized@") and ("stale=" in arm or "budget=" in arm)


def _run(tmp_path: Path, order: str) -> tuple[str, DecisionStub]:
    root = write_library(tmp_path / "scenarios", n=4)
    library = [item.scenario for item in load_library(root).values()]
    stub = DecisionStub(library, order=order)
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    with FakeOpenAI(["m-a"], reply=stub) as server:
        opts = options(server.base_url, root, db, arms=list(dict.fromkeys(ARMS)))
        assert execute(opts).status == "finished"
    return db, stub


def _records(db: str) -> list[tuple[Record, dict[str, bool]]]:
    with Session(get_engine(db)) as session:
        records = list(session.exec(select(Record)))
        honored: dict[int, dict[str, bool]] = defaultdict(dict)
        for c in session.exec(select(ConstraintResult)):
            honored[c.record_id][c.constraint_id] = c.honored
        return [(r, honored[r.id or 0]) for r in records]


@pytest.fixture(scope="module", params=["last", "first"])
def ran(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, DecisionStub, Path]:
    tmp = tmp_path_factory.mktemp(f"realism-{request.param}")
    mp = pytest.MonkeyPatch()
    from test_runner import KEY, KEY_VAR

    mp.setenv("CVB_ENDPOINTS", str(tmp / "no-endpoints.json"))
    mp.setenv("NO_PROXY", "127.0.0.1,localhost")
    mp.delenv("CVB_DATABASE_URL", raising=False)
    mp.setenv(KEY_VAR, KEY)
    mp.setenv("CVB_LAYER_STATE", str(tmp / "layers"))
    try:
        db, stub = _run(tmp, request.param)
    finally:
        mp.undo()
    return db, stub, tmp


def test_stored_delivered_flags_are_what_the_stub_was_given(
    ran: tuple[str, DecisionStub, Path],
) -> None:
    db, stub, _ = ran
    checked = cut = 0
    for record, _honored in _records(db):
        assert record.status == "ok"
        delivery = read_delivery(record.memory_json)
        if record.arm.startswith("memory"):
            assert read_delivery(record.memory_json) is None  # a layer's trace
            continue
        if not _realistic(record.arm):
            assert record.memory_json is None  # plain variants store nothing, as before
            continue
        assert delivery is not None, record.arm
        given = stub.given[record.messages_sha256]
        assert set(delivery.constraints) == set(given)
        for cid, saw in given.items():
            d = delivery.constraints[cid]
            assert d.delivered == (saw in ("current", "both")), (record.arm, cid, saw)
            if d.superseded_delivered is None:
                assert saw in ("current", "none")
            else:
                assert d.superseded_delivered == (saw in ("superseded", "both"))
            checked += 1
        cut += delivery.cut
    assert checked > 100 and cut > 10  # the sweep did cut memories


def test_the_reports_split_matches_what_the_stub_followed(
    ran: tuple[str, DecisionStub, Path],
) -> None:
    db, stub, _ = ran
    expected: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"in": [0, 0], "out": [0, 0]})
    for record, honored in _records(db):
        if not _realistic(record.arm):
            continue
        given = stub.given[record.messages_sha256]
        followed = stub.followed[record.messages_sha256]
        for cid, saw in given.items():
            # the stub honors a constraint exactly when it followed its current decision
            assert honored[cid] == (followed[cid] == "current")
            side = expected[record.arm]["in" if saw in ("current", "both") else "out"]
            side[0] += honored[cid]
            side[1] += 1
    with Session(get_engine(db)) as session:
        summary = db_summary(session, ["r1"])
    got = {d.arm: d for d in summary.delivery}
    assert set(got) == set(expected)
    for arm, sides in expected.items():
        d = got[arm]
        assert [d.delivered.k, d.delivered.n] == sides["in"], arm
        assert [d.not_delivered.k, d.not_delivered.n] == sides["out"], arm
    if stub.order == "last":
        # the current note comes after the superseded one: followed whenever it arrived
        assert all(d.delivered.k == d.delivered.n for d in summary.delivery)
        assert all(d.not_delivered.k == 0 for d in summary.delivery)
    else:
        with_stale = got["incentivized@stale=with"]
        assert with_stale.delivered.k == 0 and with_stale.delivered.n > 0  # all ignored


def test_the_stale_drop_per_model(ran: tuple[str, DecisionStub, Path]) -> None:
    db, stub, _ = ran
    with Session(get_engine(db)) as session:
        summary = db_summary(session, ["r1"])
    drops = {s.arm: s for s in summary.stale}
    only = drops["incentivized@stale=only"]
    assert only.base == "incentivized" and only.base_strict.value == 1.0
    assert only.strict.value == 0.0 and only.drop.value == 1.0
    with_ = drops["incentivized@stale=with"]
    assert with_.drop.value == (0.0 if stub.order == "last" else 1.0)
    # the memory layer ingested only the outdated notes: the stub never saw a current one
    layer_only = drops["memory@stale=only"]
    assert layer_only.base == "memory" and layer_only.strict.value == 0.0
    assert "memory@stale=with" in drops
    # a stale variant is compared with the same variant without it, budget and load kept
    assert (
        drops["incentivized@load=6,stale=with,budget=700"].base == "incentivized@load=6,budget=700"
    )
    assert "incentivized@channel=file,stale=with,budget=450" not in drops  # its base did not run


def test_every_output_carries_the_sections(
    ran: tuple[str, DecisionStub, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _stub, tmp = ran
    out = {ext: tmp / f"report.{ext}" for ext in ("md", "html", "json")}
    args = ["report", "r1", "--db", db, "--markdown", str(out["md"]), "--html", str(out["html"])]
    assert cli.main([*args, "--json", str(out["json"])]) == 0
    md = out["md"].read_text()
    page = out["html"].read_text()
    for title in (
        "Outdated notes: strict accuracy [95% CI] with the superseded decisions, and the drop",
        "Delivered versus not delivered (per-constraint honored rate [95% CI])",
        "Adherence versus delivery budget (strict accuracy [95% CI])",
        "Adherence versus unrelated exchanges since the memory",
    ):
        assert title in md and title in page, title
    # the curves drawn: budget (none last) and turns
    assert 'aria-label="Strict accuracy against the delivery budget in bytes' in page
    assert 'data-curve="m-a · inline · load 6"' in page and ">none</text>" in page
    assert 'aria-label="Strict accuracy against unrelated exchanges since the memory' in page
    data: dict[str, Any] = json.loads(out["json"].read_text())
    realism = data["memory_realism"]
    assert {s["arm"] for s in realism["stale"]} >= {
        "incentivized@stale=with",
        "incentivized@stale=only",
    }
    rec = next(r for r in data["records"] if r["arm"] == "incentivized@budget=260")
    assert rec["memory"]["budget"] == 260 and "delivered" in next(
        iter(rec["memory"]["constraints"].values())
    )
    # the results file gives the same split as the store
    file_summary = summarize_rows(rows_from_results(load_results_file(out["json"])))
    with Session(get_engine(db)) as session:
        store_summary = db_summary(session, ["r1"])
    assert delivery_table(file_summary) == delivery_table(store_summary)
    # the budget curve: one row per load, a column per budget and one without
    header = md.split("### Adherence versus delivery budget")[1].split("\n\n")[1].splitlines()[0]
    for column in ("260 bytes", "520 bytes", "900 bytes", "no budget"):
        assert column in header
