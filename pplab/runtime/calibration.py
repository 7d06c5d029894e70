"""Real runs for ``pplab calibrate``: measure schedules with the existing launcher, fit
``Costs`` to them (``pplab/calibrate.py``), and compare measured with simulated makespans.

Every repeat is one ``run_many`` launch at one P (one torchrun start-up for all its
schedules), so the calibration runs and the runs it is checked against share a machine's
load at that moment. Measured makespans are medians over the repeats.
"""
from __future__ import annotations

import statistics
from typing import Callable, Sequence

from ..calibrate import fit_costs, relative_error
from ..registry import NAMES, make_schedule
from ..simulate import Costs, simulate
from ..timeline import Timeline
from .launcher import run_many
from .model import TinyConfig

#: whole-stage F/B (1f1b), half-size chunks (interleaved), split I/W on halves (zbv): every
#: op kind and two chunk sizes, so tf, tb, tw and the fixed per-op overhead are all separable
CALIBRATION_SCHEDULES = ("1f1b", "interleaved", "zbv")


def runnable_schedules(P: int, M: int) -> list[str]:
    """The built-in schedules whose generator accepts (P, M) at their default V."""
    out = []
    for name in NAMES:
        try:
            make_schedule(name, P, M)
        except ValueError:
            continue
        out.append(name)
    return out


def check_names(names: Sequence[str], P: int, M: int) -> list[str]:
    """Names as the registry spells them; ValueError in one line for one it cannot build."""
    if not names:
        raise ValueError("give at least one schedule to calibrate on")
    out = []
    for name in names:
        out.append(make_schedule(name, P, M).name)    # ValueError names the rule broken
    return out


def measure(names: Sequence[str], P: int, M: int, repeats: int = 3, steps: int = 3,
            model: TinyConfig | None = None, emulate: dict | None = None,
            timeout: float = 600.0,
            progress: Callable[[str], None] | None = None) -> dict[str, list[Timeline]]:
    """Measured timelines (the last step of each run), ``repeats`` runs per schedule.

    All runs go into one ``run_many`` launch, round-robin (every schedule once, then again),
    so one torchrun start-up serves them all and a burst of load from other jobs hits every
    schedule alike rather than one schedule's repeats."""
    if repeats < 1 or steps < 1:
        raise ValueError(f"repeats and steps must be ≥ 1, got {repeats} and {steps}")
    opts = dict(M=M, steps=steps, check=False, emulate=emulate)
    if model is not None:
        opts["model"] = model
    order = [n for _ in range(repeats) for n in names]
    if progress:
        progress(f"{len(order)} runs ({repeats} of each of {len(names)} schedule(s)) at "
                 f"P={P}, M={M} in one torchrun launch")
    out: dict[str, list[Timeline]] = {n: [] for n in names}
    for name, res in zip(order, run_many([(n, opts) for n in order], P, timeout=timeout)):
        out[name].append(res.timeline)
    return out


def calibrate_on(measured: dict[str, list[Timeline]], names: Sequence[str]) -> Costs:
    """Fit ``Costs`` to every timeline of ``names`` in ``measured``."""
    return fit_costs([tl for n in names for tl in measured[n]])


def default_costs_like(costs: Costs) -> Costs:
    """The uncalibrated baseline: the simulator's default shape (tb = 2·tf, no tw, no comm, no
    fixed overhead) in seconds, with tf the fitted forward time. Default ``Costs()`` is in
    abstract units (tf = 1), so it needs this one number to be compared with seconds."""
    unit = costs.tf + costs.fixed
    return Costs(tf=unit, tb=2 * unit)


def comparison(measured: dict[str, list[Timeline]], calibrated: Costs) -> list[dict]:
    """One row per schedule: median measured makespan, simulated with the default and the
    calibrated costs, and both relative errors (simulated − measured) ÷ measured."""
    default = default_costs_like(calibrated)
    rows = []
    for name, timelines in measured.items():
        schedule = timelines[0].schedule
        real = statistics.median(tl.makespan for tl in timelines)
        sim_default = simulate(schedule, default).makespan
        sim_calibrated = simulate(schedule, calibrated).makespan
        rows.append({"schedule": name, "P": schedule.P, "M": schedule.M, "V": schedule.V,
                     "measured_s": real, "runs": len(timelines),
                     "spread": (max(tl.makespan for tl in timelines)
                                - min(tl.makespan for tl in timelines)) / real,
                     "default_s": sim_default, "calibrated_s": sim_calibrated,
                     "default_error": relative_error(sim_default, real),
                     "calibrated_error": relative_error(sim_calibrated, real)})
    return rows


def table_text(rows: list[dict]) -> str:
    """The comparison as a Markdown table (milliseconds, errors in percent)."""
    lines = ["| schedule | P | measured ms (spread) | default ms | error | calibrated ms | "
             "error |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['schedule']} | {r['P']} | {r['measured_s'] * 1e3:.1f} "
                     f"(±{r['spread'] * 50:.0f} %) | {r['default_s'] * 1e3:.1f} | "
                     f"{r['default_error'] * 100:+.1f} % | {r['calibrated_s'] * 1e3:.1f} | "
                     f"{r['calibrated_error'] * 100:+.1f} % |")
    return "\n".join(lines)
