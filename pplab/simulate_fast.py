"""The simulator's fast executor: the reference's events, same order, same float operations.

``pplab.simulate.execute_reference`` stays the oracle; this module replays its worklist (the
same ranks woken in the same order) and so returns exactly its events. It is faster because
of three facts:

* **Only cross-rank inputs matter.** A dependency run earlier on the same rank ended before
  the rank became free, so it never moves a start time (durations are ≥ 0) and never
  blocks; the run only checks that it has already run. What is left is one input per
  action from another rank (two for an overlapped pair), found by the action's integer
  key (``ir.KEY_STRIDE``), which the generators' constructors cache on each action.
* **The run order does not depend on the costs.** The reference blocks on "not run yet",
  never on a time, so its order is fixed by the schedule. The first simulation records it
  with each op's input; later ones (a cost slider, the search, the planner) walk it in
  one straight loop.
* **Bulk work at C speed.** Keys, checks, durations (one per (kind, stage) class) and the
  events (tuples) are made with ``map`` over whole lists.

Anything unusual (an action run twice, off its stage's rank, out of range, both B and I for
one stage and microbatch, an input nobody or the same rank only later makes, a negative
duration) makes the fast path step aside: the caller then runs the reference, which raises
its own, well-worded error.
"""
from __future__ import annotations

from functools import partial
from itertools import accumulate, chain, compress, repeat
from operator import add, and_, attrgetter, eq, is_, ne, not_, xor
from typing import Callable

from .ir import KEY_STRIDE, KIND_CODE, KINDS, Action, Op, Overlap, Schedule, gc_paused
from .timeline import Event

_new_event = partial(tuple.__new__, Event)
_KEY, _FIELDS = attrgetter("_key"), attrgetter("stage", "kind", "microbatch")
_HALVES = attrgetter("forward", "backward")
_MASK = KEY_STRIDE - 1                       # key & _MASK = the class, stage·4 + kind
_FAR = 1 << 62                               # key + _FAR: "needs nothing", always done
_PAIR = ~(_FAR - 1)                         # the look-up of an overlapped pair (never done)


class Plan:
    """One schedule's ops in rank-major order, their keys and what the run found.

    ``keys[i]``: op i's action key, or its pair's two keys; ``look[i]``: the one key a lone
    op looks up, its input from another rank, or ``~key`` of what must already have run
    on this rank (``_PAIR`` for a pair); ``cls[i]``: the duration class (``(c1, c2)`` for
    a pair); ``bounds[r]``: rank r's ops are ``bounds[r] .. bounds[r + 1] - 1``; ``always``:
    the keys done from the start (the "needs nothing" ones); ``pairs[i]``: a pair's looks,
    its own two parts left out; ``mixed_b``: the B classes whose stage also runs I's, for
    the look-ups that miss. After the first run: ``order`` (the reference's), ``dep[i]``
    (op i's cross-rank input; ``n`` for none, -1 for a pair, whose are ``two[i]``) and
    ``by_order`` (ranks and ops in that order).
    """
    __slots__ = ("ops", "rank", "keys", "look", "cls", "bounds", "keyset", "always", "pairs",
                 "mixed_b", "order", "dep", "two", "by_order")

    def __init__(self, ops, rank, keys, look, cls, bounds, keyset, always, pairs, mixed_b):
        self.ops, self.rank, self.keys, self.look, self.cls = ops, rank, keys, look, cls
        self.bounds, self.keyset, self.always, self.pairs = bounds, keyset, always, pairs
        self.mixed_b = mixed_b
        self.order = self.dep = self.two = self.by_order = None


def plan(schedule: Schedule) -> Plan | None:
    """The compiled plan of ``schedule`` (cached on it), or None where only the reference
    may answer."""
    cached = schedule.__dict__.get("_fast_plan", False)
    if cached is False:
        cached = _compile(schedule)
        schedule.__dict__["_fast_plan"] = cached      # a frozen dataclass: as cached_property
    return cached


def _key_list(actions) -> list[int]:
    """Each action's key, cached by the generators, worked out from the fields otherwise."""
    try:
        return list(map(_KEY, actions))
    except AttributeError:
        return [m * KEY_STRIDE + s * 4 + KIND_CODE[k] for s, k, m in map(_FIELDS, actions)]


