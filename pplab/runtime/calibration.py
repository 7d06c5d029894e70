"""Real runs for ``pplab calibrate``: measure schedules with the existing launcher, fit
``Costs`` to them (``pplab/sim/calibrate.py``), and compare measured with simulated makespans.

Every repeat is one ``run_many`` launch at one P (one torchrun start-up for all its
schedules), so the calibration runs and the runs it is checked against share a machine's
load at that moment. Measured makespans are medians over the repeats.

Ranks share this machine's cores (``os.sched_getaffinity``): ``measure`` writes that number
into each timeline's ``meta["cores"]``, and the fit and the comparison simulate with it
(``pplab.sim.contention``) unless told otherwise, as simulated timelines carry theirs. Runs with
emulated durations record none: they sleep most of each op, and a sleeping rank uses no core.
"""
from __future__ import annotations

import os
import statistics
from typing import Callable, Sequence

from ..sim.calibrate import fit_costs, fit_costs_and_cores, relative_error
from ..registry import NAMES, make_schedule
from ..sim import Costs, simulate
from ..timeline import Timeline
from .launcher import run_many
from .model import TinyConfig

#: whole-stage F/B (1f1b), half-size chunks (interleaved), split I/W on halves (zbv): every
#: op kind and two chunk sizes, so tf, tb, tw and the fixed per-op overhead are all
#: separable; one, two and one cross-rank message per op, so the per-message cost is too;
#: and naive, where one rank computes at a time, so that sharing the cores is told apart
#: from the ops' own cost (``calibrate.fit_costs_and_cores``)
CALIBRATION_SCHEDULES = ("1f1b", "interleaved", "zbv", "naive")


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


def usable_cores() -> int:
    """CPU cores this process (and the ranks it starts) may run on."""
    return len(os.sched_getaffinity(0))


def measure(names: Sequence[str], P: int, M: int, repeats: int = 3, steps: int = 6,
            model: TinyConfig | None = None, emulate: dict | None = None,
            timeout: float = 600.0, progress: Callable[[str], None] | None = None,
            pin: bool = False) -> dict[str, list[Timeline]]:
    """Measured timelines, ``repeats`` runs per schedule, each run's least disturbed step.

    All runs go into one ``run_many`` launch, round-robin (every schedule once, then again),
    so one torchrun start-up serves them all and a burst of load from other jobs hits every
    schedule alike rather than one schedule's repeats. Of a run's ``steps``, step 0 warms up
    and the timed step whose events span least is kept (``RunResult.fastest``): on a shared
    machine something else takes both cores for a few milliseconds now and then, a 10 %
    stall in a 40 ms step, and more steps per run make a clean one likelier at little cost.
    ``pin``: each rank on a core of its own when there are at least P (``RunConfig.pin``)."""
    if repeats < 1 or steps < 1:
        raise ValueError(f"repeats and steps must be ≥ 1, got {repeats} and {steps}")
    opts = dict(M=M, steps=steps, check=False, emulate=emulate, pin=pin)
    if model is not None:
        opts["model"] = model
    order = [n for _ in range(repeats) for n in names]
    if progress:
        progress(f"{len(order)} runs ({repeats} of each of {len(names)} schedule(s)) at "
                 f"P={P}, M={M} in one torchrun launch")
    out: dict[str, list[Timeline]] = {n: [] for n in names}
    cores = None if emulate else usable_cores()     # emulated time is a sleep: no core
    for name, res in zip(order, run_many([(n, opts) for n in order], P, timeout=timeout)):
        out[name].append((res.fastest or res.timeline).with_meta(cores=cores))
    return out


#: ``cores=RECORDED``: the cores the measured timelines say their ranks shared
RECORDED = "recorded"


def recorded_cores(measured: dict[str, list[Timeline]], cores=RECORDED) -> float | None:
    """``cores`` unless it is ``RECORDED``; then the timelines' ``meta["cores"]`` (None:
    a core per rank, as in the simulator's default)."""
    if cores != RECORDED:
        return cores
    found = {tl.meta.get("cores") for tls in measured.values() for tl in tls}
    if len(found) > 1:
        raise ValueError(f"the timelines record different core counts {sorted(found)}: "
                         "give cores=")
    return found.pop() if found else None


#: how one number per schedule is read off its repeats: "median" makespan, or the "min" —
#: other jobs on the cores only ever slow a run down, so the fastest repeat is the one
#: least disturbed (the fit then uses only each schedule's fastest repeat, too)
STATISTICS = ("median", "min")


