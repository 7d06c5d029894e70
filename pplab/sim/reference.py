"""The reference executor: the simulator's semantics, stated once.

The rules, which ``execute_reference`` below follows line for line:

1. Every rank runs its list of ops in order, one op at a time.
2. An op starts as soon as its rank is free and every action it depends on has finished
   (``dependencies.py``: its own stage's earlier part, and its input from the neighbouring
   stage); an input made on another rank arrives ``comm`` later. A dependency on the other
   half of the same overlapped pair does not count: the pair is one op.
3. It lasts ``duration(op)`` (``costs.py``: ``Costs.duration_fn``); every action in the op
   (both halves of a pair) ends when the op does.
4. A rank whose next op needs an action that has not run yet waits; it is tried again when
   that action finishes (a worklist: the last rank woken runs first, which fixes the order of
   the events). If ranks are left with ops and none can move, they wait on each other in a
   cycle: ``DeadlockError``, which walks the cycle. An input that no rank runs is a
   ``ValueError`` naming it.

Nothing waits on a time, only on "has run", so the run order depends on the schedule alone.
The other executors keep these rules: ``fast.py`` returns exactly these events in this order;
``contention.py`` (ranks sharing cores) and ``streams.py`` (communication as its own stream)
equal them where they mean the same thing. The validator runs the same rules, so "validates"
and "simulates" never disagree.
"""
from __future__ import annotations

from typing import Callable

from ..ir import Op, Schedule
from ..timeline import Event
from .dependencies import compile_graph, dependencies


class DeadlockError(ValueError):
    """Ranks wait on each other in a cycle; the message walks the cycle in plain words."""


def execute_reference(schedule: Schedule, duration: Callable[[Op], float],
                      comm: float = 0.0) -> list[Event]:
    """The reference executor, kept as the oracle the fast one is tested against.

    Each rank is re-tried only when something it waits on finishes, so the cost is linear
    in the number of ops.
    """
    steps, owned, missing = compile_graph(schedule)
    end_of: list[float | None] = [None] * (owned + len(missing))   # action id -> end time
    rank_of = [0] * owned                                          # action id -> its rank
    pointer = [0] * schedule.P
    free_at = [0.0] * schedule.P
    waiting: dict[int, list[int]] = {}
    events: list[Event] = []
    todo = list(range(schedule.P))
    while todo:
        rank = todo.pop()
        ops, row = schedule.ranks[rank], steps[rank]
        while pointer[rank] < len(ops):
            parts, deps = row[pointer[rank]]
            ready, blocked = free_at[rank], -1
            for d in deps:
                end = end_of[d]
                if end is None:
                    blocked = d
                    break
                if rank_of[d] != rank:
                    end += comm
                if end > ready:
                    ready = end
            if blocked >= 0:
                if blocked >= owned:
                    op = ops[pointer[rank]]
                    raise ValueError(f"rank {rank} step {pointer[rank]}: {op} needs "
                                     f"{missing[blocked - owned]}, which no rank runs")
                waiting.setdefault(blocked, []).append(rank)
                break
            op = ops[pointer[rank]]
            end = ready + duration(op)
            events.append(Event(rank, op, ready, end))
            free_at[rank] = end
            pointer[rank] += 1
            for a in parts:
                end_of[a], rank_of[a] = end, rank
                todo.extend(waiting.pop(a, ()))
    stuck = [r for r in range(schedule.P) if pointer[r] < len(schedule.ranks[r])]
    if stuck:
        raise DeadlockError(_describe_deadlock(schedule, pointer, schedule.owners(), stuck))
    return events


def _describe_deadlock(schedule, pointer, owner, stuck) -> str:
    """Follow 'waits on' links from the first stuck rank until they loop."""
    def head_wait(rank):
        op = schedule.ranks[rank][pointer[rank]]
        inner = set(op.parts)
        for a in op.parts:
            for dep in dependencies(schedule, a):
                if dep not in inner and owner.get(dep) is not None:
                    dr, ds = owner[dep]
                    if ds >= pointer[dr]:
                        return op, dep, dr, ds
        return op, None, None, None

    seen, rank, lines = [], stuck[0], []
    while rank not in seen and rank is not None:
        seen.append(rank)
        op, dep, dr, ds = head_wait(rank)
        if dep is None:
            break
        blocker = schedule.ranks[dr][pointer[dr]]
        if dr == rank:
            lines.append(f"rank {rank} step {pointer[rank]}: {op} needs {dep}, which this same "
                         f"rank runs later, at step {ds}")
            break
        lines.append(f"rank {rank} step {pointer[rank]}: {op} needs {dep}, which rank {dr} runs "
                     f"only after waiting on {blocker}")
        rank = dr
    return "; ".join(lines) + " — deadlock"
