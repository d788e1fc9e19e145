"""``cvb report FILE`` time and peak memory against the size of a results file.

    python benchmarks/report_scale.py             # each axis at 1x, 2x, 4x its base size
    python benchmarks/report_scale.py --steps 4   # 1x … 8x

One axis grows at a time, the others at their base: models, categories, scenarios (each
with mandated and incentivized records: the gap bootstraps resample them) and records
(repetitions of the same cells). Each size is a fresh process (``cvb report FILE
--markdown … --html …``); its wall time and peak RSS (``getrusage`` of the child) are
printed with the ratio to the axis's smallest size in the same run, beside the ratio of
the sizes: linear growth keeps the time ratio near the size ratio. Peak memory includes
the interpreter and its imports (about 100 MB), so its ratio grows slower than the data.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BASE = {"models": 20, "categories": 20, "scenarios": 200, "reps": 2}
AXES = {"models": "models", "categories": "categories", "scenarios": "scenarios", "records": "reps"}


def results_file(path: Path, models: int, categories: int, scenarios: int, reps: int) -> int:
    """Write a results file of ``models`` × ``scenarios`` (spread over ``categories``) ×
    (mandated, incentivized) × ``reps`` scored records; returns the number of records."""
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"format":"cvb-results/2","run":{"id":"scale"},"records":[')
        for m in range(models):
            for s in range(scenarios):
                for arm in ("mandated", "incentivized"):
                    for rep in range(reps):
                        honored = (m + s + rep + (arm == "mandated")) % 3 != 0
                        record = {
                            "model": f"model-{m}",
                            "scenario_id": f"s-{s}",
                            "category": f"cat-{s % categories}",
                            "arm": arm,
                            "rep": rep,
                            "status": "ok",
                            "outcome": "answered",
                            "constraints": {"c1": {"honored": honored}},
                            "strict": honored,
                        }
                        fh.write(("," if n else "") + json.dumps(record))
                        n += 1
        fh.write("]}")
    return n


def measure(path: Path, out: Path, repeat: int) -> tuple[float, float]:
    """(seconds, peak MB) of a ``cvb report`` process over ``path``: the fastest of
    ``repeat`` runs (a shared machine's load only ever adds time), the largest peak."""
    best, peak = float("inf"), 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "cvb_engine.cli", "report", str(path),
             "--markdown", str(out / "r.md"), "--html", str(out / "r.html")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
            env={**os.environ, "CVB_MAX_RESULTS_MB": "512"},
        )  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"cvb report {path} failed ({proc.returncode})")
        best = min(best, time.perf_counter() - start)
        peak = max(peak, usage.ru_maxrss / 1024)
    return best, peak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=3, help="sizes per axis: 1x, 2x, … (default 3)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per size, fastest kept")
    args = ap.parse_args(argv)
    print(f"base: {BASE}")
    print(f"{'axis':<11}{'size':>7}{'records':>10}{'MB':>7}{'time s':>9}{'peak MB':>9}"
          f"{'size ×':>8}{'time ×':>8}{'mem ×':>7}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for axis, key in AXES.items():
            first: tuple[float, float, int] | None = None
            for step in range(args.steps):
                size = {**BASE}
                size[key] = BASE[key] * 2**step
                path = work / f"{axis}-{step}.json"
                records = results_file(path, **size)
                seconds, peak = measure(path, work, args.repeat)
                first = first or (seconds, peak, size[key])
                print(
                    f"{axis:<11}{size[key]:>7}{records:>10,}{path.stat().st_size / 2**20:>7.1f}"
                    f"{seconds:>9.2f}{peak:>9.0f}{size[key] / first[2]:>8.1f}"
                    f"{seconds / first[0]:>8.2f}{peak / first[1]:>7.2f}"
                )
                path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
