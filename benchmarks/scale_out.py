"""Scale-out: 1, 2 and 4 runners on one run, the endpoint the bottleneck.

    python benchmarks/scale_out.py [--runners 1,2,4] [--delay 0.4] [--concurrency 4]
        [--cells 560] [--lease 60] [--db postgresql+psycopg://...]

The endpoint is the test fake (``tests/fake_openai.py``, a process of its own)
with a fixed latency per request (``--delay``); each runner keeps at most
``--concurrency`` requests in flight, as one key's quota would allow. For each
number of runners N, a fresh fake endpoint and a new run of the same matrix (the
scenario library × 1 arm × 2 models × as many repetitions as make ``--cells``):
the run is created, then N ``cvb run --join`` processes, each with its own key
variable and name, are started together and send it.

Measured per N, from the endpoint's request log and the store:

* seconds: from the first request the endpoint received to the last answer it
  sent; cells/s, and the speed-up against one runner measured in the same
  script (the goal: at least 0.9 × N up to 4 runners). The start-up of the
  first runner (~2 s of imports) is left out; the runners start together, and
  whatever the others take longer to start counts against them;
* steady: the same speed-up while every runner works (from the last runner's
  first answer to the first runner's last one), start-up and tail left out;
* the cells each runner stored, requests sent twice (must be 0: no runner was
  killed), and that the run ends ``finished`` with exactly its matrix;
* database work per cell, counted by the server (PostgreSQL's
  ``pg_stat_statements``, every statement of the runners and their recorders,
  ``BEGIN``/``COMMIT`` included, between the creation of the run and the end):
  statements per cell, split into the claims' (``cellclaim``/``runworker``:
  enqueueing, claiming, renewing, releasing, registering) and the rest (storing
  and scoring records, heartbeats), and transactions per cell
  (``pg_stat_database.xact_commit``). Every statement is at most one round
  trip; the recorder's batched statements (``executemany``: constraint and
  check rows, claim releases) share theirs (psycopg pipelines them).

Without ``--db`` a throwaway PostgreSQL server is started as the tests do
(``tests/pg_server.py``, with ``pg_stat_statements`` loaded). A ``--db`` server
needs the extension in ``shared_preload_libraries`` for the statement counts;
without it they are left out. A SQLite ``--db`` works too (one machine; no
counts).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from runner_overhead import scenario_dir  # noqa: E402  (the same library, or a generated one)

FAKE_SERVER = REPO / "tests" / "fake_openai.py"
MODELS = ["bench-a", "bench-b"]
ARM = "cold"
CLAIM_TABLES = ("cellclaim", "runworker")
#: The claims' statements by kind, known by how they start (claims.py).
CLAIM_KINDS = {
    "claim": "with picked",
    "release": "delete from cellclaim",
    "enqueue": "insert into cellclaim",
    "renew": "update cellclaim set lease_until",
    "other": "\0",  # registering, heartbeats, leaving, looking at what is left
}


def cvb_command() -> list[str]:
    # `cvb` imports the run command's module as the entry point does
    return [sys.executable, "-c", "import sys; from cvb_engine.cli import main; sys.exit(main())"]


def start_endpoint(workdir: Path, delay: float, log: Path) -> tuple[subprocess.Popen[str], str]:
    argv = ["--port", "0", "--models", ",".join(MODELS), "--delay", str(delay), "--log", str(log)]
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), *argv],
        stdout=subprocess.PIPE,
        text=True,
        cwd=workdir,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"the fake endpoint did not start: {line!r}")
    return proc, line.split()[1]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Counts:
    """Statements and transactions the PostgreSQL server executed for one database."""

    def __init__(self, url: str) -> None:
        import sqlalchemy

        self.engine = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
        self.text = sqlalchemy.text
        self.available = False
        if self.engine.dialect.name != "postgresql":
            return
        with self.engine.connect() as conn:
            try:
                conn.execute(self.text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
                conn.execute(self.text("SELECT count(*) FROM pg_stat_statements"))
                self.available = True
            except Exception as exc:  # not preloaded on that server
                print(f"note: no statement counts ({str(exc).splitlines()[0]})", file=sys.stderr)

    def reset(self) -> None:
        if self.available:
            with self.engine.connect() as conn:
                conn.execute(self.text("SELECT pg_stat_statements_reset()"))
        self.xacts0 = self._xacts()

    def _xacts(self) -> int:
        if not self.available:
            return 0
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    self.text(
                        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                    )
                ).scalar_one()
            )

    def read(self) -> dict[str, int] | None:
        if not self.available:
            return None
        time.sleep(0.6)  # the statistics collector reports transactions with a short delay
        with self.engine.connect() as conn:
            rows = conn.execute(
                self.text(
                    "SELECT s.query, s.calls FROM pg_stat_statements s "
                    "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()"
                )
            ).all()
        out = {"claims": 0, "rest": 0, **dict.fromkeys(CLAIM_KINDS, 0)}
        for query, calls in rows:
            q = " ".join(query.lower().split())
            if "pg_stat" in q or "pg_database" in q:
                continue  # this script's own
            if not any(t in q for t in CLAIM_TABLES):
                out["rest"] += int(calls)
                continue
            out["claims"] += int(calls)
            kind = next((k for k, mark in CLAIM_KINDS.items() if mark in q), "other")
            out[kind] += int(calls)
        out["transactions"] = self._xacts() - self.xacts0
        return out


def create_run(args: argparse.Namespace, scenarios: Path, runs: int, run_id: str, url: str) -> int:
    """Bind the run (its matrix stored, no cell sent) and return its size."""
    from sqlmodel import Session

    from cvb_engine.runner import BenchmarkRun, RunOptions
    from cvb_engine.store import Run, get_engine

    bench = BenchmarkRun(
        RunOptions(
            scenarios=str(scenarios),
            models=MODELS,
            arms=[ARM],
            runs=runs,
            base_url=url,
            api_key_env="",
            run_id=run_id,
            db=args.db,
            concurrency=args.concurrency,
        )
    )
    matrix = bench.matrix(MODELS)
    engine = get_engine(args.db)
    with Session(engine, expire_on_commit=False) as session:
        bench.bind(matrix, session)
        run = session.get(Run, run_id)
        assert run is not None
        run.pid = None  # created, not sent by this process: the runners bind it
        session.add(run)
        session.commit()
    return matrix.size


def phase(
    args: argparse.Namespace,
    n: int,
    scenarios: Path,
    runs: int,
    workdir: Path,
    counts: Counts,
) -> dict[str, Any]:
    run_id = f"scale-out-{n}-{int(time.time())}"
    log = workdir / f"served-{n}.jsonl"
    endpoint, url = start_endpoint(workdir, args.delay, log)
    procs: list[subprocess.Popen[str]] = []
    try:
        size = create_run(args, scenarios, runs, run_id, url)
        counts.reset()
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        env.pop("CVB_DATABASE_URL", None)
        for i in range(n):
            env[f"CVB_SCALE_BENCH_{i}_KEY"] = f"sk-bench-runner-{i}"  # one key per runner
        for i in range(n):
            argv = ["run", "--join", "--run-id", run_id, "--worker", f"runner-{i}"]
            argv += ["--base-url", url, "--api-key-env", f"CVB_SCALE_BENCH_{i}_KEY"]
            argv += ["--concurrency", str(args.concurrency), "--lease", str(args.lease)]
            argv += ["--db", args.db, "--scenarios", str(scenarios), "--quiet"]
            procs.append(
                subprocess.Popen(
                    [*cvb_command(), *argv],
                    cwd=workdir,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for proc in procs:
            out, err = proc.communicate(timeout=3600)
            if proc.returncode != 0:
                raise SystemExit(f"a runner failed (exit {proc.returncode}):\n{out}\n{err}")
        db_counts = counts.read()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stop(endpoint)
    served = [
        e
        for e in map(json.loads, log.read_text(encoding="utf-8").splitlines())
        if e["path"].endswith("/chat/completions")
    ]
    times = [e["t"] for e in served]
    seconds = max(times) + args.delay - min(times)
    twice = sum(
        n - 1
        for n in Counter((e["model"], e["messages_sha256"], e["seed"]) for e in served).values()
    )
    from sqlalchemy import select
    from sqlmodel import Session, col

    from cvb_engine.store import Record, Run, get_engine

    with Session(get_engine(args.db)) as session:
        status = session.get(Run, run_id).status  # type: ignore[union-attr]
        stamps = session.execute(
            select(col(Record.worker), col(Record.created)).where(col(Record.run_id) == run_id)
        ).all()
    by_worker = Counter(w for w, _ in stamps)
    stored = sum(by_worker.values())
    # While every runner works: from the last runner's first answer to the first
    # runner's last one (start-up and the tail left out).
    firsts = {w: min(t for x, t in stamps if x == w) for w in by_worker}
    lasts = {w: max(t for x, t in stamps if x == w) for w in by_worker}
    start, end = max(firsts.values()), min(lasts.values())
    inside = sum(1 for _, t in stamps if start < t <= end)
    steady = inside / (end - start).total_seconds() if end > start else float("nan")
    if status != "finished" or stored != size:
        raise SystemExit(f"{n} runner(s): run {status}, {stored} of {size} cells stored")
    return {
        "runners": n,
        "cells": size,
        "requests": len(served),
        "twice": twice,
        "seconds": seconds,
        "per_runner": sorted(by_worker.values(), reverse=True),
        "steady": steady,
        "db": db_counts,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runners", default="1,2,4", help="runner counts to measure (1 first)")
    p.add_argument("--delay", type=float, default=0.4, help="endpoint latency per request, s")
    p.add_argument("--concurrency", type=int, default=4, help="requests in flight per runner")
    p.add_argument("--cells", type=int, default=560, help="matrix size, at least")
    p.add_argument("--lease", type=float, default=60.0, help="claim lease, s")
    p.add_argument("--scenarios", default="scenarios")
    p.add_argument("--db", help="store URL (default: a throwaway PostgreSQL server)")
    args = p.parse_args(argv)
    ns = [int(x) for x in args.runners.split(",")]
    if ns[0] != 1:
        ns.insert(0, 1)  # the speed-up is against one runner, measured here
    server = None
    with tempfile.TemporaryDirectory(prefix="cvb-scale-out-") as tmp:
        workdir = Path(tmp)
        if not args.db:
            from pg_server import PgServer

            server = PgServer({"shared_preload_libraries": "pg_stat_statements"})
            args.db = server.start()
        try:
            scenarios = scenario_dir(args.scenarios, workdir)
            from cvb_engine.runner import BenchmarkRun, RunOptions

            library = BenchmarkRun(RunOptions(scenarios=str(scenarios), arms=[ARM])).library
            per_rep = len(library) * len(MODELS)
            runs = max(1, math.ceil(args.cells / per_rep))
            counts = Counts(args.db)
            print(
                f"scale-out: {len(library)} scenarios × 1 arm × {len(MODELS)} models × {runs} "
                f"runs = {per_rep * runs} cells; endpoint latency {args.delay} s, "
                f"{args.concurrency} requests in flight per runner, lease {args.lease:g} s"
            )
            from sqlalchemy.engine import make_url

            print(f"store: {make_url(args.db).render_as_string(hide_password=True)}")
            results = [phase(args, n, scenarios, runs, workdir, counts) for n in ns]
        finally:
            if server is not None:
                server.stop()
    base = results[0]["cells"] / results[0]["seconds"]
    steady_base = results[0]["steady"]
    print()
    print(
        f"{'runners':>7}{'cells':>7}{'seconds':>9}{'cells/s':>9}{'speed-up':>10}{'/ N':>6}"
        f"{'steady':>8}{'/ N':>6}{'sent twice':>12}{'stmts/cell':>12}{'claims':>8}{'rest':>7}"
        f"{'xacts/cell':>12}"
        "   cells per runner"
    )
    for r in results:
        rate = r["cells"] / r["seconds"]
        db = r["db"]
        if db:
            total = (db["claims"] + db["rest"]) / r["cells"]
            stmts = (
                f"{total:>12.2f}{db['claims'] / r['cells']:>8.2f}{db['rest'] / r['cells']:>7.2f}"
            )
            xacts = f"{db['transactions'] / r['cells']:>12.2f}"
        else:
            stmts, xacts = f"{'n/a':>12}{'':>8}{'':>7}", f"{'n/a':>12}"
        print(
            f"{r['runners']:>7}{r['cells']:>7}{r['seconds']:>9.2f}{rate:>9.2f}"
            f"{rate / base:>10.2f}{rate / base / r['runners']:>6.2f}"
            f"{r['steady'] / steady_base:>8.2f}{r['steady'] / steady_base / r['runners']:>6.2f}"
            f"{r['twice']:>12}"
            f"{stmts}{xacts}   {', '.join(map(str, r['per_runner']))}"
        )
    print("\nclaims' statements per cell, by kind:")
    for r in results:
        if r["db"]:
            kinds = ", ".join(f"{k} {r['db'][k] / r['cells']:.2f}" for k in CLAIM_KINDS)
            print(f"  {r['runners']} runner(s): {kinds}")
    ideal = args.concurrency / args.delay
    print(
        f"\none runner's ceiling: {args.concurrency} in flight / {args.delay} s = {ideal:.1f} cells/s. "
        "speed-up: cells/s from the first request to the last answer, against one runner;\n"
        "steady: the same while every runner works (from the last runner's first answer to the "
        "first runner's last: start-up left out);\nstatements: every one the server ran for the "
        "run (runners and recorders), per cell"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
