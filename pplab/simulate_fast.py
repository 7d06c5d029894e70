"""The simulator's fast executor: the reference's events, same order, same float operations.

``pplab.simulate.execute_reference`` stays the oracle; this module replays its worklist (the
same ranks woken in the same order) and so returns exactly its times. It is faster because
it works on the schedule's integer keys (``Schedule.rank_keys``, ``ir.KEY_STRIDE``), never
on Action objects, and because of three facts:

* **Only cross-rank inputs matter.** A dependency run earlier on the same rank ended before
  the rank became free, so it never moves a start time (durations are ≥ 0) and never
  blocks; the compile only checks that it comes earlier. What is left is one input per op
  from another rank (up to two for an overlapped pair), found once, as an index.
* **The run order does not depend on the costs.** The reference blocks on "not run yet",
  never on a time, so its order is fixed by the schedule. The first simulation records
  it; later ones (a cost slider, the search, the planner) walk it in one straight loop.
* **Columns, not objects.** The result is the run order and a start and an end per op
  (:class:`Run`); ``Timeline`` makes Event objects from them only when they are read.

Anything unusual (an action run twice, off its stage's rank, out of range, both B and I for
one stage and microbatch, an input nobody or the same rank only later makes, a deadlock, a
negative duration) makes the fast path step aside: the caller then runs the reference,
which raises its own, well-worded error.
"""
from __future__ import annotations

from itertools import accumulate, chain, compress, repeat
from operator import add, and_, ge, rshift, xor
from typing import Callable, NamedTuple

from .ir import (KEY_STRIDE, KINDS, PAIR_BASE, PAIR_SHIFT, Action, Op, Overlap, Schedule,
                 gc_paused)
from .timeline import run_events

_MASK = KEY_STRIDE - 1                 # key & _MASK = the class, stage·4 + kind


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


class Plan:
    """One schedule's ops, keys and inputs, compiled once and kept on the schedule.

    ``dep[i]``: the part from another rank whose end op i waits for, or ``~j`` for op j on
    this rank that must have run (no wait, no time; ``~i``: nothing needed), or
    ``-(sentinel + 2)`` for an overlapped pair, whose are ``two[i]``; a pair's second half
    is part ``extra[i]``
    (parts ``0..n-1`` are the ops themselves). ``prev[i]``: op i's predecessor on its rank
    (``sentinel + 1``, "free at 0", for a rank's first op). After the first run: ``order``.
    """
    __slots__ = ("n", "keys", "rank", "bounds", "cls", "dep", "two", "extra", "sentinel",
                 "prev", "order", "memo")

    def __init__(self, n, keys, rank, bounds, cls, dep, two, extra, sentinel):
        self.n, self.keys, self.rank, self.bounds, self.cls = n, keys, rank, bounds, cls
        self.dep, self.two, self.extra, self.sentinel = dep, two, extra, sentinel
        self.prev = self.order = None
        self.memo = {}

    def predecessors(self) -> list[int]:
        """``prev``, made on first use (only a second simulation needs it)."""
        if self.prev is None:
            prev = list(range(-1, self.n - 1))
            for b in self.bounds[:-1]:
                if b < self.n:
                    prev[b] = self.sentinel + 1
            self.prev = prev
        return self.prev


def plan(schedule: Schedule) -> Plan | None:
    """The compiled plan of ``schedule`` (cached on it), or None where only the reference
    may answer."""
    cached = schedule.__dict__.get("_fast_plan", False)
    if cached is False:
        with gc_paused():
            cached = _compile(schedule)
        schedule.__dict__["_fast_plan"] = cached      # a frozen dataclass: as cached_property
    return cached


