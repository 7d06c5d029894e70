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
from operator import add, and_, eq, ge, gt, invert, mod, rshift
from typing import Callable, NamedTuple

from .ir import (KEY_BITS, KEY_STRIDE, KIND_CODE, KINDS, PAIR_BASE, PAIR_SHIFT, Action, Op,
                 Overlap, Schedule, gc_paused)
from .timeline import run_events

_MASK = KEY_STRIDE - 1                 # key & _MASK = the class, stage·4 + kind
#: key & _CLASS = an op's duration class: its action's, or for a pair both halves' classes
_CLASS = _MASK | _MASK << PAIR_SHIFT


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

    Parts: op ``i`` is part ``i``; an overlapped pair at ``i`` has its backward half as
    part ``n + i`` (both end when the pair does); part ``2n`` is "none", done at -inf.
    ``dep[i]``: the part op i needs from another rank (it waits for it), or "none"; for a
    pair, ``~`` the forward half's and ``second[i]`` the backward half's. ``cls[i]``: the
    op's duration class (``_CLASS``). After the first run: ``order``.
    """
    __slots__ = ("n", "keys", "rank", "bounds", "cls", "dep", "second", "order", "memo",
                 "_prev")

    def __init__(self, n, keys, rank, bounds, cls, dep, second):
        self.n, self.keys, self.rank, self.bounds = n, keys, rank, bounds
        self.cls, self.dep, self.second = cls, dep, second
        self.order = self._prev = None
        self.memo = {}

    def prev(self) -> list[int]:
        """Each op's predecessor on its rank, ``2n + 1`` ("free at 0") for a rank's first
        op: the straight pass's other input, made on first use (a second simulation)."""
        if self._prev is None:
            n = self.n
            prev = list(range(-1, n - 1))
            for b in self.bounds[:-1]:
                if b < n:
                    prev[b] = 2 * n + 1
            self._prev = prev
        return self._prev


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
    sizes = list(map(len, rank_keys))
    bounds = [0, *accumulate(sizes)]
    keys = list(chain.from_iterable(rank_keys))
    rank_of = list(chain.from_iterable(map(repeat, range(schedule.P), sizes)))
    cls = list(map(and_, keys, repeat(_CLASS)))
    if _off_its_rank(schedule, cls, bounds):
        return None
    inputs = _inputs_from_streams(schedule, bounds)
    if inputs is None:
        inputs = _inputs_by_key(schedule, keys, cls)
        if inputs is None:
            return None
    return Plan(bounds[-1], keys, rank_of, bounds, cls, *inputs)


def _off_its_rank(schedule, cls, bounds) -> bool:
    """Some op's stage is out of range or lives on another rank (checked per class)."""
    place, S = schedule.stage_to_rank, schedule.num_stages
    for r in range(len(bounds) - 1):
        for c in set(cls[bounds[r]:bounds[r + 1]]):
            for half in ((c & _MASK, c >> PAIR_SHIFT) if c >= PAIR_BASE else (c,)):
                if half >> 2 >= S or place[half >> 2] != r:
                    return True
    return False


