"""The simulator's fast executor: the reference's algorithm on a plan compiled once per schedule.

``pplab.simulate.execute_reference`` stays the oracle; this module replays exactly its steps
(the same worklist of ranks, the same wake-up order, the same float operations), so it
returns the same events in the same order. What makes it faster:

* the dependency graph is compiled with integer keys (no tuples hashed per action) and kept
  on the schedule object, so simulating one schedule under many costs (cost sliders, the
  search, the planner) compiles it once;
* durations are looked up per (kind, stage) class, not computed per op;
* events are built in one pass at the end, as tuples (``Event`` is a NamedTuple).

Anything unusual (an action run twice, a missing producer, a deadlock, both B and I for one
stage and microbatch) makes :func:`plan` return ``None``: the caller then runs the
reference, which raises its own, well-worded error.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

from .ir import Action, Op, Schedule, gc_paused
from .timeline import Event

KIND_CODE = {"F": 0, "B": 1, "I": 2, "W": 3}
_new_event = partial(tuple.__new__, Event)


class Plan:
    """One schedule's dependency graph as flat lists indexed by op (rank-major order).

    ``deps[i]``: part ids op ``i`` waits on, ``~id`` when produced on another rank (a hop
    costs ``comm``); ``parts[i]``: the part ids op ``i`` finishes; ``cls[i]``: its duration
    class, ``reps[c]`` an op of class ``c``; ``bounds[r]``: rank r's ops are
    ``bounds[r] .. bounds[r + 1] - 1``.
    """
    __slots__ = ("ops", "rank", "deps", "parts", "cls", "reps", "bounds", "num_parts")

    def __init__(self, ops, rank, deps, parts, cls, reps, bounds, num_parts):
        self.ops, self.rank, self.deps, self.parts = ops, rank, deps, parts
        self.cls, self.reps, self.bounds, self.num_parts = cls, reps, bounds, num_parts


def plan(schedule: Schedule) -> Plan | None:
    """The compiled plan of ``schedule`` (cached on it), or None where only the reference
    may answer."""
    cached = schedule.__dict__.get("_fast_plan", False)
    if cached is False:
        cached = _compile(schedule)
        schedule.__dict__["_fast_plan"] = cached      # a frozen dataclass: as cached_property
    return cached


def _number(schedule: Schedule):
    """Pass 1: a part id per action key ``(microbatch·S + stage)·4 + kind``, a duration
    class per op (its key mod 4S; an overlapped pair's two), in rank-major order. None for a
    schedule the fast path does not take (see the module doc)."""
    S, M = schedule.num_stages, schedule.M
    S4 = 4 * S
    slot = [-1] * ((M + 2) * S4)                # key -> part id; -1: nobody runs it
    parts, cls, keys, part_rank = [], [], [], []
    n = 0
    for r, row in enumerate(schedule.ranks):
        for op in row:
            mine = []
            for a in (op,) if type(op) is Action else op.parts:
                s, m, kc = a.stage, a.microbatch, KIND_CODE[a.kind]
                if not (0 <= s < S and 0 <= m < M):
                    return None
                k = m * S4 + s * 4 + kc
                if slot[k] >= 0 or (kc == 1 and slot[k + 1] >= 0) or \
                        (kc == 2 and slot[k - 1] >= 0):
                    return None                  # run twice, or both B and I: reference
                slot[k] = n
                mine.append(n)
                keys.append(k)
                n += 1
            part_rank += [r] * len(mine)
            parts.append(tuple(mine))
            cls.append(k % S4 if len(mine) == 1 else (keys[-2] % S4, k % S4))
    return slot, parts, cls, keys, part_rank


def _offsets(schedule: Schedule) -> list[tuple[int, ...]]:
    """Per ``stage·4 + kind``: the key offsets of what a part waits on, as in
    ``simulate.dependency_keys``: its own stage's earlier part, then its input. A positive
    offset is the next stage's B (its I is one further, tried when no B runs)."""
    first, last = schedule._stage_ends
    out = []
    for s in range(schedule.num_stages):
        out.append(() if first[s] else (-4,))                       # F: previous stage's F
        for kc in (1, 2):                                            # B, I: own F, next stage
            out.append((-kc,) if last[s] else (-kc, 5 - kc))
        out.append((-1,))                                            # W: own I
    return out


def _compile(schedule: Schedule) -> Plan | None:
    """Pass 2: each part's dependencies, ``~id`` for those made on another rank."""
    numbered = _number(schedule)
    if numbered is None:
        return None
    slot, parts, cls, keys, part_rank = numbered
    ops = [op for row in schedule.ranks for op in row]
    rank_of = [r for r, row in enumerate(schedule.ranks) for _ in row]
    bounds = [0]
    for row in schedule.ranks:
        bounds.append(bounds[-1] + len(row))
    offsets, S4 = _offsets(schedule), 4 * schedule.num_stages
    deps = []
    p = 0
    for i, mine in enumerate(parts):
        out, r = [], rank_of[i]
        for _ in mine:
            k = keys[p]
            p += 1
            for w in offsets[k % S4]:
                d = slot[k + w]
                if d < 0 and w > 0:
                    d = slot[k + w + 1]               # the next stage split its backward
                    if d < 0:
                        return None
                elif d < 0:
                    return None                       # nobody runs it: the reference says so
                if d not in mine:
                    out.append(d if part_rank[d] == r else ~d)
        deps.append(tuple(out))
    first = dict(zip(reversed(cls), range(len(cls) - 1, -1, -1)))    # class -> its first op
    order = {c: j for j, c in enumerate(first)}
    return Plan(ops, rank_of, deps, parts, list(map(order.__getitem__, cls)),
                [ops[i] for i in first.values()], bounds, len(part_rank))


def run(pl: Plan, dur: list[float], comm: float, P: int) -> list[Event] | None:
    """The reference's worklist on the plan; ``dur[i]`` is op i's duration. None if stuck."""
    deps, parts, bounds = pl.deps, pl.parts, pl.bounds
    end_of: list = [None] * pl.num_parts
    start, finish, order = [0.0] * len(pl.ops), [0.0] * len(pl.ops), []
    pointer, free_at = bounds[:P], [0.0] * P
    waiting: dict[int, list[int]] = {}
    todo = list(range(P))
    while todo:
        rank = todo.pop()
        i, stop, t = pointer[rank], bounds[rank + 1], free_at[rank]
        while i < stop:
            ready = t
            for d in deps[i]:
                if d >= 0:
                    e = end_of[d]
                    if e is None:
                        break
                else:
                    e = end_of[~d]
                    if e is None:
                        d = ~d
                        break
                    e += comm
                if e > ready:
                    ready = e
            else:
                t = ready + dur[i]
                start[i], finish[i] = ready, t
                order.append(i)
                for a in parts[i]:
                    end_of[a] = t
                    if a in waiting:
                        todo.extend(waiting.pop(a))
                i += 1
                continue
            waiting.setdefault(d, []).append(rank)
            break
        pointer[rank], free_at[rank] = i, t
    if len(order) < len(pl.ops):
        return None
    ops, rank = pl.ops, pl.rank
    return list(map(_new_event, zip(map(rank.__getitem__, order), map(ops.__getitem__, order),
                                    map(start.__getitem__, order),
                                    map(finish.__getitem__, order))))


def execute(schedule: Schedule, duration: Callable[[Op], float], comm: float = 0.0,
            by_class: bool = False) -> list[Event] | None:
    """Events as the reference gives them, or None where the reference must answer.

    ``by_class=True`` promises that ``duration`` depends only on an op's kind and stages
    (true of ``Costs.duration_fn``): it is then asked once per class, not once per op.
    """
    with gc_paused():
        pl = plan(schedule)
        if pl is None:
            return None
        if by_class:
            table = [duration(op) for op in pl.reps]
            dur = list(map(table.__getitem__, pl.cls))
        else:
            dur = list(map(duration, pl.ops))
        return run(pl, dur, comm, schedule.P)
