"""Measured vs simulated makespans, before and after ``pplab calibrate``, for docs/calibration.md.

For each P: one torchrun launch (``run_many``) of every built-in schedule at that P, M = 8,
``--repeats`` times round-robin, the tiny default model unless ``--model``; costs fitted on
the calibration schedules (1f1b, interleaved, zbv, naive) of the same launch, with the ranks
sharing the cores they effectively got of this machine's (``pplab.sim.contention``,
``calibrate.fit_costs_and_cores``) and, for comparison, a core each; then, per schedule,
the measured makespan (median of the repeats, then the fastest repeat, the fit using only
the fastest repeats) against the simulator with the default cost shape (tb = 2·tf, no comm,
no fixed; tf the fitted forward time) and with the calibrated costs.
Run: .venv/bin/python benchmarks/bench_calibration.py [--P 2 4] [--repeats 20] [--emulate]
``--save FILE`` keeps the measured timelines (a pickle of ``{P: measure(...)}``) and
``--load FILE`` fits and compares them again without a run: model changes are then judged on
the same measurements. ``--record`` (real compute only) writes the fastest-repeat table, the
fitted costs and the error summary into docs/figures.json (section "calibration"), from
where ``benchmarks/figures.py --write`` puts them into docs/calibration.md.
"""
from __future__ import annotations

import argparse
import datetime
import os
import pickle
import platform
import statistics

from figures import record

from pplab.sim.calibrate import costs_to_dict
from pplab.runtime.model import TinyConfig
from pplab.runtime.calibration import (CALIBRATION_SCHEDULES, calibrate, calibrate_on, comparison,
                                       measure, runnable_schedules, STATISTICS,
                                       table_text, usable_cores)

EMULATED = {"tf": 0.02, "tb": 0.04, "tw": 0.015}


def machine_line() -> str:
    import torch
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
            f"{os.cpu_count()} cores, {platform.machine()}, torch {torch.__version__}, gloo; "
            f"load average {load} (1, 5, 15 min)")


def rows_for(P: int, measured: dict, statistic: str) -> list[dict]:
    """Fit with the shared-core model (the calibrated column) and without it (per-op costs
    only, the 'per-op fit' column); compare on ``statistic`` of the repeats."""
    costs, cores = calibrate(measured, CALIBRATION_SCHEDULES, statistic=statistic)
    flat = calibrate_on(measured, CALIBRATION_SCHEDULES, cores=None, statistic=statistic)
    shared = f"{cores:.2f}" if cores else "none"
    for label, c in ((f"shared cores, effectively {shared}", costs), ("per-op only", flat)):
        print(f"P={P}, {statistic}: fitted ({label}): " + ", ".join(
            f"{k}={v * 1e3:.3f} ms" for k, v in costs_to_dict(c).items()))
    rows = comparison(measured, costs, cores, statistic=statistic)
    for r, f in zip(rows, comparison(measured, flat, cores=None, statistic=statistic)):
        r["flat_s"], r["flat_error"] = f["calibrated_s"], f["calibrated_error"]
    FITTED[(P, statistic)] = fitted_text(P, costs, cores)
    return rows


#: (P, statistic) -> the fitted costs as the docs print them (filled by rows_for)
FITTED: dict = {}


def fitted_text(P: int, costs, cores) -> str:
    """``P = 2 tf 1.53 ms, tb 1.80, ..., cores 1.85 of 2``: milliseconds, the first with
    its unit, as docs/calibration.md prints a fit."""
    parts = [f"{k} {v * 1e3:.3g}" for k, v in costs_to_dict(costs).items()]
    parts[0] += " ms"
    shared = f", cores {cores:.2f} of {usable_cores()}" if cores else ", a core per rank"
    return f"P = {P} " + ", ".join(parts) + shared


def summary(rows: list[dict]) -> list[str]:
    """Per P and column: the median and largest |error| and how many rows are within 10 %."""
    lines = []
    for P in sorted({r["P"] for r in rows}):
        mine = [r for r in rows if r["P"] == P]
        for key, label in (("default_error", "default"), ("flat_error", "per-op fit"),
                           ("calibrated_error", "calibrated")):
            errs = [abs(r[key]) for r in mine]
            lines.append(f"P={P} {label:>10}: |error| median "
                         f"{statistics.median(errs):.1%}, max {max(errs):.1%}, ≤ 10 % on "
                         f"{sum(e <= 0.10 for e in errs)}/{len(errs)}")
    print("\n".join(lines))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--P", type=int, nargs="+", default=[2, 4])
    ap.add_argument("-M", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--steps", type=int, default=6,
                    help="steps per run: step 0 warms up, the least disturbed of the rest counts")
    ap.add_argument("--model", default="", metavar="K=V,...",
                    help="TinyConfig fields, e.g. hidden=256,heads=8,ffn=1024,seq=128")
    ap.add_argument("--emulate", action="store_true",
                    help=f"add emulated op durations {EMULATED} (seconds per chunk)")
    ap.add_argument("--pin", action="store_true",
                    help="bind each rank to a core of its own when P ≤ cores")
    ap.add_argument("--save", metavar="FILE", help="keep the measured timelines here")
    ap.add_argument("--load", metavar="FILE", help="fit timelines saved by --save; run nothing")
    ap.add_argument("--record", action="store_true",
                    help="write the fastest-repeat figures into docs/figures.json")
    args = ap.parse_args()
    if args.record and (args.emulate or args.load):
        ap.error("--record keeps a new real-compute run's figures: drop --emulate and --load")
    if args.load:
        with open(args.load, "rb") as f:
            measured = pickle.load(f)
        report(sorted(measured), measured)
        return
    emulate = dict(EMULATED) if args.emulate else None
    model = TinyConfig(**{k: int(v) for k, v in (kv.split("=") for kv in
                                                    args.model.split(",") if kv)})
    print(f"model {model}, usable cores {usable_cores()}, pinned: {args.pin}; M={args.M}, "
          f"{args.repeats} repeats, the least disturbed of steps 1–{args.steps - 1} timed"
          + (f", emulated {EMULATED}" if emulate else ", real compute (no emulation)"))
    measured = {}
    for P in args.P:
        print(f"P={P} before: {machine_line()}", flush=True)
        measured[P] = measure(runnable_schedules(P, args.M), P, args.M, args.repeats,
                              args.steps, model=model, emulate=emulate, pin=args.pin,
                              progress=lambda m: print(f"  {m}", flush=True))
        print(f"P={P} after: {machine_line()}", flush=True)
    if args.save:
        with open(args.save, "wb") as f:
            pickle.dump(measured, f)
    tables = report(args.P, measured)
    if args.record:
        by = (f"benchmarks/bench_calibration.py --P {' '.join(map(str, args.P))} --repeats "
              f"{args.repeats} --steps {args.steps}")
        record("calibration",
               {"table": f"\n{tables['min'][0]}\n", "summary": "\n".join(tables["min"][1]),
                "fitted": "; ".join(FITTED[(P, "min")] for P in args.P),
                "repeats": str(args.repeats)}, by)


def report(Ps, measured) -> dict:
    """Print, per statistic, the comparison table and its summary; return them."""
    out = {}
    for statistic in STATISTICS:
        rows = [r for P in Ps for r in rows_for(P, measured[P], statistic)]
        print(table_text(rows))
        out[statistic] = (table_text(rows), summary(rows))
    return out


if __name__ == "__main__":
    main()