def _check_statistic(statistic: str) -> None:
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")


def _chosen(measured, names, statistic: str) -> list[Timeline]:
    """The timelines a fit reads: all repeats, or each schedule's fastest (``"min"``)."""
    return [tl for n in names for tl in (measured[n] if statistic == "median" else
                                         [min(measured[n], key=lambda t: t.makespan)])]


def calibrate_on(measured: dict[str, list[Timeline]], names: Sequence[str],
                 cores=RECORDED, statistic: str = "min") -> Costs:
    """Fit ``Costs`` to the timelines of ``names`` in ``measured`` (all of them, or with
    ``statistic="min"`` each schedule's fastest), the ranks sharing ``cores`` CPU cores
    (default: as recorded by ``measure``; None: a core each)."""
    _check_statistic(statistic)
    chosen = _chosen(measured, names, statistic)
    return fit_costs(chosen, cores=recorded_cores(measured, cores))


def calibrate(measured: dict[str, list[Timeline]], names: Sequence[str], cores=RECORDED,
              statistic: str = "min") -> tuple[Costs, float | None]:
    """``calibrate_on`` that also fits the cores the ranks effectively shared (at most the
    recorded ones; ``calibrate.fit_costs_and_cores``): ``(costs, cores)``, to simulate
    with both. Without shared cores (emulated runs, ``cores=None``) it is ``calibrate_on``."""
    cores = recorded_cores(measured, cores)
    if cores is None:
        return calibrate_on(measured, names, None, statistic), None
    _check_statistic(statistic)
    chosen = _chosen(measured, names, statistic)
    return fit_costs_and_cores(chosen, cores)


def default_costs_like(costs: Costs) -> Costs:
    """The uncalibrated baseline: the simulator's default shape (tb = 2·tf, no tw, no comm, no
    fixed overhead) in seconds, with tf the fitted forward time. Default ``Costs()`` is in
    abstract units (tf = 1), so it needs this one number to be compared with seconds."""
    unit = costs.tf + costs.fixed
    return Costs(tf=unit, tb=2 * unit)


def comparison(measured: dict[str, list[Timeline]], calibrated: Costs,
               cores=RECORDED, statistic: str = "min") -> list[dict]:
    """One row per schedule: measured makespan (``statistic`` of the repeats), simulated with
    the default costs (a core per rank, as the simulator's default) and with the calibrated
    costs on ``cores`` shared cores (as for ``calibrate_on``), and both relative errors
    (simulated − measured) ÷ measured."""
    _check_statistic(statistic)
    default = default_costs_like(calibrated)
    cores = recorded_cores(measured, cores)
    pick = statistics.median if statistic == "median" else min
    rows = []
    for name, timelines in measured.items():
        schedule = timelines[0].schedule
        real = pick(tl.makespan for tl in timelines)
        sim_default = simulate(schedule, default).makespan
        sim_calibrated = simulate(schedule, calibrated, cores=cores).makespan
        rows.append({"schedule": name, "P": schedule.P, "M": schedule.M, "V": schedule.V,
                     "measured_s": real, "runs": len(timelines),
                     "spread": (max(tl.makespan for tl in timelines)
                                - min(tl.makespan for tl in timelines)) / real,
                     "default_s": sim_default, "calibrated_s": sim_calibrated,
                     "default_error": relative_error(sim_default, real),
                     "calibrated_error": relative_error(sim_calibrated, real),
                     "cores": cores, "statistic": statistic})
    return rows


def table_text(rows: list[dict]) -> str:
    """The comparison as a Markdown table (milliseconds, errors in percent); rows that carry
    ``flat_s`` (costs fitted without the shared-core model) get that column too."""
    flat = bool(rows) and "flat_s" in rows[0]
    which = "fastest" if rows and rows[0].get("statistic") == "min" else "median"
    lines = [f"| schedule | P | {which} measured ms (spread) | default ms | error | "
             + ("per-op fit ms | error | " if flat else "") + "calibrated ms | error |",
             "|---|---|---|---|---|---|---|" + ("---|---|" if flat else "")]
    for r in rows:
        cols = [r["schedule"], str(r["P"]), f"{r['measured_s'] * 1e3:.1f} "
                f"(±{r['spread'] * 50:.0f} %)"]
        for key in ("default", "flat", "calibrated") if flat else ("default", "calibrated"):
            cols += [f"{r[key + '_s'] * 1e3:.1f}", f"{r[key + '_error'] * 100:+.1f} %"]
        lines.append("| " + " | ".join(cols) + " |")
    return "\n".join(lines)
