"""The Run page, driven through Streamlit's AppTest, launching real ``cvb run`` processes.

Each test points the studio at a temporary scenario folder (two shipped
scenarios), store and endpoint file, and at the loopback fake endpoint
(``tests/fake_openai.py``). Launches are real background processes; the page is
re-run while polling, as its live panel would refresh itself in a browser.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import delete
from sqlmodel import Session, col, select
from streamlit.testing.v1 import AppTest

from cvb_engine import monitor, score_code
from cvb_engine.arms import build_messages
from cvb_engine.endpoints import Endpoint, save_preset
from cvb_engine.prompts import messages_sha256
from cvb_engine.runner import BenchmarkRun, RunOptions
from cvb_engine.scenario import ARMS, load_library
from cvb_engine.store import (
    CheckOutcome,
    ConstraintResult,
    Record,
    Run,
    dispose_engines,
    get_engine,
)

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "studio" / "streamlit_app.py"
TESTS = REPO / "tests"
sys.path.insert(0, str(TESTS))

from fake_openai import FakeOpenAI, FaultPlan  # noqa: E402
from fake_openai import messages_sha256 as served_sha256  # noqa: E402
from markdown_support import HOSTILE, assert_inert, shown  # noqa: E402

KEY_VAR = "CVB_TEST_RUN_PAGE_KEY"
KEY = "sk-runpage-LeakCanary-7f3a9c2e41"  # distinctive: grep-able in any file
M1, M2 = "llama-3.1-8b-instant", "openai/gpt-oss-20b"  # both on the default preference list
SCENARIOS = {"http-client-choice": "library-choice", "shell-command-runner": "security"}


@pytest.fixture
def studio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two shipped scenarios, an empty store and endpoint file; the key variable is set."""
    for sid, category in SCENARIOS.items():
        (tmp_path / "scenarios" / category).mkdir(parents=True)
        shutil.copy(
            REPO / "scenarios" / category / f"{sid}.yaml",
            tmp_path / "scenarios" / category / f"{sid}.yaml",
        )
    monkeypatch.setenv("CVB_SCENARIOS", str(tmp_path / "scenarios"))
    monkeypatch.setenv("CVB_DATABASE_URL", f"sqlite:///{tmp_path / 'cvb.db'}")
    monkeypatch.setenv("CVB_ENDPOINTS", str(tmp_path / "endpoints.json"))
    monkeypatch.delenv("CVB_LOGS", raising=False)
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    yield tmp_path
    dispose_engines()


def db(tmp: Path) -> str:
    return f"sqlite:///{tmp / 'cvb.db'}"


# --------------------------------------------------------------------------- the page


def open_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.switch_page("app_pages/run.py")
    return run(at)


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def click(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click()
    return run(at)


def bodies(at: AppTest) -> list[str]:
    """The Markdown source of every element that renders Markdown."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    for kind in ("success", "error", "warning", "info"):
        parts += [e.value for e in at.get(kind)]
    return [str(p) for p in parts]


def texts(at: AppTest) -> str:
    """What those elements show (escapes resolved)."""
    return "\n".join(shown(p) for p in bodies(at))


def progress_text(at: AppTest) -> str:
    return "\n".join(p.proto.text for p in at.get("progress"))


def run_state(at: AppTest, run_id: str) -> str | None:
    """The state badge next to a run's title in the live panel."""
    values = [str(m.value) for m in at.markdown]
    for i, value in enumerate(values):
        if value.startswith(f"**{run_id}**") and i + 1 < len(values):
            badge = values[i + 1]  # :green-badge[:material/check_circle: finished]
            return badge.rsplit(": ", 1)[-1].rstrip("]") if "-badge[" in badge else None
    return None


def table_with(at: AppTest, column: str) -> pd.DataFrame:
    return next(t.value for t in at.table if column in t.value.columns)


def poll(at: AppTest, until: Callable[[AppTest], bool], what: str, timeout: float = 60) -> AppTest:
    """Re-run the page (as its live panel refreshes) until ``until`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run(at)
        if until(at):
            return at
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}:\n{texts(at)}\n{progress_text(at)}")


def only_run_id(tmp: Path) -> str:
    with Session(get_engine(db(tmp))) as session:
        [run_] = session.exec(select(Run)).all()
        return run_.id


def stored_cells(tmp: Path, run_id: str) -> list[tuple[str, str, str, int, str]]:
    with Session(get_engine(db(tmp))) as session:
        rows = session.exec(select(Record).where(Record.run_id == run_id)).all()
        return [(r.model, r.scenario_id, r.arm, r.rep, r.status) for r in rows]


def assert_no_key_anywhere(tmp: Path) -> None:
    """The key's value is in no file the studio or the run wrote (presets, logs, store)."""
    for path in tmp.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), f"the key leaked into {path}"


