"""Median time to generate + simulate every schedule at a slider-sized and a cluster-sized
configuration, and to also draw the slider-sized one (the live canvas's redraw path); then
the fast executor against the reference one (``simulate(..., executor=...)``) at the sizes
of issue 21, in the same run, and the timeline canvas's render at the far corner of its
sliders (fresh schedule, kept schedule, scene size).

Goals: ≤ 50 ms median for the P=8 redraw path; time per action roughly constant between the
two sizes (linear growth); make + simulate ≤ 50 ms at P=64, M=256 (issue 21). Prints medians
and ratios; the machine is noisy, so no asserts.
"""
from __future__ import annotations

import statistics
import time

from pplab import NAMES, make_schedule, simulate
from pplab.registry import spec

SMALL = (8, 32, 2)
LARGE = (32, 256, 4)
#: issue 21's cases: (schedule, P, M, V)
AT_SCALE = (("interleaved", 32, 128, 2), ("interleaved", 64, 256, 2), ("zbv", 64, 256, 2),
            ("dualpipev", 64, 256, 2))


def v_for(name: str, V: int) -> int:
    """The slider's V where the schedule takes any V, else the schedule's own."""
    s = spec(name)
    return V if s.stages_per_rank == "any" else s.default_V


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def planner_time() -> None:
    """The 3D planner over every layout of Llama-3-70B on 64 GPUs, caches cleared each time."""
    from pplab.memory import get_preset
    from pplab.memory import extrapolate as ex, planner as pl, rank_memory as rm
    model = get_preset("llama3-70b").with_(seq=4096)

    def cold_plan():
        for f in (ex.sim_makespan, ex.cached_schedule, rm._alive_states, rm.rank_params,
                  rm._equivalents, pl._estimate_cached, pl._stage_scale):
            f.cache_clear()
        pl.plan(model, 64)
    print(f"\nplanner, llama3-70b on 64 GPUs, cold caches: median {median_ms(cold_plan, 3):.0f} ms "
          "over 3 runs")


def executors_at_scale(repeats: int = 5) -> None:
    """make + simulate with each executor, a fresh schedule each time (nothing compiled
    ahead), and simulate alone on a kept schedule (a cost slider: the plan is reused)."""
    print(f"\n{'make + simulate':24s} {'actions':>8s} {'make ms':>8s} {'reference ms':>13s} "
          f"{'fast ms':>8s} {'ratio':>6s} {'goal 50':>8s} {'costs only ms':>14s}")
    for name, P, M, V in AT_SCALE:
        n = make_schedule(name, P, M, V).num_actions
        make = median_ms(lambda: make_schedule(name, P, M, V), repeats)
        ref, fast = (median_ms(lambda: simulate(make_schedule(name, P, M, V), tf=1, tb=2,
                                                tw=1, executor=ex), repeats)
                     for ex in ("reference", "auto"))
        kept = make_schedule(name, P, M, V)
        simulate(kept, tf=1, tb=2, tw=1)
        costs_only = median_ms(lambda: simulate(kept, tf=1.5, tb=2, tw=1, comm=0.1), repeats)
        print(f"{name + f' P={P} M={M} V={V}':24s} {n:8d} {make:8.0f} {ref:13.0f} {fast:8.0f} "
              f"{ref / fast:6.2f} {'met' if fast <= 50 else 'missed':>8s} {costs_only:14.0f}")


