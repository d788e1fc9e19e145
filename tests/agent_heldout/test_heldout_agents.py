"""Held-out check of the agent arm (issue 28): real ``cvb run`` against ``tests/heldout_agent.py``,
an endpoint written from the README alone. Expectations are computed from what each scripted
agent does (which files it opens, which rules it sees in its messages), never from the engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import heldout_agent

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
ONLY = "http-client-choice,report-copy-pathlib,reset-token-generator"
CONSTRAINTS = {
    "http-client-choice": ("httpx-not-requests", "retries-via-tenacity"),
    "report-copy-pathlib": ("pathlib-not-os-path", "metadata-preserving-copy"),
    "reset-token-generator": ("secrets-for-tokens", "constant-time-compare"),
}
VARIANTS = [
    "agent",
    "agent@rules=claude-md",
    "agent@rules=adr",
    "agent@rules=readme",
    "agent@rules=nested",
    "agent@preload=true",
    "agent@rules=nested,preload=true",
    "agent@rules=claude-md,preload=true",
    "agent@load=20,position=middle",
    "agent@steps=3",
]
MODELS = [
    "parallel",
    "reader",
    "at-once",
    "messages-only",
    "searcher",
    "multi",
    "hostile",
    "endless",
    "broken",
    "empty",
]
STEPS_DEFAULT = 12


def _params(arm: str) -> dict[str, str]:
    _, _, rest = arm.partition("@")
    return dict(kv.split("=", 1) for kv in rest.split(",") if kv)


def _snapshot(folder: Path) -> dict[str, object]:
    """Every file under ``folder`` by size and modification time (the checkout's .venv
    included: hostile code plants files there), read once per call."""
    out: dict[str, object] = {}
    for p in sorted(folder.rglob("*")):
        if (
            ".git" in p.parts
            or "__pycache__" in p.parts
            or ".pytest_cache" in p.parts
            or ".mypy_cache" in p.parts
        ):
            continue
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return out


def _expected(model: str, arm: str, cids: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """(honored, read) for a scripted agent in a variant, from the agent's documented behaviour
    and where the README says the memory lives."""
    p = _params(arm)
    rules = p.get("rules", "agents-md")
    preload = p.get("preload") == "true"
    everything = set(cids)
    # The root rules file holds the constraints except for nested (distractors only) and adr (none).
    system_has = everything if preload and rules in ("agents-md", "claude-md", "readme") else set()
    if model in ("reader", "multi"):
        return everything, everything
    if model == "searcher":
        # search_files("decision") shows the matching line only: the notes' "- Decision n (label): text"
        # lines carry the rule, a decision record's "# Decision n: label" heading does not.
        return (set(), set()) if rules == "adr" else (everything, everything)
    if model == "messages-only":
        return system_has, set()
    if model == "parallel":
        # it reads README.md (twenty times) and writes violating code
        return set(), (everything if rules == "readme" else set())
    return set(), set()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("heldout")
    sentinel = tmp / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("keep\n")
    heldout_agent.HOSTILE_SENTINEL = str(sentinel)
    server = heldout_agent.serve(SCENARIOS)
    port = server.server_address[1]
    before_repo = _snapshot(ROOT)
    before_sentinel = _snapshot(sentinel)
    db = f"sqlite:///{tmp / 'run.db'}"
    env = {**os.environ, "HELDOUT_API_KEY": "x"}
    base = [sys.executable, "-m", "cvb_engine.cli"]
    cmd = [
        *base,
        "run", "--base-url", f"http://127.0.0.1:{port}/v1", "--api-key-env", "HELDOUT_API_KEY",
        "--models", ",".join(MODELS), "--arms", ",".join(VARIANTS), "--only", ONLY, "--runs", "1", "--scenarios", str(SCENARIOS),
        "--db", db, "--json", str(tmp / "r.json"), "--quiet", "--run-id", "heldout", "--max-attempts", "1",
    ]  # fmt: skip
    done = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=900)
    report = subprocess.run(
        [*base, "report", "heldout", "--db", db, "--scenarios", str(SCENARIOS), "--markdown", str(tmp / "r.md"), "--html", str(tmp / "r.html")],
        env=env, cwd=tmp, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    server.shutdown()
    after_repo = _snapshot(ROOT)
    return {
        "done": done,
        "report": report,
        "results": json.loads((tmp / "r.json").read_text()) if (tmp / "r.json").exists() else None,
        "md": (tmp / "r.md").read_text() if (tmp / "r.md").exists() else "",
        "html": (tmp / "r.html").read_text() if (tmp / "r.html").exists() else "",
        "repo_changed": {
            k for k in set(before_repo) | set(after_repo) if before_repo.get(k) != after_repo.get(k)
        },
        "sentinel_same": _snapshot(sentinel) == before_sentinel,
        "escaped": [p for p in (tmp.parent, Path("/tmp")) if (p / "escaped.py").exists()],
    }


def _records(run: dict[str, Any]) -> list[dict[str, Any]]:
    assert run["done"].returncode == 0, run["done"].stderr[-3000:]
    return run["results"]["records"]


def test_the_run_completes_every_cell(run: dict[str, Any]) -> None:
    recs = _records(run)
    assert len(recs) == len(MODELS) * len(VARIANTS) * 3


@pytest.mark.parametrize(
    "model", ["reader", "at-once", "messages-only", "searcher", "multi", "hostile", "parallel"]
)
def test_verdicts_and_read_flags_match_what_the_agent_did(run: dict[str, Any], model: str) -> None:
    wrong = []
    for r in _records(run):
        if r["model"] != model:
            continue
        cids = CONSTRAINTS[r["scenario_id"]]
        honored, read = _expected(model, r["arm"], cids)
        got_honored = {c for c, v in (r["constraints"] or {}).items() if v["honored"]}
        got_read = {c for c, v in (r["agent"] or {}).get("read", {}).items() if v}
        if got_honored != honored or got_read != read:
            wrong.append(
                (
                    r["arm"],
                    r["scenario_id"],
                    sorted(got_honored),
                    sorted(honored),
                    sorted(got_read),
                    sorted(read),
                )
            )
    assert not wrong, wrong


def test_every_episode_ends_within_its_steps(run: dict[str, Any]) -> None:
    for r in _records(run):
        trace = r["agent"]
        if not trace:
            continue
        limit = int(_params(r["arm"]).get("steps", STEPS_DEFAULT))
        assert trace["steps"] <= limit, (r["model"], r["arm"])
        # one request per round plus the final one at most
        assert trace["requests"] <= limit + 1, (r["model"], r["arm"], trace["requests"])
        if r["model"] == "endless":
            assert trace["steps"] == limit and trace["ended_by"] == "steps", (
                r["arm"],
                trace["ended_by"],
            )
            assert r["code"] in (None, ""), "endless never writes"


def test_hostile_calls_are_refused_and_nothing_outside_changes(run: dict[str, Any]) -> None:
    recs = [r for r in _records(run) if r["model"] == "hostile"]
    assert recs
    for r in recs:
        calls = r["agent"]["calls"]
        by_id = {c["call_id"]: c for c in calls}
        # every hostile call is on the trace, refused (run_tests and the empty search are legal)
        for i in range(1, 21):
            c = by_id.get(f"call_{i}")
            assert c is not None, (r["arm"], i, "missing from the trace")
            if i not in (14, 17):
                assert c["refused"], (r["arm"], i, c["result"][:200])
        assert r["agent"]["ended_by"] == ("steps" if r["arm"] == "agent@steps=3" else "answer")
        if r["arm"] == "agent@steps=3":
            assert by_id["call_99"]["refused"], "a call after the last round is recorded, not run"
        assert "root:" not in json.dumps(calls), "no host file content reaches the trace"
        # only the final, ordinary write lands: the 50 MB one, the field-less and the escaping ones do not
        written = {f["path"] for f in r["agent"]["files"]}
        assert written == set(r["agent"]["targets"]), written
    assert run["sentinel_same"]
    assert not run["escaped"]
    assert not run["repo_changed"], run["repo_changed"]


def test_every_parallel_call_of_one_message_is_on_the_trace(run: dict[str, Any]) -> None:
    """Twenty calls in one message: each is run, or refused on the trace; none silently dropped."""
    for r in _records(run):
        if r["model"] != "parallel":
            continue
        ids = {c["call_id"] for c in r["agent"]["calls"]}
        assert {f"call_{100 + i}" for i in range(20)} <= ids, (r["arm"], sorted(ids))


@pytest.mark.parametrize("model", ["broken", "empty"])
def test_a_misbehaving_server_is_stored_not_crashed(run: dict[str, Any], model: str) -> None:
    recs = [r for r in _records(run) if r["model"] == model]
    assert len(recs) == len(VARIANTS) * 3
    for r in recs:
        # nothing was written: honors nothing
        assert not any(v["honored"] for v in (r["constraints"] or {}).values())
        assert r["strict"] in (False, None)


def _summary(run: dict[str, Any], model: str, arm: str) -> dict[str, Any]:
    return next(
        s for s in run["results"]["agent_summary"] if s["model"] == model and s["arm"] == arm
    )


@pytest.mark.parametrize("model", ["reader", "at-once", "messages-only", "searcher"])
@pytest.mark.parametrize("arm", ["agent", "agent@rules=nested,preload=true", "agent@preload=true"])
def test_agent_summary_read_vs_obeyed_figures(run: dict[str, Any], model: str, arm: str) -> None:
    s = _summary(run, model, arm)
    exp = [_expected(model, arm, CONSTRAINTS[sid]) for sid in CONSTRAINTS]
    n = len(exp)
    read_eps = sum(1 for _, rd in exp if rd)
    strict = sum(1 for h, _ in exp if len(h) == 2)
    assert s["episodes"] == n
    assert s["read"] == read_eps and s["read_share"] == pytest.approx(read_eps / n)
    assert s["strict"]["k"] == strict and s["strict"]["n"] == n
    assert s["per_constraint"]["k"] == sum(len(h) for h, _ in exp)
    assert s["strict_when_read"]["n"] == read_eps
    assert s["strict_when_not_read"]["n"] == n - read_eps
    p = _params(arm)
    in_system = n if p.get("preload") == "true" else 0
    assert s["rules_in_system_message"] in (
        in_system,
        0 if p.get("rules") == "nested" else in_system,
    )


def test_reports_carry_the_agent_section(run: dict[str, Any]) -> None:
    assert run["report"].returncode == 0, run["report"].stderr[-2000:]
    for text in (run["md"], run["html"]):
        assert "Agent arm" in text
        for model in ("reader", "messages-only"):
            assert model in text