def _inputs_from_streams(schedule, bounds):
    """``(dep, second)`` (``Plan``) from a generator's streams (``Schedule.from_keys(
    streams=...)``): one stage's F's, and its backwards (B or I), come in microbatch order,
    so what microbatch m needs is element m of another stream (the one ``_tables`` names);
    whether that is on another rank is known per stream, so inputs are filled a run at a
    time with slice assignments (no key is looked up). A W written out of order
    (``Streams.weight``) finds its I by its key's microbatch. None where a stream is short
    or missing, a same-rank input comes later, or some op is in no stream: then the keys
    answer."""
    runs = schedule.__dict__.get("_streams")
    if runs is None:
        return None
    n = bounds[-1]
    where = {stream: _ids(base, segs, n)
             for base, streams in zip(bounds, runs) for stream, segs in streams.items()}
    if max(map(len, where.values()), default=0) > schedule.microbatches_per_copy:
        return None
    offset = _tables(schedule, set())[0]       # a stream: B's and I's together, as a B
    here, none = _made_here(schedule, offset), 2 * n
    dep, second = [None] * n, [none] * n
    for base, streams in zip(bounds, runs):
        for (kind, s), segs in streams.items():
            mine, c = where[(kind, s)], 4 * s + KIND_CODE[kind]
            src = c + offset[c]
            need = [none] * len(mine)
            if src != c:                       # not a first stage's F, which needs nothing
                made = where.get(("F" if src & 3 == 0 else "B", src >> 2), ())
                if kind == "W" and any(seg[3] == 2 for seg in segs):
                    keys = schedule.rank_keys()[schedule.stage_to_rank[s]]
                    mbs = [keys[i - base] >> KEY_BITS for i in mine]
                    if max(mbs) >= len(made):
                        return None
                    made = list(map(made.__getitem__, mbs))
                made = made[:len(mine)]
                if len(made) < len(mine) or here[c] and _made_later(made, mine, n):
                    return None
                if not here[c]:
                    need = made
            _fill(dep, second, base, segs, need)
    return None if None in dep else (dep, second)


def _fill(dep, second, base, segs, need) -> None:
    """Write a stream's inputs ``need`` (in its microbatch order) where its runs sit: an
    op's in ``dep``, a pair's forward half's as ``~`` in ``dep``, its backward half's in
    ``second`` (``Streams`` run halves 3 and 1)."""
    m = 0
    for p, step, count, half in segs:
        at, part = slice(base + p, base + p + step * count, step), need[m:m + count]
        if half == 1:
            second[at] = part
        else:
            dep[at] = map(invert, part) if half == 3 else part
        m += count


def _ids(base: int, segs, n: int) -> list[int]:
    """The part ids of a stream's runs, in order (a pair's backward half: ``n`` on)."""
    out = []
    for p, step, count, half in segs:
        lo = base + p + (n if half == 1 else 0)
        out += range(lo, lo + step * count, step)
    return out


def _inputs_by_key(schedule, keys, cls):
    """``(dep, second)`` (``Plan``) found by key in a dict of every part's key; None where
    an action runs twice or out of range, a stage and microbatch has both a B and an I, or
    an input is missing or made on its own rank only later (the reference says which)."""
    n = len(keys)
    parts, ids, pair_at = keys, range(n), []
    if max(keys, default=0) >= PAIR_BASE:               # a pair's backward half: n + i
        pair_at = list(compress(range(n), map(ge, keys, repeat(PAIR_BASE))))
        parts = list(map(and_, keys, repeat(PAIR_BASE - 1)))
        parts += map(rshift, map(keys.__getitem__, pair_at), repeat(PAIR_SHIFT))
        ids = [*ids, *map(add, pair_at, repeat(n))]
    if parts and (min(parts) < 0 or max(parts) >= schedule.M * KEY_STRIDE):
        return None
    idx = dict(zip(parts, ids))
    if len(idx) < len(parts):
        return None                                     # an action run twice
    if pair_at:                                         # the op's classes, halves apart
        cls = list(map(and_, parts, repeat(_MASK)))
    present = set(cls)
    if {1, 2} <= {c & 3 for c in present} and _b_and_i_for_one_action(parts, idx):
        return None
    offset, mixed = _tables(schedule, present)
    found = list(map(idx.get, map(add, parts, map(offset.__getitem__, cls)), repeat(-1)))
    if -1 in found and not _found_in_mixed(found, cls, parts, idx, mixed):
        return None                                     # an input nobody makes
    here = list(map(_made_here(schedule, offset).__getitem__, cls))
    return _cross(found, ids, here, pair_at, n)


