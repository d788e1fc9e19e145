"""No silent fallback: model code runs in bwrap, or on a weaker backend the user named.

With bwrap missing from ``PATH``, every command that executes model code
(``cvb run`` of an executing scenario, ``cvb score``, ``cvb audit``, ``cvb lint``
of executing samples) stops before the first execution, naming what is missing
and how to install it; ``--sandbox``/``CVB_SANDBOX`` names a weaker backend,
with a warning; the backend that judged a run is kept in its params and shown
in its report. ``cvb doctor`` says what the machine offers.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from fake_openai import CHAT_PATH, FakeOpenAI
from sandbox_support import need

from cvb_engine import sandbox
from cvb_engine.report import sandbox_label
from cvb_engine.sandbox import choice, launch

REPO = Path(__file__).resolve().parent.parent
IVR = REPO / "scenarios" / "ivr" / "he-003-below-zero.yaml"
KEY_VAR = "CVB_TEST_SANDBOX_API_KEY"
MAIN = "import sys; from cvb_engine.cli import main; sys.exit(main())"
BWRAP_WORKS = sandbox.self_test("bwrap") is None


@pytest.fixture
def no_bwrap_path(tmp_path: Path) -> str:
    """A PATH with the interpreter and nothing else: no bwrap, no unshare."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    return str(bin_dir)


