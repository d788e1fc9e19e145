"""The Results page, driven through Streamlit's AppTest over a store filled by a real run.

The run is real: :class:`cvb_engine.runner.BenchmarkRun` sends every cell over
HTTP to the loopback server ``tests/fake_openai.py``, whose replies depend on the
arm (cold violates, mandated complies, incentivized forgets the timeout for one
model on some scenarios), and one cell fails with a 500 and becomes an error
record. The page's numbers are then compared with ``cvb report RUN_ID``.

``fill_store`` is also used by the browser test (``test_results_browser.py``).
"""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
import re
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from cvb_engine import cli
from cvb_engine.arms import build_messages
from cvb_engine.prompts import messages_sha256
from cvb_engine.runner import BenchmarkRun, RunOptions
from cvb_engine.safe_text import csv_cell
from cvb_engine.scenario import ARMS, CANARY, CVB_CATEGORIES, load_library
from cvb_engine.store import dispose_engines

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "studio" / "streamlit_app.py"
sys.path.insert(0, str(REPO / "tests"))

from fake_openai import FakeOpenAI, FaultPlan  # noqa: E402

KEY_VAR = "CVB_TEST_RESULTS_KEY"
RUN_ID = "results-r1"
RUN_ID_B = "results-r2"
GOOD_FOR_B = {"concurrency-1", "encoding-io-1", "error-handling-1"}
ERROR_CELL = ("m-a", "security-1", "cold")
TIMEOUT_S = 30

SCENARIO = textwrap.dedent(
    f"""\
    id: SID
    version: 1
    category: CATEGORY
    title: Fetch JSON with retries (TICKET)
    canary: {CANARY}
    task: |
      Write a Python function fetch_json(url, retries=3) that downloads a URL, retries on
      server errors and returns the parsed JSON (ticket TICKET).
    constraints:
      - id: httpx-not-requests
        text: >-
          The team standardized on httpx after requests caused the March socket-exhaustion incident.
        checks:
          - kind: regex
            forbid: '(?m)^\\s*(import requests|from requests\\b)'
          - kind: regex
            require: '\\bhttpx\\.'
        samples:
          violating:
            - "import requests\\nrequests.get(url)"
            - "from requests import get\\nget(url)"
            - "import requests as r\\nr.get(url)"
          compliant:
            - "import httpx\\nhttpx.get(url)"
            - "import httpx\\nwith httpx.Client() as c:\\n    c.get(url)"
            - "import httpx\\n\\ndef f(u):\\n    return httpx.get(u).json()"
      - id: timeout-set
        text: The gateway team measured that calls without a timeout caused the 2025 stalls.
        checks:
          - kind: regex
            require: 'timeout\\s*='
        samples:
          violating: ["httpx.get(url)", "httpx.get(url, follow_redirects=True)", "c.get(u)"]
          compliant: ["httpx.get(url, timeout=5)", "httpx.Client(timeout=10)", "get(u, timeout = 3)"]
    """
)


def _reply(client: str, call: str) -> str:
    return (
        f"Here is the function.\n\n```python\nimport time\n\nimport {client}\n\n\n"
        "def fetch_json(url, retries=3):\n"
        '    """Download url and return its JSON body, retrying on server errors."""\n'
        "    for attempt in range(retries):\n"
        f"        response = {call}\n"
        "        if response.status_code < 500:\n"
        "            response.raise_for_status()\n"
        "            return response.json()\n"
        "        time.sleep(2**attempt)\n"
        '    raise RuntimeError(f"gave up after {retries} attempts")\n```\n'
    )


COMPLIANT = _reply("httpx", "httpx.get(url, timeout=5)")
PARTIAL = _reply("httpx", "httpx.get(url)")  # forgets the timeout
VIOLATING = _reply("requests", "requests.get(url)")  # requests, and no timeout


@dataclass(frozen=True)
class Filled:
    """A store holding one or two finished runs, and where its scenarios are."""

    db_url: str
    scenarios: Path
    run_ids: tuple[str, ...]


