"""Reports of the memory-layer arms (README: Memory arms): layer names, the memory-load curve per layer,
how models used the memory tool, and memory failures counted apart from API failures.

The store (``tests/memory_store.py``) holds the seed arms beside ``memory``,
``memory@load=20`` and ``memory-tool`` with traces, one API error, one memory
failure and one unreadable trace; every figure below is counted by hand there.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from sqlmodel import Session

sys.path.insert(0, str(Path(__file__).resolve().parent))

import memory_store as ms

from cvb_engine import cli
from cvb_engine.memory_trace import read_trace, trace_value
from cvb_engine.metrics import RecordRow, Summary, summarize_rows
from cvb_engine.report.html import html_report
from cvb_engine.report.markdown_report import markdown
from cvb_engine.report.tables import tool_use_table
from cvb_engine.results import ResultsFileError, db_summary, load_results_file
from cvb_engine.store import get_engine

LAYER = "bm25 0.3.16+cvb.1"


@pytest.fixture
def store(db_url: str, valid_text: str) -> str:
    ms.fill(db_url, valid_text)
    return db_url


@pytest.fixture
def summary(store: str) -> Summary:
    with Session(get_engine(store)) as session:
        return db_summary(session, [ms.RUN_ID])


def md_rows(md: str, heading: str) -> list[list[str]]:
    """The rows (header first) of the first Markdown table after ``heading``."""
    section = md.split(heading, 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            if not set(line.replace("|", "").strip()) <= {"-"}:
                rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif rows:
            break
    return rows


# --------------------------------------------------------------------------- the trace


def test_a_trace_written_by_the_runner_reads() -> None:
    text = ms.TOOL_CELLS[("m-b", ms.S2, 0)][1]
    trace = read_trace(text)
    assert trace is not None and trace.arm == "memory-tool" and trace.looked_up
    refused, answered = trace.tool_calls
    assert refused.query is None and refused.error and refused.arguments == "{not json"
    assert answered.held == (ms.C2,) and answered.result_text == ms.CONTEXT
    assert trace.layer.title == LAYER and trace.held == (ms.C2,)
    assert trace_value(text) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(None, id="none"),
        pytest.param("", id="empty"),
        pytest.param("{not json", id="not-json"),
        pytest.param("[1, 2]", id="array"),
        pytest.param('"a string"', id="string"),
        pytest.param('{"arm": "cold"}', id="not-a-layer-arm"),
        pytest.param('{"arm": "memory", "calls": "x"}', id="calls-not-a-list"),
        pytest.param('{"arm": "memory", "calls": [{"source": "elsewhere"}]}', id="bad-source"),
        pytest.param('{"arm": "memory", "calls": [{"source": "tool", "round": true}]}', id="bool"),
        pytest.param('{"arm": "memory", "calls": [{"source": "tool", "round": "1"}]}', id="str"),
        pytest.param(
            '{"arm": "memory", "calls": [{"source": "tool", "latency_s": NaN}]}', id="nan"
        ),
        pytest.param('{"arm": "memory", "held": [1]}', id="held-not-ids"),
        pytest.param('{"arm": "memory", "layer": {"name": 3}}', id="name-not-text"),
        pytest.param(
            '{"arm": "memory", "calls": [{"source": "prompt", "messages": [{"role": 1}]}]}',
            id="bad-message",
        ),
        pytest.param("[" * 100_000, id="deep"),
        # not text any layer sends (cvb stores layers' strings cleaned): refused, not repaired
        pytest.param('{"arm": "memory", "error": "\\ud800"}', id="lone-surrogate"),
    ],
)
def test_anything_else_reads_as_no_trace(text: str | None) -> None:
    assert read_trace(text) is None


# --------------------------------------------------------------------------- metrics


def test_memory_failures_are_counted_apart_from_api_failures(summary: Summary) -> None:
    cold = summary.strict[("m-a", "cold")]
    assert (cold.k, cold.n, cold.errors, cold.memory_errors) == (0, 3, 1, 0)
    failed = summary.strict[("m-b", ms.MEMORY_20)]
    assert (failed.k, failed.n, failed.errors, failed.memory_errors) == (0, 3, 0, 1)
    assert summary.strict[("m-a", ms.MEMORY_20)].value == 0.5


def test_memory_arms_stand_beside_the_seed_arms_named_by_their_layer(summary: Summary) -> None:
    assert summary.arms == ["cold", "mandated", "incentivized", ms.MEMORY, ms.MEMORY_20, ms.TOOL]
    assert summary.layers == {ms.MEMORY: LAYER, ms.MEMORY_20: LAYER, ms.TOOL: LAYER}
    rows = md_rows(markdown(summary), "## Strict accuracy")
    assert rows[0][:7] == [
        "model",
        "cold",
        "mandated",
        "incentivized",
        f"memory \\({LAYER}\\)",
        f"memory@load=20 \\({LAYER}\\)",
        f"memory-tool \\({LAYER}\\)",
    ]
    assert rows[1][:7] == ["m-a", "0.000", "1.000", "1.000", "1.000", "0.500", "0.750"]
    assert rows[2][:7] == ["m-b", "0.000", "1.000", "0.500", "0.500", "0.000", "0.250"]


def test_without_traces_a_layer_arm_is_named_by_its_parameters() -> None:
    rows = [
        RecordRow("m", "s", "c", arm, "ok", True, {"c1": True})
        for arm in ("memory", "memory@command=./l.py", "memory@url=http://h:1", "memory-tool")
    ]
    assert summarize_rows(rows).layers == {
        "memory": "bm25",
        "memory@command=./l.py": "command",
        "memory@url=http://h:1": "http",
        "memory-tool": "bm25",
    }


def test_the_memory_load_curve_has_a_series_per_layer(summary: Summary) -> None:
    layer = {(m.model, m.arm): m for m in summary.memory if m.kind == "memory"}
    assert {m.series for m in layer.values()} == {"memory"}
    at_0, at_20 = layer[("m-b", ms.MEMORY)], layer[("m-b", ms.MEMORY_20)]
    assert (at_0.load, at_0.strict.k, at_0.strict.n) == (0, 2, 4)
    assert (at_20.load, at_20.strict.k, at_20.strict.n, at_20.strict.memory_errors) == (20, 0, 3, 1)
    # m-b memory: 2/2 on S1, 0/2 on S2: the bootstrap over the two scenarios spans 0..1
    assert (at_0.strict_ci.low, at_0.strict_ci.high, at_0.strict_ci.n_units) == (0.0, 1.0, 2)
    assert at_0.gap.value == pytest.approx(0.5)  # mandated 4/4 − memory 2/4
    rows = md_rows(markdown(summary), "### Memory layers versus memory size")
    assert rows[0] == ["model", "arm", "layer", "load 0", "load 20"]
    assert rows[3] == ["m-b", "memory", LAYER, "0.500 [0.000, 1.000]", "0.000 [0.000, 0.000]"]
    # no incentivized variant beyond the seed ran: no incentivized curve, position or channel table
    assert "### Adherence versus memory size" not in markdown(summary)
    assert "### Channels" not in markdown(summary)


def test_how_each_model_used_the_memory_tool(summary: Summary) -> None:
    by = {u.model: u for u in summary.tool_use}
    a, b = by["m-a"], by["m-b"]
    assert (a.n, a.unavailable, a.looked, a.calls, a.lookups, a.lookups_held) == (3, 1, 2, 3, 3, 2)
    assert (b.n, b.unavailable, b.looked, b.calls, b.lookups, b.lookups_held) == (4, 0, 2, 3, 2, 1)
    assert (a.strict_looked.k, a.strict_looked.n) == (2, 2)
    assert (a.strict_not_looked.k, a.strict_not_looked.n) == (0, 1)
    assert (b.strict_looked.k, b.strict_looked.n, b.strict_held.k, b.strict_held.n) == (1, 2, 1, 1)
    assert b.calls_per_record == 0.75 and b.held_share == 0.5 and a.looked_share == 2 / 3
    # m-b looked up on S1 (0/1) and S2 (1/1): the CI spans both
    assert (b.strict_looked_ci.low, b.strict_looked_ci.high) == (0.0, 1.0)
    table = tool_use_table(summary)
    header, rows = table.header, table.texts()
    assert header[3:6] == ["looked up", "calls per record", "lookups holding a constraint"]
    assert rows[1][2:] == [
        "4",
        "0.500 (2/4)",
        "0.75",
        "0.500 (1/2)",
        "0.500 [0.000, 1.000] (1/2)",
        "0.000 [0.000, 0.000] (0/2)",
        "1.000 [1.000, 1.000] (1/1)",
        "0",
    ]


def test_a_run_of_the_seed_arms_reports_as_before(summary: Summary) -> None:
    seed = summarize_rows(
        [RecordRow("m", "s", "c", arm, "ok", True, {"c1": True}) for arm in ("cold", "mandated")]
        + [RecordRow("m", "s", "c", "cold", "error", None, error_kind="api")]
    )
    text = markdown(seed)
    assert "## Counts (scored records / error records)" in text
    assert "| m | 1 / 1 | 1 / 0 |" in text and "memory" not in text
    assert seed.layers == {} and seed.tool_use == [] and seed.memory == []


# --------------------------------------------------------------------------- the outputs


def test_cvb_report_writes_every_output_and_reads_its_results_file_back(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = {ext: tmp_path / f"r.{ext}" for ext in ("md", "html", "json", "csv")}
    args = ["report", ms.RUN_ID, "--db", store, "--markdown", str(out["md"])]
    args += ["--html", str(out["html"]), "--json", str(out["json"]), "--csv", str(out["csv"])]
    assert cli.main(args) == 0
    md = out["md"].read_text()
    counts = md_rows(md, "## Counts (scored records / API errors / memory failures)")
    assert counts[1][1] == "3 / 1 / 0" and counts[2][5] == "3 / 0 / 1"
    assert "memory failures (the memory layer" in md
    assert "### Memory lookups by the model (memory-tool)" in md

    page = out["html"].read_text()
    assert "<li>API error records: <b>1</b></li><li>memory failures: <b>1</b></li>" in page
    assert f'data-curve="m-b · memory ({LAYER})"' in page  # the layer's series on the curve
    assert "Memory lookups by the model (memory-tool)" in page and "0.500 (1/2)" in page
    assert "1 memory failure</span>" in page  # in the accuracy table's cell
    assert f"<th>memory ({LAYER})</th>" in page

    data = json.loads(out["json"].read_text())
    recs = {(r["model"], r["scenario_id"], r["arm"], r["rep"]): r for r in data["records"]}
    failure = recs[("m-b", ms.S1, ms.MEMORY_20, 0)]
    assert failure["error_kind"] == "memory" and failure["memory"]["error"] == ms.FAILURE
    assert recs[("m-a", ms.S2, "cold", 1)]["error_kind"] == "api"
    assert recs[("m-a", ms.S2, ms.TOOL, 1)]["memory"] is None  # not a trace: not carried
    assert recs[("m-a", ms.S1, "cold", 0)]["memory"] is None
    tool = {u["model"]: u for u in data["memory_tool"]}
    assert tool["m-b"]["looked_up"] == 2 and tool["m-b"]["held_share"] == 0.5
    assert tool["m-b"]["when_looked_up"] == {"strict": 0.5, "ci95": [0.0, 1.0], "k": 1, "n": 2}
    assert tool["m-a"]["layer"] == LAYER and tool["m-a"]["trace_unavailable"] == 1

    # the file reports what the store reports (the unreadable trace is unavailable both ways)
    capsys.readouterr()
    assert cli.main(["report", str(out["json"])]) == 0
    from_file = capsys.readouterr().out
    for heading in (
        "## Strict accuracy",
        "## Counts (scored records / API errors / memory failures)",
        "### Memory layers versus memory size",
        "### Memory lookups by the model (memory-tool)",
    ):
        assert md_rows(from_file, heading) == md_rows(md, heading), heading


def test_names_from_layers_stay_text_in_every_report() -> None:
    hostile_trace = json.dumps(
        {
            "arm": "memory-tool",
            "layer": {"label": "x", "name": "<img src=x onerror=alert(1)>|*", "version": None},
            "calls": [],
        }
    )
    rows = [
        RecordRow("m", "s", "c", arm, "ok", True, {"c1": True}, memory=hostile_trace)
        for arm in ("mandated", "memory-tool")
    ]
    summary = summarize_rows(rows)
    md = markdown(summary)
    assert "<img" not in md and "&lt;img src=x onerror=alert\\(1\\)&gt;\\|\\*" in md
    page = html_report(summary, reference=None)
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;|*" in page


def test_a_results_file_with_a_bad_error_kind_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    record = {"model": "m", "scenario_id": "s", "category": "c", "arm": "memory", "rep": 0}
    record |= {"status": "error", "error_kind": "gremlins"}
    path.write_text(json.dumps({"format": "cvb-results/2", "records": [record]}))
    with pytest.raises(ResultsFileError, match=r"records\[0\]\.error_kind"):
        load_results_file(path)


# --------------------------------------------------------------------------- a real run


def test_the_traces_a_real_run_stores_read_into_every_report(
    tmp_path: Path, valid_text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's own traces (built-in bm25, a scripted endpoint that calls the tool)
    read, name the layer and fill the tool-use figures: the reader and the writer agree."""
    from fake_openai import FakeOpenAI
    from test_runner import COMPLIANT, KEY, KEY_VAR, execute, options, write_scenarios

    from cvb_engine import queries as q

    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv("CVB_ENDPOINTS", str(tmp_path / "no-endpoints.json"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("CVB_LAYER_STATE", str(tmp_path / "layers"))
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, per_category=1, categories=["library-choice"])
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    arms = ["mandated", "memory", "memory@load=5", "memory-tool"]
    with FakeOpenAI(["m-a"], reply=lambda _request: COMPLIANT, tool_rounds=1) as server:
        assert execute(options(server.base_url, scenarios, db, arms=arms)).status == "finished"
    with Session(get_engine(db)) as session:
        summary = db_summary(session, ["r1"])
        cell = q.cell_records(session, "r1", "m-a", "library-choice-1", 0)
    assert summary.layers == dict.fromkeys(arms[1:], summary.layers["memory"])
    assert summary.layers["memory"].startswith("bm25 ")  # its own name and version
    (use,) = summary.tool_use
    assert (use.n, use.unavailable, use.looked, use.calls, use.lookups) == (1, 0, 1, 1, 1)
    assert {(m.series, m.load) for m in summary.memory if m.kind == "memory"} == {
        ("memory", 0),
        ("memory", 5),
    }
    prompt, tool = cell["memory"].memory, cell["memory-tool"].memory
    assert prompt is not None and prompt.calls[0].source == "prompt"
    assert prompt.calls[0].context is not None and prompt.calls[0].query
    assert tool is not None and tool.looked_up and tool.tool_calls[0].query
    assert cell["mandated"].memory is None and not cell["mandated"].memory_unreadable
