"""The Results page's cost table and paired comparisons equal `cvb report`'s."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_results_page import RUN_ID, RUN_ID_B, Filled, filled, start, store, texts  # noqa: F401

from cvb_engine import cli

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _md_row(text: str, first: str, section: str = "") -> list[str]:
    text = text.split(section, 1)[1] if section else text
    line = next(x for x in text.splitlines() if x.startswith(f"| {first} |"))
    return [c.strip().replace("\\", "") for c in line.strip("|").split("|")]


def _same(shown: list[object], md: list[str]) -> None:
    """A dataframe row equals the report's: numbers to the report's 3 places, text as is."""
    assert len(shown) == len(md)
    for value, text in zip(shown, md, strict=True):
        if isinstance(value, float):
            assert float(text) == pytest.approx(value, abs=5e-4), (value, text)
        else:
            assert str(value).replace("\\", "") == text


def _frame(at: object, column: str, contains: str) -> object:
    for d in at.dataframe:  # type: ignore[attr-defined]
        df = d.value
        if column in df.columns and contains in df.columns:
            return df
    raise AssertionError(f"no table with {column!r} and {contains!r}")


def test_overview_cost_table_is_the_reports(
    store: Filled,  # noqa: F811 (the fixture of test_results_page)
    capsys: pytest.CaptureFixture[str],
) -> None:
    at = start()
    df = _frame(at, "cost per strictly accurate record", "price in / out")
    capsys.readouterr()
    assert cli.main(["report", RUN_ID, "--db", store.db_url]) == 0
    report = capsys.readouterr().out
    for _, row in df.iterrows():  # type: ignore[attr-defined]
        if row["model"] == "total":
            continue
        md = _md_row(report, f"{row['model']} | {row['arm']}", "## Cost")
        assert list(row)[2:] == md[2:]
    # a custom endpoint with no configured price: unknown, never $0
    assert set(df["cost"]) == {"unknown"}  # type: ignore[index]


def test_compare_view_pairs_runs_and_models_like_the_report(
    store: Filled,  # noqa: F811 (the fixture of test_results_page)
    capsys: pytest.CaptureFixture[str],
) -> None:
    at = start(run_ids=(RUN_ID, RUN_ID_B), view="Compare runs")
    at.selectbox(key="results_cmp_a").set_value(RUN_ID)
    at.selectbox(key="results_cmp_b").set_value(RUN_ID_B)
    at.run()
    groups = _frame(at, "shared cells", "gained")
    capsys.readouterr()
    assert cli.main(["report", "--db", store.db_url, "--compare", RUN_ID, RUN_ID_B]) == 0
    report = capsys.readouterr().out
    first = groups.iloc[0]  # type: ignore[attr-defined]
    assert first["group"] == "all"
    _same(list(first), _md_row(report, "all"))
    assert int(first["gained"]) > 0  # the second run recovered scenarios for m-b
    flaky = [d.value for d in at.dataframe if "flaky scenarios" in d.value.columns]
    assert len(flaky) == 2
    # two models of one run
    at.selectbox(key="results_pm_run").set_value(RUN_ID)
    at.run()
    models = [d.value for d in at.dataframe if "shared cells" in d.value.columns]
    assert len(models) == 2
    capsys.readouterr()
    assert cli.main(["report", RUN_ID, "--db", store.db_url, "--compare-models", "m-a", "m-b"]) == 0
    by_models = capsys.readouterr().out
    _same(list(models[1].iloc[0]), _md_row(by_models, "all"))
    assert "Pick two different models." not in texts(at)
