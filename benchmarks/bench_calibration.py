"""Measured vs simulated makespans, before and after ``pplab calibrate``, for docs/calibration.md.

For each P: ``--repeats`` launches (``run_many``: one torchrun start per repeat) of every
built-in schedule at that P, M = 8, the tiny default model; costs fitted on the
calibration schedules (1f1b, interleaved, zbv) of the same launches; then, per schedule,
the median measured makespan against the simulator with the default cost shape (tb = 2·tf,
no comm, no fixed; tf the fitted forward time) and with the calibrated costs.
Run: .venv/bin/python benchmarks/bench_calibration.py [--P 2 4] [--repeats 5] [--emulate]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics

from pplab.calibrate import costs_to_dict
from pplab.runtime.model import TinyConfig
from pplab.runtime.calibration import (CALIBRATION_SCHEDULES, calibrate_on, comparison,
                                       measure, runnable_schedules, table_text,
                                       usable_cores)

EMULATED = {"tf": 0.02, "tb": 0.04, "tw": 0.015}


def machine_line() -> str:
    import torch
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
            f"{os.cpu_count()} cores, {platform.machine()}, torch {torch.__version__}, gloo; "
            f"load average {load} (1, 5, 15 min)")


def one_P(P: int, M: int, repeats: int, steps: int, emulate: dict | None,
          model: TinyConfig, pin: bool) -> list[dict]:
    """Measure every schedule at P; fit with the shared-core model (the calibrated column)
    and without it (per-op costs only, the 'per-op fit' column)."""
    names = runnable_schedules(P, M)
    print(f"P={P} before: {machine_line()}", flush=True)
    measured = measure(names, P, M, repeats, steps, model=model, emulate=emulate,
                       progress=lambda m: print(f"  {m}", flush=True), pin=pin)
    print(f"P={P} after: {machine_line()}", flush=True)
    costs = calibrate_on(measured, CALIBRATION_SCHEDULES)
    flat = calibrate_on(measured, CALIBRATION_SCHEDULES, cores=None)
    for label, c in (("shared cores", costs), ("per-op only", flat)):
        print(f"P={P}: fitted ({label}) on {', '.join(CALIBRATION_SCHEDULES)}: " + ", ".join(
            f"{k}={v * 1e3:.3f} ms" for k, v in costs_to_dict(c).items()))
    rows = comparison(measured, costs)
    for r, f in zip(rows, comparison(measured, flat, cores=None)):
        r["flat_s"], r["flat_error"] = f["calibrated_s"], f["calibrated_error"]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--P", type=int, nargs="+", default=[2, 4])
    ap.add_argument("-M", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--model", default="", metavar="K=V,...",
                    help="TinyConfig fields, e.g. hidden=256,heads=8,ffn=1024,seq=128")
    ap.add_argument("--emulate", action="store_true",
                    help=f"add emulated op durations {EMULATED} (seconds per chunk)")
    ap.add_argument("--no-pin", action="store_true",
                    help="leave ranks unpinned (default: a core each when P ≤ cores)")
    args = ap.parse_args()
    emulate = dict(EMULATED) if args.emulate else None
    model = TinyConfig(**{k: int(v) for k, v in (kv.split("=") for kv in
                                                    args.model.split(",") if kv)})
    print(f"before: {machine_line()}")
    rows = []
    for P in args.P:
        rows += one_P(P, args.M, args.repeats, args.steps, emulate, model, not args.no_pin)
    print(f"after: {machine_line()}")
    print(f"model {model}, usable cores {usable_cores()}, pinned: {not args.no_pin}")
    print(f"M={args.M}, {args.repeats} repeats, median makespan of the last of {args.steps} "
          f"steps" + (f", emulated {EMULATED}" if emulate else ", real compute (no emulation)"))
    print(table_text(rows))
    for P in args.P:
        mine = [r for r in rows if r["P"] == P]
        for key in ("default_error", "flat_error", "calibrated_error"):
            errs = [abs(r[key]) for r in mine]
            print(f"P={P} {key.split('_')[0]:>10}: |error| median {statistics.median(errs):.1%}"
                  f", max {max(errs):.1%}, ≤ 10 % on {sum(e <= 0.10 for e in errs)}/{len(errs)}")


if __name__ == "__main__":
    main()
