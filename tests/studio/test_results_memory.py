"""The Results page's Memory view: the adherence curve with CI bands and the memory tables.

The store is the Results page tests' real run, with two arms renamed into memory
variants (``incentivized@load=10`` and ``incentivized@load=10,channel=system``), so
the curve has two loads and the channel table two channels.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_results_page import RUN_ID, Filled, decode, figures, start, texts

from cvb_engine.store import dispose_engines


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    from test_results_page import fill_store

    return fill_store(tmp_path_factory.mktemp("memory"), two_runs=False)


def test_memory_view_draws_the_curve_and_tables(
    filled: Filled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "memory.db"
    shutil.copy(filled.db_url.removeprefix("sqlite:///"), db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE record SET arm = 'incentivized@load=10' WHERE arm = 'cold'")
        cols = [r[1] for r in con.execute("PRAGMA table_info(record)") if r[1] != "id"]
        picked = ", ".join(
            "'incentivized@load=10,channel=system'" if c == "arm" else c for c in cols
        )
        con.execute(
            f"INSERT INTO record ({', '.join(cols)}) SELECT {picked} FROM record "
            "WHERE arm = 'mandated'"
        )
    monkeypatch.setenv("CVB_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("CVB_SCENARIOS", str(filled.scenarios))
    at = start((RUN_ID,), view="Memory")
    fig = next(f for f in figures(at) if "memory size" in f["layout"]["title"]["text"])
    lines = [t for t in fig["data"] if t.get("mode") == "lines+markers"]
    assert lines and all(t["x"] and len(decode(t["y"])) == 2 for t in lines)
    assert any(t.get("fill") == "toself" for t in fig["data"])  # CI bands
    page = texts(at)
    assert "Channels: gap to mandated" in page
    headers = [list(d.value.columns) for d in at.dataframe]
    assert ["model", "load", "position", "gap: inline", "gap: system"] in headers
    dispose_engines()
