"""The studio for the memory-layer arms (README: Bring your own memory layer), driven through Streamlit's AppTest.

Results: a store holding the seed arms beside ``memory``, ``memory@load=20`` and
``memory-tool`` with their memory traces, one API error, one memory failure and
one unreadable trace (``tests/memory_store.py``, figures counted by hand there):
the overview counts memory failures apart, the Memory view draws each layer's
series and the tool-use table, Side by side shows what the layer gave each
record above its code. Run: the layer builder makes ``memory@command=...``
variants that join the run's arms, and probes real layers (the built-in bm25,
and ``python -m cvb_engine.memory_layers.bm25`` as a command).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_support import assert_inert, shown
from streamlit.testing.v1 import AppTest
from test_results_page import decode, figures
from test_run_page import bodies, click, open_page, run, studio  # noqa: F401  (a fixture)

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

import memory_store as ms  # noqa: E402
from conftest import VALID_SCENARIO  # noqa: E402

from cvb_engine.store import dispose_engines  # noqa: E402

APP = TESTS.parent / "studio" / "streamlit_app.py"
LAYER = "bm25 0.3.16+cvb.1"
BM25_COMMAND = f"{sys.executable} -m cvb_engine.memory_layers.bm25"


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    tmp = tmp_path_factory.mktemp("memory-layers")
    scenarios = ms.write_scenarios(tmp / "scenarios", VALID_SCENARIO)
    url = f"sqlite:///{tmp / 'cvb.db'}"
    ms.fill(url, VALID_SCENARIO)
    dispose_engines()
    return url, scenarios


@pytest.fixture
def store(filled: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("CVB_DATABASE_URL", filled[0])
    monkeypatch.setenv("CVB_SCENARIOS", str(filled[1]))
    yield
    dispose_engines()


def results(view: str, **state: object) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.switch_page("app_pages/results.py")
    at.session_state["results_runs"] = [ms.RUN_ID]
    at.session_state["results_view"] = view
    for key, value in state.items():
        at.session_state[key] = value
    return run(at)


def everything(at: AppTest) -> list[str]:
    """Every Markdown body of the page, expander labels among them."""
    return [*bodies(at), *(str(e.label) for e in at.expander)]


def column(at: AppTest, arm_heading: str) -> list[str]:
    """The Markdown bodies from the heading of one arm's column to the next heading."""
    values = [str(m.value) for m in at.markdown]
    start = next(i for i, v in enumerate(values) if v.startswith("#### ") and arm_heading in v)
    out = []
    for v in values[start + 1 :]:
        if v.startswith("#### "):
            break
        out.append(shown(v))
    return out


# --------------------------------------------------------------------------- Results


def test_overview_counts_memory_failures_apart_and_names_layers(store: None) -> None:
    at = results("Overview")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["API errors · memory failures"] == "1 · 1"
    page = "\n".join(shown(b) for b in bodies(at))
    assert "1 error record(s) (API failures" in page and "1 memory failure(s)" in page
    acc = next(
        d.value for d in at.dataframe if "gap (mandated − incentivized) [95% CI]" in d.value.columns
    )
    row = acc[acc["model"] == "m-b"].iloc[0]
    assert row["memory@load=20 n"] == "0/3 · 1 memory failure"
    assert row["cold n"] == "0/4"
    assert abs(row["memory-tool"] - 0.25) < 1e-9
    bars = next(
        f for f in figures(at) if "Strict accuracy per model" in f["layout"]["title"]["text"]
    )
    assert f"memory ({LAYER})" in {t["name"] for t in bars["data"] if t["type"] == "bar"}


