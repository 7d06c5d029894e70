"""The simulator's one entry point, ``simulate``, and ``execute`` (the validator's and the
lowering's way in): each picks the fast executor wherever it gives the reference's answer,
else the reference (``reference.py`` states the rules both follow).
"""
from __future__ import annotations

from itertools import repeat
from operator import and_
from typing import Callable

from ..ir import Op, Schedule, op_of_key
from ..keys import PAIR_CLASS_MASK
from ..timeline import Event, Timeline, run_events
from . import fast
from .compiled import CompiledSchedule
from .costs import Costs
from .dependencies import compile_graph
from .reference import execute_reference


#: which executor ``execute`` and ``simulate`` use: "auto" (the fast one wherever it gives
#: the reference's answer, else the reference), "fast" (same, named) or "reference"
EXECUTORS = ("auto", "fast", "reference")


def execute(schedule: Schedule, duration: Callable[[Op], float], comm: float = 0.0,
            executor: str = "auto", by_class: bool = False) -> list[Event]:
    """Run every rank's list in order; return events. Raises DeadlockError if stuck.

    An op starts when its rank is free and all its dependencies have finished (plus
    ``comm`` for a dependency produced on another rank). ``executor`` picks the
    implementation (``EXECUTORS``); the fast one (``pplab.sim.fast``) returns the
    reference's events, in the same order, and hands every schedule it cannot take (errors
    included) back to the reference. ``by_class``: ``duration`` depends only on an op's kind
    and stages, so it may be asked once per (kind, stage).
    """
    run = _fast_run(schedule, duration, comm, executor, by_class)
    if run is not None:
        return run_events(run)
    return execute_reference(schedule, duration, comm)


def _fast_run(schedule: Schedule, duration, comm: float, executor: str, by_class: bool,
              compiled: CompiledSchedule | None = None):
    """The fast executor's columns (``timeline.RunColumns``), or None where the reference
    answers: asked for by name, or a schedule the fast one steps aside from."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if executor == "reference":
        return None
    if compiled is not None and compiled.schedule is not schedule \
            and compiled.schedule != schedule:
        raise ValueError("compiled= is compile_schedule(schedule) of the schedule simulated")
    return fast.run(schedule, duration, comm, by_class, compiled)


def simulate(schedule: Schedule, costs: Costs | None = None, *, executor: str = "auto",
             cores: float | None = None, compiled: CompiledSchedule | None = None,
             **cost_kw) -> Timeline:
    """Simulate ``schedule`` under ``costs`` (or keyword costs, e.g. ``tf=1, tb=2``);
    ``executor`` as for :func:`execute` (every choice gives the same timeline).
    ``compiled``: ``compile_schedule(schedule)``, kept by a caller that simulates the same
    schedule again (a cost slider, a search): it skips the compile.
    ``cores``: the ranks share that many CPU cores (``pplab.sim.contention``); None, the
    default, gives each rank its own. Communication as its own stream is the stream model's
    entry, ``pplab.streams.simulate_streams`` (it sits above the lowering, which this
    one sits below)."""
    if "network" in cost_kw:
        raise TypeError("simulate has no network=: for communication as its own stream call "
                        "pplab.streams.simulate_streams(schedule, costs, link)")
    if costs is None:
        costs = Costs(**cost_kw)
    elif cost_kw:
        raise TypeError("pass either a Costs object or keyword costs, not both")
    if costs.stage_scale is not None and len(costs.stage_scale) != schedule.num_stages:
        raise ValueError(f"stage_scale has {len(costs.stage_scale)} entries but the schedule has "
                         f"{schedule.num_stages} stages")
    meta = {"schedule": schedule.name, "P": schedule.P, "M": schedule.M, "V": schedule.V,
            "costs": _costs_dict(costs)}
    if cores is None:
        duration = costs.duration_fn(schedule)
        run = _fast_run(schedule, duration, costs.comm, executor, True, compiled)
        if run is not None:          # columns; an event is made only when read
            return Timeline.from_run(schedule, run, "simulated", meta)
        events = execute_reference(schedule, duration, costs.comm)
    else:
        events = _shared_cores(schedule, costs, cores)
    return Timeline.of_events(schedule.P, events, "simulated", schedule,
                              meta if cores is None else dict(meta, cores=cores))


def _shared_cores(schedule: Schedule, costs: Costs, cores: float) -> list[Event]:
    """The contention executor's events; the reference raises for a schedule it cannot run."""
    from . import contention
    duration = costs.duration_fn(schedule)
    events = contention.execute(schedule, _durations_by_class(schedule, duration), costs.comm,
                                contention.check_cores(cores), compile_graph(schedule))
    return events if events is not None else execute_reference(schedule, duration, costs.comm)


def _durations_by_class(schedule: Schedule, duration) -> list[list[float]]:
    """Each rank's op durations, ``duration`` asked once per duration class (it reads only
    kinds and stages, as ``Costs.duration_fn`` does)."""
    table: dict[int, float] = {}
    out = []
    for row in schedule.rank_keys():
        classes = list(map(and_, row, repeat(PAIR_CLASS_MASK)))
        for c in set(classes) - table.keys():
            table[c] = duration(op_of_key(c))     # a class is its microbatch 0's key
        out.append(list(map(table.__getitem__, classes)))
    return out


def _costs_dict(c: Costs) -> dict:
    d = {"tf": c.tf, "tb": c.tb, "tw": c.tw, "tfb": c.overlapped, "comm": c.comm,
         "fixed": c.fixed}
    if c.msg:
        d["msg"] = c.msg
    return d
