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
from operator import add, and_, eq, ge, getitem, invert, ne, not_, rshift
from typing import Callable, NamedTuple

from .ir import (KEY_BITS, KEY_STRIDE, KINDS, PAIR_BASE, PAIR_SHIFT, Action, Op, Overlap, Schedule,
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

    ``dep[i]``: the part op i looks up, its input from another rank (it waits for it), or
    an op of its own rank that must already have run (no wait, no time; itself when it
    needs nothing), or ``~j`` for the j-th overlapped pair, whose two inputs from other
    ranks are ``first[j]`` and ``second[j]`` (part ``parts``, always done at -inf, where a
    half has none). Parts ``0..n-1`` are the ops; pair j's second half is part ``n + j``.
    ``part_rank`` gives each part's rank. After the first run: ``order``.
    """
    __slots__ = ("n", "keys", "rank", "part_rank", "bounds", "cls", "dep", "first",
                 "second", "order", "memo", "_straight")

    def __init__(self, n, keys, rank, part_rank, bounds, cls, dep, first, second):
        self.n, self.keys, self.rank, self.part_rank = n, keys, rank, part_rank
        self.bounds, self.cls, self.dep = bounds, cls, dep
        self.first, self.second = first, second
        self.order = self._straight = None
        self.memo = {}

    @property
    def parts(self) -> int:
        return len(self.part_rank)

    def straight(self):
        """``(prev, cross)`` for the straight pass, made on first use (only a second
        simulation needs them): each op's predecessor on its rank (``parts + 1``, "free at
        0", for a rank's first op) and its input from another rank (``parts``, "none")."""
        if self._straight is None:
            n, none = self.n, self.parts
            prev = list(range(-1, n - 1))
            for b in self.bounds[:-1]:
                if b < n:
                    prev[b] = none + 1
            pr = self.part_rank
            cross = [d if d < 0 or pr[d] != r else none for d, r in zip(self.dep, self.rank)]
            self._straight = prev, cross
        return self._straight


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
    parts, part_rank, pair_at = keys, rank_of, []
    top = max(keys, default=0)
    if top >= PAIR_BASE:                             # overlapped pairs: a part each half
        is_pair = list(map(ge, keys, repeat(PAIR_BASE)))
        pair_at = list(compress(range(n), is_pair))
        parts = list(map(and_, keys, repeat(PAIR_BASE - 1)))
        parts += map(rshift, compress(keys, is_pair), repeat(PAIR_SHIFT))
        part_rank = rank_of + list(map(rank_of.__getitem__, pair_at))
        top = max(parts)
    cls = list(map(and_, parts, repeat(_MASK)))
    present = set(cls)
    if parts and (min(keys) < 0 or top >= M * KEY_STRIDE or max(present) >= 4 * S):
        return None                                  # a stage or microbatch out of range
    if _off_its_rank(schedule, cls, bounds, pair_at, rank_of):
        return None
    dep = _deps_from_streams(schedule, bounds, parts, pair_at)
    if dep is None:
        dep = _deps_by_key(schedule, parts, cls, present)
        if dep is None:
            return None
    first = second = ()
    if pair_at:
        paired = _pairs(dep, n, pair_at, part_rank)
        if paired is None:
            return None
        dep, first, second = paired
    op_cls = cls[:n] if pair_at else cls
    any(map(op_cls.__setitem__, pair_at, zip(map(cls.__getitem__, pair_at), cls[n:])))
    return Plan(n, keys, rank_of, part_rank, bounds, op_cls, dep, first, second)


def _deps_by_key(schedule, parts, cls, present) -> list[int] | None:
    """Each part's look-up (``Plan.dep``), found by key in a dict of all keys; None where
    an action runs twice, a stage and microbatch has both a B and an I, or an input is
    missing (the reference says which)."""
    N = len(parts)
    idx = dict(zip(parts, range(N)))
    if len(idx) < N:
        return None                                  # an action run twice
    if {1, 2} <= {c & 3 for c in present} and _b_and_i_for_one_action(parts, idx):
        return None
    offset, mixed = _tables(schedule, present)
    dep = list(map(idx.get, map(add, parts, map(offset.__getitem__, cls)), repeat(N)))
    if N in dep and not _found_in_mixed(dep, cls, parts, idx, mixed, N):
        return None                                  # an input nobody makes
    return dep


def _deps_from_streams(schedule, bounds, parts, pair_at) -> list[int] | None:
    """``Plan.dep`` from a generator's streams (``Schedule.from_keys(streams=...)``): the
    F's and the backwards (B or I) of one stage come in microbatch order, so what
    microbatch m looks up is element m of another stream, filled a run at a time with
    slice assignments (no key is looked up); a W looks up its own I (by its key's
    microbatch where it was written out of order, ``Streams.weight``).
    None where a stream it needs is short or missing, or some op is in no stream: then
    the keys answer."""
    runs = schedule.__dict__.get("_streams")
    if runs is None:
        return None
    n, first, last = bounds[-1], *schedule._stage_ends
    second = list(range(n))                         # a part's id, by its op's position
    if pair_at:                                     # a pair's backward half: n + ordinal
        any(map(second.__setitem__, pair_at, range(n, len(parts))))
    where = {stream: _ids(base, segs, second)
             for base, streams in zip(bounds, runs) for stream, segs in streams.items()}
    if max(map(len, where.values()), default=0) > schedule.microbatches_per_copy:
        return None
    dep = [-1] * len(parts)
    for base, streams in zip(bounds, runs):
        for (kind, s), segs in streams.items():
            mine = where[(kind, s)]
            if kind == "W" and any(seg[3] == 2 for seg in segs):    # its own I, by microbatch
                src = where.get(("B", s))
                mbs = list(map(rshift, map(parts.__getitem__, mine), repeat(KEY_BITS)))
                if src is None or max(mbs) >= len(src):
                    return None
                any(map(dep.__setitem__, mine, map(src.__getitem__, mbs)))
                continue
            src = where.get(("F", s - 1) if kind == "F" and not first[s] else (kind, s)
                            if kind == "F" else ("B", s) if kind == "W" else ("F", s)
                            if last[s] else ("B", s + 1))
            if src is None or len(src) < len(mine):
                return None
            m = 0
            for p, step, count, half in segs:
                if half:
                    any(map(dep.__setitem__, mine[m:m + count], src[m:m + count]))
                else:
                    dep[base + p:base + p + step * count:step] = src[m:m + count]
                m += count
    return None if -1 in dep else dep


def _ids(base: int, segs, second) -> list[int]:
    """The part ids of a stream's runs, in order (a backward half's from ``second``)."""
    out = []
    for p, step, count, half in segs:
        run = range(base + p, base + p + step * count, step)
        out += map(second.__getitem__, run) if half else run
    return out


def _pairs(dep, n, pair_at, part_rank):
    """``(dep, first, second)``: pair j's look-ups moved to ``first[j]`` and ``second[j]``
    (its inputs from other ranks) and its ``dep`` set to ``~j``; a part made on the op's
    own rank is named by its op's index. None where a pair needs something its own rank
    makes only later."""
    part_op = list(range(n)) + pair_at
    out = dep[:n]
    halves = list(compress(range(n), map(ge, out, repeat(n))))   # look at a pair's half
    for i in compress(halves, map(eq, map(part_rank.__getitem__, map(out.__getitem__, halves)),
                                  map(part_rank.__getitem__, halves))):      # on this rank
        out[i] = part_op[out[i]]
    ranks = list(map(part_rank.__getitem__, pair_at))
    looks = (list(map(out.__getitem__, pair_at)), dep[n:])
    cross = [list(map(ne, map(part_rank.__getitem__, d), ranks)) for d in looks]
    for d, c in zip(looks, cross):                 # made here: must come earlier
        if any(part_op[x] > i for x, i in compress(zip(d, pair_at), map(not_, c))):
            return None
    none = len(dep)                                # a part that is always done, at -inf
    inputs = [map(getitem, zip(repeat(none), d), c) for d, c in zip(looks, cross)]
    any(map(out.__setitem__, pair_at, map(invert, range(len(pair_at)))))
    return out, *map(list, inputs)


def _off_its_rank(schedule, cls, bounds, pair_at, rank_of) -> bool:
    """Some action runs on a rank other than its stage's (checked per distinct class)."""
    place = schedule.stage_to_rank
    for r in range(len(bounds) - 1):
        if any(place[c >> 2] != r for c in set(cls[bounds[r]:bounds[r + 1]])):
            return True
    n = bounds[-1]
    return any(map(ne, map(place.__getitem__, map(rshift, cls[n:], repeat(2))),
                   map(rank_of.__getitem__, pair_at)))


def _b_and_i_for_one_action(parts, idx) -> bool:
    """Some stage and microbatch has both a B and an I (the reference decides)."""
    full = compress(parts, map(eq, map(and_, parts, repeat(3)), repeat(1)))
    return any(map(idx.__contains__, map(add, full, repeat(1))))


def _found_in_mixed(dep, cls, parts, idx, mixed, sentinel) -> bool:
    """Fill in, in place, the backward inputs looked for as a B where that stage ran an I;
    False if some input is still missing."""
    for p in list(compress(range(len(dep)), map(eq, dep, repeat(sentinel)))):
        c = cls[p]
        if c not in mixed:
            return False
        d = dep[p] = idx.get(parts[p] + mixed[c] + 1, sentinel)
        if d == sentinel:
            return False
    return True


def _tables(schedule: Schedule, present: set[int]):
    """Per class ``stage·4 + kind``: the offset from an action's key to the key it looks up:
    its input (made on another rank, or on this one: the V's turn), else its own stage's
    earlier part, which must already have run (a W's I, a last stage's B's F: an input
    implies it, since its maker needed it), else itself (a first stage's F needs nothing).
    A backward's input is the next stage's B, or its I where only I's run there; ``mixed``
    has the backward classes whose next stage runs both (look for the B, then the I:
    offset + 1). ``Schedule.input_key`` is the rule; this is it per class."""
    first, last = schedule._stage_ends
    offset, mixed = [], {}
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
            offset.append(0 if target is None else off)
    return offset, mixed


def first_run(pl: Plan, dur: list[float], comm: float):
    """The reference's worklist: ``(start, end)``, ``pl.order`` filled in, or None where
    the reference must answer (a deadlock, or something made on this rank only later). A
    rank runs until an input from another rank is missing, then waits for that part."""
    n, dep, bounds, prank = pl.n, pl.dep, pl.bounds, pl.part_rank
    first, second = pl.first, pl.second
    P = len(bounds) - 1
    start, end, waiter = [0.0] * n, [None] * (pl.parts + 1), [-1] * (pl.parts + 1)
    end[pl.parts] = float("-inf")                    # "none": a pair's missing input
    pointer, free_at, stretches = bounds[:P], [0.0] * P, []
    todo = list(range(P))
    pop, push = todo.pop, todo.append
    while todo:
        rank = pop()
        i0 = i = pointer[rank]
        stop, t = bounds[rank + 1], free_at[rank]
        while i < stop:
            d = dep[i]
            if d < 0:                            # overlapped pair ~d: two inputs
                a, b = first[~d], second[~d]
                ea, eb = end[a], end[b]
                if ea is None or eb is None:
                    waiter[a if ea is None else b] = rank
                    break
                start[i] = t = max(t, ea + comm, eb + comm)
                t += dur[i]
                x = n + ~d
                end[i] = end[x] = t
                for part in (i, x):              # woken part by part, as the reference does
                    if waiter[part] >= 0:
                        push(waiter[part])
                i += 1
                continue
            if prank[d] != rank:                 # an input from another rank
                e = end[d]
                if e is None:
                    waiter[d] = rank
                    break
                e += comm
                if e > t:
                    t = e
            elif d > i:                          # made on this rank, but later: stuck
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
    n, first, second, none = pl.n, pl.first, pl.second, pl.parts
    prev, dep = pl.straight()
    start, end = [0.0] * n, [0.0] * (none + 2)
    end[none] = float("-inf")                        # "no input": never the later one
    for i in pl.order:
        t = end[prev[i]]
        d = dep[i]
        if d >= 0:
            e = end[d] + comm
            if e > t:
                t = e
        else:
            j = ~d
            start[i] = t = max(t, end[first[j]] + comm, end[second[j]] + comm)
            end[i] = end[n + j] = t + dur[i]
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
