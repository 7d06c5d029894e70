"""Median time to generate + simulate every schedule at a slider-sized and a cluster-sized
configuration, and to also draw the slider-sized one (the live canvas's redraw path); then
the fast executor against the reference one (``simulate(..., executor=...)``) at the far
corner of the sliders (P=64, M=256), in the same run, and the timeline canvas's render there
(fresh schedule, kept schedule, scene size).

Goals: ≤ 50 ms median for the P=8 redraw path; time per action roughly constant between the
two sizes (linear growth); make + simulate ≤ 50 ms at P=64, M=256. Prints medians and
ratios; the machine is noisy, so no asserts. ``--record`` writes the figures the docs quote
into docs/figures.json (section "simulator").

``--against DIR`` (a checkout of another version, e.g. ``git archive main | tar -x -C DIR``)
times make + simulate at P=64, M=256 in this tree and in DIR, in fresh processes taking
turns, and prints each side's median and their ratio: a change's cost measured in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from figures import record

from pplab import NAMES, make_schedule, simulate
from pplab.sim import compile_schedule
from pplab.registry import spec

SMALL = (8, 32, 2)
LARGE = (32, 256, 4)
#: the far corner of the canvases' sliders, and a middle size: (schedule, P, M, V)
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


def executors_at_scale(figs: dict, repeats: int = 5) -> None:
    """make + simulate with each executor, a fresh schedule each time (nothing compiled
    ahead), and simulate alone on a kept schedule (a cost slider: its compile_schedule value
    is reused)."""
    print(f"\n{'make + simulate':24s} {'actions':>8s} {'make ms':>8s} {'reference ms':>13s} "
          f"{'fast ms':>8s} {'ratio':>6s} {'goal 50':>8s} {'costs only ms':>14s}")
    for name, P, M, V in AT_SCALE:
        n = make_schedule(name, P, M, V).num_actions
        make = median_ms(lambda: make_schedule(name, P, M, V), repeats)
        ref, fast = (median_ms(lambda: simulate(make_schedule(name, P, M, V), tf=1, tb=2,
                                                tw=1, executor=ex), repeats)
                     for ex in ("reference", "auto"))
        kept = make_schedule(name, P, M, V)
        compiled = compile_schedule(kept)
        costs_only = median_ms(lambda: simulate(kept, tf=1.5, tb=2, tw=1, comm=0.1,
                                                compiled=compiled), repeats)
        print(f"{name + f' P={P} M={M} V={V}':24s} {n:8d} {make:8.0f} {ref:13.0f} {fast:8.0f} "
              f"{ref / fast:6.2f} {'met' if fast <= 50 else 'missed':>8s} {costs_only:14.0f}")
        key = f"{name}_p{P}"
        figs.update({f"{key}_ms": f"{fast:.0f} ms", f"{key}_reference_ms": f"{ref:.0f} ms",
                     f"{key}_ratio": f"{ref / fast:.1f}×",
                     f"{key}_again_ms": f"{costs_only:.0f} ms"})


def streams_vs_simulate(figs: dict, repeats: int = 5) -> None:
    """The stream model (lowering + messages on their own streams) against the compute-only
    executor on the same kept schedule, in the same run: what a network slider costs. The
    first stream run of a schedule and lowering is the full worklist (recorded); a slider's
    later ones replay it (``pplab/streams/replay.py``). Goal: ≤ 4× the compute-only path
    at interleaved P=32, M=128 (the last line prints that ratio)."""
    from pplab.streams import Link, compile_streams, simulate_streams
    link = Link(latency=0.1, bandwidth=1.0, act_bytes=0.05)
    print(f"\n{'simulate one kept schedule':27s} {'actions':>8s} {'compute ms':>11s} "
          f"{'streams ms':>11s} {'ratio':>6s} {'first streams run ms':>21s}")
    ratio = None
    for name, P, M, V in (("1f1b", 8, 32, 1), ("interleaved", 8, 32, 2),
                          ("dualpipev", 8, 32, 2), AT_SCALE[0]):
        kept = make_schedule(name, P, M, V)
        compiled = compile_schedule(kept)
        t0 = time.perf_counter()
        streams_kept = compile_streams(kept, link.lowering, link.blocking)
        first = (time.perf_counter() - t0) * 1e3
        today = median_ms(lambda: simulate(kept, tf=1.5, tb=2, tw=1, comm=0.1,
                                           compiled=compiled), repeats)
        streams = median_ms(lambda: simulate_streams(kept, tf=1.5, tb=2, tw=1, link=link,
                                                     compiled=streams_kept), repeats)
        ratio = streams / today
        print(f"{name + f' P={P} M={M} V={V}':27s} {kept.num_actions:8d} {today:11.1f} "
              f"{streams:11.1f} {ratio:6.1f} {first:21.0f}")
    name, P, M, V = AT_SCALE[0]
    print(f"streams / compute-only, {name} P={P} M={M}: {ratio:.1f}× (goal ≤ 4×, "
          f"{'met' if ratio <= 4 else 'missed'})")
    figs.update(streams_ratio=f"{ratio:.1f}×", streams_ms=f"{streams:.1f} ms")


def network_canvas_redraw(moves: int = 40) -> None:
    """The canvas with a network slider (lesson 05's head-of-line canvas: two stream-model
    runs and their scene per move) at the far corner of its P, M and V sliders: the render
    of a first visit, then of latency and tb moves on the kept schedule (replayed). Goal: the
    course's slider goal, p50 ≤ 50 ms and p95 ≤ 100 ms (``bench_browser.py``), here the
    kernel's share of it."""
    from pplab.canvases.cache import KEPT
    from pplab.canvases.head_of_line import HOL_COSTS, HOL_M, HOL_P, HOL_V, render_head_of_line
    P, M, V = HOL_P[1], HOL_M[1], HOL_V[1]

    def positions(name):
        lo, hi, step = HOL_COSTS[name]
        return [lo + step * k for k in range(round((hi - lo) / step) + 1)]
    latencies, tbs = positions("latency"), positions("tb")
    KEPT.schedules.clear()
    t0 = time.perf_counter()
    render_head_of_line(P, M, V, tbs[0], latencies[0])
    first = (time.perf_counter() - t0) * 1e3
    times = []
    for k in range(moves):
        t0 = time.perf_counter()
        render_head_of_line(P, M, V, tbs[k // len(latencies) % len(tbs)],
                            latencies[k % len(latencies)])
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    p50, p95 = times[len(times) // 2], times[min(len(times) - 1, int(0.95 * len(times)))]
    print(f"\nhead-of-line canvas (network slider) at P={P} M={M} V={V}: first visit "
          f"{first:.0f} ms; {moves} latency/tb moves p50 {p50:.1f} ms p95 {p95:.1f} ms "
          f"(goal p50 ≤ 50, p95 ≤ 100: {'met' if p50 <= 50 and p95 <= 100 else 'missed'})")


def far_corner_redraw(figs: dict, repeats: int = 5) -> None:
    """The timeline canvas's render at the far corner of its sliders (what the kernel does
    per slider move before the browser draws): a fresh schedule, then one the canvas kept
    (a cost slider, or a slider moved back), and the size of the scene it sends."""
    import json

    from pplab.canvases.cache import KEPT
    from pplab.canvases.timeline import render

    def fresh():
        KEPT.schedules.clear()
        return render("interleaved", 64, 256, 2)
    sc, _ = fresh()
    kb = len(json.dumps(sc, separators=(",", ":"))) / 1e3
    first = median_ms(fresh, repeats)
    kept = median_ms(lambda: render("interleaved", 64, 256, 2, tf=1.5), repeats)
    print(f"\ntimeline canvas render, interleaved P=64 M=256 V=2: fresh schedule {first:.0f} ms, "
          f"kept schedule {kept:.0f} ms, scene {kb:.0f} kB (medians of {repeats})")
    figs.update(canvas_fresh_ms=f"{first:.0f} ms", canvas_kept_ms=f"{kept:.0f} ms",
                scene_kb=f"{kb:.0f} kB")


def v_shape_make(repeats: int = 5) -> None:
    """Building V-Min, V-Half and V-ZB alone (block, squeeze, reorder), at two sizes."""
    for name in ("v-zb", "v-half", "v-min"):
        small, large = (median_ms(lambda: make_schedule(name, P, M), repeats)
                        for P, M in ((32, 128), (64, 256)))
        print(f"make {name:7s} P=32 M=128 {small:6.0f} ms (goal 100)   "
              f"P=64 M=256 {large:6.0f} ms (goal 300)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", action="store_true", help="write docs/figures.json's figures")
    ap.add_argument("--against", metavar="DIR", help="time make + simulate here and in DIR")
    opts = ap.parse_args()
    if opts.against:
        against(opts.against)
        return
    figs: dict[str, str] = {}
    v_shape_make()
    executors_at_scale(figs)
    streams_vs_simulate(figs)
    network_canvas_redraw()
    far_corner_redraw(figs)
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
    drawn = redraw_path()
    if drawn is not None:
        figs["redraw_p8_ms"] = f"{drawn:.0f} ms"
    if opts.record:
        record("simulator", figs, "make bench (benchmarks/bench_simulator.py --record)")


def redraw_path() -> float | None:
    """generate + simulate + draw + render of a slider-sized schedule, ms (None: no drawing)."""
    try:
        from pplab.draw import draw_timeline
    except ImportError:
        print("pplab.draw not available: skipping the redraw path")
        return None
    import matplotlib
    matplotlib.use("Agg")

    def redraw():
        fig = draw_timeline(simulate(make_schedule("1f1b", 8, 32), tf=1, tb=2))
        fig.canvas.draw()

    redraw()  # warm-up: font cache, first figure
    drawn = median_ms(redraw, 15)
    print(f"\nredraw path (generate + simulate + draw + render), 1f1b P=8 M=32: "
          f"median {drawn:.1f} ms over 15 runs (goal ≤ 50 ms)")
    return drawn


#: one side's turn in ``--against``: every case made and simulated ``REPS`` times
TURN = """
import json, sys, time
from pplab import make_schedule, simulate
out = {}
for name, P, M, V in CASES:
    simulate(make_schedule(name, P, M, V), tf=1, tb=2, tw=1)       # imports, caches warm
    wall, cpu = [], []
    for _ in range(REPS):
        t0, c0 = time.perf_counter(), time.process_time()
        simulate(make_schedule(name, P, M, V), tf=1, tb=2, tw=1)
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    out[f"{name} P={P} M={M}"] = [wall, cpu]
print(json.dumps(out))
"""


def against(other: str, rounds: int = 8, reps: int = 5) -> None:
    """make + simulate at issue 21's sizes here and in ``other``, in fresh processes that
    alternate (so both sides see the same load); medians over every repetition, of the wall
    clock and of the process's own CPU time (which other processes' load disturbs less)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = TURN.replace("CASES", repr(AT_SCALE[1:])).replace("REPS", str(reps))
    times: dict[str, dict[str, list]] = {"before": {}, "after": {}}
    for _ in range(rounds):
        for side, root in (("before", other), ("after", here)):
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 cwd=root, env=dict(os.environ, PYTHONPATH=root),
                                 timeout=600, check=True).stdout
            for case, (wall, cpu) in json.loads(out).items():
                kept = times[side].setdefault(case, ([], []))
                kept[0].extend(wall)
                kept[1].extend(cpu)
    print(f"make + simulate, {rounds} alternating rounds of {reps}: before = {other}, "
          f"after = this tree; medians, wall clock and CPU time")
    print(f"{'case':24s} {'before ms':>10s} {'after ms':>9s} {'ratio':>6s}   "
          f"{'before CPU':>10s} {'after CPU':>9s} {'ratio':>6s}")
    for case in times["after"]:
        (bw, bc), (aw, ac) = ([statistics.median(x) for x in times[side][case]]
                              for side in ("before", "after"))
        print(f"{case:24s} {bw:10.1f} {aw:9.1f} {aw / bw:6.3f}   {bc:10.1f} {ac:9.1f} "
              f"{ac / bc:6.3f}")


if __name__ == "__main__":
    main()
