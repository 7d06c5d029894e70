"""Time `pplab grade` on one student's full set of assignments and on a class, on this
machine (the course's reference is 2 cores). Prints medians of the per-student times.

    python benchmarks/bench_grading.py                 # 1 student, then a class of --class
    python benchmarks/bench_grading.py --class-size 30 # measure the full class (slow)

If the class is smaller than 30, the 30-student figure is extrapolated from the measured
per-student median, and the output says so.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scratch import scratch_tmpdir    # benchmarks/scratch.py, next to this file

ROOT = Path(__file__).resolve().parents[1]


def grade_class(n: int, tmp: Path) -> tuple[float, list[float]]:
    """Grade n copies of the solutions; (wall seconds, per-student seconds)."""
    sub = tmp / f"class{n}"
    for k in range(n):
        shutil.copytree(ROOT / "solutions", sub / f"student{k:02d}")
    cmd = [sys.executable, "-m", "pplab.cli", "grade", str(sub), "--out",
           str(tmp / f"grades{n}.csv"), "--seed", "1"]
    start, marks = time.perf_counter(), []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if re.match(r"student \d+ of \d+", line) or line.startswith("wrote "):
            marks.append(time.perf_counter())
    if proc.wait() != 0:
        raise SystemExit(f"pplab grade failed with status {proc.returncode}")
    return time.perf_counter() - start, [b - a for a, b in zip(marks, marks[1:])]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--class-size", type=int, default=3)
    args = ap.parse_args()
    print(f"cores available: {len(os.sched_getaffinity(0))}")
    with scratch_tmpdir("pplab-bench-grading-") as tmp:   # torch's folders land here too
        wall1, per1 = grade_class(1, Path(tmp))
        print(f"one student, 8 assignments (30 tasks): {wall1:.1f} s wall "
              f"({per1[0]:.1f} s grading, the rest is the scratch course)")
        wall, per = grade_class(args.class_size, Path(tmp))
        med = statistics.median(per)
        print(f"class of {args.class_size}: {wall:.1f} s wall, median {med:.1f} s per student")
        if args.class_size < 30:
            setup = wall - sum(per)
            print(f"30 students: ~{(setup + 30 * med) / 60:.1f} min (EXTRAPOLATED from the "
                  f"measured class of {args.class_size}: setup + 30 × median)")
        else:
            print(f"30 students: {wall / 60:.1f} min (measured)")


if __name__ == "__main__":
    main()
