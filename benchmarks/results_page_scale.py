"""Results page at scale: 100,000+ synthetic records in a temporary SQLite store.

Measures, in one process and on the same store:

* engine alone: ``db_tallies`` (aggregated in SQL) + ``summarize`` (every metric,
  bootstrap CIs included), the work the overview needs;
* the Results page's overview rendered by Streamlit's AppTest with cold caches
  (a fresh store URL, so nothing is cached), after one warm-up render on a tiny
  store so that imports are not counted;
* the other views (Breakdowns, Side by side, Compare runs) and a rerun of the
  overview with warm caches;
* peak resident memory of the process (``ru_maxrss``).

Prints the page / engine ratio; the goal is ≤ 3× and < 1 GB.

    python benchmarks/results_page_scale.py [--records 100800] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "studio" / "streamlit_app.py"
CATEGORIES = (
    "library-choice",
    "security",
    "encoding-io",
    "style-architecture",
    "error-handling",
    "concurrency",
    "logging-testing",
)
ARMS = ("cold", "mandated", "incentivized")
RESPONSE = (
    "Here is the implementation.\n\n```python\nimport httpx\n\n\ndef fetch_json(url, retries=3):\n"
    + "    # a line of a plausible answer, repeated to give the record a realistic size\n" * 12
    + "    return httpx.get(url, timeout=5).json()\n```\n"
)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def fill(db_path: Path, n_target: int, run_id: str, seed: int = 7) -> int:
    """Insert a run of about ``n_target`` records (8 models x 35 scenarios x 3 arms x reps)."""
    from sqlmodel import SQLModel

    from cvb_engine.store import dispose_engines, get_engine

    url = f"sqlite:///{db_path}"
    engine = get_engine(url)
    SQLModel.metadata.create_all(engine)
    dispose_engines()
    models = [f"bench-model-{i}" for i in range(8)]
    scenarios = [(f"{cat}-{j}", cat) for cat in CATEGORIES for j in range(1, 6)]
    reps = max(1, round(n_target / (len(models) * len(scenarios) * len(ARMS))))
    rng = random.Random(seed)
    now = datetime.now(UTC).isoformat(sep=" ")
    con = sqlite3.connect(db_path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")
    params = {"models": models, "arms": list(ARMS), "runs": reps, "synthetic": True}
    con.execute(
        "INSERT INTO run (id, created, updated, prompt_version, params_json, matrix_sha256, "
        "total_cells, status) VALUES (?, ?, ?, '2.0', ?, '', ?, 'finished')",
        (run_id, now, now, json.dumps(params), len(models) * len(scenarios) * len(ARMS) * reps),
    )
    base = {"cold": 0.3, "mandated": 0.93, "incentivized": 0.85}
    record_id = con.execute("SELECT COALESCE(MAX(id), 0) FROM record").fetchone()[0]
    records, verdicts, outcomes = [], [], []
    n = 0

    def flush() -> None:
        con.executemany(
            "INSERT INTO record (id, run_id, model, scenario_id, scenario_version, "
            "scenario_sha256, category, arm, rep, status, error, attempts, response, code, "
            "messages_sha256, prompt_version, latency_s, prompt_tokens, completion_tokens, "
            "finish_reason, created, scored_at, strict, stated_passed, n_constraints, n_honored) "
            "VALUES (?,?,?,?,1,'s',?,?,?,?,?,1,?,?,'m','2.0',0.5,100,200,'stop',?,?,?,NULL,?,?)",
            records,
        )
        con.executemany(
            "INSERT INTO constraintresult (record_id, constraint_id, honored) VALUES (?,?,?)",
            verdicts,
        )
        con.executemany(
            "INSERT INTO checkoutcome (record_id, constraint_id, check_index, check_id, kind, "
            "passed, reason, scope, evidence_json) VALUES (?,?,0,'regex-0','regex',?,?,'code',?)",
            outcomes,
        )
        con.commit()
        records.clear()
        verdicts.clear()
        outcomes.clear()

    for mi, model in enumerate(models):
        skill = 0.6 + 0.05 * mi
        for si, (sid, cat) in enumerate(scenarios):
            n_constraints = 2 + si % 3
            for arm in ARMS:
                for rep in range(reps):
                    record_id += 1
                    n += 1
                    if rng.random() < 0.01:
                        records.append(
                            (
                                record_id,
                                run_id,
                                model,
                                sid,
                                cat,
                                arm,
                                rep,
                                "error",
                                "HTTP 500",
                                None,
                                None,
                                now,
                                None,
                                None,
                                None,
                                None,
                            )
                        )
                        continue
                    honored = [
                        rng.random() < min(0.99, base[arm] * skill + 0.25)
                        for _ in range(n_constraints)
                    ]
                    records.append(
                        (
                            record_id,
                            run_id,
                            model,
                            sid,
                            cat,
                            arm,
                            rep,
                            "ok",
                            None,
                            RESPONSE,
                            RESPONSE[40:],
                            now,
                            now,
                            all(honored),
                            n_constraints,
                            sum(honored),
                        )
                    )
                    for ci, ok in enumerate(honored):
                        cid = f"{sid}-c{ci}"
                        verdicts.append((record_id, cid, ok))
                        outcomes.append(
                            (
                                record_id,
                                cid,
                                ok,
                                "ok" if ok else "forbidden pattern matched",
                                "[]" if ok else '[{"line": 3, "col": 0, "length": 12}]',
                            )
                        )
                    if len(records) >= 20_000:
                        flush()
    flush()
    con.close()
    return n


def engine_alone(url: str, run_id: str) -> tuple[float, object]:
    from sqlmodel import Session

    from cvb_engine.metrics import summarize
    from cvb_engine.results import db_tallies
    from cvb_engine.store import get_engine

    start = time.perf_counter()
    with Session(get_engine(url)) as session:
        summary = summarize(*db_tallies(session, [run_id]))
    return time.perf_counter() - start, summary


def render(
    url: str, run_ids: list[str], view: str | None = None, at: object = None
) -> tuple[float, object]:
    from streamlit.testing.v1 import AppTest

    os.environ["CVB_DATABASE_URL"] = url
    if at is None:
        at = AppTest.from_file(str(APP), default_timeout=600)
        at.switch_page("app_pages/results.py")
        at.session_state["results_runs"] = run_ids
    if view is not None:
        at.session_state["results_view"] = view
    start = time.perf_counter()
    at.run()
    elapsed = time.perf_counter() - start
    if at.exception:
        raise SystemExit(f"the page raised: {[e.value for e in at.exception]}")
    return elapsed, at


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_800)
    parser.add_argument("--keep", help="build the store in this folder and keep it")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("CVB_SCENARIOS", str(REPO / "scenarios"))

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cvb-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "bench.db"
    if db.exists():
        db.unlink()
    t = time.perf_counter()
    n = fill(db, args.records, "bench-a")
    n_b = fill(db, args.records // 10, "bench-b", seed=8)  # a second run for Compare runs
    print(
        f"store: {db} ({db.stat().st_size / 1e6:.0f} MB), run bench-a {n:,} records, "
        f"run bench-b {n_b:,} records, filled in {time.perf_counter() - t:.1f} s"
    )
    url = f"sqlite:///{db}"

    # Warm-up on a tiny store: imports, Streamlit and plotly start-up are not what we measure.
    tiny = folder / "tiny.db"
    if tiny.exists():
        tiny.unlink()
    fill(tiny, 105, "tiny")
    warm, _ = render(f"sqlite:///{tiny}", ["tiny"])
    overhead, _ = render(f"sqlite:///{tiny}", ["tiny"])
    print(
        f"warm-up render (tiny store): first {warm:.2f} s, fixed AppTest overhead {overhead:.2f} s"
    )
    rss_before = peak_rss_mb()

    engine_s, summary = engine_alone(url, "bench-a")
    page_s, at = render(url, ["bench-a"])
    engine2_s, _ = engine_alone(url, "bench-a")
    engine_best = min(engine_s, engine2_s)
    rerun_s, _ = render(url, ["bench-a"], at=at)
    views = {}
    for view in ("Breakdowns", "Side by side", "Compare runs", "Exports"):
        views[view], _ = render(url, ["bench-a"], view=view, at=at)
    peak = peak_rss_mb()

    n_scored = sum(r.n for r in summary.strict.values())  # type: ignore[attr-defined]
    print(
        f"engine alone (db_tallies + summarize): {engine_s:.2f} s, again {engine2_s:.2f} s "
        f"({n_scored:,} scored records)"
    )
    print(f"page overview, cold caches (AppTest):   {page_s:.2f} s")
    print(f"page overview rerun, warm caches:       {rerun_s:.2f} s")
    for view, seconds in views.items():
        print(f"page view {view!r:<16}              {seconds:.2f} s")
    ratio = page_s / engine_best
    print(f"ratio page / engine alone: {ratio:.2f}x (goal <= 3x)")
    print(
        f"peak RSS: {peak:.0f} MB (before the 100k store was read: {rss_before:.0f} MB; "
        "goal < 1024 MB)"
    )
    ok = ratio <= 3 and peak < 1024
    print("PASS" if ok else "ABOVE GOAL")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