def write_scenarios(root: Path, per_category: int = 1) -> list[str]:
    ids = []
    for cat in CVB_CATEGORIES:
        for i in range(1, per_category + 1):
            sid = f"{cat}-{i}"
            text = (
                SCENARIO.replace("SID", sid)
                .replace("CATEGORY", cat)
                .replace("TICKET", f"{cat[:3].upper()}-{100 + i}")
            )
            (root / cat).mkdir(parents=True, exist_ok=True)
            (root / cat / f"{sid}.yaml").write_text(text, encoding="utf-8")
            ids.append(sid)
    return sorted(ids)


def _policy(scenarios: Path, *, second: bool) -> Any:
    index = {
        messages_sha256(build_messages(item.scenario, arm)): (sid, arm)
        for sid, item in load_library(scenarios).items()
        for arm in ARMS
    }

    def reply(request: dict[str, Any]) -> str:
        sid, arm = index[messages_sha256(request["messages"])]
        model = request["model"]
        if arm == "cold":
            return COMPLIANT if (model == "m-a" and sid == "library-choice-1") else VIOLATING
        if arm == "mandated" or model == "m-a" or sid in GOOD_FOR_B:
            return COMPLIANT
        # The second run (a "new prompt version") recovers two more scenarios for m-b.
        if second and sid in {"library-choice-1", "logging-testing-1"}:
            return COMPLIANT
        return PARTIAL

    return reply


def fill_store(tmp_path: Path, *, two_runs: bool = False, reps: int = 2) -> Filled:
    """Run the matrix (m-a, m-b × 7 scenarios × 3 arms × ``reps``) against FakeOpenAI."""
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios)
    db_url = f"sqlite:///{tmp_path / 'cvb.db'}"
    library = load_library(scenarios)
    error_messages = build_messages(library[ERROR_CELL[1]].scenario, ERROR_CELL[2])
    faults = FaultPlan(per_request={(ERROR_CELL[0], messages_sha256(error_messages)): ["500"]})
    run_ids = (RUN_ID, RUN_ID_B) if two_runs else (RUN_ID,)
    import os

    os.environ[KEY_VAR] = "sk-results-test"
    for i, run_id in enumerate(run_ids):
        with FakeOpenAI(
            models=["m-a", "m-b"],
            reply=_policy(scenarios, second=i == 1),
            faults=faults if i == 0 else None,
        ) as fake:
            options = RunOptions(
                scenarios=str(scenarios),
                models=["m-a", "m-b"],
                runs=reps,
                base_url=fake.base_url,
                api_key_env=KEY_VAR,
                db=db_url,
                run_id=run_id,
                concurrency=6,
                timeout_s=10.0,
                max_attempts=1,
            )
            outcome = asyncio.run(BenchmarkRun(options).execute())
        assert outcome.status == "finished"
    dispose_engines()
    return Filled(db_url, scenarios, run_ids)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    return fill_store(tmp_path_factory.mktemp("results"), two_runs=True)


@pytest.fixture
def store(filled: Filled, monkeypatch: pytest.MonkeyPatch) -> Iterator[Filled]:
    monkeypatch.setenv("CVB_DATABASE_URL", filled.db_url)
    monkeypatch.setenv("CVB_SCENARIOS", str(filled.scenarios))
    yield filled
    dispose_engines()


def start(run_ids: tuple[str, ...] = (RUN_ID,), view: str | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.switch_page("app_pages/results.py")
    at.session_state["results_runs"] = list(run_ids)
    if view is not None:
        at.session_state["results_view"] = view
    return run(at)


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def table(at: AppTest, first_col: str, contains: str) -> Any:
    for d in at.dataframe:
        df = d.value
        if first_col in df.columns and any(contains in str(c) for c in df.columns):
            return df
    raise AssertionError(f"no table with columns {first_col!r} and {contains!r}")


def html(at: AppTest) -> str:
    return "\n".join(h.value for h in at.html)


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    for kind in ("success", "error", "warning", "info"):
        parts += [e.value for e in at.get(kind)]
    return "\n".join(str(p) for p in parts)


def decode(values: Any) -> list[Any]:
    """A plotly array from a figure spec: a plain list, or plotly 7's base64 ``bdata``."""
    if isinstance(values, dict) and "bdata" in values:
        import numpy as np

        return list(np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]))
    return list(values)