def _made_here(schedule, offset) -> list[bool]:
    """Per class: is its input made on its own rank (or is it "none", a first F's)? Its
    input's stage is the same for every op of a class (a B's or an I's, where ``mixed``)."""
    place = schedule.stage_to_rank
    return [place[(c + off) >> 2] == place[c >> 2] for c, off in enumerate(offset)]


def _cross(found, ids, here, pair_at, n):
    """``(dep, second)`` from each part's input: kept where another rank makes it, "none"
    where its own rank does, earlier (else None: the reference finds it stuck). Parts
    ``ids`` (an op's ``i``, a pair's backward half ``n + i``), inputs ``found``."""
    if _made_later(compress(found, here), compress(ids, here), n):
        return None
    none = 2 * n
    any(map(found.__setitem__, compress(range(len(found)), here), repeat(none)))
    dep, second = found[:n], [none] * n
    any(map(dep.__setitem__, pair_at, map(invert, map(dep.__getitem__, pair_at))))
    any(map(second.__setitem__, pair_at, found[n:]))
    return dep, second


def _made_later(made, mine, n: int) -> bool:
    """Some input ``made`` on the op's own rank comes after the op (``mine``); parts, so a
    pair's backward half ``n + i`` counts as its op ``i``."""
    return any(map(gt, map(mod, made, repeat(n)), map(mod, mine, repeat(n))))


def _b_and_i_for_one_action(parts, idx) -> bool:
    """Some stage and microbatch has both a B and an I (the reference decides)."""
    full = compress(parts, map(eq, map(and_, parts, repeat(3)), repeat(1)))
    return any(map(idx.__contains__, map(add, full, repeat(1))))


def _found_in_mixed(found, cls, parts, idx, mixed) -> bool:
    """Fill in, in place, the backward inputs looked for as a B where that stage ran an I;
    False if some input is still missing."""
    for p in list(compress(range(len(found)), map(eq, found, repeat(-1)))):
        c = cls[p]
        if c not in mixed:
            return False
        d = found[p] = idx.get(parts[p] + mixed[c] + 1, -1)
        if d == -1:
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
    the reference must answer (a deadlock). A rank runs until an input from another rank
    is missing, then waits for that part."""
    n, dep, second, bounds = pl.n, pl.dep, pl.second, pl.bounds
    P = len(bounds) - 1
    start, end, waiter = [0.0] * n, [None] * (2 * n + 1), [-1] * (2 * n)
    end[2 * n] = float("-inf")                        # "none"
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
                start[i] = t
                t += dur[i]
                end[i] = t
            else:                                    # an overlapped pair: two inputs
                a, b = ~d, second[i]
                ea, eb = end[a], end[b]
                if ea is None or eb is None:
                    waiter[a if ea is None else b] = rank
                    break
                start[i] = t = max(t, ea + comm, eb + comm)
                t += dur[i]
                end[i] = end[n + i] = t
                if waiter[i] >= 0:                   # woken part by part, as the reference
                    push(waiter[i])
                if waiter[n + i] >= 0:
                    push(waiter[n + i])
                i += 1
                continue
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
    n, dep, second, prev = pl.n, pl.dep, pl.second, pl.prev()
    start, end = [0.0] * n, [0.0] * (2 * n + 2)
    end[2 * n] = float("-inf")                       # "none": never the later one
    for i in pl.order:
        t = end[prev[i]]
        d = dep[i]
        if d >= 0:
            e = end[d] + comm
            if e > t:
                t = e
            start[i] = t
            end[i] = t + dur[i]
        else:
            start[i] = t = max(t, end[~d] + comm, end[second[i]] + comm)
            end[i] = end[n + i] = t + dur[i]
    return start, end


def _representative(c) -> Op:
    """An op of duration class ``c`` (``Costs.duration_fn`` reads only kinds and stages)."""
    if c >= PAIR_BASE:
        return Overlap(_representative(c & _MASK), _representative(c >> PAIR_SHIFT))
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
