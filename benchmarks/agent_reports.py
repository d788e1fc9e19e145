"""What the agent arm's report figures cost: read versus obeyed needs every agent record's trace.

Two temporary SQLite stores of the same size (``results_page_scale.fill``: 8 models ×
35 scenarios × 3 arms × repetitions). In the baseline the third arm is
``incentivized``; in the other it is ``agent``, each of its records holding an
episode trace of about ``--trace-kb`` KB (12 tool calls with bounded results,
the file written, read flags). Measured, in rounds that alternate the two stores:
``db_summary`` (tallies in SQL, every metric; on the agent store also every
trace read in batches, boiled down to its facts, and the agent figures with
their bootstrap CIs), wall and CPU time, and the peak Python memory it
allocates (``tracemalloc``). Prints the agent / baseline ratios.

    python benchmarks/agent_reports.py [--records 33600] [--trace-kb 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def trace_text(rng: random.Random, constraints: list[str], kb: int) -> str:
    from cvb_engine.agent.trace import AgentTrace, ToolCall, WrittenFile

    body = "x" * max(64, kb * 1024 // 13)
    calls = tuple(
        ToolCall(
            round=i + 1,
            name="read_file",
            arguments=json.dumps({"path": f"docs/n{i}.md"}),
            parsed={"path": f"docs/n{i}.md"},
            result=body,
            path=f"docs/n{i}.md",
        )
        for i in range(12)
    )
    read = {c: rng.random() < 0.5 for c in constraints}
    return AgentTrace(
        transport="tools",
        variant="agent",
        targets=("pkg/mod.py",),
        calls=calls,
        files=(WrittenFile(path="pkg/mod.py", content=body, size=len(body)),),
        steps=12,
        requests=13,
        prompt_tokens=9000,
        completion_tokens=700,
        ended_by=rng.choice(["answer", "answer", "steps"]),
        read=read,
    ).to_json()


def make_agent_store(db: Path, kb: int) -> None:
    con = sqlite3.connect(db)
    rng = random.Random(3)
    ids: dict[int, list[str]] = {}
    for rid, cid in con.execute(
        "SELECT c.record_id, c.constraint_id FROM constraintresult c JOIN record r "
        "ON r.id = c.record_id WHERE r.arm = 'incentivized'"
    ):
        ids.setdefault(rid, []).append(cid)
    rows = [(trace_text(rng, cids, kb), rid) for rid, cids in ids.items()]
    con.execute("UPDATE record SET arm = 'agent' WHERE arm = 'incentivized'")
    con.executemany("UPDATE record SET agent_json = ? WHERE id = ?", rows)
    con.commit()
    con.close()


def measure(url: str, run_id: str) -> tuple[float, float, float, int]:
    from sqlmodel import Session

    from cvb_engine.results import db_summary
    from cvb_engine.store import dispose_engines, get_engine

    dispose_engines()
    tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    with Session(get_engine(url)) as session:
        summary = db_summary(session, [run_id])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    dispose_engines()
    return wall, cpu, peak, len(summary.agent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=33_600)
    parser.add_argument("--trace-kb", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import results_page_scale as scale

    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for name in ("baseline", "agent"):
            db = Path(tmp) / f"{name}.db"
            n = scale.fill(db, args.records, "bench")
            if name == "agent":
                make_agent_store(db, args.trace_kb)
            stores[name] = f"sqlite:///{db}"
        size = {
            k: Path(v.removeprefix("sqlite:///")).stat().st_size / 2**20 for k, v in stores.items()
        }
        print(
            f"{n:,} records per store; store size baseline {size['baseline']:.0f} MB, "
            f"agent {size['agent']:.0f} MB ({args.trace_kb} KB traces on a third of the records)"
        )
        seen: dict[str, list[tuple[float, float, float, int]]] = {k: [] for k in stores}
        for _ in range(args.rounds):
            for name, url in stores.items():  # alternate: load moves both alike
                seen[name].append(measure(url, "bench"))
        for name, runs in seen.items():
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            peak = max(r[2] for r in runs)
            print(
                f"{name:9s} db_summary wall {wall:6.2f} s  cpu {cpu:6.2f} s  "
                f"peak traced memory {peak:7.1f} MB  agent stats {runs[0][3]}"
            )
        b, a = seen["baseline"], seen["agent"]
        print(
            "agent / baseline: wall "
            f"{statistics.median(r[0] for r in a) / statistics.median(r[0] for r in b):.2f}x, cpu "
            f"{statistics.median(r[1] for r in a) / statistics.median(r[1] for r in b):.2f}x, "
            f"peak memory {max(r[2] for r in a) / max(r[2] for r in b):.2f}x"
        )


if __name__ == "__main__":
    main()
