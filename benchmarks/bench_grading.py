"""Time ``pplab grade`` on a whole class, measured end to end (no extrapolation): N copies of
the solutions (8 assignments, 30 tasks each), every submission sandboxed, once with
``-j 1`` and once with ``-j J`` (default: the cores). Prints wall times, the speedup, and
the median and 90th percentile of one submission's grading time.

    python benchmarks/bench_grading.py                       # the course's class: 30 students
    python benchmarks/bench_grading.py --students 4 --jobs 2 # a quick look
    python benchmarks/bench_grading.py --skip-serial         # only the -j run

Every score must be full marks, or the run is not counted.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scratch import scratch_tmpdir    # benchmarks/scratch.py, next to this file

ROOT = Path(__file__).resolve().parents[1]


def grade(sub: Path, out: Path, jobs: int) -> tuple[float, list[float]]:
    """(wall seconds, per-submission seconds) of one ``pplab grade`` run."""
    cmd = [sys.executable, "-m", "pplab.cli", "grade", str(sub), "--out", str(out),
           "--seed", "1", "-j", str(jobs)]
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"pplab grade failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    with open(out, newline="") as f:
        rows = list(csv.reader(f))[1:]
    short = [row for row in rows if float(row[3]) != float(row[4])]
    if short:
        raise SystemExit(f"a solution lost points, the run does not count: {short[:3]}")
    parts = out.parent / f"{out.name}.parts" / "results"
    secs = [json.loads(p.read_text())["seconds"] for p in parts.rglob("*.json")]
    return wall, secs


def report(label: str, wall: float, secs: list[float]) -> None:
    q = statistics.quantiles(secs, n=10)[-1] if len(secs) > 1 else secs[0]
    print(f"{label}: {wall / 60:.1f} min wall for {len(secs)} submissions; one submission "
          f"median {statistics.median(secs):.1f} s, p90 {q:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--skip-serial", action="store_true")
    args = ap.parse_args()
    print(f"cores available: {len(os.sched_getaffinity(0))}; class of {args.students} × 8 "
          "assignments, every submission sandboxed", flush=True)
    with scratch_tmpdir("pplab-bench-grading-") as tmp:   # torch's folders land here too
        sub = Path(tmp) / "class"
        for k in range(args.students):
            shutil.copytree(ROOT / "solutions", sub / f"student{k:02d}")
        walls = {}
        for jobs in ([] if args.skip_serial else [1]) + [args.jobs]:
            wall, secs = grade(sub, Path(tmp) / f"grades-j{jobs}.csv", jobs)
            walls[jobs] = wall
            report(f"-j {jobs}", wall, secs)
        if 1 in walls and args.jobs in walls and args.jobs != 1:
            print(f"speedup -j {args.jobs} over -j 1: {walls[1] / walls[args.jobs]:.2f}×")


if __name__ == "__main__":
    main()
