"""The planner's speed (every layout of Llama 3 70B on 64 GPUs, caches cleared each time) and
the answers docs/memory.md quotes. ``--record`` writes both into docs/figures.json: the
timing as section "planner" (measured: it moves with the machine), the answers as section
"planner_answers" (computed: the docs test recomputes them, so they cannot drift from the
code either).
Run: .venv/bin/python benchmarks/bench_planner.py [--record]
"""
from __future__ import annotations

import argparse
import statistics
import time

from figures import record

from pplab.memory import get_preset
from pplab.memory import extrapolate as ex, planner as pl, rank_memory as rm
from pplab.memory.units import fmt_seconds

LLAMA_70B = get_preset("llama3-70b")


def cold_plan_seconds(repeats: int = 3) -> tuple[float, list]:
    """Median seconds of one plan with every cache emptied first, and the plan."""
    model, times, cands = LLAMA_70B.with_(seq=4096), [], []
    for _ in range(repeats):
        for f in (ex.sim_makespan, ex.cached_schedule, rm._alive_states, rm.rank_params,
                  rm._equivalents, pl._estimate_cached, pl._stage_scale):
            f.cache_clear()
        t = time.perf_counter()
        cands = pl.plan(model, 64)
        times.append(time.perf_counter() - t)
    return statistics.median(times), cands


def _best(cands) -> str:
    c = next(c for c in cands if c.feasible)
    return f"{c.layout()}, {fmt_seconds(c.step_time, 4)}"


def answers() -> dict[str, str]:
    """What the planner answers for the cases docs/memory.md walks through."""
    s4096 = LLAMA_70B.with_(seq=4096)
    plan = pl.plan(s4096, 64)
    ok = [c for c in plan if c.feasible]
    return {
        "layouts": f"{len(plan)}", "fit": f"{len(ok)}", "best_4096": _best(plan),
        "best_4096_last19": _best(pl.plan(s4096, 64, last_layers=19)),
        "best_8192": _best(pl.plan(LLAMA_70B, 64)),
        "best_8192_per_microbatch": _best(pl.plan(LLAMA_70B, 64,
                                                  zero3_regather=("per_microbatch",))),
        "best_8192_per_step": _best(pl.plan(LLAMA_70B, 64, zero3_regather=("per_step",))),
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", action="store_true", help="write docs/figures.json's figures")
    a = ap.parse_args()
    seconds, cands = cold_plan_seconds()
    print(f"planner, llama3-70b s=4096 on 64 GPUs, cold caches: median {seconds:.2f} s over 3 "
          f"runs ({len(cands)} layouts, {sum(c.feasible for c in cands)} fit)")
    found = answers()
    for key, text in found.items():
        print(f"  {key}: {text}")
    if a.record:
        record("planner", {"cold_s": f"{seconds:.1f} s"},
               "make bench (benchmarks/bench_planner.py --record)")
        record("planner_answers", found, "make bench (benchmarks/bench_planner.py --record)")
