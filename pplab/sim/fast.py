"""The simulator's fast executor: the reference's events, same order, same float operations.

``pplab.sim.reference.execute_reference`` stays the oracle; this module replays its worklist
(the same ranks woken in the same order) and so returns exactly its times. It is faster
because it works on the schedule's integer keys (``pplab.keys``), never on Action objects,
and because of three facts:

* **Only cross-rank inputs matter.** A dependency run earlier on the same rank ended before
  the rank became free, so it never moves a start time (durations are ≥ 0) and never
  blocks; the compile (``plan.py``) only checks that it comes earlier. What is left is one
  input per op from another rank (up to two for an overlapped pair), found once, as an index.
* **The run order does not depend on the costs.** The reference blocks on "not run yet",
  never on a time, so its order is fixed by the schedule. The first simulation records
  it; later ones (a cost slider, the search, the planner) walk it in one straight loop.
* **Columns, not objects.** The result is the run order and a start and an end per op
  (:class:`Run`); ``Timeline`` makes Event objects from them only when they are read.

Anything unusual (see ``plan.py``; a deadlock, a negative duration) makes the fast path step
aside: the caller then runs the reference, which raises its own, well-worded error.
"""
from __future__ import annotations

from itertools import chain
from typing import Callable, NamedTuple

from ..ir import Op, Schedule, gc_paused, op_of_key
from ..timeline import run_events
from .plan import PAIR, Plan, plan

#: the end time of the part ``Plan.nothing``: never the later of two times
NEVER = float("-inf")


class Run(NamedTuple):
    """One simulation as columns over the schedule's ops in rank-major order: op ``i`` ran
    on ``rank[i]`` from ``start[i]`` to ``end[i]``; ``order`` is the reference's event
    order; ``bounds[r]`` .. ``bounds[r + 1] - 1`` are rank r's ops."""
    order: list[int]
    rank: list[int]
    start: list[float]
    end: list[float]
    bounds: list[int]
    keys: list
    #: what depends on the schedule alone (per-rank peaks, kinds), kept with its plan
    memo: dict


def first_run(pl: Plan, dur: list[float], comm: float):
    """The reference's worklist: ``(start, end)``, ``pl.order`` filled in, or None where
    the reference must answer (a deadlock). A rank runs until an input from another rank
    is missing, then waits for that part (``Plan`` numbers the parts)."""
    n, source, part_source, bounds = pl.n, pl.source, pl.part_source, pl.bounds
    P = len(bounds) - 1
    start, end, waiter = [0.0] * n, [None] * (2 * n + 1), [None] * (2 * n)
    end[pl.nothing] = NEVER
    pointer, free_at, stretches = bounds[:P], [0.0] * P, []
    todo = list(range(P))
    pop, push = todo.pop, todo.append
    while todo:
        rank = pop()
        i0 = i = pointer[rank]
        stop, t = bounds[rank + 1], free_at[rank]
        while i < stop:
            d = source[i]
            if d != PAIR:
                e = end[d]
                if e is None:
                    waiter[d] = rank
                    break
                e += comm
                if e > t:
                    t = e
                start[i] = t
                t += dur[i]
                end[i] = t
            else:                                    # an overlapped pair: two inputs
                a, b = part_source[i], part_source[n + i]
                ea, eb = end[a], end[b]
                if ea is None or eb is None:
                    waiter[a if ea is None else b] = rank
                    break
                start[i] = t = max(t, ea + comm, eb + comm)
                t += dur[i]
                end[i] = end[n + i] = t
                if waiter[i] is not None:            # woken part by part, as the reference
                    push(waiter[i])
                if waiter[n + i] is not None:
                    push(waiter[n + i])
                i += 1
                continue
            if waiter[i] is not None:
                push(waiter[i])
            i += 1
        stretches.append(range(i0, i))
        pointer[rank], free_at[rank] = i, t
    order = list(chain.from_iterable(stretches))
    if len(order) < n:
        return None
    pl.order = order
    return start, end


def rerun(pl: Plan, dur: list[float], comm: float):
    """Times along the recorded run order: one straight pass, every input already done."""
    n, source, part_source, previous = pl.n, pl.source, pl.part_source, pl.previous()
    start, end = [0.0] * n, [0.0] * (2 * n + 2)       # end[pl.rank_start] stays 0
    end[pl.nothing] = NEVER
    for i in pl.order:
        t = end[previous[i]]
        d = source[i]
        if d != PAIR:
            e = end[d] + comm
            if e > t:
                t = e
            start[i] = t
            end[i] = t + dur[i]
        else:
            start[i] = t = max(t, end[part_source[i]] + comm, end[part_source[n + i]] + comm)
            end[i] = end[n + i] = t + dur[i]
    return start, end


def run(schedule: Schedule, duration: Callable[[Op], float], comm: float = 0.0,
        by_class: bool = False) -> Run | None:
    """The reference's times as columns, or None where the reference must answer.

    ``by_class=True`` promises that ``duration`` depends only on an op's kind and stages
    (true of ``Costs.duration_fn``): it is then asked once per class, not once per op.
    """
    with gc_paused():
        pl = plan(schedule)
        if pl is None:
            return None
        if by_class:
            # a class is the key of its microbatch 0: its op stands for every op of the class
            table = {c: duration(op_of_key(c)) for c in set(pl.cls)}
            dur = list(map(table.__getitem__, pl.cls))
            values = table.values()
        else:
            dur = values = list(map(duration, chain.from_iterable(schedule.ranks)))
        if not all(x >= 0 for x in values):
            return None                          # NaN too: the reference decides
        times = rerun(pl, dur, comm) if pl.order is not None else first_run(pl, dur, comm)
        if times is None:
            return None
        return Run(pl.order, pl.rank, times[0], times[1], pl.bounds, pl.keys, pl.memo)


def execute(schedule: Schedule, duration: Callable[[Op], float], comm: float = 0.0,
            by_class: bool = False) -> list | None:
    """Events as the reference gives them, or None where the reference must answer."""
    r = run(schedule, duration, comm, by_class)
    return None if r is None else run_events(r, schedule)