def _compile(schedule: Schedule) -> Plan | None:
    """Keys, checks and inputs, in bulk; None where the fast path steps aside."""
    rank_keys = schedule.rank_keys()
    if rank_keys is None:
        return None
    S, M, P = schedule.num_stages, schedule.M, schedule.P
    sizes = list(map(len, rank_keys))
    bounds = [0, *accumulate(sizes)]
    n = bounds[-1]
    keys = list(chain.from_iterable(rank_keys))
    rank_of = list(chain.from_iterable(map(repeat, range(P), sizes)))
    parts, part_op, pair_at = keys, None, []
    if keys and max(keys) >= PAIR_BASE:              # overlapped pairs: a part each half
        is_pair = list(map(ge, keys, repeat(PAIR_BASE)))
        pair_at = list(compress(range(n), is_pair))
        parts = list(map(and_, keys, repeat(PAIR_BASE - 1)))
        parts += map(rshift, compress(keys, is_pair), repeat(PAIR_SHIFT))
        part_op = list(range(n)) + pair_at
    N = len(parts)
    cls = list(map(and_, parts, repeat(_MASK)))
    present = set(cls)
    if parts and (min(parts) < 0 or max(parts) >= M * KEY_STRIDE or max(present) >= 4 * S):
        return None                                  # a stage or microbatch out of range
    if _off_its_rank(schedule, cls, bounds, pair_at, rank_of):
        return None
    idx = dict(zip(parts, range(N)))
    if len(idx) < N:
        return None                                  # an action run twice
    if {1, 2} <= {c & 3 for c in present} and _b_and_i_for_one_action(parts, idx):
        return None
    offset, flag, mixed = _tables(schedule, present)
    sentinel = N
    dep = list(map(xor, map(idx.get, map(add, parts, map(offset.__getitem__, cls)),
                            repeat(sentinel)), map(flag.__getitem__, cls)))
    if (sentinel in dep or ~sentinel in dep) and not _found_in_mixed(
            dep, cls, parts, idx, mixed, flag, sentinel):
        return None                                  # an input nobody makes
    pair = -(N + 2)
    two, extra = {}, {}
    for j, i in enumerate(pair_at):
        e = n + j
        extra[i], deps = e, []
        for d in (dep[i], dep[e]):
            if d >= 0 and d not in (i, e):
                deps.append(d)
            elif d < 0 and part_op[~d] > i:
                return None                          # made here, but only later
        two[i], dep[i] = tuple(deps), pair
    if pair_at:                                      # a part made here: by its op's index
        dep = [d if d >= 0 or d == pair else ~part_op[~d] for d in dep[:n]]
    op_cls = cls[:n] if pair_at else cls
    for j, i in enumerate(pair_at):
        op_cls[i] = (cls[i], cls[n + j])
    return Plan(n, keys, rank_of, bounds, op_cls, dep, two, extra, sentinel)


def _off_its_rank(schedule, cls, bounds, pair_at, rank_of) -> bool:
    """Some action runs on a rank other than its stage's (checked per distinct class)."""
    place = schedule.stage_to_rank
    for r in range(len(bounds) - 1):
        if any(place[c >> 2] != r for c in set(cls[bounds[r]:bounds[r + 1]])):
            return True
    n = bounds[-1]
    return any(place[cls[n + j] >> 2] != rank_of[i] for j, i in enumerate(pair_at))


def _b_and_i_for_one_action(parts, idx) -> bool:
    """Some stage and microbatch has both a B and an I (the reference decides)."""
    return any(k + 1 in idx for k in parts if k & 3 == 1)


def _found_in_mixed(dep, cls, parts, idx, mixed, flag, sentinel) -> bool:
    """Fill in, in place, the backward inputs looked for as a B where that stage ran an I;
    False if some input is still missing."""
    for p, d in enumerate(dep):
        if d == sentinel or d == ~sentinel:
            c = cls[p]
            if c not in mixed:
                return False
            d = idx.get(parts[p] + mixed[c] + 1)
            if d is None:
                return False
            dep[p] = d ^ flag[c]
    return True


