"""Search times and the docs table: the search against every built-in across costs and caps.

Prints medians of wall time per search (its evaluations included) and a Markdown table for
docs/search.md: per (costs, cap), the best built-in that fits, and what the search found.
Run: .venv/bin/python benchmarks/bench_search.py [--evaluations 500] [--table] [--record];
``--record`` writes the timings into docs/figures.json (section "search") and, with
``--table``, the table (section "search_table": computed, the same on any machine).
"""
from __future__ import annotations

import argparse
import statistics
import time

from figures import record

from pplab import Costs
from pplab.search import exact, search

COSTS = {"tf=1 tb=2 tw=1": Costs(tf=1, tb=2, tw=1),
         "tf=1 tb=3 tw=1 comm=0.2": Costs(tf=1, tb=3, tw=1, comm=0.2),
         "tf=2 tb=3 tw=0.5": Costs(tf=2, tb=3, tw=0.5)}


def table(P: int, M: int, evaluations: int) -> list[str]:
    rows = ["| costs | V | cap | best built-in that fits | its makespan | search | "
            "search peak |", "|---|---|---|---|---|---|---|"]
    for label, costs in COSTS.items():
        for V, caps in ((1, (2, 3, P, 2 * P - 1)), (2, (2, P, P + 2, 2 * P))):
            for cap in caps:
                r = search(P, M, V, costs, cap, evaluations=evaluations)
                fit = [b for b in r.baselines if b["fits"]]
                best = min(fit, key=lambda b: b["makespan"]) if fit else None
                name = best["name"] if best else "none fits"
                span = f"{best['makespan']:.4g}" if best else "—"
                rows.append(f"| {label} | {V} | {cap} | {name} | {span} | "
                            f"{r.makespan:.4g} | {max(r.peak_inflight)} |")
    return rows


def timings(evaluations: int) -> dict[str, str]:
    figs = {"evaluations": str(evaluations)}
    for P, M, V in ((4, 8, 1), (4, 8, 2), (8, 16, 1), (8, 32, 2)):
        times = []
        for seed in range(3):
            t = time.perf_counter()
            search(P, M, V, Costs(tf=1, tb=2, tw=1), cap=P * V, evaluations=evaluations,
                   seed=seed)
            times.append(time.perf_counter() - t)
        print(f"search P={P} M={M} V={V} {evaluations} evaluations: median "
              f"{statistics.median(times):.3f}s")
        figs[f"p{P}_m{M}_v{V}_s"] = f"{statistics.median(times):.2f} s"
    return figs


def gaps() -> None:
    for P, M in ((2, 2), (2, 3), (3, 2), (4, 2)):
        costs = Costs(tf=1, tb=2, tw=1)
        t = time.perf_counter()
        best, _ = exact(P, M, costs, cap=P)
        took = time.perf_counter() - t
        found = search(P, M, 1, costs, P, evaluations=200).makespan
        print(f"exact P={P} M={M} cap={P}: optimum {best:g} ({took:.2f}s), search {found:g}, "
              f"gap {found / best - 1:.1%}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--evaluations", type=int, default=500)
    ap.add_argument("--table", action="store_true", help="also print the docs table")
    ap.add_argument("--record", action="store_true", help="write docs/figures.json's figures")
    a = ap.parse_args()
    figs = timings(a.evaluations)
    gaps()
    by = "make bench (benchmarks/bench_search.py --table --record)"
    if a.table:
        rows = table(4, 8, a.evaluations)
        print("\n".join(rows))
        if a.record:
            record("search_table", {"p4_m8": "\n" + "\n".join(rows) + "\n"}, by)
    if a.record:
        record("search", figs, by)