def _compile(schedule: Schedule) -> Plan | None:
    """Keys and checks, in bulk; None where the fast path steps aside."""
    S, M = schedule.num_stages, schedule.M
    ops = list(chain.from_iterable(schedule.ranks))
    sizes = list(map(len, schedule.ranks))
    bounds = [0, *accumulate(sizes)]
    rank_of = list(chain.from_iterable(map(repeat, range(schedule.P), sizes)))
    types = set(map(type, ops))
    if not types <= {Action, Overlap}:
        return None
    if Overlap in types:
        is_pair = list(map(is_, map(type, ops), repeat(Overlap)))
        lone = list(map(not_, is_pair))
        pairs_at = list(compress(range(len(ops)), is_pair))
        singles = list(compress(ops, lone))
        parts = singles + list(chain.from_iterable(map(_HALVES, compress(ops, is_pair))))
        keys = _key_list(parts)
        pair_rank = list(compress(rank_of, is_pair))
        part_rank = list(compress(rank_of, lone)) + list(chain.from_iterable(
            zip(pair_rank, pair_rank)))
        op_keys = _merge(ops, keys, len(singles))
    else:
        keys = op_keys = _key_list(ops)
        part_rank = rank_of
    cls = list(map(and_, keys, repeat(_MASK)))
    present = set(cls)
    if keys and (min(keys) < 0 or max(keys) >= M * KEY_STRIDE or max(present) >= 4 * S):
        return None                                  # a stage or microbatch out of range
    keyset = set(keys)
    if len(keyset) < len(keys):
        return None                                  # an action run twice
    if {1, 2} <= {c & 3 for c in present} and not keyset.isdisjoint(
            [k + 1 for k, b in zip(keys, map(eq, map(and_, keys, repeat(3)), repeat(1))) if b]):
        return None                                  # both B and I for one action
    place = [schedule.stage_to_rank[c >> 2] for c in range(4 * S)]
    if any(map(ne, map(place.__getitem__, cls), part_rank)):
        return None                                  # an action off its stage's rank
    one, mixed_b = _tables(schedule, present)
    offset, flag = [o for o, _ in one], [f for _, f in one]
    look = list(map(xor, map(add, keys, map(offset.__getitem__, cls)), map(flag.__getitem__, cls)))
    nothing = [o == _FAR for o in offset]
    always = list(map(add, compress(keys, map(nothing.__getitem__, cls)), repeat(_FAR)))
    pairs = {}
    if op_keys is not keys:
        pair_looks = iter(look[len(singles):])
        for i in pairs_at:                       # a pair's own other half is no input
            x, y = next(pair_looks), next(pair_looks)
            inside = op_keys[i]
            if (x if x >= 0 else ~x) in inside:
                pairs[i] = () if (y if y >= 0 else ~y) in inside else (y,)
            else:
                pairs[i] = (x,) if (y if y >= 0 else ~y) in inside else (x, y)
        look = _merge(ops, look, len(singles), _PAIR)
        cls = [k & _MASK if type(k) is int else (k[0] & _MASK, k[1] & _MASK) for k in op_keys]
    return Plan(ops, rank_of, op_keys, look, cls, bounds, keyset, always, pairs, mixed_b)


def _merge(ops, keys, n_singles, pair=None) -> list:
    """Per op its key, or its overlapped pair's two keys (``pair`` in their place when
    given), from singles-then-pairs order."""
    singles, pairs = iter(keys[:n_singles]), iter(keys[n_singles:])
    if pair is not None:
        return [pair if type(op) is Overlap else next(singles) for op in ops]
    return [(next(pairs), next(pairs)) if type(op) is Overlap else next(singles) for op in ops]


def _tables(schedule: Schedule, present: set[int]):
    """Per class ``stage·4 + kind``: ``(offset, flag)`` of the one key a lone op looks up
    (``look = (key + offset) ^ flag``): its input made on another rank (flag 0), else what
    must already have run on this rank (flag -1): an input made here (the V's turn), else
    its own stage's earlier part (a W's I, a last stage's F: an input implies it, since
    its maker needed it), else nothing (``_FAR``, always done). A backward's input is the
    next stage's B, or its I where only I's run there; ``mixed_b`` has the B classes of
    stages that run both (a look-up that misses a B there tries the I)."""
    first, last = schedule._stage_ends
    place = schedule.stage_to_rank
    one, mixed_b = [], set()
    for s in range(schedule.num_stages):
        up = None if first[s] else s - 1
        down = None if last[s] else s + 1
        b_there = down is not None and 4 * down + 1 in present
        split = down is not None and not b_there and 4 * down + 2 in present
        if b_there and 4 * down + 2 in present:
            mixed_b.add(4 * down + 1)
        inputs = [None if up is None else (-4, up), None, None, None]
        if down is not None:
            inputs[1:3] = [(4 + split, down), (3 + split, down)]      # from B, from I
        for c, own in enumerate((None, -1, -2, -1)):
            off, at = inputs[c] or (None, None)
            here = off is not None and place[at] == place[s]
            one.append((off, 0) if off is not None and not here else
                       (off, -1) if off is not None else (own, -1) if own else (_FAR, 0))
    return one, mixed_b


def _waits_for(key: int, pl: Plan) -> int | None:
    """The key of the input a blocked op waits for (B, else I where the stage runs both),
    or None: nobody makes it."""
    if key in pl.keyset:
        return key
    return key + 1 if (key & _MASK) in pl.mixed_b and key + 1 in pl.keyset else None


def _found(key: int, pl: Plan, done: dict):
    """What a missed look-up finds after all: the I where a B was looked for (its stage
    runs both), else None."""
    if (key & _MASK) in pl.mixed_b:
        return done.get(key + 1)
    return None


