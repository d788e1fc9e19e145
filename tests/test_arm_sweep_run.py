"""A small memory sweep through the real runner: killed with SIGKILL, resumed to the exact matrix.

Variants are arms like any other: their canonical names are stored on the
records, they are part of the matrix (with the memory pool's sha256), the dry
run counts them, and a resume sends only what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_runner import (
    cli_args,
    cvb,
    fake_process,
    launch_and_kill,
    query,
    records,
    run_status,
    write_scenarios,
)

VARIANTS = [
    "cold",
    "mandated",
    "incentivized",
    "incentivized@load=8",
    "incentivized@load=8,channel=system",
    "incentivized@load=8,position=start",
    "incentivized@load=8,position=start,channel=system",
]


def write_pool(scenarios: Path, n: int = 20) -> None:
    (scenarios / "memory").mkdir(parents=True, exist_ok=True)
    entries = "\n".join(
        f"  - id: ops-{i:03d}\n    kind: ops\n    text: The storage review in week {i} "
        f"moved the archive volume to the second rack."
        for i in range(n)
    )
    (scenarios / "memory" / "pool.yaml").write_text(f"version: 1\nentries:\n{entries}\n")


def test_sweep_dry_run_lists_variants_and_counts_calls(tmp_path: Path, valid_text: str) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, per_category=1)
    write_pool(scenarios)
    argv = ["run", "--dry-run", "--models", "m-a", "--runs", "1", "--scenarios", str(scenarios)]
    argv += [
        "--arms",
        "cold,mandated,incentivized",
        "--memory-sweep",
        "load=8",
        "position=spread,start",
    ]
    argv += ["channel=inline,system"]
    proc = cvb(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr
    arms_line = next(line for line in proc.stdout.splitlines() if line.startswith("arms"))
    for name in VARIANTS:
        assert name in arms_line.split(None, 1)[1].split(", "), (name, arms_line)
    assert "= 49 calls" in proc.stdout, proc.stdout  # 7 scenarios x 7 arms


def test_a_bad_variant_or_a_load_beyond_the_pool_is_refused_before_sending(
    tmp_path: Path, valid_text: str
) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, per_category=1)
    write_pool(scenarios, n=5)
    base = ["run", "--dry-run", "--models", "m-a", "--scenarios", str(scenarios)]
    too_many = cvb([*base, "--arms", "incentivized@load=50"], tmp_path)
    assert too_many.returncode == 2 and "only 5 entries" in too_many.stderr, too_many.stderr
    typo = cvb([*base, "--arms", "incentivized@lod=5"], tmp_path)
    assert typo.returncode == 2 and "lod" in typo.stderr and "load" in typo.stderr, typo.stderr


def test_sweep_killed_and_resumed_stores_exactly_the_matrix(
    tmp_path: Path, valid_text: str
) -> None:
    scenarios = tmp_path / "scenarios"
    sids = write_scenarios(scenarios, valid_text, per_category=1)
    write_pool(scenarios)
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    runs = 2
    size = len(sids) * len(VARIANTS) * runs  # 98
    with fake_process(tmp_path, "--models", "m-a", "--delay", "0.05") as url:
        argv = ["run", "--models", "m-a", "--runs", str(runs), "--run-id", "sweep"]
        argv += ["--arms", ",".join(VARIANTS), "--concurrency", "4", *cli_args(url, scenarios, db)]
        before = launch_and_kill(tmp_path, argv, db, "sweep", 10)
        assert 10 <= len(before) < size
        resumed = cvb(argv, tmp_path, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        # the same variants in another spelling name the same run
        again = cvb(
            [
                *argv[: argv.index("--arms")],
                "--arms",
                "cold,mandated,incentivized",
                "--memory-sweep",
                "load=8",
                "channel=system,inline",
                "position=start,spread",
                *argv[argv.index("--arms") + 2 :],
            ],
            tmp_path,
        )
        assert again.returncode == 0, again.stderr
        assert f"{size} already done" in again.stdout, again.stdout
    after = records(db, "sweep")
    assert len(after) == size and run_status(db, "sweep") == "finished"
    params = json.loads(query(db, "SELECT params_json FROM run WHERE id = 'sweep'")[0][0])
    assert params["arm_versions"] == {
        "cold": "2.0",
        "mandated": "2.0",
        "incentivized": "2.0+memory.1",
    }
    assert len(params["memory_pool"]) == 64  # the pool's sha256 is part of the matrix
    report = cvb(["report", "sweep", "--db", db, "--scenarios", str(scenarios)], tmp_path)
    assert report.returncode == 0, report.stderr
    assert "## Memory arms" in report.stdout and "| load 0 | load 8 |" in report.stdout
    assert "gap: system" in report.stdout
    assert {r["arm"] for r in after} == set(VARIANTS)
    assert all(r["status"] == "ok" for r in after)
    # one messages hash per (scenario, arm): deterministic; different arms, different messages
    by_cell = {}
    for r in after:
        by_cell.setdefault((r["scenario_id"], r["arm"]), set()).add(r["messages_sha256"])
    assert all(len(v) == 1 for v in by_cell.values())
    for sid in sids:
        assert len({next(iter(by_cell[(sid, a)])) for a in VARIANTS}) == len(VARIANTS)
