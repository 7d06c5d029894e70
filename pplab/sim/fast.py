"""The simulator's fast executor: the reference's events, same order, same float operations.

``pplab.sim.reference.execute_reference`` stays the oracle; this module gives exactly its
times. It is faster because it works on the schedule's integer keys (``pplab.keys``), never
on Action objects, and because of three facts:

* **Only cross-rank inputs matter.** A dependency run earlier on the same rank ended before
  the rank became free, so it never moves a start time (durations are ≥ 0) and never
  blocks; the compile (``compiled.py``) only checks that it comes earlier. What is left is
  one input per op from another rank (up to two for an overlapped pair), found once.
* **The run order does not depend on the costs.** The reference blocks on "not run yet",
  never on a time, so its order is fixed by the schedule: ``compile_schedule`` finds it
  once (``CompiledSchedule.order``), and a caller that keeps that value simulates with one
  straight timing pass along it; a schedule nobody kept runs the worklist (``first_run``),
  one pass that finds the order and the times together.
* **Columns, not objects.** The result is a start and an end per op
  (``timeline.RunColumns``), the timeline's own storage; an Event is made only when read.

Anything unusual (see ``compiled.py``; a deadlock, a negative duration) makes the fast path
step aside: the caller then runs the reference, which raises its own, well-worded error.
"""
from __future__ import annotations

from itertools import chain
from typing import Callable

from ..ir import Op, Schedule, gc_paused, op_of_key
from ..timeline import RunColumns
from .compiled import PAIR, CompiledSchedule, Inputs, schedule_inputs

#: the end time of the part ``CompiledSchedule.nothing``: never the later of two times
NEVER = float("-inf")


def first_run(c: Inputs, dur: list[float], comm: float):
    """The reference's worklist: ``(start, end, order)``, or None where the reference must
    answer (a deadlock). A rank runs until an input from another rank is not made yet,
    then waits for that part (``Inputs`` numbers the parts), and is woken when it is made.
    What a simulation of a schedule nobody kept compiled runs; ``compile_schedule`` runs
    it once without costs to keep the order."""
    n, source, part_source, bounds = c.n, c.source, c.part_source, c.bounds
    P = len(bounds) - 1
    start, end, waiter = [0.0] * n, [None] * (2 * n + 1), [None] * (2 * n)
    end[c.nothing] = NEVER
    pointer, free_at, stretches = list(bounds[:P]), [0.0] * P, []
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
    return None if len(order) < n else (start, end, order)


def timing_pass(c: CompiledSchedule, dur: list[float], comm: float):
    """``(start, end)`` per op along a kept run order: one straight pass, every input done."""
    inputs = c.inputs
    n, source, part_source, previous = inputs.n, inputs.source, inputs.part_source, c.previous
    start, end = [0.0] * n, [0.0] * (2 * n + 2)       # end[rank_start] stays 0
    end[inputs.nothing] = NEVER
    for i in c.order:
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
        by_class: bool = False, compiled: CompiledSchedule | None = None) -> RunColumns | None:
    """The reference's times as columns, or None where the reference must answer.

    ``compiled``: ``compile_schedule(schedule)``, kept by the caller: one timing pass along
    its order; without it, the schedule's inputs and one worklist pass. ``by_class=True``
    promises that ``duration`` depends only on an op's kind and stages (true of
    ``Costs.duration_fn``): it is then asked once per class, not once per op.
    """
    with gc_paused():
        inputs = schedule_inputs(schedule) if compiled is None else compiled.inputs
        if inputs is None:
            return None
        if by_class:
            # a class is the key of its microbatch 0: its op stands for every op of the class
            table = {k: duration(op_of_key(k)) for k in set(inputs.cls)}
            dur = list(map(table.__getitem__, inputs.cls))
            values = table.values()
        else:
            dur = values = list(map(duration, chain.from_iterable(schedule.ranks)))
        if not all(x >= 0 for x in values):
            return None                          # NaN too: the reference decides
        if compiled is not None:
            start, end = timing_pass(compiled, dur, comm)
            order = compiled.order
        else:
            ran = first_run(inputs, dur, comm)
            if ran is None:
                return None
            start, end, order = ran
        # end also holds a pair's second half and the two times (``Inputs``): ops only.
        # The lists are this run's own and no one else's (a tuple copy would cost 5% here)
        del end[inputs.n:]
        return RunColumns(order, inputs.rank, start, end, inputs.bounds, inputs.keys)