def first_run(pl: Plan, dur: list[float], comm: float, P: int):
    """The reference's worklist: ``(start, end)`` with ``pl.order``, ``pl.dep`` and
    ``pl.two`` filled in, or None where the reference must answer. A rank runs until an
    input from another rank is missing, then waits for that action's key."""
    keys, look, bounds = pl.keys, pl.look, pl.bounds
    n = len(keys)
    start, end, dep, two, stretches = [0.0] * n, [0.0] * (n + 2), [n] * n, {}, []
    done = dict.fromkeys(pl.always, n)           # key -> the op that ran it
    get = done.get
    pointer, free_at = bounds[:P], [0.0] * P
    waiting: dict[int, list[int]] = {}
    todo = list(range(P))
    while todo:
        rank = todo.pop()
        i0 = i = pointer[rank]
        stop, t = bounds[rank + 1], free_at[rank]
        while i < stop:
            x = look[i]
            if x >= 0:                           # an input from another rank
                d = get(x)
                if d is None:
                    d = _found(x, pl, done)
                    if d is None:
                        w = _waits_for(x, pl)
                        if w is None:
                            return None          # nobody makes it
                        waiting.setdefault(w, []).append(rank)
                        break
                if d < n:
                    e = end[d] + comm
                    if e > t:
                        t = e
                    dep[i] = d
            elif ~x not in done:
                if x != _PAIR:
                    if _found(~x, pl, done) is None:
                        return None              # the same rank runs it later, or nobody
                else:
                    got = _pair(pl, i, done, end, comm, t, two)
                    if type(got) is not float:
                        if got is None:
                            return None
                        waiting.setdefault(got[0], []).append(rank)
                        break
                    t = got
                    dep[i] = -1
                    start[i] = t
                    t += dur[i]
                    end[i] = t
                    for a in keys[i]:            # woken part by part, as the reference does
                        done[a] = i
                        if a in waiting:
                            todo.extend(waiting.pop(a))
                    i += 1
                    continue
            k = keys[i]
            done[k] = i
            start[i] = t
            t += dur[i]
            end[i] = t
            if k in waiting:
                todo.extend(waiting.pop(k))
            i += 1
        stretches.append(range(i0, i))
        pointer[rank], free_at[rank] = i, t
    order = list(chain.from_iterable(stretches))
    if len(order) < n:
        return None
    pl.order, pl.dep, pl.two = order, dep, two
    return start, end


def _pair(pl: Plan, i: int, done, end, comm, t, two):
    """An overlapped pair's ready time; ``(key,)`` of the input it waits for; None where
    the reference must answer. Its looks in the reference's order (``Plan.look``); the
    inputs from other ranks are kept in ``two[i]``."""
    found, n = [], len(pl.keys)
    for x in pl.pairs[i]:
        if x >= 0:
            d = done.get(x)
            if d is None:
                d = _found(x, pl, done)
                if d is None:
                    w = _waits_for(x, pl)
                    return None if w is None else (w,)
            if d < n:
                e = end[d] + comm
                if e > t:
                    t = e
                found.append(d)
        elif ~x not in done and _found(~x, pl, done) is None:
            return None
    two[i] = tuple(found)
    return float(t)


def rerun(pl: Plan, dur: list[float], comm: float):
    """Times along the recorded run order: one straight pass, every input already done."""
    dep, two, n = pl.dep, pl.two, len(pl.dep)
    start, end = [0.0] * n, [0.0] * (n + 2)
    end[n] = float("-inf")                       # "no input": never the later one
    prev = list(range(-1, n - 1))
    for b in pl.bounds[:-1]:
        if b < n:
            prev[b] = n + 1                      # a rank's first op: free at 0.0
    for i in pl.order:
        t = end[prev[i]]
        d = dep[i]
        if d >= 0:
            e = end[d] + comm
            if e > t:
                t = e
        else:
            for d in two[i]:
                e = end[d] + comm
                if e > t:
                    t = e
        start[i] = t
        end[i] = t + dur[i]
    return start, end


def _representative(c) -> Op:
    """An op of duration class ``c`` (``Costs.duration_fn`` reads only kinds and stages)."""
    if type(c) is tuple:
        return Overlap(*map(_representative, c))
    return Action(c >> 2, KINDS[c & 3], 0)


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
            table = {c: duration(_representative(c)) for c in set(pl.cls)}
            dur = list(map(table.__getitem__, pl.cls))
        else:
            dur = list(map(duration, pl.ops))
        if not all(x >= 0 for x in (table.values() if by_class else dur)):
            return None                          # NaN too: the reference decides
        if pl.order is None:
            times = first_run(pl, dur, comm, schedule.P)
            if times is None:
                return None
            pl.by_order = (list(map(pl.rank.__getitem__, pl.order)),
                           list(map(pl.ops.__getitem__, pl.order)))
        else:
            times = rerun(pl, dur, comm)
        order, (ranks, ops), (start, end) = pl.order, pl.by_order, times
        return list(map(_new_event, zip(ranks, ops, map(start.__getitem__, order),
                                        map(end.__getitem__, order))))