# --------------------------------------------------------------------------- the endpoint


def sample_replies(scenarios: Path) -> Callable[[dict[str, Any]], str]:
    """cold: a violating sample; mandated: a fully compliant one; incentivized: compliant
    for M1 only. So strict accuracy is 0 / 1 / 1 for M1 and 0 / 1 / 0 for M2."""
    library = load_library(scenarios)
    good: dict[str, str] = {}
    bad: dict[str, str] = {}
    for sid, item in library.items():
        samples = [s for c in item.scenario.constraints for s in c.samples.compliant]
        good[sid] = next(s for s in samples if score_code(item.scenario, s).strict)
        bad[sid] = item.scenario.constraints[0].samples.violating[0]
    index = {
        messages_sha256(build_messages(item.scenario, arm)): (sid, arm)
        for sid, item in library.items()
        for arm in ARMS
    }

    def reply(request: dict[str, Any]) -> str:
        sid, arm = index[served_sha256(request["messages"])]
        honors = arm == "mandated" or (arm == "incentivized" and request["model"] == M1)
        return f"```python\n{good[sid] if honors else bad[sid]}\n```"

    return reply


def request_of(scenarios: Path, model: str, sid: str, arm: str) -> tuple[str, str]:
    item = load_library(scenarios)[sid]
    return model, served_sha256(build_messages(item.scenario, arm))


def chats(server: FakeOpenAI) -> int:
    return sum(1 for e in server.log if e.path.endswith("/chat/completions"))


