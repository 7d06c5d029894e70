"""How long the test suite takes and how many tests it runs, as the README quotes it, and where
the time goes: the 20 slowest tests and the time per folder (setup + call + teardown, from
pytest's ``--junitxml`` report; with workers these add up to more than the wall time).

``--fast`` times ``make test-fast`` (pytest -m "not slow" -n auto); without it, ``make test``
(the fast tier with a worker per core, then the slow tier's two streams at once:
tools/slow_tier.py, whose second stream ends with the solutions under nbval). Heavy: run it alone, under the shared lock where several people share
the machine. ``--record`` writes the figures into
docs/figures.json (section "tests_fast" or "tests"), ``make bench-tests`` does that.
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from figures import record

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"(\d+) passed")


def timed(args: list[str]) -> tuple[float, int, str, dict[str, float]]:
    """(seconds, tests passed, last line, seconds per test id) of one pytest run; exits on a
    failure."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        t = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={report}", *args],
                           cwd=ROOT, capture_output=True, text=True)
        took = time.monotonic() - t
        per_test = {f"{c.get('classname', '')}::{c.get('name', '')}": float(c.get("time", 0))
                    for c in ET.parse(report).iter("testcase")} if report.exists() else {}
    last = (r.stdout.strip().splitlines() or [""])[-1]
    if r.returncode != 0:
        sys.exit(f"pytest {' '.join(args)} failed: {last}")
    m = SUMMARY.search(last)
    return took, int(m.group(1)) if m else 0, last, per_test


def slow_tier() -> tuple[float, dict[str, int], dict[str, float]]:
    """(seconds, {"tests": passed, "cells": solution cells passed, "seconds": per report},
    seconds per test id) of ``tools/slow_tier.py``, as make test runs it; exits on a
    failure."""
    with tempfile.TemporaryDirectory() as tmp:
        t = time.monotonic()
        r = subprocess.run([sys.executable, "tools/slow_tier.py", "--junit-dir", tmp], cwd=ROOT)
        took = time.monotonic() - t
        if r.returncode != 0:
            sys.exit(f"the slow tier failed (exit {r.returncode})")
        per_test, counts = {}, {"tests": 0, "cells": 0, "seconds": {}}
        for report in Path(tmp).glob("*.xml"):
            tree = ET.parse(report)
            counts["seconds"][report.stem] = float(tree.find("testsuite").get("time", 0))
            cases = list(tree.iter("testcase"))
            counts["cells" if report.name == "compute-1.xml" else "tests"] += sum(
                c.find("skipped") is None for c in cases)
            per_test.update({f"{c.get('classname', '')}::{c.get('name', '')}":
                             float(c.get("time", 0)) for c in cases})
    return took, counts, per_test


def where_the_time_goes(per_test: dict[str, float], slowest: int = 20) -> str:
    """The slowest tests, then the seconds per folder of tests/ (largest first)."""
    lines = [f"{slowest} slowest tests:"]
    for name, s in sorted(per_test.items(), key=lambda kv: -kv[1])[:slowest]:
        lines.append(f"  {s:7.1f} s  {name}")
    folders = collections.Counter()
    for name, s in per_test.items():
        parts = name.split("::")[0].split(".")
        folders[parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]] += s
    lines.append("seconds per folder (summed over workers):")
    lines += [f"  {s:7.1f} s  {folder}/" for folder, s in folders.most_common()]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast", action="store_true", help="only the fast tier")
    ap.add_argument("--record", action="store_true", help="write docs/figures.json's figures")
    a = ap.parse_args()
    if a.fast:
        s, n, last, per_test = timed(["-m", "not slow", "-n", "auto", "tests"])   # test-fast
        print(where_the_time_goes(per_test))
        print(f"fast tier: {n} tests in {s:.0f} s ({last})")
        if a.record:
            record("tests_fast", {"tests": f"{n:,}", "wall": f"{s:.0f} s"},
                   "make bench-tests FAST=1 (benchmarks/bench_tests.py --fast --record)")
        sys.exit(0)
    s_fast, n_fast, _, per_fast = timed(["-m", "not slow", "-n", "auto", "tests"])  # make test
    s_slow, counts, per_slow = slow_tier()
    n = n_fast + counts["tests"]
    print(where_the_time_goes({**per_fast, **per_slow}))
    s = s_fast + s_slow
    print(f"make test: {n} tests and {counts['cells']} solution cells in {s / 60:.1f} min "
          f"(fast tier {s_fast:.0f} s, slow tier {s_slow / 60:.1f} min, its two streams at once)")
    if a.record:
        took = counts["seconds"]
        record("tests", {"tests": f"{n:,}", "total_min": f"{s / 60:.0f} min",
                         "slow_min": f"{s_slow / 60:.0f} min", "fast_s": f"{s_fast:.0f} s",
                         "system_min": f"{took.get('system-0', 0) / 60:.0f} min",
                         "nbval_s": f"{took.get('compute-1', 0):.0f} s"},
               "make bench-tests (benchmarks/bench_tests.py --record)")
