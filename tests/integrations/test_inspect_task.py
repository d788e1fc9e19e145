"""CVB as inspect tasks: run with inspect's mockllm, verdicts equal to `cvb score`'s on the
same replies (sent through CVB's own runner to a test endpoint)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai")
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from cvb_engine.integrations.inspect import cvb, cvb_tasks
from cvb_engine.library import shipped_root
from cvb_engine.scenario import load_library

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))
from fake_openai import FakeOpenAI  # noqa: E402

ONLY = ["http-client-choice", "shell-command-runner", "report-copy-pathlib"]
ARMS = ["cold", "mandated", "incentivized"]
LIBRARY = load_library(shipped_root())


def reply_for(text: str) -> str:
    """A reply chosen from the scenario's own labelled samples by a hash of the prompt:
    compliant or violating code per constraint, so verdicts differ across arms."""
    item = next(i for sid, i in LIBRARY.items() if sid in ONLY and i.scenario.task[:80] in text)
    digest = hashlib.sha256(text.encode()).digest()
    constraint = item.scenario.constraints[digest[0] % len(item.scenario.constraints)]
    pool = constraint.samples.compliant if digest[1] % 2 else constraint.samples.violating
    return f"Here it is.\n\n```python\n{pool[digest[2] % len(pool)]}\n```\n"


def mock_output(input: list[Any], *_: Any) -> ModelOutput:
    text = "\n".join(m.text for m in input)
    out = ModelOutput.from_content("mockllm/model", reply_for(text))
    # given usage, mockllm counts no tokens itself (its counter downloads a tokenizer)
    out.usage = ModelUsage(
        input_tokens=len(text) // 4, output_tokens=50, total_tokens=len(text) // 4 + 50
    )
    return out


def test_a_task_per_arm_with_the_runs_messages() -> None:
    tasks = cvb_tasks(ARMS, only=ONLY)
    assert [t.name for t in tasks] == [f"cvb_{a}" for a in ARMS]
    assert all(len(t.dataset) == len(ONLY) for t in tasks)
    with pytest.raises(ValueError, match="memory layer"):
        cvb(arm="memory-tool", only=",".join(ONLY))
    with pytest.raises(ValueError, match="no scenario nope"):
        cvb(only="nope")


def test_inspect_verdicts_equal_cvb_score(tmp_path: Path) -> None:
    logs = inspect_eval(
        cvb_tasks(ARMS, only=ONLY),
        model=get_model("mockllm/model", custom_outputs=mock_output),
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    seen: dict[tuple[str, str], tuple[str, dict[str, bool], str]] = {}
    for log in logs:
        assert log.status == "success", log.error
        assert log.samples
        for s in log.samples:
            assert s.scores is not None
            score = s.scores["cvb_checks"]
            honored = {k: v["honored"] for k, v in score.metadata["constraints"].items()}
            seen[(str(s.id), s.metadata["arm"])] = (str(score.value), honored, s.output.completion)
    assert len(seen) == len(ONLY) * len(ARMS)
    assert {v[0] for v in seen.values()} == {"C", "I"}  # both verdicts occur

    # The same replies through CVB: a test endpoint answering by the same rule, then
    # `cvb score` (re-scoring the stored replies) and the results file.
    url = f"sqlite:///{tmp_path / 'cvb.db'}"
    with FakeOpenAI(
        models=["m"], reply=lambda r: reply_for("\n".join(m["content"] for m in r["messages"]))
    ) as server:
        run = _cvb(
            "run", "--base-url", server.base_url, "--api-key-env", "", "--models", "m",
            "--only", ",".join(ONLY), "--arms", ",".join(ARMS), "--runs", "1",
            "--run-id", "via-cvb", "--db", url,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr
    scored = _cvb("score", "via-cvb", "--db", url)
    assert scored.returncode == 0, scored.stderr
    out = tmp_path / "r.json"
    assert _cvb("report", "via-cvb", "--db", url, "--json", str(out)).returncode == 0
    records = json.loads(out.read_text())["records"]
    assert len(records) == len(seen)
    for r in records:
        value, honored, completion = seen[(r["scenario_id"], r["arm"])]
        assert r["response"] == completion  # the same reply on both sides
        assert value == ("C" if r["strict"] else "I")
        assert honored == {k: v["honored"] for k, v in r["constraints"].items()}


def _cvb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cvb_engine.cli", *args], capture_output=True, text=True, timeout=300
    )
