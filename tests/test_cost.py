"""Cost from stored token counts and prices: unknown is unknown, never zero."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_dbtools import cvb, reply

from cvb_engine.cost import (
    BUILTIN_PRICES,
    Price,
    PriceError,
    cost_rows,
    estimate_tokens,
    format_cost,
    price_table,
    prices_for,
    prices_from_params,
    prices_param,
    run_costs,
    total_cost,
)
from cvb_engine.report.cost_table import cost_markdown, cost_table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_openai import FakeOpenAI


def rec(model: str, arm: str, strict: bool | None, p: int | None, c: int | None, **kw: Any) -> dict:
    usage = None if p is None else {"prompt_tokens": p, "completion_tokens": c}
    status = kw.pop("status", "ok")
    return {"model": model, "arm": arm, "status": status, "strict": strict, "usage": usage, **kw}


FLAG = Price(1.0, 2.0, "--price-in/out")
STORED = Price(3.0, 4.0, "run")
TABLE = Price(5.0, 6.0, "file")


@pytest.mark.parametrize(
    ("flags", "stored", "table", "expected"),
    [
        pytest.param((1.0, 2.0), {"m": STORED}, {"m": TABLE}, FLAG, id="flags-win"),
        pytest.param((None, None), {"m": STORED}, {"m": TABLE}, STORED, id="stored-next"),
        pytest.param((None, None), {}, {"m": TABLE}, TABLE, id="table-last"),
        pytest.param((None, None), {"x": STORED}, {"y": TABLE}, None, id="unknown"),
    ],
)
def test_price_precedence(
    flags: tuple[float | None, float | None],
    stored: dict[str, Price],
    table: dict[str, Price],
    expected: Price | None,
) -> None:
    got = prices_for(["m"], price_in=flags[0], price_out=flags[1], stored=stored, table=table)
    assert got == {"m": expected}


@pytest.mark.parametrize(
    ("price_in", "price_out", "fragment"),
    [
        pytest.param(1.0, None, "go together", id="half"),
        pytest.param(-1.0, 1.0, "--price-in: a price cannot be negative", id="negative"),
        pytest.param(1.0, float("nan"), "--price-out: expected a number", id="nan"),
    ],
)
def test_bad_price_flags_are_named(
    price_in: float | None, price_out: float | None, fragment: str
) -> None:
    with pytest.raises(PriceError, match=fragment):
        prices_for(["m"], price_in=price_in, price_out=price_out)


def test_price_table_overlays_builtin_file_and_preset(tmp_path: Path) -> None:
    f = tmp_path / "endpoints.json"
    f.write_text(
        json.dumps(
            {
                "prices": {
                    "llama-3.1-8b-instant": {"input": 0.5, "output": 0.6},
                    "a": {"input": 1, "output": 1},
                },
                "groq": {"base_url": "https://x/v1", "prices": {"a": {"input": 7, "output": 8}}},
            }
        )
    )
    table = price_table("groq", f)
    assert table["llama-3.1-8b-instant"].input_per_m == 0.5  # the file over the built-in list
    assert (table["a"].input_per_m, table["a"].output_per_m) == (7, 8)  # the preset over the file
    i, o = BUILTIN_PRICES["groq"]["llama-3.3-70b-versatile"]
    assert table["llama-3.3-70b-versatile"] == Price(i, o, "preset groq")
    assert "qwen/qwen3.6-27b" not in table  # no guess: unknown


@pytest.mark.parametrize(
    ("prices", "fragment"),
    [
        pytest.param(
            {"m": {"input": -1, "output": 1}},
            "prices.m.input: a price cannot be negative",
            id="neg",
        ),
        pytest.param(
            {"m": {"input": "1", "output": 1}}, "prices.m.input: expected a number", id="str"
        ),
        pytest.param({"m": {"in": 1, "output": 1}}, 'prices.m: expected {"input"', id="key"),
        pytest.param(["m"], "prices: expected", id="shape"),
    ],
)
def test_malformed_file_prices_name_the_entry(tmp_path: Path, prices: Any, fragment: str) -> None:
    f = tmp_path / "endpoints.json"
    f.write_text(json.dumps({"prices": prices}))
    with pytest.raises(PriceError, match=fragment.replace("{", r"\{").replace(".", r"\.")):
        price_table("groq", f)


def test_cost_rows_by_hand() -> None:
    records = [
        rec("m", "cold", True, 1000, 200),
        rec("m", "cold", False, 3000, 800),
        rec("m", "cold", None, 500, 0, status="error"),  # billed tokens of a failed call count
        rec("m", "cold", None, None, None, status="error"),  # nothing known, nothing added
        rec("m", "mandated", True, 2000, 100),
        rec("m", "mandated", True, 2000, 100),
        rec("n", "cold", True, 10, 10),
        rec("u", "cold", True, None, None),  # answered without usage: cost unknown
    ]
    prices = {"m": Price(0.5, 1.5, "t"), "n": None, "u": Price(1, 1, "t")}
    rows = {(r.model, r.arm): r for r in cost_rows(records, prices)}
    cold = rows[("m", "cold")]
    assert (cold.records, cold.scored, cold.strict) == (4, 2, 1)
    assert (cold.prompt_tokens, cold.completion_tokens) == (4500, 1000)
    assert cold.cost == pytest.approx((4500 * 0.5 + 1000 * 1.5) / 1e6)
    assert cold.cost_per_strict == pytest.approx(cold.cost)
    mandated = rows[("m", "mandated")]
    assert mandated.cost_per_strict == pytest.approx((4000 * 0.5 + 200 * 1.5) / 1e6 / 2)
    assert (
        rows[("n", "cold")].cost is None
        and rows[("n", "cold")].why_unknown == "no price for this model"
    )
    assert (
        rows[("u", "cold")].cost is None
        and "without token counts" in rows[("u", "cold")].why_unknown
    )
    assert total_cost(list(rows.values())) is None  # one unknown cell: the total is unknown
    assert total_cost([cold, mandated]) == pytest.approx(cold.cost + mandated.cost)  # type: ignore[operator]
    table = cost_table(list(rows.values())).texts()
    assert table[-1][6] == "unknown" and all(row[6] != "$0" for row in table[2:-1])


@pytest.mark.parametrize(
    ("value", "shown"),
    [(None, "unknown"), (0.0, "$0"), (0.01234, "$0.0123"), (1234.5, "$1,234.50")],
)
def test_format_cost(value: float | None, shown: str) -> None:
    assert format_cost(value) == shown


def test_no_strictly_accurate_record_has_no_cost_per_one() -> None:
    [row] = cost_rows([rec("m", "cold", False, 100, 100)], {"m": Price(1, 1, "t")})
    assert row.cost is not None and row.cost_per_strict is None
    assert "no strictly accurate record" in cost_markdown([row])


def test_hostile_model_name_stays_in_its_cell() -> None:
    [row] = cost_rows([rec("a|b\n<script>", "cold", True, 1, 1)], {})
    line = cost_markdown([row]).splitlines()[6]
    assert "<script>" not in line and line.count(" | ") == 7


def test_stored_prices_round_trip_and_bad_entries_are_skipped() -> None:
    params = {
        "prices": {**prices_param({"m": Price(0.5, 1.5, "preset groq")}), "x": {"input_per_m": "?"}}
    }
    back = prices_from_params(params)
    assert set(back) == {"m"} and (back["m"].input_per_m, back["m"].output_per_m) == (0.5, 1.5)
    assert prices_from_params({"prices": "junk"}) == {} and prices_from_params(None) == {}


def test_estimate_tokens() -> None:
    [e] = estimate_tokens({"cold": [400, 401]}, runs=3, models=2, max_tokens=100)
    assert (e.calls, e.prompt_tokens, e.completion_tokens_max) == (12, (100 + 101) * 6, 1200)
    assert e.cost_max(None) is None
    assert e.cost_max(Price(1, 2, "t")) == pytest.approx((1206 + 2400) / 1e6)


def test_run_stores_its_prices_and_the_report_costs_it(scenario_dir: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with FakeOpenAI(models=["m-a"], reply=reply) as server:
        done = cvb(
            "run", "--scenarios", str(scenario_dir), "--base-url", server.base_url,
            "--api-key-env", "", "--models", "m-a", "--runs", "2", "--run-id", "c1",
            "--db", url, "--price-in", "0.5", "--price-out", "1.5", "--json", str(tmp_path / "c1.json"),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "c1.json").read_text())
    assert data["run"]["params"]["prices"]["m-a"]["input_per_m"] == 0.5
    # independently: the sum of the file's usage at the stored prices
    by_arm: dict[str, float] = {}
    for r in data["records"]:
        u = r["usage"]
        by_arm[r["arm"]] = (
            by_arm.get(r["arm"], 0.0)
            + (u["prompt_tokens"] * 0.5 + u["completion_tokens"] * 1.5) / 1e6
        )
    assert {r.arm: r.cost for r in run_costs(data)} == pytest.approx(by_arm)
    shown = cvb("report", "c1", "--db", url, "--html", str(tmp_path / "c1.html"))
    assert shown.returncode == 0, shown.stderr
    html = (tmp_path / "c1.html").read_text()
    assert "<h2>Cost</h2>" in html and "<h2>Flakiness</h2>" in html  # 2 repetitions
    assert format_cost(sum(by_arm.values())) in html
    shown = cvb("report", "c1", "--db", url)
    assert shown.returncode == 0 and "## Cost" in shown.stdout
    assert format_cost(sum(by_arm.values())) in shown.stdout
    # a run that stored no price: unknown without flags (never $0), priced with them
    del data["run"]["params"]["prices"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data))
    unknown = cvb("report", str(bare))
    assert unknown.returncode == 0, unknown.stderr
    cost_lines = unknown.stdout.split("## Cost", 1)[1].splitlines()
    assert any(line.startswith("| m-a | cold |") and "| unknown |" in line for line in cost_lines)
    assert "$0" not in unknown.stdout
    assert any(line.startswith("| total |") and "unknown" in line for line in cost_lines)
    priced = cvb("report", str(bare), "--price-in", "0.5", "--price-out", "1.5")
    assert priced.returncode == 0 and format_cost(sum(by_arm.values())) in priced.stdout


def test_dry_run_prints_token_and_cost_estimates(scenario_dir: Path) -> None:
    out = cvb(
        "run", "--dry-run", "--scenarios", str(scenario_dir), "--base-url", "http://127.0.0.1:9/v1",
        "--api-key-env", "", "--models", "m-a,m-b", "--runs", "2", "--price-in", "1", "--price-out", "2",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    tokens = [line for line in out.stdout.splitlines() if line.startswith("tokens")]
    assert [line.split()[1] for line in tokens] == ["cold:", "mandated:", "incentivized:"]
    assert all("at most" in line for line in tokens)
    assert (
        sum(line.startswith("cost") and "at most $" in line for line in out.stdout.splitlines())
        == 2
    )
    bare = cvb(
        "run", "--dry-run", "--scenarios", str(scenario_dir), "--base-url", "http://127.0.0.1:9/v1",
        "--api-key-env", "", "--models", "m-a",
    )  # fmt: skip
    assert "cost       m-a: unknown" in bare.stdout and "$0" not in bare.stdout


def test_the_estimate_bounds_only_what_it_can(scenario_dir: Path) -> None:
    """An 'at most' is a bound: the fixed-message arms are in it; an agent episode's later
    requests (they carry its history) and an agent program's requests are not, and the
    estimate says so instead of counting one request a cell."""
    from cvb_engine.arms import ArmContext
    from cvb_engine.cost import estimate_run
    from cvb_engine.run.plan import pool_path
    from cvb_engine.scenario import load_library

    scenarios = [item.scenario for item in load_library(scenario_dir).values()]
    arms = ["cold", "agent@steps=4", "agent@command=./a.sh"]
    estimate = estimate_run(
        scenarios,
        arms,
        ArmContext(pool_path(str(scenario_dir))),
        runs=2,
        models=["m-a", "m-b"],
        max_tokens=100,
        endpoint=None,
        price_in=1.0,
        price_out=2.0,
    )
    cold, agent, command = estimate.arms
    cells = len(scenarios) * 2 * 2
    assert cold.bounded and cold.requests_max == cells and cold.tokens is not None
    assert not agent.bounded and agent.requests_max == cells * 5  # steps + 1 per episode
    assert agent.tokens is not None and agent.tokens.calls == cells
    assert not command.bounded and command.tokens is None and command.requests_max is None
    assert not estimate.bounded
    assert [line.split(":")[0] for line in estimate.left_out()] == arms[1:]
    # The bound is the cold arm's alone, split between the two models.
    share = Price(1.0, 2.0, "t").of(cold.tokens.prompt_tokens, cold.tokens.completion_tokens_max)
    assert estimate.cost_max("m-a") == pytest.approx(share / 2)
    assert estimate.prompts_cost("m-a") == pytest.approx(
        (cold.tokens.prompt_tokens + agent.tokens.prompt_tokens) / 1e6 / 2
    )
    no_price = estimate_run(
        scenarios, ["cold"], ArmContext(pool_path(str(scenario_dir))), runs=1, models=["m"],
        max_tokens=10, endpoint=None,
    )  # fmt: skip
    assert no_price.cost_max("m") is None and no_price.bounded
