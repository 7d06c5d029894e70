"""How long the test suite takes and how many tests it runs, as the README quotes it.

``--fast`` times ``make test-fast`` (pytest -m "not slow" -n auto); without it, ``make test``
(every test, then the notebooks and solutions under nbval). Heavy: run it alone, under the shared
lock where several people share the machine. ``--record`` writes the figures into
docs/figures.json (section "tests_fast" or "tests"), ``make bench-tests`` does that.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

from figures import record

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"(\d+) passed")


def timed(args: list[str]) -> tuple[float, int, str]:
    """(seconds, tests passed, last line) of one pytest run; exits on a failure."""
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", *args], cwd=ROOT,
                       capture_output=True, text=True)
    took = time.monotonic() - t
    last = (r.stdout.strip().splitlines() or [""])[-1]
    if r.returncode != 0:
        sys.exit(f"pytest {' '.join(args)} failed: {last}")
    m = SUMMARY.search(last)
    return took, int(m.group(1)) if m else 0, last


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast", action="store_true", help="only the fast tier")
    ap.add_argument("--record", action="store_true", help="write docs/figures.json's figures")
    a = ap.parse_args()
    if a.fast:
        s, n, last = timed(["-m", "not slow", "-n", "auto", "tests"])   # as make test-fast
        print(f"fast tier: {n} tests in {s:.0f} s ({last})")
        if a.record:
            record("tests_fast", {"tests": f"{n:,}", "wall": f"{s:.0f} s"},
                   "make bench-tests FAST=1 (benchmarks/bench_tests.py --fast --record)")
        sys.exit(0)
    s, n, last = timed(["tests"])
    s_nb, n_nb, _ = timed(["--nbval", "--nbval-current-env", "-p", "no:randomly", "notebooks",
                           "solutions"])
    print(f"pytest tests: {n} tests in {s / 60:.1f} min; notebooks: {n_nb} cells in "
          f"{s_nb:.0f} s")
    if a.record:
        record("tests", {"tests": f"{n:,}", "pytest_min": f"{s / 60:.1f} min",
                         "nbval_s": f"{s_nb:.0f} s", "total_min": f"{(s + s_nb) / 60:.0f} min"},
               "make bench-tests (benchmarks/bench_tests.py --record)")