def _tables(schedule: Schedule, present: set[int]):
    """Per class ``stage·4 + kind``: the offset from an action's key to the key it looks up,
    and a flag, 0 or -1 (xor'ed onto the index found). The look-up is its input made on
    another rank (flag 0), else something that must already have run on this rank (flag
    -1, so ``~index``): an input made here (the V's turn), else its own stage's earlier
    part (a W's I, a last stage's B's F: an input implies it, since its maker needed it),
    else itself (nothing to wait for: a first stage's F). A backward's input is the next
    stage's B, or its I where only I's run there; ``mixed`` has the backward classes whose
    next stage runs both (look for the B, then the I: offset + 1)."""
    first, last = schedule._stage_ends
    place = schedule.stage_to_rank
    offset, flag, mixed = [], [], {}
    for s in range(schedule.num_stages):
        down = None if last[s] else s + 1
        b_there = down is not None and 4 * down + 1 in present
        i_there = down is not None and 4 * down + 2 in present
        for code in range(4):
            if code == 0:
                target, off = (None, None) if first[s] else (s - 1, -4)
            elif code == 3:
                target, off = s, -1                            # W: its own I
            elif down is None:
                target, off = s, -code                         # last stage: its own F
            else:
                target, off = down, 4 + (1 if b_there or not i_there else 2) - code
                if b_there and i_there:
                    mixed[4 * s + code] = off
            if target is None:
                offset.append(0)
                flag.append(-1)
            else:
                offset.append(off)
                flag.append(-1 if place[target] == place[s] else 0)
    return offset, flag, mixed


def first_run(pl: Plan, dur: list[float], comm: float):
    """The reference's worklist: ``(start, end)``, ``pl.order`` filled in, or None where
    the reference must answer (a deadlock, or something made on this rank only later). A
    rank runs until an input from another rank is missing, then waits for that part."""
    n, dep, two, extra, bounds = pl.n, pl.dep, pl.two, pl.extra, pl.bounds
    P, pair = len(bounds) - 1, -(pl.sentinel + 2)
    start, end = [0.0] * n, [None] * (pl.sentinel + 2)
    end[pl.sentinel] = float("-inf")
    waiter = [-1] * pl.sentinel
    pointer, free_at, stretches = bounds[:P], [0.0] * P, []
    todo = list(range(P))
    pop, push = todo.pop, todo.append
    while todo:
        rank = pop()
        i0 = i = pointer[rank]
        stop, t = bounds[rank + 1], free_at[rank]
        while i < stop:
            d = dep[i]
            if d >= 0:
                e = end[d]
                if e is None:
                    waiter[d] = rank
                    break
                e += comm
                if e > t:
                    t = e
            elif d != pair:
                if ~d > i:                       # made on this rank, but later: stuck
                    break
            else:
                for d in two[i]:
                    e = end[d]
                    if e is None:
                        waiter[d] = rank
                        break
                    e += comm
                    if e > t:
                        t = e
                else:
                    start[i] = t
                    t += dur[i]
                    x = extra[i]
                    end[i] = end[x] = t
                    for part in (i, x):          # woken part by part, as the reference does
                        if waiter[part] >= 0:
                            push(waiter[part])
                    i += 1
                    continue
                break
            start[i] = t
            t += dur[i]
            end[i] = t
            if waiter[i] >= 0:
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
    n, dep, two, extra, prev = pl.n, pl.dep, pl.two, pl.extra, pl.predecessors()
    pair = -(pl.sentinel + 2)
    start, end = [0.0] * n, [0.0] * (pl.sentinel + 2)
    end[pl.sentinel] = float("-inf")                 # "no input": never the later one
    for i in pl.order:
        t = end[prev[i]]
        d = dep[i]
        if d >= 0:
            e = end[d] + comm
            if e > t:
                t = e
        elif d == pair:
            for d in two[i]:
                e = end[d] + comm
                if e > t:
                    t = e
            start[i] = t
            end[i] = end[extra[i]] = t + dur[i]
            continue
        start[i] = t
        end[i] = t + dur[i]
    return start, end


def _representative(c) -> Op:
    """An op of duration class ``c`` (``Costs.duration_fn`` reads only kinds and stages)."""
    if type(c) is tuple:
        return Overlap(*map(_representative, c))
    return Action(c >> 2, KINDS[c & 3], 0)


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
            table = {c: duration(_representative(c)) for c in set(pl.cls)}
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
