"""How the studio draws a table model as a dataframe (studio/components/tables.py
``table_frame``): figures as numbers (a difference with its sign), small print beside
them, names from outside as text cells."""

from __future__ import annotations

from markdown_support import HOSTILE

from cvb_engine.report.tables import Cell, Column, Table
from studio.components.tables import table_frame

TABLE = Table(
    "t",
    "T",
    (
        Column("model", outside=True),
        Column(f"A: {HOSTILE}", key="A", outside_name=True, numeric=True),
        Column("Δ (B − A)", key="Δ", numeric=True, signed=True),
    ),
    ((Cell(HOSTILE), Cell("0.500", 0.5, "1/2"), Cell("+0.250", 0.25)),),
)


def test_numbers_small_print_and_names_as_text() -> None:
    rows, config = table_frame(TABLE)
    assert rows == [{"model": HOSTILE, "A": 0.5, "Δ": 0.25, "A n": "1/2"}]
    assert config["A"]["label"] == f"A: {HOSTILE}"  # a dataframe heading is text
    assert config["A"]["type_config"]["format"] == "%.3f"
    assert config["Δ"]["type_config"]["format"] == "%+.3f"