def test_memory_view_draws_each_layer_series_and_the_tool_use_table(store: None) -> None:
    at = results("Memory")
    curve = next(f for f in figures(at) if "memory size" in f["layout"]["title"]["text"])
    lines = {t["name"]: t for t in curve["data"] if t.get("mode") == "lines+markers"}
    assert set(lines) == {f"m-a · memory ({LAYER})", f"m-b · memory ({LAYER})"}
    mb = lines[f"m-b · memory ({LAYER})"]
    assert decode(mb["x"]) == [0, 20] and decode(mb["y"]) == [0.5, 0.0]
    assert any(t.get("fill") == "toself" for t in curve["data"])  # CI bands
    tables = {tuple(d.value.columns): d.value for d in at.dataframe}
    layer = tables[("model", "arm", "layer", "load 0", "load 20")]
    assert list(layer["layer"]) == [LAYER] * 4
    use = next(v for k, v in tables.items() if "looked up" in k)
    mb_use = use[use["model"] == "m-b"].iloc[0]
    assert mb_use["looked up"] == "0.500 (2/4)"
    assert mb_use["lookups holding a constraint"] == "0.500 (1/2)"
    assert mb_use["strict: looked up"] == "0.500 [0.000, 1.000] (1/2)"
    assert mb_use["strict: did not look"] == "0.000 [0.000, 0.000] (0/2)"
    ma_use = use[use["model"] == "m-a"].iloc[0]
    assert ma_use["trace unavailable"] == "1" and ma_use["records"] == "3"


def test_side_by_side_shows_the_context_the_tool_calls_and_a_memory_failure(store: None) -> None:
    at = results(
        "Side by side",
        results_sbs_model="m-b",
        results_sbs_scenario=ms.S1,
        results_sbs_rep=0,
    )
    # memory: the layer and its context, above the code
    memory = column(at, f"memory \\({LAYER}")
    assert memory[0] == f"**Memory layer:** {LAYER} · builtin"
    codes = [c.value for c in at.code]
    assert ms.CONTEXT in codes
    context = next(e for e in at.expander if str(e.label).startswith("Context the layer returned"))
    assert "(83 characters)" in context.label and context.proto.expanded  # short: open
    # memory@load=20: a memory failure, with the layer's message, never an API error
    errors = [str(e.value) for e in at.error]
    assert any("memory failure, neither an API failure nor a violation" in e for e in errors)
    assert not any("endpoint said" in e for e in errors)
    assert ms.FAILURE in codes
    assert "memory failure: not scored" in "\n".join(h.value for h in at.html)
    # memory-tool: the call, its query and result as text, whether it held a constraint
    label = next(str(e.label) for e in at.expander if str(e.label).startswith("Round 1"))
    assert shown(label) == (
        f"Round 1 · search_project_memory: {ms.HOSTILE_QUERY} · 4 ms · "
        "no constraint of this scenario"
    )
    assert "- \\x1b[31mred\\x1b[0m <script>alert(1)</script> [click](http://evil.test)" in codes
    # where the query shows, it is inert (the page's own verdicts are Markdown on purpose)
    assert_inert([b for b in everything(at) if "evil" in b], ms.HOSTILE_QUERY)
    captions = "\n".join(str(c.value) for c in at.caption)
    assert "1 tool call in 1 round · 0 brought back a constraint of this scenario" in captions


def test_side_by_side_says_when_the_model_never_looked_and_when_a_trace_is_unavailable(
    store: None,
) -> None:
    at = results(
        "Side by side", results_sbs_model="m-a", results_sbs_scenario=ms.S2, results_sbs_rep=0
    )
    assert any("never looked memory up" in str(i.value) for i in at.info)
    at = results(
        "Side by side", results_sbs_model="m-a", results_sbs_scenario=ms.S2, results_sbs_rep=1
    )
    assert any("memory trace of this record is unavailable" in str(w.value) for w in at.warning)
    badges = "\n".join(h.value for h in at.html)  # this cell's cold record is the API error
    assert "API error: not scored" in badges and "memory failure" not in badges
    at = results(
        "Side by side", results_sbs_model="m-b", results_sbs_scenario=ms.S2, results_sbs_rep=0
    )
    labels = [shown(str(e.label)) for e in at.expander if str(e.label).startswith("Round")]
    assert labels == [
        "Round 1 · search_project_memory: no query · 0 ms · ✗ failed",
        "Round 2 · search_project_memory: timeout policy · 4 ms · holds timeout-set",
    ]
    assert "{not json" in [c.value for c in at.code]  # the refused call's raw arguments


# --------------------------------------------------------------------------- Run


