"""Measured vs simulated bubble of every generator at P = 4, M = 8 with emulated op durations.

This is the timing half of tests/runtime/test_runtime_grads.py's emulated test: the test checks
what machine load cannot move (order, in-flight peaks, gradients, lower bounds); how close the
measured bubble comes to the simulated one depends on how busy the machine is, so it is
measured here. On a quiet 2-core machine every schedule lands within 0.03.
"pad" mode: an op lasts max(compute, emulated), so the per-op Python cost of many small chunks
does not pile up; split and V-shaped schedules get twice the emulated time for the same reason.
Run: .venv/bin/python benchmarks/bench_emulated_bubble.py [--limit 0.03]; exit 1 over the limit.
"""
from __future__ import annotations

import argparse
import os
import sys

from pplab.runtime import run_many


def items() -> list[tuple[str, dict]]:
    add = dict(tf=0.05, tb=0.1)
    costs = dict(tf=0.05, tb=0.1, tw=0.04, tfb=0.15, mode="pad")
    no_w = dict(costs, tw=0.0)
    longer = dict(tf=0.1, tb=0.2, tw=0.08, tfb=0.3, mode="pad")
    out = [("gpipe", dict(M=8, steps=2, emulate=add)),
           ("1f1b", dict(M=8, steps=2, emulate=add)),
           ("naive", dict(M=1, steps=2, emulate=no_w)),
           ("interleaved-zb", dict(M=8, V=2, steps=2, emulate=longer))]
    out += [(n, dict(M=8, V=2, steps=2, emulate=no_w)) for n in ("interleaved", "bfs", "bfs-1f1b")]
    out += [(n, dict(M=8, steps=2, emulate=costs))
            for n in ("zb-h1", "zb-h2", "zbv", "dualpipe", "dualpipev")]
    out += [(n, dict(M=8, steps=2, emulate=longer)) for n in ("v-zb", "v-half", "v-min")]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=0.03,
                    help="largest |measured - simulated| bubble fraction accepted")
    args = ap.parse_args()
    print("load average", ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    worst = 0.0
    for r in run_many(items(), 4, timeout=600):
        gap = abs(r.bubble_fraction - r.simulated.bubble_fraction)
        worst = max(worst, gap)
        print(f"{r.schedule.name:15s} measured {r.bubble_fraction:.4f} simulated "
              f"{r.simulated.bubble_fraction:.4f} gap {gap:.4f}")
    print(f"worst gap {worst:.4f} (limit {args.limit})")
    return 0 if worst <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