def cvb(
    args: list[str], tmp: Path, path: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    child = {k: v for k, v in os.environ.items() if k not in ("CVB_SANDBOX", "CVB_DATABASE_URL")}
    child.update(CVB_ENDPOINTS=str(tmp / "no-endpoints.json"), NO_PROXY="127.0.0.1")
    child.update({KEY_VAR: "sk-sandbox-test", **env})
    if path is not None:
        child["PATH"] = path
    return subprocess.run(
        [sys.executable, "-c", MAIN, *args],
        cwd=REPO,
        env=child,
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_args(fake: FakeOpenAI, db: str, *extra: str) -> list[str]:
    return [
        "run",
        "--scenarios",
        str(IVR),
        "--models",
        "m-a",
        "--runs",
        "1",
        "--arms",
        "mandated",
        "--base-url",
        fake.base_url,
        "--api-key-env",
        KEY_VAR,
        "--db",
        db,
        "--quiet",
        *extra,
    ]


def chat_requests(fake: FakeOpenAI) -> int:
    return sum(1 for entry in fake.log if entry.path == CHAT_PATH)


def run_params(db_file: Path, run_id: str) -> dict[str, object]:
    with sqlite3.connect(db_file) as conn:
        row = conn.execute("SELECT params_json FROM run WHERE id = ?", (run_id,)).fetchone()
    return dict(json.loads(row[0]))


REFUSAL = ("bwrap is not installed", "apt-get install bubblewrap", "--sandbox unshare")


# --- in process -------------------------------------------------------------------


@pytest.fixture
def fresh_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(choice, "PROBES", {})
    monkeypatch.setattr(choice, "WARNED", set())
    # set (to "none named"), not deleted: undoing a setenv restores the variable even
    # after sandbox.choose() has written it, so no backend leaks into later tests
    monkeypatch.setenv(sandbox.ENV_BACKEND, "")


def test_without_bwrap_nothing_falls_back(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(launch.TOOLS, "bwrap", None)
    assert "plain" in sandbox.available_backends()  # a weaker backend works, and is not used
    with pytest.raises(sandbox.SandboxError) as caught:
        sandbox.backend()
    for needle in REFUSAL:
        assert needle in str(caught.value)
    with pytest.raises(sandbox.SandboxError):
        sandbox.run_python("x = 1", "assert x == 1")


@pytest.mark.parametrize("name", ["unshare", "plain"])
def test_a_weaker_backend_runs_only_when_named_and_warns(
    name: str, fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    need(name)
    monkeypatch.setitem(launch.TOOLS, "bwrap", None)
    monkeypatch.setattr(choice, "PROBES", {})
    with pytest.warns(sandbox.WeakSandboxWarning, match=name):
        assert sandbox.choose(name) == name
    assert os.environ[sandbox.ENV_BACKEND] == name
    assert sandbox.run_python("x = 1", "assert x == 1").backend == name


def test_bwrap_is_the_default_and_warns_nothing(fresh_probes: None) -> None:
    need("bwrap")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sandbox.backend() == "bwrap"


@pytest.mark.parametrize(
    ("params", "shown"),
    [
        pytest.param({"sandbox": ["bwrap"]}, "bwrap", id="bwrap"),
        pytest.param({"sandbox": []}, "none (no check executed model code)", id="none"),
        pytest.param({"sandbox": ["bwrap", "plain"]}, "weaker than bwrap: plain", id="mixed"),
        pytest.param({}, "not recorded", id="older-run"),
        pytest.param(None, "not recorded", id="no-params"),
    ],
)
def test_report_label_of_the_backends_that_judged_a_run(params: object, shown: str) -> None:
    assert shown in sandbox_label(params)


def test_params_keep_every_backend_that_judged_a_run_strongest_first() -> None:
    params = sandbox.with_backend({"runs": 1}, "plain")
    assert params == {"runs": 1, "sandbox": ["plain"]}
    assert sandbox.with_backend(params, "bwrap")["sandbox"] == ["bwrap", "plain"]
    assert sandbox.with_backend({"runs": 1}, None)["sandbox"] == []


# --- the commands, with bwrap missing from PATH ---------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["audit", "--scenarios", str(IVR)], id="audit"),
        pytest.param(["lint", str(IVR)], id="lint"),
    ],
)
def test_commands_that_execute_refuse_without_bwrap(
    args: list[str], tmp_path: Path, no_bwrap_path: str
) -> None:
    proc = cvb(args, tmp_path, no_bwrap_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    for needle in REFUSAL:
        assert needle in proc.stderr, proc.stderr
    assert "sandboxed executions" not in proc.stdout


def test_run_refuses_before_the_first_request_then_runs_when_a_backend_is_named(
    tmp_path: Path, no_bwrap_path: str
) -> None:
    db_file = tmp_path / "cvb.db"
    db = f"sqlite:///{db_file}"
    with FakeOpenAI(models=["m-a"]) as fake:
        refused = cvb(run_args(fake, db, "--run-id", "nobw"), tmp_path, no_bwrap_path)
        assert refused.returncode == 2, (refused.stdout, refused.stderr)
        for needle in REFUSAL:
            assert needle in refused.stderr, refused.stderr
        assert chat_requests(fake) == 0, "a request was sent for a run that cannot be judged"

        dry = cvb([*run_args(fake, db), "--dry-run"], tmp_path, no_bwrap_path)
        assert dry.returncode == 0 and "sandbox    MISSING" in dry.stdout, dry.stdout

        named = cvb(
            run_args(fake, db, "--run-id", "plainrun", "--sandbox", "plain"),
            tmp_path,
            no_bwrap_path,
        )
        assert named.returncode == 0, (named.stdout, named.stderr)
        assert "warning: model code runs on the plain sandbox backend" in named.stderr
        assert chat_requests(fake) == 1, [(e.path, e.outcome, e.model) for e in fake.log]
    assert run_params(db_file, "plainrun")["sandbox"] == ["plain"]

    # re-scoring executes too: refused without bwrap, then recorded when named
    score = cvb(
        ["score", "plainrun", "--db", db, "--scenarios", str(IVR.parent)], tmp_path, no_bwrap_path
    )
    assert score.returncode == 2 and "bwrap is not installed" in score.stderr, score.stderr
    report = cvb(["report", "plainrun", "--db", db], tmp_path)
    assert "- sandbox: plain" in report.stdout, report.stdout
    assert "weaker than bwrap: plain, named by the user" in report.stdout
    if BWRAP_WORKS:
        rescored = cvb(["score", "plainrun", "--db", db, "--scenarios", str(IVR.parent)], tmp_path)
        assert rescored.returncode == 0, rescored.stderr
        assert run_params(db_file, "plainrun")["sandbox"] == ["bwrap", "plain"]


def test_run_of_scenarios_that_execute_nothing_needs_no_sandbox(
    tmp_path: Path, no_bwrap_path: str, scenario_dir: Path
) -> None:
    db_file = tmp_path / "cvb.db"
    with FakeOpenAI(models=["m-a"]) as fake:
        args = run_args(fake, f"sqlite:///{db_file}", "--run-id", "text", "--arms", "mandated")
        args[args.index(str(IVR))] = str(scenario_dir)
        proc = cvb(args, tmp_path, no_bwrap_path)
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert run_params(db_file, "text")["sandbox"] == []


def test_a_bwrap_run_records_bwrap(tmp_path: Path) -> None:
    need("bwrap")
    db_file = tmp_path / "cvb.db"
    with FakeOpenAI(models=["m-a"]) as fake:
        proc = cvb(run_args(fake, f"sqlite:///{db_file}", "--run-id", "bw"), tmp_path)
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        assert "warning" not in proc.stderr
    assert run_params(db_file, "bw")["sandbox"] == ["bwrap"]


# --- cvb doctor ------------------------------------------------------------------------


def test_doctor_names_what_is_missing_and_its_fix(tmp_path: Path, no_bwrap_path: str) -> None:
    proc = cvb(["doctor", "--db", f"sqlite:///{tmp_path / 'x.db'}"], tmp_path, no_bwrap_path)
    assert proc.returncode == 1, proc.stdout
    lines = proc.stdout.splitlines()
    bwrap = next(i for i, line in enumerate(lines) if "sandbox bwrap" in line)
    assert lines[bwrap].startswith("MISSING") and "not installed" in lines[bwrap]
    assert "apt-get install bubblewrap" in lines[bwrap + 1]
    assert any(line.startswith("ok") and "sandbox plain" in line for line in lines)
    assert any("store" in line and "not created yet" in line for line in lines)
    assert any("local model" in line for line in lines)
    assert any("browser tests" in line for line in lines)


def test_doctor_on_a_machine_with_bwrap_and_an_older_store(tmp_path: Path) -> None:
    need("bwrap")
    db_file = tmp_path / "old.db"
    with sqlite3.connect(db_file) as conn:  # a store from before schema versions
        conn.execute("CREATE TABLE record (id INTEGER PRIMARY KEY)")
    proc = cvb(["doctor", "--db", f"sqlite:///{db_file}"], tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert any(
        line.startswith("ok") and "sandbox bwrap" in line for line in proc.stdout.splitlines()
    )
    assert "schema version 1" in proc.stdout and "cvb db upgrade" in proc.stdout
    assert shutil.which("bwrap") is not None


def test_results_page_figures_name_the_backend_and_flag_a_weaker_one(tmp_path: Path) -> None:
    from sqlmodel import Session

    from cvb_engine.queries import aggregates
    from cvb_engine.store import Run, get_engine

    engine = get_engine(f"sqlite:///{tmp_path / 'q.db'}")
    with Session(engine) as session:
        for rid, params in (("a", {"sandbox": ["bwrap"]}), ("b", {"sandbox": ["plain"]})):
            session.add(Run(id=rid, prompt_version="2.0", params_json=json.dumps(params)))
        session.commit()
        one = aggregates(session, ["a"])
        both = aggregates(session, ["a", "b"])
    assert one.sandbox_text == "Sandbox: bwrap" and not one.weaker_sandbox
    assert both.weaker_sandbox
    assert "a: bwrap" in both.sandbox_text and "b: plain (weaker than bwrap" in both.sandbox_text