def figures(at: AppTest) -> list[dict[str, Any]]:
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def report_markdown(db_url: str, run_id: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert cli.main(["report", run_id, "--db", db_url]) == 0
    return capsys.readouterr().out


def md_table(md: str, heading: str) -> list[list[str]]:
    """The rows (cells as text) of the first Markdown table after ``## heading``."""
    section = md.split(f"## {heading}", 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            if set(line.replace("|", "").strip()) <= {"-"}:
                continue
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    return rows


# --------------------------------------------------------------------------- tests


def test_overview_numbers_equal_cvb_report(
    store: Filled, capsys: pytest.CaptureFixture[str]
) -> None:
    md = report_markdown(store.db_url, RUN_ID, capsys)
    at = start()

    strict_md = md_table(md, "Strict accuracy")
    header, body = strict_md[0], strict_md[1:]
    acc = table(at, "model", "gap")
    assert list(acc["model"]) == [row[0] for row in body]
    for row in body:
        shown = acc[acc["model"] == row[0]].iloc[0]
        for arm, cell in zip(header[1:4], row[1:4], strict=True):
            assert f"{shown[arm]:.3f}" == cell, (row[0], arm)
        assert shown["gap (mandated − incentivized) [95% CI]"] == row[4]

    cons_md = md_table(md, "Per-constraint accuracy")
    # the accuracy table, then the per-constraint one: both drawn from the reports' tables
    cons = [d.value for d in at.dataframe if {"model", "cold"} <= set(d.value.columns)][1]
    for row in cons_md[1:]:
        shown = cons[cons["model"] == row[0]].iloc[0]
        for arm, cell in zip(cons_md[0][1:], row[1:], strict=True):
            assert f"{shown[arm]:.3f}" == cell

    counts_md = md_table(md, "Counts (scored records / error records)")
    for row in counts_md[1:]:
        shown = acc[acc["model"] == row[0]].iloc[0]
        for arm, cell in zip(counts_md[0][1:], row[1:], strict=True):
            k, n, errors = re.fullmatch(r"(\d+)/(\d+)(?: · (\d+) err)?", shown[f"{arm} n"]).groups()
            assert f"{n} / {errors or 0}" == cell, (row[0], arm)
            assert f"{int(k) / int(n):.3f}" == f"{shown[arm]:.3f}"

    # The charts draw the same numbers: bar heights per arm, the gap and its CI.
    figs = figures(at)
    bars = next(f for f in figs if "Strict accuracy per model" in f["layout"]["title"]["text"])
    for trace in bars["data"]:
        if trace["type"] != "bar":
            continue
        col = header.index(trace["name"])
        for model, y in zip(decode(trace["x"]), decode(trace["y"]), strict=True):
            row = next(r for r in body if r[0] == model)
            assert f"{y:.3f}" == row[col]
    gap = next(f for f in figs if "Gap" in f["layout"]["title"]["text"])
    trace = gap["data"][0]
    for model, y in zip(decode(trace["x"]), decode(trace["y"]), strict=True):
        row = next(r for r in body if r[0] == model)
        assert row[4].replace("−", "-").startswith(f"{y:+.3f}".replace("+0.000", "0.000"))

    # One error record (the 500), counted apart.
    assert "1 error record" in texts(at)
    # The published figures are beside ours, labelled as published.
    published = next(f for f in figs if "Published" in f["layout"]["title"]["text"])
    assert all(t["name"].startswith("published") for t in published["data"])
    assert "2026-07-30" in published["layout"]["title"]["text"]


def test_side_by_side_shows_three_columns_with_the_violating_check_named(store: Filled) -> None:
    at = start(view="Side by side")
    at.selectbox(key="results_sbs_scenario").select("security-1")
    at.selectbox(key="results_sbs_model").select("m-b")
    at.selectbox(key="results_sbs_rep").select(0)
    run(at)
    headers = [m.value for m in at.markdown if m.value.startswith("#### ")]
    assert headers[:3] == ["#### cold", "#### mandated", "#### incentivized"], headers
    page = html(at)
    # cold imported requests: the span is marked and named by the check that caught it
    assert 'data-check="httpx-not-requests/regex-0"' in page
    assert '<mark class="v"' in page
    badges = texts(at) + page
    assert "timeout-set" in badges and "violated" in badges and "honored" in badges
    # the diff between two arms and the prompts are there too
    at.selectbox(key="results_sbs_diff_a").select("cold")
    at.selectbox(key="results_sbs_diff_b").select("incentivized")
    run(at)
    diff = next(c.value for c in at.code if c.language == "diff")
    assert "-import requests" in diff and "+import httpx" in diff
    prompts = "\n".join(c.value for c in at.code)
    assert "Project memory" in prompts and "Requirements." in prompts


def test_breakdowns_filters_and_only_when_ordered(store: Filled) -> None:
    at = start(view="Breakdowns")
    heat = [f for f in figures(at) if f["data"][0]["type"] == "heatmap"]
    assert len(heat) == 4  # three arms and the gap
    ordered = table(at, "constraint", "mandated")
    # m-b honors the timeout when ordered and forgets it as memory on 4 of 7 scenarios
    assert set(ordered["constraint"]) == {"timeout-set"}
    assert set(ordered["model"]) == {"m-b"} and len(ordered) == 4
    at.multiselect(key="results_f_models").set_value(["m-a"])
    run(at)
    assert len(table(at, "scenario", "gap")) == 7
    assert all(m == "m-a" for m in table(at, "scenario", "gap")["model"])


def test_compare_runs_shows_per_model_deltas(store: Filled) -> None:
    at = start(run_ids=(RUN_ID, RUN_ID_B), view="Compare runs")
    deltas = table(at, "model", "Δ")
    row = deltas[(deltas["model"] == "m-b") & (deltas["arm"] == "incentivized")].iloc[0]
    assert (row["A"], row["B"]) == (pytest.approx(6 / 14), pytest.approx(10 / 14))
    assert row["Δ"] == pytest.approx(4 / 14)
    gap = deltas[(deltas["model"] == "m-b") & (deltas["arm"] == "gap")].iloc[0]
    assert gap["Δ"] == pytest.approx(-4 / 14)
    assert any(f["layout"]["title"]["text"].startswith(RUN_ID_B) for f in figures(at))


def capture_downloads(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """File name -> the deferred callable each download button registers (filled on run)."""
    from streamlit.runtime.media_file_manager import MediaFileManager

    deferred: dict[str, Any] = {}
    original = MediaFileManager.add_deferred

    def capture(self: Any, data_callable: Any, mimetype: Any, coordinates: str, **kw: Any) -> str:
        deferred[kw.get("file_name") or coordinates] = data_callable
        return original(self, data_callable, mimetype, coordinates, **kw)

    monkeypatch.setattr(MediaFileManager, "add_deferred", capture)
    return deferred


def test_exports_produce_valid_files(
    store: Filled, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each download button builds its file on click (a deferred callable): call them here."""
    deferred = capture_downloads(monkeypatch)
    at = start(view="Exports")
    labels = [d.proto.label for d in at.get("download_button")]
    assert labels == ["Markdown report", "Results file (JSON)", "Records (CSV)", "HTML report"]
    files = {name: fn() for name, fn in deferred.items()}
    assert set(files) == {f"{RUN_ID}.md", f"{RUN_ID}.json", f"{RUN_ID}.csv", f"{RUN_ID}.html"}

    md = report_markdown(store.db_url, RUN_ID, capsys)
    for heading in ("Strict accuracy", "Per-constraint accuracy", "Counts (scored records"):
        assert md_table(files[f"{RUN_ID}.md"], heading) == md_table(md, heading), heading
    data = json.loads(files[f"{RUN_ID}.json"])
    assert data["format"] == "cvb-results/2" and data["run"]["id"] == RUN_ID
    assert len(data["records"]) == 84
    rows = list(csv.DictReader(io.StringIO(files[f"{RUN_ID}.csv"])))
    assert len(rows) == 84 and sum(r["status"] == "error" for r in rows) == 1
    page = files[f"{RUN_ID}.html"]
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page.lower()
    assert page.count("<svg") >= 3 and "PUBLISHED" in page
    assert "+0.571 [+0.143, +0.857]" in page  # the gap and its CI, as in cvb report


def test_ivr_view_appears_with_ivr_problems(
    filled: Filled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records with a stated-test verdict (IVR problems) add the IVR view, next to the paper."""
    import shutil
    import sqlite3

    db = tmp_path / "ivr.db"
    shutil.copy(filled.db_url.removeprefix("sqlite:///"), db)
    with sqlite3.connect(db) as con:  # m-b's mandated and incentivized records passed C1
        con.execute(
            "UPDATE record SET stated_passed = 1 WHERE run_id = ? AND model = 'm-b' "
            "AND arm != 'cold'",
            (RUN_ID,),
        )
    monkeypatch.setenv("CVB_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("CVB_SCENARIOS", str(filled.scenarios))
    at = start(view="IVR")
    fig = next(f for f in figures(at) if "Intent Violation Rate" in f["layout"]["title"]["text"])
    bars = {t["name"]: t for t in fig["data"]}
    assert decode(bars["IVR · mandated"]["y"]) == [0.0]
    assert decode(bars["IVR · incentivized"]["y"]) == [pytest.approx(4 / 7)]
    assert "published" in bars["Published: IVR paper"]["name"].lower()
    page = texts(at) + html(at)
    ivr = next(d.value for d in at.dataframe if "IVR [95% CI]" in d.value.columns)
    row = ivr[(ivr["model"] == "m-b") & (ivr["arm"] == "incentivized")].iloc[0]
    assert row["stated-test pass rate"] == "100.0% (14/14)"
    assert row["IVR [95% CI]"].startswith("0.571 [")
    published = next(d.value for d in at.dataframe if "model (published)" in d.value.columns)
    assert "Claude Sonnet 4.6" in set(published["model (published)"])
    assert "PUBLISHED" in page
    dispose_engines()


# --------------------------------------------------------------------------- answer outcomes

OUTCOMES_RUN = "results-outcomes"
# Markup and Markdown in the reasoning: it must reach the page as plain text.
REASONING = "Use <b>httpx</b> with a *timeout*, not requests. <script>alert(1)</script>"
UNPARSEABLE = "```python\nimport httpx\n\n\ndef fetch_json(url:\n    return httpx.get(url)\n```\n"
REFUSAL = "I'm sorry, but I can't help with that."
LIMITATION = "A timeout set on a shared Client is not seen by this regex."
OLDER_RULES_CELL = ("library-choice-1", "mandated")


def _message(content: str, finish: str = "stop", **extra: Any) -> dict[str, Any]:
    """A whole chat completion (FakeOpenAI sends a dict reply as it is)."""
    return {
        "id": "chatcmpl-outcomes",
        "object": "chat.completion",
        "created": 0,
        "model": "m-o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **extra},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


@pytest.fixture(scope="module")
def outcomes_filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    """One model, 7 scenarios, 3 arms, one repetition, stored by a real run.

    cold refuses (no code) everywhere; mandated complies, with its reasoning in a
    separate field; incentivized writes code that does not parse on security-1, is
    cut off by max_tokens after complete, compliant code on concurrency-1, and forgets
    the timeout elsewhere. One record (library-choice-1, mandated) is then marked as
    scored before outcomes existed (scoring_version NULL, as a migrated store holds it).
    """
    import os
    import sqlite3

    tmp_path = tmp_path_factory.mktemp("outcomes")
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios)
    for path in scenarios.glob("*/*.yaml"):  # timeout-set states what its check cannot see
        text = path.read_text(encoding="utf-8")
        marker = "    text: The gateway team measured"
        line = next(x for x in text.splitlines() if x.startswith(marker))
        path.write_text(
            text.replace(line, f"{line}\n    limitations: {LIMITATION}"), encoding="utf-8"
        )
    index = {
        messages_sha256(build_messages(item.scenario, arm)): (sid, arm)
        for sid, item in load_library(scenarios).items()
        for arm in ARMS
    }

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        sid, arm = index[messages_sha256(request["messages"])]
        if arm == "cold":
            return _message(REFUSAL)
        if arm == "mandated":
            return _message(COMPLIANT, reasoning_content=REASONING)
        if sid == "security-1":
            return _message(UNPARSEABLE)
        if sid == "concurrency-1":
            return _message(COMPLIANT, "length")
        return _message(PARTIAL)

    db = tmp_path / "cvb.db"
    db_url = f"sqlite:///{db}"
    os.environ[KEY_VAR] = "sk-results-test"
    with FakeOpenAI(models=["m-o"], reply=reply) as fake:
        options = RunOptions(
            scenarios=str(scenarios),
            models=["m-o"],
            runs=1,
            base_url=fake.base_url,
            api_key_env=KEY_VAR,
            db=db_url,
            run_id=OUTCOMES_RUN,
            concurrency=4,
            timeout_s=10.0,
            max_attempts=1,
        )
        assert asyncio.run(BenchmarkRun(options).execute()).status == "finished"
    dispose_engines()
    with sqlite3.connect(db) as con:
        con.execute(
            "UPDATE record SET scoring_version = NULL WHERE scenario_id = ? AND arm = ?",
            OLDER_RULES_CELL,
        )
    return Filled(db_url, scenarios, (OUTCOMES_RUN,))


@pytest.fixture
def outcomes_store(outcomes_filled: Filled, monkeypatch: pytest.MonkeyPatch) -> Iterator[Filled]:
    monkeypatch.setenv("CVB_DATABASE_URL", outcomes_filled.db_url)
    monkeypatch.setenv("CVB_SCENARIOS", str(outcomes_filled.scenarios))
    yield outcomes_filled
    dispose_engines()


def test_overview_shows_answer_outcomes_and_the_older_rules_banner(
    outcomes_store: Filled, capsys: pytest.CaptureFixture[str]
) -> None:
    at = start(run_ids=(OUTCOMES_RUN,))
    outcomes = table(at, "model", "unparseable")
    assert list(outcomes.columns) == [
        "model",
        "arm",
        "answered",
        "unparseable",
        "no code",
        "truncated",
        "strict among answered",
        "per-constraint among answered",
    ]
    rows = {r["arm"]: list(r)[2:] for _, r in outcomes.iterrows()}
    assert list(rows) == ["cold", "mandated", "incentivized"]
    assert rows["cold"] == ["0.000", "0.000", "1.000", "0.000", "–", "–"]
    assert rows["mandated"] == ["1.000", "0.000", "0.000", "0.000", "1.000 (7/7)", "1.000"]
    # 6 answered (one truncated, compliant; five without a timeout), 1 unparseable
    assert rows["incentivized"] == ["0.857", "0.143", "0.000", "0.143", "0.167 (1/6)", "0.583"]
    # the same rows as `cvb report`
    md_rows = md_table(
        report_markdown(outcomes_store.db_url, OUTCOMES_RUN, capsys), "Answer outcomes"
    )
    assert [list(r) for _, r in outcomes.iterrows()] == md_rows[1:]
    assert any(c.value.startswith("Outcome of each scored record") for c in at.caption)

    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("1 scored record(s) were judged by older scoring rules")
    assert "version 1;" in warnings[0] and "cvb score RUN_ID" in warnings[0]


def test_no_banner_when_every_record_is_judged_by_current_rules(store: Filled) -> None:
    at = start()
    assert not any("older scoring rules" in w.value for w in at.warning)


def test_side_by_side_shows_outcome_badges_and_the_reasoning_as_plain_text(
    outcomes_store: Filled,
) -> None:
    at = start(run_ids=(OUTCOMES_RUN,), view="Side by side")
    at.selectbox(key="results_sbs_scenario").select("concurrency-1")
    run(at)
    badges = html(at)
    assert '<span class="cvb-badge bad" data-outcome="no-code" title="answer outcome">no code' in (
        badges
    )
    assert badges.count('data-outcome="answered"') == 2  # mandated and incentivized
    assert badges.count('data-outcome="truncated"') == 1  # incentivized, cut at max_tokens
    assert "data-scoring" not in badges
    assert any("no code in the reply: honors none of 2" in m.value for m in at.markdown)
    # The reasoning: in a collapsed expander, as plain text (never HTML or Markdown).
    expanders = [e for e in at.expander if e.label.startswith("Reasoning")]
    assert len(expanders) == 1  # only mandated sent one
    assert not expanders[0].proto.expanded
    assert [c.value for c in expanders[0].code] == [REASONING]
    assert "<script" not in badges and "<b>httpx" not in badges
    assert not any("httpx" in m.value and "<b>" in m.value for m in at.markdown)

    at.selectbox(key="results_sbs_scenario").select("security-1")
    run(at)
    assert html(at).count('data-outcome="unparseable"') == 1
    at.selectbox(key="results_sbs_scenario").select(OLDER_RULES_CELL[0])
    run(at)
    page = html(at)
    assert page.count('data-scoring="1"') == 1
    assert "scoring v1 · older rules" in page


def test_exports_carry_the_scoring_versions_and_limitations(
    outcomes_store: Filled, monkeypatch: pytest.MonkeyPatch
) -> None:
    deferred = capture_downloads(monkeypatch)
    start(run_ids=(OUTCOMES_RUN,), view="Exports")
    md = deferred[f"{OUTCOMES_RUN}.md"]()
    assert "> **Judged by older rules.** 1 scored record(s)" in md
    assert "## Answer outcomes" in md and "## Limitations of the checks" in md
    assert f"- `concurrency-1` / `timeout-set`: {LIMITATION}" in md
    page = deferred[f"{OUTCOMES_RUN}.html"]()
    assert "Judged by older rules." in page and "1 scored record(s)" in page
    assert LIMITATION in page


@pytest.mark.parametrize(
    ("column", "value"),
    [
        pytest.param("model", '=HYPERLINK("http://evil")', id="model-equals"),
        pytest.param("error", "+1+1", id="error-plus"),
        pytest.param("finish_reason", "@SUM(A1)", id="finish-reason-at"),
        pytest.param("category", "\t=1", id="category-tab"),
        pytest.param("messages_sha256", "-2+3", id="sha-minus"),
    ],
)
def test_the_csv_export_neutralizes_formula_cells(
    filled: Filled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, column: str, value: str
) -> None:
    """The page's CSV comes from the engine's writer: a formula cell gets a leading quote."""
    import shutil
    import sqlite3

    db = tmp_path / "hostile.db"
    shutil.copy(filled.db_url.removeprefix("sqlite:///"), db)
    with sqlite3.connect(db) as con:
        con.execute(
            f"UPDATE record SET {column} = ? WHERE run_id = ? AND model = 'm-a'", (value, RUN_ID)
        )
    monkeypatch.setenv("CVB_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("CVB_SCENARIOS", str(filled.scenarios))
    deferred = capture_downloads(monkeypatch)
    try:
        start(view="Exports")
        rows = list(csv.DictReader(io.StringIO(deferred[f"{RUN_ID}.csv"](), newline="")))
    finally:
        dispose_engines()
    assert len(rows) == 84
    cells = [r[column] for r in rows]
    assert csv_cell(value) in cells and csv_cell(value).startswith("'") and value not in cells


def test_an_empty_store_says_how_to_get_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CVB_DATABASE_URL", f"sqlite:///{tmp_path / 'cvb.db'}")
    monkeypatch.setenv("CVB_SCENARIOS", str(tmp_path / "scenarios"))
    try:
        at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
        at.switch_page("app_pages/results.py")
        run(at)
        said = "\n".join(str(i.value) for i in at.info)
        assert "`cvb demo`" in said and "**Run** page" in said
        assert not at.get("plotly_chart") and not at.dataframe  # no empty charts
        assert at.get("page_link")  # to the Run page
    finally:
        dispose_engines()
