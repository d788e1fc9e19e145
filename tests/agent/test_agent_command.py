"""Bring your own agent: ``agent@command=...`` runs a program in the workspace under bwrap.

The program (tests/agent_cmd.py) follows the documented protocol; a hostile one
tries to write outside the workspace, read the runner's key, leave a daemon
behind and pass a link off as its solution. What the sandbox promises
(cvb_engine.agent.command): the rest of the file system is read-only, the
environment holds only the protocol's variables and those named in ``env=``,
nothing outlives the time limit, and the output kept is bounded.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from scripted_agent import ScriptedAgent  # noqa: E402
from test_agent_run import agent_records  # noqa: E402
from test_runner import (  # noqa: E402, F401 (_isolated_env: the runner tests' autouse fixture)
    KEY,
    _isolated_env,
    execute,
    options,
    write_scenarios,
)

from cvb_engine.agent.command import MAX_OUTPUT_CHARS, bwrap_problem  # noqa: E402
from cvb_engine.agent.run import agent_arms_problem  # noqa: E402
from cvb_engine.arms import canonical_arm  # noqa: E402

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"no bwrap: {bwrap_problem()}")

PROGRAM = f"{sys.executable} {TESTS / 'agent_cmd.py'}"


@pytest.fixture
def scenarios(tmp_path: Path, valid_text: str) -> Path:
    root = tmp_path / "scenarios"
    write_scenarios(root, valid_text, per_category=1, categories=["library-choice"])
    return root


def run_commands(tmp_path: Path, scenarios: Path, arms: list[str]) -> dict[str, dict[str, Any]]:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    with ScriptedAgent() as server:
        outcome = execute(options(server.base_url, scenarios, db, models=["writer"], arms=arms))
    assert outcome.progress.done == len(arms)
    recs = {arm: rec for (_, arm), rec in agent_records(db).items()}
    return {arm: recs[canonical_arm(arm)] for arm in arms}


def test_a_program_that_reads_the_rules_and_one_that_does_not(
    tmp_path: Path, scenarios: Path
) -> None:
    arms = [
        f"agent@command={PROGRAM} reader",
        f"agent@command={PROGRAM} writer",
        f"agent@rules=nested,command={PROGRAM} reader",
    ]
    recs = run_commands(tmp_path, scenarios, arms)
    for arm in arms:
        rec = recs[arm]
        trace = rec["trace"]
        reader = arm.endswith("reader")
        assert rec["status"] == "ok" and trace.transport == "command"
        assert trace.command.exit_code == 0 and trace.command.sandbox == "bwrap"
        assert bool(rec["strict"]) is reader, arm
        assert rec["response"] == trace.command.stdout
        assert trace.ended_by == "answer" and trace.steps == 0
        # which rules file it opened shows through access times, where they move
        if trace.command.reads_observed:
            assert all(trace.read.values()) is reader, arm
            assert any(trace.read.values()) is reader, arm
        else:
            assert not any(trace.read.values())
    assert "read 0 characters" not in recs[arms[0]]["trace"].command.stdout


def test_a_hostile_program_stays_in_its_workspace(tmp_path: Path, scenarios: Path) -> None:
    planted = tmp_path / "planted-from-the-agent.txt"
    outside = [planted, Path("/var/tmp/cvb-planted"), Path("/root/cvb-planted")]
    for path in outside[1:]:
        path.unlink(missing_ok=True)
    arm = f"agent@command={PROGRAM} hostile {planted},env=CVB_TEST_PASSED_VAR"
    import os

    os.environ["CVB_TEST_PASSED_VAR"] = "passed-on-purpose"
    try:
        recs = run_commands(tmp_path, scenarios, [arm])
    finally:
        del os.environ["CVB_TEST_PASSED_VAR"]
    rec = recs[arm]
    trace = rec["trace"]
    report = json.loads(trace.command.stdout)
    assert report["task"] and report["cwd"]
    assert report["key"] is None and KEY not in trace.command.stdout  # the runner's key: not there
    assert "CVB_TEST_PASSED_VAR" in report["env"]  # named in env=: passed
    assert set(report["env"]) <= {
        "PATH", "LANG", "TERM", "HOME", "TMPDIR", "CVB_WORKSPACE", "CVB_FILES", "CVB_MODEL",
        "CVB_TEST_PASSED_VAR", "PWD", "SHLVL", "_",
    }  # fmt: skip
    assert not any(report["wrote_outside"].values()), report["wrote_outside"]
    assert report["wrote_tmp"] and report["wrote_home"]  # its own, private, gone after
    for path in outside:
        assert not path.exists(), path
    assert not Path("/tmp/cvb-planted-in-private-tmp").exists()
    # its solution is a link out: not a solution
    assert rec["outcome"] == "no-code" and trace.files == ()
    assert trace.command.exit_code == 3 and trace.ended_by == "error"
    time.sleep(0.5)
    assert not planted.exists()  # the daemon died with the sandbox


def test_time_limit_and_bounded_output(tmp_path: Path, scenarios: Path) -> None:
    arms = [f"agent@command={PROGRAM} sleeper,timeout=2", f"agent@command={PROGRAM} noisy"]
    started = time.monotonic()
    recs = run_commands(tmp_path, scenarios, arms)
    assert time.monotonic() - started < 60
    sleeper = recs[arms[0]]["trace"]
    assert sleeper.ended_by == "timeout" and sleeper.command.timed_out
    assert sleeper.command.exit_code is None and 2 <= sleeper.command.time_s < 20
    assert sleeper.files and recs[arms[0]]["outcome"] == "answered"  # what it left is scored
    noisy = recs[arms[1]]["trace"]
    assert len(noisy.command.stdout) == MAX_OUTPUT_CHARS and noisy.command.stdout_cut
    assert len(noisy.command.stderr) == MAX_OUTPUT_CHARS and noisy.command.stderr_cut
    assert bool(recs[arms[1]]["strict"])


def test_no_bwrap_no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from cvb_engine.agent import command

    monkeypatch.setattr(command, "bwrap_problem", lambda: "bwrap is not installed")
    assert "bwrap" in (agent_arms_problem(["cold", f"agent@command={PROGRAM} writer"]) or "")
    assert agent_arms_problem(["cold", "agent"]) is None


def test_the_readme_wrapper_runs_as_documented(tmp_path: Path, scenarios: Path) -> None:
    """The self-contained wrapper of the README, written to a file as a user would, run
    with a relative path from the folder cvb runs in."""
    import os
    import re
    import stat

    readme = (TESTS.parent / "README.md").read_text(encoding="utf-8")
    block = re.search(
        r"```python\n(#!/usr/bin/env python3\n\"\"\"Reads AGENTS\.md.*?)```", readme, re.S
    )
    assert block, "the README's wrapper example is gone"
    script = tmp_path / "my-agent.py"
    script.write_text(block.group(1).replace("/usr/bin/env python3", sys.executable, 1))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        recs = run_commands(tmp_path, scenarios, ["agent@command=./my-agent.py"])
    finally:
        os.chdir(here)
    rec = recs["agent@command=./my-agent.py"]
    assert rec["status"] == "ok" and bool(rec["strict"])
    assert rec["trace"].command.stdout.startswith("read ") and rec["trace"].command.exit_code == 0


def test_paths_the_command_names_under_tmp_are_shown_read_only(tmp_path: Path) -> None:
    """``python /tmp/x/agent.py``: the script, not only the program, lives under the
    private /tmp the agent sees, so its folder is bound again (a checkout under /tmp)."""
    from cvb_engine.agent.command import command_line

    script = tmp_path / "tools" / "agent.py"
    script.parent.mkdir()
    script.write_text("print('hi')\n")
    line, extra = command_line(f"{sys.executable} {script} reader", tmp_path)
    assert line.endswith(f"{script} reader")
    assert str(tmp_path.resolve()).startswith("/tmp/")  # pytest's tmp_path, under /tmp here
    assert extra == [str(script.parent.resolve())]
