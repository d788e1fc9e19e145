"""What ``cvb run`` does to start fast, and what it must not lose doing so:

* ``load_library(root, only=...)`` parses just the files that may hold the wanted ids,
  and falls back to the whole library when its reading of ``id:`` lines is not enough;
* the recorder is started before the runner's heavy imports; one that was never told
  about a run is stopped at once (it has nothing to keep), and its environment still
  lacks the API key.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cvb_engine.run.recording import Recorder
from cvb_engine.scenario import ScenarioError, load_library


def _write(root: Path, category: str, name: str, text: str) -> None:
    (root / category).mkdir(parents=True, exist_ok=True)
    (root / category / f"{name}.yaml").write_text(text, encoding="utf-8")


def _with_id(valid_text: str, sid: str, line: str | None = None) -> str:
    return valid_text.replace("id: http-client-choice", line or f"id: {sid}", 1)


def test_only_parses_the_files_of_the_wanted_ids(tmp_path: Path, valid_text: str) -> None:
    root = tmp_path / "scenarios"
    _write(root, "library-choice", "alpha", _with_id(valid_text, "alpha"))
    _write(root, "library-choice", "beta", _with_id(valid_text, "beta"))
    # Quoted, commented, and a file named otherwise than its id.
    _write(root, "security", "gamma", _with_id(valid_text, "gamma", "id: 'gamma'  # the id"))
    _write(root, "security", "not-its-id", _with_id(valid_text, "delta", 'id: "delta"'))
    _write(root, "security", "broken", "id: broken\ntitle: [unclosed\n")

    with pytest.raises(ScenarioError):
        load_library(root)  # the whole library: the broken file stops it
    assert set(load_library(root, only=["alpha"])) == {"alpha"}
    assert set(load_library(root, only=["gamma", "delta"])) == {"gamma", "delta"}


def test_only_loads_every_file_when_the_id_lines_do_not_tell(
    tmp_path: Path, valid_text: str
) -> None:
    root = tmp_path / "scenarios"
    _write(root, "library-choice", "alpha", _with_id(valid_text, "alpha"))
    # The id in a form the line pattern does not read: only parsing finds it.
    _write(root, "library-choice", "beta", _with_id(valid_text, "beta", "id: >-\n  beta"))
    assert set(load_library(root, only=["beta"])) >= {"beta"}
    # An id no file has: the whole library is loaded (and its problems said), so the
    # caller's "unknown scenario id" comes from the same library as without ``only``.
    assert set(load_library(root, only=["nowhere"])) == {"alpha", "beta"}
    _write(root, "security", "broken", "id: broken\ntitle: [unclosed\n")
    with pytest.raises(ScenarioError):
        load_library(root, only=["nowhere"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose; the transport reaps it.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_recorder_never_told_about_a_run_is_stopped_at_once() -> None:
    """Started early, it may still be importing when the run fails to start: closing it
    must not wait for those imports, and must leave no process behind."""

    async def scenario() -> int:
        recorder = await Recorder.spawn()
        assert recorder.pid is not None
        await recorder.close()
        await recorder.close()  # again: the same end
        assert recorder.failure is None  # nothing was recorded, so nothing failed
        return recorder.pid

    pid = asyncio.run(scenario())
    assert not _alive(pid)


def test_the_early_recorder_does_not_see_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CVB_TEST_EARLY_KEY", "sk-early-secret")

    async def scenario() -> bytes:
        recorder = await Recorder.spawn(hide=["CVB_TEST_EARLY_KEY"])
        try:
            assert recorder.pid is not None
            return Path(f"/proc/{recorder.pid}/environ").read_bytes()
        finally:
            await recorder.close()

    environ = asyncio.run(scenario())
    assert b"sk-early-secret" not in environ
    assert b"CVB_TEST_EARLY_KEY" not in environ


def _with_environ(mark: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if mark.encode() in Path(f"/proc/{entry}/environ").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def test_a_run_that_cannot_start_leaves_no_recorder(tmp_path: Path, valid_text: str) -> None:
    """``cvb run`` starts its recorder first; a run refused after that (an unknown scenario
    id) says why, exits 2, and leaves no recorder process behind."""
    root = tmp_path / "scenarios"
    _write(root, "library-choice", "alpha", _with_id(valid_text, "alpha"))
    mark = f"cvb-startup-{uuid.uuid4().hex}"
    env = {**os.environ, "CVB_TEST_MARK": mark, "CVB_TEST_KEY": "sk-x"}
    argv = [sys.executable, "-m", "cvb_engine.cli", "run", "--scenarios", str(root)]
    argv += ["--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "CVB_TEST_KEY"]
    argv += ["--models", "m", "--only", "nope", "--db", str(tmp_path / "cvb.db"), "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "unknown scenario id(s): nope" in done.stderr
    assert _with_environ(mark) == []