@pytest.fixture
def layer_state(studio: Path, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    monkeypatch.setenv("CVB_LAYER_STATE", str(studio / "layers"))
    return studio


def terminal_command(at: AppTest) -> str:
    return next(c.value for c in at.code if c.value.startswith("cvb run"))


def test_the_layer_builder_adds_command_layer_variants_and_probes_them(layer_state: Path) -> None:
    at = open_page()
    at.radio(key="run_layer_transport").set_value("Command")
    run(at)
    at.text_input(key="run_layer_command").input(BM25_COMMAND)
    at.multiselect(key="run_layer_kinds").set_value(["memory", "memory-tool"])
    at.multiselect(key="run_layer_loads").set_value([0, 10])
    run(at)
    at.number_input(key="run_layer_rounds").set_value(2)  # enabled once memory-tool is chosen
    run(at)
    expected = [
        f"memory@command={BM25_COMMAND}",
        f"memory@command={BM25_COMMAND},load=10",
        f"memory-tool@command={BM25_COMMAND},rounds=2",
        f"memory-tool@command={BM25_COMMAND},load=10,rounds=2",
    ]
    preview = next(shown(str(c.value)) for c in at.caption if "These settings give" in c.value)
    assert preview == "These settings give: " + ", ".join(expected)
    assert "--arms cold,mandated,incentivized --runs" in terminal_command(at)  # not added yet

    click(at, "run_layer_add")
    assert any("Added 4 arms to the run" in str(s.value) for s in at.success)
    command = terminal_command(at)
    assert "'cold,mandated,incentivized," + ",".join(expected) + "'" in command
    assert any("× 7 arms ×" in str(m.value) for m in at.markdown)  # the call count follows

    click(at, "run_layer_probe_button")
    answered = [shown(str(s.value)) for s in at.success if "The layer answered" in s.value]
    assert answered and "bm25 0.3.16+cvb.1 (command): ingest" in answered[0]
    assert (layer_state / "layers" / "studio-probe").is_dir()  # the command kept its index

    click(at, f"run_layer_remove_{expected[0]}")
    assert f"'cold,mandated,incentivized,{expected[1]}," in terminal_command(at)


def test_probing_the_builtin_layer_and_a_layer_that_fails(layer_state: Path) -> None:
    at = click(open_page(), "run_layer_probe_button")
    assert any("The layer answered (memory): bm25" in shown(str(s.value)) for s in at.success)

    at.radio(key="run_layer_transport").set_value("Command")
    run(at)
    at.text_input(key="run_layer_command").input("./no-such-layer.py --flag")
    run(at)
    at = click(at, "run_layer_probe_button")
    failed = [shown(str(e.value)) for e in at.error if "Probe failed" in e.value]
    assert failed and "cannot start './no-such-layer.py': no such file" in failed[0]
    assert not at.exception

    at.text_input(key="run_layer_command").input("python -c 'print(1)',x")
    run(at)
    assert any("cannot contain a comma" in str(w.value) for w in at.warning)
    assert at.button(key="run_layer_add").disabled


def test_a_url_layer_takes_a_key_variable_name_and_says_whether_it_is_set(
    layer_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page()
    at.radio(key="run_layer_transport").set_value("URL (HTTP)")
    run(at)
    at.text_input(key="run_layer_url").input("http://127.0.0.1:9")
    at.text_input(key="run_layer_key_env").input("HOME")
    run(at)
    assert any("cannot be used" in str(e.value) and "HOME" in e.value for e in at.error)
    assert at.button(key="run_layer_add").disabled  # never sent to a server as a key

    monkeypatch.delenv("CVB_TEST_LAYER_API_KEY", raising=False)
    at.text_input(key="run_layer_key_env").input("CVB_TEST_LAYER_API_KEY")
    run(at)
    assert any("is not set in the studio's environment" in str(w.value) for w in at.warning)
    monkeypatch.setenv("CVB_TEST_LAYER_API_KEY", "sk-layer-LeakCanary-91c2")
    run(at)
    assert any("`CVB_TEST_LAYER_API_KEY` is set" in str(s.value) for s in at.success)
    click(at, "run_layer_add")
    assert "memory@url=http://127.0.0.1:9,key_env=CVB_TEST_LAYER_API_KEY" in terminal_command(at)
    at = click(at, "run_layer_probe_button")
    failed = [shown(str(e.value)) for e in at.error if "Probe failed" in e.value]
    assert failed and "cannot connect to http://127.0.0.1:9" in failed[0]
    page = json.dumps([*everything(at), *(c.value for c in at.code)])
    assert "LeakCanary" not in page  # the key's value is never on the page
