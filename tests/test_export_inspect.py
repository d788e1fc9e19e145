"""`cvb report RUN --inspect FILE`: read back with inspect_ai's own reader."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_dbtools import cvb

from cvb_engine.arms import ArmContext, build_messages
from cvb_engine.library import shipped_pool, shipped_root
from cvb_engine.scenario import load_library

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_openai import FakeOpenAI, FaultPlan

pytest.importorskip("inspect_ai")
from inspect_ai.log import read_eval_log

GOOD = "```python\nimport httpx\n\ndef fetch_json(url, retries=3):\n    return httpx.get(url).json()\n```"
BAD = "```python\nimport requests\n\ndef fetch_json(url, retries=3):\n    return requests.get(url).json()\n```"
SCENARIOS = "http-client-choice,report-copy-pathlib"


def reply(request: dict[str, Any]) -> str:
    text = request["messages"][-1]["content"]
    return BAD if request["model"] == "m-b" and "memory" not in text.lower() else GOOD


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Path]:
    tmp = tmp_path_factory.mktemp("inspect")
    url = f"sqlite:///{tmp / 'i.db'}"
    # the first request fails for good (one attempt): an error record among the samples
    with FakeOpenAI(models=["m-a", "m-b"], reply=reply, faults=FaultPlan(script=["500"])) as server:
        done = cvb(
            "run", "--base-url", server.base_url, "--api-key-env", "", "--models", "m-a,m-b",
            "--only", SCENARIOS, "--runs", "2", "--run-id", "ins", "--db", url,
            "--max-attempts", "1", "--concurrency", "1",
        )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    out = cvb(
        "report", "ins", "--db", url, "--json", str(tmp / "r.json"),
        "--inspect", str(tmp / "log.json"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    eval_out = cvb("report", str(tmp / "r.json"), "--inspect", str(tmp / "log.eval"))
    assert eval_out.returncode == 0, eval_out.stderr
    return json.loads((tmp / "r.json").read_text()), tmp / "log.json", tmp / "log.eval"


@pytest.mark.parametrize("which", [1, 2], ids=["json", "eval"])
def test_inspect_reads_every_record_back(
    exported: tuple[dict[str, Any], Path, Path], which: int
) -> None:
    data, *logs = exported
    log = read_eval_log(str(logs[which - 1]))
    records = data["records"]
    assert log.status == "success" and log.samples is not None
    assert len(log.samples) == len(records) == 2 * 2 * 3 * 2
    by_key = {(s.id, s.epoch): s for s in log.samples}
    assert len(by_key) == len(records)
    library = load_library(shipped_root())
    context = ArmContext(shipped_pool())
    errors = 0
    for r in records:
        s = by_key[(f"{r['model']}/{r['scenario_id']}/{r['arm']}", r["rep"] + 1)]
        meta = s.metadata
        assert (meta["model"], meta["arm"], meta["scenario_id"]) == (
            r["model"],
            r["arm"],
            r["scenario_id"],
        )
        assert meta["outcome"] == r.get("outcome") and meta["memory"] == r.get("memory")
        if r["status"] != "ok":
            errors += 1
            assert s.error is not None and not s.scores
            continue
        assert s.output.completion == r["response"]
        assert s.output.usage is not None
        assert s.output.usage.input_tokens == r["usage"]["prompt_tokens"]
        assert s.scores is not None
        assert {k for k in s.scores if k != "strict"} == set(r["constraints"])
        for cid, entry in r["constraints"].items():
            assert s.scores[cid].value == ("C" if entry["honored"] else "I")
            for check in entry["checks"]:
                assert check["reason"] in (s.scores[cid].explanation or "")
        assert s.scores["strict"].value == ("C" if r["strict"] else "I")
        want = build_messages(library[r["scenario_id"]].scenario, r["arm"], context)
        assert meta["messages"] == "verified"
        assert [(m.role, m.text) for m in s.input] == [(m["role"], m["content"]) for m in want]  # type: ignore[union-attr]
    assert errors == 1
    # the header: the run's parameters and the headline metrics
    assert log.eval.metadata is not None and log.eval.metadata["params"] == data["run"]["params"]
    assert log.eval.model_generate_config.max_tokens == data["run"]["params"]["max_tokens"]
    assert log.results is not None
    metrics = log.results.scores[0].metrics
    scored = [r for r in records if r["status"] == "ok"]
    assert metrics["accuracy"].value == pytest.approx(
        sum(r["strict"] for r in scored) / len(scored)
    )
    for model in ("m-a", "m-b"):
        for arm in ("cold", "mandated", "incentivized"):
            cell = [r for r in scored if r["model"] == model and r["arm"] == arm]
            want_rate = sum(r["strict"] for r in cell) / len(cell)
            assert metrics[f"{model}/{arm}"].value == pytest.approx(want_rate)
        gap = metrics[f"{model}/gap"].value
        assert -1.0 <= gap <= 1.0


def test_changed_scenario_is_said_not_mislabelled(
    exported: tuple[dict[str, Any], Path, Path], tmp_path: Path
) -> None:
    data = exported[0]
    for r in data["records"]:
        r["messages_sha256"] = "0" * 64  # as if the scenario had been edited since
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(data))
    out = cvb("report", str(path), "--inspect", str(tmp_path / "c.json"))
    assert out.returncode == 0, out.stderr
    log = read_eval_log(str(tmp_path / "c.json"))
    assert log.samples
    sample = log.samples[0]
    assert "hash differs" in sample.metadata["messages"]
    assert "not available" in sample.input[0].text  # type: ignore[union-attr]