def streams_vs_simulate(repeats: int = 5) -> None:
    """The stream model (lowering + messages on their own streams) against today's executor
    on the same kept schedule, in the same run: what a ``network=`` slider costs."""
    from pplab.streams import Link
    link = Link(latency=0.1, bandwidth=1.0, act_bytes=0.05)
    print(f"\n{'simulate one schedule':24s} {'actions':>8s} {'today ms':>9s} {'streams ms':>11s} "
          f"{'ratio':>6s}")
    for name, P, M, V in (("1f1b", 8, 32, 1), ("interleaved", 8, 32, 2),
                          ("dualpipev", 8, 32, 2), AT_SCALE[0]):
        kept = make_schedule(name, P, M, V)
        simulate(kept, tf=1, tb=2, tw=1)
        today = median_ms(lambda: simulate(kept, tf=1, tb=2, tw=1, comm=0.1), repeats)
        streams = median_ms(lambda: simulate(kept, tf=1, tb=2, tw=1, network=link), repeats)
        print(f"{name + f' P={P} M={M} V={V}':24s} {kept.num_actions:8d} {today:9.1f} "
              f"{streams:11.1f} {streams / today:6.1f}")


def far_corner_redraw(repeats: int = 5) -> None:
    """The timeline canvas's render at the far corner of its sliders (what the kernel does
    per slider move before the browser draws): a fresh schedule, then one the canvas kept
    (a cost slider, or a slider moved back), and the size of the scene it sends."""
    import json

    from pplab.canvases import base
    from pplab.canvases.timeline import render

    def fresh():
        base._schedule.cache_clear()
        return render("interleaved", 64, 256, 2, draw="scene")
    sc, _ = fresh()
    kb = len(json.dumps(sc, separators=(",", ":"))) / 1e3
    first = median_ms(fresh, repeats)
    kept = median_ms(lambda: render("interleaved", 64, 256, 2, tf=1.5, draw="scene"), repeats)
    print(f"\ntimeline canvas render, interleaved P=64 M=256 V=2: fresh schedule {first:.0f} ms, "
          f"kept schedule {kept:.0f} ms, scene {kb:.0f} kB (medians of {repeats})")


def v_shape_make(repeats: int = 5) -> None:
    """Building V-Min, V-Half and V-ZB alone (block, squeeze, reorder), issue 21's sizes."""
    for name in ("v-zb", "v-half", "v-min"):
        small, large = (median_ms(lambda: make_schedule(name, P, M), repeats)
                        for P, M in ((32, 128), (64, 256)))
        print(f"make {name:7s} P=32 M=128 {small:6.0f} ms (goal 100)   "
              f"P=64 M=256 {large:6.0f} ms (goal 300)")


def main() -> None:
    v_shape_make()
    executors_at_scale()
    streams_vs_simulate()
    far_corner_redraw()
    print(f"{'schedule':12s} {'P=8,M=32 ms':>12s} {'actions':>8s} {'P=32,M=256 ms':>14s} "
          f"{'actions':>8s} {'us/action small':>16s} {'us/action large':>16s} {'ratio':>6s}")
    for name in NAMES:
        row = []
        for P, M, V in (SMALL, LARGE):
            V = v_for(name, V)
            n = make_schedule(name, P, M, V).num_actions
            ms = median_ms(lambda: simulate(make_schedule(name, P, M, V), tf=1, tb=2, tw=1),
                           repeats=15 if P == 8 else 5)
            row.append((ms, n))
        (a, na), (b, nb) = row
        per_a, per_b = a / na * 1e3, b / nb * 1e3
        print(f"{name:12s} {a:12.2f} {na:8d} {b:14.1f} {nb:8d} {per_a:16.2f} {per_b:16.2f} "
              f"{per_b / per_a:6.2f}")
    planner_time()
    try:
        from pplab.draw import draw_timeline
    except ImportError:
        print("pplab.draw not available: skipping the redraw path")
        return
    import matplotlib
    matplotlib.use("Agg")

    def redraw():
        fig = draw_timeline(simulate(make_schedule("1f1b", 8, 32), tf=1, tb=2))
        fig.canvas.draw()

    redraw()  # warm-up: font cache, first figure
    print(f"\nredraw path (generate + simulate + draw + render), 1f1b P=8 M=32: "
          f"median {median_ms(redraw, 15):.1f} ms over 15 runs (goal ≤ 50 ms)")


if __name__ == "__main__":
    main()
