"""The Run page's small tables drawn whole (studio/components/tables.py ``static_frame``):
``st.table`` renders Markdown, so every heading and cell is drawn through ``plain``. The
tables themselves are the engine's (tests/test_report_live.py)."""

from __future__ import annotations

from markdown_support import HOSTILE, assert_inert, shown
from test_report_live import state

from cvb_engine.metrics import Rate
from cvb_engine.monitor import ArmAccuracy
from cvb_engine.report.live import live_accuracy_table, runner_table
from studio.components.tables import static_frame


def test_runners_are_indexed_by_name_and_read_as_written() -> None:
    frame = static_frame(runner_table([state()]))
    assert frame.index.name == "runner" and str(frame.index[0]) == "lab-2"
    assert shown(str(frame.iloc[0]["stored"])) == "12 (1 errors)"
    assert shown(str(frame.iloc[0]["where"])) == "lab-2.example · pid 4242"


def test_runner_names_hosts_and_variables_are_shown_as_text() -> None:
    frame = static_frame(runner_table([state(worker=HOSTILE, host=HOSTILE, api_key_env=HOSTILE)]))
    cells = [str(frame.index[0]), str(frame.iloc[0]["where"]), str(frame.iloc[0]["key variable"])]
    assert_inert(cells)


def test_live_accuracy_models_and_arms_are_shown_as_text() -> None:
    frame = static_frame(live_accuracy_table([ArmAccuracy(HOSTILE, HOSTILE, Rate(2, 3, 0))]))
    assert frame.index.name == "model"
    assert_inert([str(frame.index[0]), *map(str, frame.columns)])
    assert shown(str(frame.iloc[0, 0])) == "67% (2/3)"