@pytest.fixture
def fake_process(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A slow fake endpoint as a process of its own: (base URL, its request log)."""
    served = tmp_path / "served.jsonl"
    proc = subprocess.Popen(
        [
            *(sys.executable, str(TESTS / "fake_openai.py"), "--port", "0"),
            *("--models", "m-slow", "--delay", "0.8", "--log", str(served)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), line
        yield line.split()[1], served
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- tests


def test_endpoints_add_edit_remove_and_key_messages(
    studio: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    presets = studio / "endpoints.json"
    at = open_page()
    unreachable = f"http://127.0.0.1:{closed_port()}/v1"

    # A new endpoint whose key variable is not set: saved, selected, and said plainly.
    at.text_input(key="run_ep_name").input("lab")
    at.text_input(key="run_ep_url").input(unreachable + "/")
    at.text_input(key="run_ep_key_env").input("LAB_UNSET_API_KEY")
    click(at, "run_ep_save")
    assert "Saved endpoint **lab**" in texts(at)
    assert at.selectbox(key="run_endpoint").value == "lab"
    saved = json.loads(presets.read_text())
    assert saved["lab"] == {
        "name": "lab",
        "base_url": unreachable,
        "api_key_env": "LAB_UNSET_API_KEY",
        "models": [],
    }
    warning = "\n".join(w.value for w in at.warning)
    assert "LAB_UNSET_API_KEY is not set in the studio's environment" in warning
    assert at.button(key="run_launch").disabled
    click(at, "run_probe_button")
    assert "Probe failed" in texts(at) and "LAB_UNSET_API_KEY is not set" in texts(at)

    # A key pasted where the variable's name goes: refused, not stored, not echoed, cleared.
    pasted = "sk-live-Abcdefghijklmnopqrstuvwx123456"
    at.selectbox(key="run_ep_edit").select("lab")
    run(at)
    assert at.text_input(key="run_ep_url").value == unreachable
    at.text_input(key="run_ep_key_env").input(pasted)
    click(at, "run_ep_save")
    assert "looks like a key itself" in texts(at)
    assert pasted not in texts(at) and pasted not in presets.read_text()
    assert at.text_input(key="run_ep_key_env").value == ""

    # Not a URL: refused with an example.
    at.text_input(key="run_ep_key_env").input("LAB_UNSET_API_KEY")
    at.text_input(key="run_ep_url").input("ftp://models.example")
    click(at, "run_ep_save")
    assert "Base URL: an http(s) URL" in texts(at)
    assert json.loads(presets.read_text())["lab"]["base_url"] == unreachable

    # Edit: a model list, which becomes the launch's default models.
    at.text_input(key="run_ep_url").input(unreachable)
    at.text_input(key="run_ep_models").input("alpha, beta,alpha")
    click(at, "run_ep_save")
    assert json.loads(presets.read_text())["lab"]["models"] == ["alpha", "beta"]
    assert at.multiselect(key="run_models").value == ["alpha", "beta"]
    assert "2 scenarios × 3 arms × 3 repetitions × 2 models = 36 calls" in texts(at)

    # With the variable set, the page says so; probing an unreachable server says that.
    monkeypatch.setenv("LAB_UNSET_API_KEY", "sk-whatever-value")
    run(at)
    assert "Key variable `LAB_UNSET_API_KEY` is set" in texts(at)
    assert not at.button(key="run_launch").disabled
    click(at, "run_probe_button")
    assert f"cannot reach {unreachable}" in texts(at)
    assert at.button(key="run_launch").disabled  # until a probe succeeds
    assert "The last probe of this endpoint failed" in texts(at)

    # Built-in endpoints cannot be removed; the user's can.
    at.selectbox(key="run_ep_edit").select("groq")
    run(at)
    assert at.button(key="run_ep_remove").disabled
    at.selectbox(key="run_ep_edit").select("lab")
    run(at)
    click(at, "run_ep_remove")
    assert "lab" not in json.loads(presets.read_text())
    assert "lab" not in at.selectbox(key="run_endpoint").options
    assert "sk-whatever-value" not in presets.read_text()


def test_probe_dry_run_launch_watch_and_retry_errors(studio: Path) -> None:
    scenarios = studio / "scenarios"
    # One cell answers HTTP 500 to every attempt, until the faults are lifted.
    faults = FaultPlan(
        per_request={request_of(scenarios, M2, "shell-command-runner", "mandated"): ["500"] * 5}
    )
    with FakeOpenAI(
        [M1, M2, "some-other-model"], reply=sample_replies(scenarios), faults=faults
    ) as server:
        at = open_page()
        at.text_input(key="run_ep_name").input("fake")
        at.text_input(key="run_ep_url").input(server.base_url)
        at.text_input(key="run_ep_key_env").input(KEY_VAR)
        click(at, "run_ep_save")
        assert f"Key variable `{KEY_VAR}` is set" in texts(at)

        # Probe: the catalog, the preference list marked, the default models chosen.
        click(at, "run_probe_button")
        assert "lists 3 models" in texts(at) and "Default models available: 2 of 5" in texts(at)
        marks = table_with(at, "offered here")
        assert marks.loc[M1].to_dict() == {"offered here": "yes", "chosen by default": "yes"}
        assert marks.loc[M2].to_dict() == {"offered here": "yes", "chosen by default": "yes"}
        assert marks.loc["llama-3.3-70b-versatile", "offered here"] == "no"
        assert at.multiselect(key="run_models").value == [M1, M2]

        # Dry run: the matrix and the number of calls, before anything is sent.
        at.number_input(key="run_runs").set_value(1)
        run(at)
        at.number_input(key="run_attempts").set_value(1)
        run(at)
        assert "#### 12 calls" in texts(at)
        assert "2 scenarios × 3 arms × 1 repetition × 2 models = 12 calls" in texts(at)
        assert "library-choice 1, security 1" in texts(at)
        assert chats(server) == 0
        assert at.button(key="run_launch").label == "Launch 12 calls"

        # Launch, and watch it reach 100% with accuracy per model × arm.
        click(at, "run_launch")
        assert "Started run" in texts(at)
        poll(at, lambda a: "12 / 12 cells (100%)" in progress_text(a), "the run to finish")
        rid = only_run_id(studio)
        poll(at, lambda a: run_state(a, rid) == "finished", "the finished badge")
        assert "12 / 12 cells (100%) · 11 ok · 1 errors" in progress_text(at)
        acc = table_with(at, "mandated")
        assert acc.loc[M1].to_dict() == {
            "cold": "0% (0/2)",
            "mandated": "100% (2/2)",
            "incentivized": "100% (2/2)",
        }
        assert acc.loc[M2].to_dict() == {
            "cold": "0% (0/2)",
            "mandated": "100% (1/1)",
            "incentivized": "0% (0/2)",
        }
        errors = table_with(at, "reason")
        assert list(errors["scenario"]) == ["shell-command-runner"]
        assert "HTTP 500" in errors["reason"].iloc[0]
        assert "**Latest answer:**" in texts(at)
        assert chats(server) == 12

        # Retry only the errored cell once the endpoint behaves.
        server.set_faults(None)
        assert at.button(key=f"run_retry_{rid}").label == "Retry 1 errors"
        click(at, f"run_retry_{rid}")
        assert "Retrying the 1 errored cells" in texts(at)
        poll(
            at,
            lambda a: "12 ok · 0 errors" in progress_text(a) and run_state(a, rid) == "finished",
            "the retry to finish",
        )
        assert table_with(at, "mandated").loc[M2, "mandated"] == "100% (2/2)"
        assert chats(server) == 13  # 12 cells + the one retried: nothing else re-sent

    cells = stored_cells(studio, rid)
    assert len(cells) == len(set(c[:4] for c in cells)) == 12
    assert all(status == "ok" for *_, status in cells)
    launch = json.loads((studio / "logs" / f"{rid}.json").read_text())
    assert f"--api-key-env {KEY_VAR}" in launch["command"] and "--retry-errors" in launch["command"]
    assert_no_key_anywhere(studio)


def test_a_launch_that_cannot_start_says_why(studio: Path) -> None:
    with FakeOpenAI([M1]) as server:
        save_preset(Endpoint("fake", server.base_url, KEY_VAR))
        at = open_page()
        at.selectbox(key="run_endpoint").select("fake")
        run(at)
        # A model id typed by hand, which the endpoint does not offer.
        at.multiselect(key="run_models").set_value(["llama-3.1-8b-instnt"])
        at.number_input(key="run_runs").set_value(1)
        run(at)
        assert "2 scenarios × 3 arms × 1 repetition × 1 model = 6 calls" in texts(at)
        rid = launched_id(click(at, "run_launch"))
        poll(
            at,
            lambda a: "ended before the run started" in texts(a),
            "the launch to end with its reason",
        )
        log = "\n".join(c.value for c in at.code)
        assert "model(s) not offered" in log and "llama-3.1-8b-instnt" in log
        assert chats(server) == 0
        click(at, f"run_dismiss_{rid}")
        assert "ended before the run started" not in texts(at)
        assert "No runs yet" in texts(at)


def launched_id(at: AppTest) -> str:
    found = re.search(r"Started run \*\*([^*]+)\*\*", texts(at))
    assert found, texts(at)
    return found.group(1)


def test_two_runs_at_once_cancel_one_midway_and_resume_it(
    studio: Path, fake_process: tuple[str, Path]
) -> None:
    base_url, served = fake_process
    save_preset(Endpoint("slow", base_url, KEY_VAR, ["m-slow"]))
    at = open_page()
    at.selectbox(key="run_endpoint").select("slow")
    run(at)
    assert at.multiselect(key="run_models").value == ["m-slow"]
    at.radio(key="run_pick_mode").set_value("One by one")
    run(at)
    at.multiselect(key="run_only").set_value(sorted(SCENARIOS))
    at.number_input(key="run_runs").set_value(1)
    at.number_input(key="run_concurrency").set_value(1)
    run(at)
    assert "#### 6 calls" in texts(at)
    # Two background runs of the same matrix, each under its own id.
    rid = launched_id(click(at, "run_launch"))
    other = launched_id(click(at, "run_launch"))
    assert rid != other

    def midway(a: AppTest) -> bool:
        both = run_state(a, rid) == run_state(a, other) == "running"
        return both and 2 <= len(stored_cells(studio, rid)) < 6

    poll(at, midway, "both runs to be going, the first one midway")
    assert set(at.session_state["run_active"]) == {rid, other}  # the panel refreshes itself
    assert at.button(key=f"run_cancel_{rid}").label == "Cancel"
    click(at, f"run_cancel_{rid}")
    assert f"Asked run **{rid}** to stop" in texts(at)
    poll(at, lambda a: run_state(a, rid) == "cancelled", "the cancelled badge", timeout=30)
    kept = stored_cells(studio, rid)
    assert 2 <= len(kept) < 6, kept
    missing = 6 - len(kept)
    assert at.button(key=f"run_resume_{rid}").label == f"Resume ({missing} missing)"
    poll(at, lambda a: run_state(a, other) == "finished", "the other run to finish")
    # Nothing active once both processes have exited: no refresh timer. (A cancelled
    # run's process writes its status a moment before it exits, so wait for that.)
    poll(at, lambda a: a.session_state["run_active"] == [], "no run left active")

    click(at, f"run_resume_{rid}")
    assert f"only its {missing} missing cells are sent" in texts(at)
    poll(at, lambda a: run_state(a, rid) == "finished", "the resumed run to finish")
    assert "6 / 6 cells (100%) · 6 ok · 0 errors" in progress_text(at)

    for run_id in (rid, other):
        cells = stored_cells(studio, run_id)
        assert sorted(Counter(c[:4] for c in cells).values()) == [1] * 6  # no cell twice
    # Cells finished before the cancel were not sent again by the resume: each was
    # asked once by each run.
    requests = Counter(
        (e["model"], e["messages_sha256"])
        for e in map(json.loads, served.read_text().splitlines())
        if e["path"].endswith("/chat/completions")
    )
    for model, sid, arm, _rep, _status in kept:
        assert requests[request_of(studio / "scenarios", model, sid, arm)] == 2, (sid, arm)
    log = (studio / "logs" / f"{rid}.log").read_text()
    assert "== launch at" in log and "== resume at" in log
    assert_no_key_anywhere(studio)


def test_a_died_run_is_shown_as_died_and_resumes(studio: Path) -> None:
    scenarios = studio / "scenarios"
    # A scenario id and a parameter that merely contain "token" (reset-token-generator,
    # max_tokens) are kept in the run's parameters, so resuming a run started outside
    # the studio sends its exact matrix.
    shutil.copy(
        REPO / "scenarios" / "security" / "reset-token-generator.yaml",
        scenarios / "security" / "reset-token-generator.yaml",
    )
    with FakeOpenAI(["m-x"], reply=sample_replies(scenarios)) as server:
        opts = RunOptions(
            scenarios=str(scenarios),
            models=["m-x"],
            runs=1,
            base_url=server.base_url,
            api_key_env=KEY_VAR,
            run_id="crashed",
            db=db(studio),
            max_tokens=700,
        )
        asyncio.run(BenchmarkRun(opts).execute())
        # Make it look like a process killed mid-run: the cells of one scenario missing,
        # the status still "running", the pid that of a process that is gone.
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        with Session(get_engine(db(studio))) as session:
            run_ = session.get(Run, "crashed")
            assert run_ is not None and "reset-token-generator" in run_.params["scenarios"]
            assert run_.params["max_tokens"] == 700
            ids = session.exec(
                select(Record.id).where(
                    Record.run_id == "crashed", Record.scenario_id == "reset-token-generator"
                )
            ).all()
            session.exec(delete(CheckOutcome).where(col(CheckOutcome.record_id).in_(ids)))
            session.exec(delete(ConstraintResult).where(col(ConstraintResult.record_id).in_(ids)))
            session.exec(delete(Record).where(col(Record.id).in_(ids)))
            run_.status, run_.pid, run_.host = "running", gone.pid, monitor.this_host()
            run_.updated = datetime.now(UTC) - timedelta(minutes=1)
            session.add(run_)
            session.commit()
        assert chats(server) == 9 and len(ids) == 3

        at = open_page()
        assert run_state(at, "crashed") == "died"
        assert f"process {gone.pid}" in texts(at) and "is gone" in texts(at)
        assert "3 scenarios × 3 arms × 1 repetition × 1 model" in texts(at)
        assert "6 / 9 cells (67%)" in progress_text(at)
        assert at.button(key="run_resume_crashed").label == "Resume (3 missing)"
        assert not [b for b in at.button if b.key == "run_cancel_crashed"]
        click(at, "run_resume_crashed")
        poll(at, lambda a: run_state(a, "crashed") == "finished", "the resumed run to finish")
        assert "9 / 9 cells (100%) · 9 ok · 0 errors" in progress_text(at)
        assert chats(server) == 12  # only the three missing cells were sent
    assert len(stored_cells(studio, "crashed")) == 9
    assert_no_key_anywhere(studio)


# --------------------------------------------------------------------------- trust boundary


class _HostileCatalog:
    """A loopback server whose ``/models`` answers a hostile error, then a hostile catalog."""

    def __init__(self) -> None:
        import http.server
        import threading

        outer = self
        self.requests: list[str] = []
        self.fail = True

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(self.path)
                if outer.fail:
                    body = json.dumps({"error": {"message": HOSTILE}}).encode()
                    self.send_response(500)
                else:
                    body = json.dumps({"object": "list", "data": [{"id": HOSTILE}]}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_after_a_local_demo_the_page_opens_on_the_local_endpoint(studio: Path) -> None:
    scenarios = studio / "scenarios"
    with FakeOpenAI(["smollm2-135m"], reply=sample_replies(scenarios)) as server:
        # The local preset, pointed at the fake server; the run sent as older demos
        # were (--base-url, no key), so it is stored under the name "custom".
        save_preset(Endpoint("local", server.base_url, "", ["smollm2-135m"]))
        opts = RunOptions(
            scenarios=str(scenarios),
            models=["smollm2-135m"],
            runs=1,
            base_url=server.base_url,
            api_key_env="",
            run_id="demo-local",
            db=db(studio),
        )
        asyncio.run(BenchmarkRun(opts).execute())
        with Session(get_engine(db(studio))) as session:
            stored = session.get(Run, "demo-local")
            assert stored is not None and stored.params["endpoint"] == "custom"

        at = open_page()
        assert at.selectbox(key="run_endpoint").value == "local"
        assert "This endpoint needs no key" in texts(at)
        assert not [w for w in at.warning if "not set" in str(w.value)]
        card = "\n".join(str(m.value) for m in at.markdown if "demo-local" in str(m.value))
        assert "· local ·" in card and "custom" not in card
        assert "2 scenarios × 3 arms × 1 repetition × 1 model" in texts(at)
    # The server is gone: probing it says how to start it, and Launch waits for a probe.
    click(at, "run_probe_button")
    assert "Probe failed" in texts(at)
    advice = [str(i.value) for i in at.info if "is not running" in str(i.value)]
    assert advice and "`cvb serve-local`" in advice[0]
    assert at.button(key="run_launch").disabled


def test_probe_errors_and_catalogs_from_the_server_are_shown_as_text(studio: Path) -> None:
    server = _HostileCatalog()
    try:
        save_preset(Endpoint("hostile", server.base_url, KEY_VAR))
        at = open_page()
        at.selectbox(key="run_endpoint").select("hostile")
        run(at)
        click(at, "run_probe_button")
        errors = [str(e.value) for e in at.error]
        assert any("Probe failed" in e for e in errors), errors
        assert_inert(bodies(at))

        server.fail = False
        click(at, "run_probe_button")
        # The hostile model id is shown, literally, as code; no Markdown carries it live.
        assert_inert(bodies(at), required=False)
        assert any(HOSTILE in str(c.value) for c in at.code)
        assert server.requests, "the probe did reach the server"
    finally:
        server.close()


@pytest.mark.parametrize("variable", ["PATH", "HOME", "DATABASE_URL", "CVB_DATABASE_URL"])
def test_an_undeclared_key_variable_is_refused_and_never_sent(
    studio: Path, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = _HostileCatalog()
    presets = studio / "endpoints.json"
    secret = "value-that-must-not-leave-7c1e"
    if variable != "CVB_DATABASE_URL":  # that one is the store's own URL, already set
        monkeypatch.setenv(variable, secret)
    try:
        # From the page: not saved, and the message names the variable.
        at = open_page()
        at.text_input(key="run_ep_name").input("exfil")
        at.text_input(key="run_ep_url").input(server.base_url)
        at.text_input(key="run_ep_key_env").input(variable)
        click(at, "run_ep_save")
        assert "Not saved" in texts(at) and f"{variable} is not declared" in texts(at)
        assert not presets.exists() or "exfil" not in json.loads(presets.read_text())

        # Written into the file by hand: the page says why it cannot be used; nothing is sent.
        presets.write_text(
            json.dumps({"exfil": {"base_url": server.base_url, "api_key_env": variable}})
        )
        at = open_page()
        at.selectbox(key="run_endpoint").select("exfil")
        run(at)
        assert f"{variable} is not declared" in "\n".join(shown(str(e.value)) for e in at.error)
        assert at.button(key="run_launch").disabled
        click(at, "run_probe_button")
        assert "Probe failed" in texts(at)
        assert server.requests == []
        assert secret not in texts(at)
    finally:
        server.close()


def test_a_key_variable_listed_in_the_endpoints_file_can_be_used(studio: Path) -> None:
    presets = studio / "endpoints.json"
    presets.write_text(json.dumps({"key_variables": ["LAB_SECRET"]}))
    at = open_page()
    at.text_input(key="run_ep_name").input("lab")
    at.text_input(key="run_ep_url").input("http://127.0.0.1:9/v1")
    at.text_input(key="run_ep_key_env").input("LAB_SECRET")
    click(at, "run_ep_save")
    assert "Saved endpoint **lab**" in texts(at)
    saved = json.loads(presets.read_text())
    assert saved["key_variables"] == ["LAB_SECRET"] and saved["lab"]["api_key_env"] == "LAB_SECRET"
    assert "key_variables" not in at.selectbox(key="run_endpoint").options


@pytest.mark.parametrize(
    ("run_id", "accepted"),
    [
        pytest.param("my-run.2_b", True, id="letters-dot-underscore-dash"),
        pytest.param("R" * 80, True, id="80-characters"),
        pytest.param("R" * 81, False, id="81-characters"),
        pytest.param("-leading-dash", False, id="leading-dash"),
        pytest.param("a b", False, id="space"),
        pytest.param("x\x1b]0;pwned\x07", False, id="escape-sequence"),
    ],
)
def test_the_run_id_follows_the_engine_rule(studio: Path, run_id: str, accepted: bool) -> None:
    """The page checks the run id with the engine's rule (``cvb_engine.run_id_problem``)."""
    from cvb_engine import RUN_ID_RULE, run_id_problem

    assert (run_id_problem(run_id) is None) is accepted
    at = open_page()
    at.text_input(key="run_id_input").input(run_id)
    run(at)
    warnings = [str(w.value).replace("\\", "") for w in at.warning]  # Markdown escapes
    refused = RUN_ID_RULE[:1].upper() + RUN_ID_RULE[1:]
    assert (refused in warnings) is not accepted, warnings
    if not accepted:
        assert at.button(key="run_launch").disabled


def test_a_memory_sweep_adds_variants_and_the_call_count_follows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The Run page's sweep builder: loads × positions × channels become incentivized
    variants in the preview, and the live call count multiplies by the arms."""
    from cvb_engine import RunOptions, load_library, preview_launch, sweep_arms

    repo = Path(__file__).resolve().parents[2]
    assert sweep_arms([], ["start"], ["system"]) == []
    assert sweep_arms([0, 50], [], ["inline", "system"]) == [
        "incentivized",
        "incentivized@channel=system",
        "incentivized@load=50",
        "incentivized@load=50,channel=system",
    ]
    library = load_library(repo / "scenarios")
    spec = RunOptions(
        scenarios=str(repo / "scenarios"),
        base_url="http://127.0.0.1:9",
        api_key_env="",
        run_id="sweep-preview",
        models=("m-a",),
        only=tuple(SCENARIOS),
        arms=("mandated", *sweep_arms([10, 50], ["start", "end"], [])),
        runs=1,
    )
    preview = preview_launch(spec, library)
    assert preview.problems == []
    assert preview.arms == [
        "mandated",  # then the variants in the matrix's one order (parameters' values)
        "incentivized@load=10,position=end",
        "incentivized@load=10,position=start",
        "incentivized@load=50,position=end",
        "incentivized@load=50,position=start",
    ]
    assert preview.calls == 2 * 5
    bad = preview_launch(spec.changed(arms=("incentivized@load=400",)), library)
    assert any("only 350 entries" in problem for problem in bad.problems), bad.problems


def test_the_sweep_builder_on_the_page_counts_its_calls_live(studio: Path) -> None:
    at = open_page()
    at.radio(key="run_pick_mode").set_value("One by one")
    run(at)
    at.multiselect(key="run_only").set_value(sorted(SCENARIOS))
    at.number_input(key="run_runs").set_value(1)
    at.multiselect(key="run_arms").set_value(["mandated"])
    run(at)
    before = texts(at)
    assert "2 scenarios × 1 arm × 1 repetition" in before
    at.multiselect(key="run_sweep_loads").set_value([10, 50])
    at.multiselect(key="run_sweep_channels").set_value(["inline", "system"])
    run(at)
    page = texts(at)
    assert "2 scenarios × 5 arms × 1 repetition" in page  # mandated + 2 loads × 2 channels
    assert "incentivized@load=50,channel=system" in page
