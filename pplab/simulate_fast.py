"""The simulator's fast executor: the reference's answer from a plan compiled once per schedule.

``pplab.simulate.execute_reference`` stays the oracle; this module returns exactly its events
in the same order, with the same float operations. It is faster because of three facts:

* **Only cross-rank inputs matter.** A dependency that ran earlier on the same rank ended
  before the rank became free, so it never moves a start time (durations are ≥ 0) and
  never blocks. The plan keeps one input per action (two for an overlapped pair), taken
  from another rank, and checks once that every same-rank dependency comes earlier.
* **The run order does not depend on the costs.** The reference's worklist blocks on
  "not run yet", never on a time, so the order it runs ops in is fixed by the schedule.
  The first simulation records it; later ones (a cost slider, the search, the planner)
  walk it in one straight loop.
* **Bulk work at C speed.** Fields, keys and look-ups are built with ``map`` over whole
  lists; durations are looked up per (kind, stage) class; events are made as tuples.

Anything unusual (an action run twice, a missing producer, a deadlock, both B and I for one
stage and microbatch, an input produced later on the same rank, a negative duration) makes
the fast path step aside: the caller then runs the reference, which raises its own,
well-worded error.
"""
from __future__ import annotations

from functools import partial
from itertools import accumulate, chain, compress, count, repeat
from operator import add, and_, attrgetter, is_not, itemgetter, sub
from typing import Callable

from .ir import KEY_STRIDE as _MB_STRIDE, KIND_CODE, Op, Overlap, Schedule, gc_paused
from .timeline import Event

_new_event = partial(tuple.__new__, Event)
_KEY, _FIELDS = attrgetter("_key"), attrgetter("stage", "kind", "microbatch")


class Plan:
    """One schedule's ops in rank-major order with what each waits on.

    ``dep[i]``: the op that makes op ``i``'s one cross-rank input, -1 for none, -2 for an
    overlapped pair with two (``two[i]`` lists them as ``(op, part)``); ``part[i]``: which
    part of ``dep[i]`` it is (an overlapped producer has two); ``cls[i]``: the duration
    class, ``reps[c]`` an op of class ``c``; ``bounds[r]``: rank r's ops are
    ``bounds[r] .. bounds[r + 1] - 1``; ``order``: the reference's run order, once known.
    """
    __slots__ = ("ops", "rank", "dep", "part", "two", "cls", "reps", "bounds", "order",
                 "by_order")

    def __init__(self, ops, rank, dep, part, two, cls, reps, bounds):
        self.ops, self.rank, self.dep, self.part, self.two = ops, rank, dep, part, two
        self.cls, self.reps, self.bounds = cls, reps, bounds
        self.order = self.by_order = None


def plan(schedule: Schedule) -> Plan | None:
    """The compiled plan of ``schedule`` (cached on it), or None where only the reference
    may answer."""
    cached = schedule.__dict__.get("_fast_plan", False)
    if cached is False:
        cached = _compile(schedule)
        schedule.__dict__["_fast_plan"] = cached      # a frozen dataclass: as cached_property
    return cached


def _parts(ops: list) -> tuple[list, list[int] | None, list[int]]:
    """The actions of ``ops`` in order, per action its op's index, and per op the index of
    its first action (an overlapped pair gives two actions; None, None when every op is
    one action)."""
    types = list(map(type, ops))
    if Overlap not in set(types):
        return ops, None, None
    sizes = [2 if t is Overlap else 1 for t in types]
    parts = list(chain.from_iterable([(op.forward, op.backward) if t is Overlap else (op,)
                                      for op, t in zip(ops, types)]))
    op_of = list(chain.from_iterable(map(repeat, count(), sizes)))
    return parts, op_of, list(accumulate(sizes, initial=0))


def _tables(schedule: Schedule, present: set[int]):
    """Per class ``stage·4 + kind``: the key offset of its own stage's earlier part (None
    for F), of its input on the same rank and of its input on another rank (None for none).
    A backward's input is the next stage's B, or its I where only I's run there (both:
    B, and :func:`_find` tries I where B is missing). ``present``: the classes run."""
    first, last = schedule._stage_ends
    place = schedule.stage_to_rank
    own, same, cross = [], [], []
    for s in range(schedule.num_stages):
        up = None if first[s] else s - 1
        down = None if last[s] else s + 1
        split = down is not None and 4 * down + 1 not in present and 4 * down + 2 in present
        inputs = [None if up is None else -4, None, None, None]
        if down is not None:
            inputs[1:3] = [4 + split, 3 + split]          # from B, from I
        own += [None, -1, -2, -1]
        for c, off in enumerate(inputs):
            other = off is not None and place[(up, down, down, None)[c]] != place[s]
            same.append(None if other else off)
            cross.append(off if other else None)
    return own, same, cross


def _keys(parts: list) -> list[int] | None:
    """Each action's key (``ir.KEY_STRIDE``), cached by the generators' constructors
    (``schedules/_common.py``), worked out from the fields otherwise."""
    try:
        return list(map(_KEY, parts))
    except AttributeError:
        return [m * _MB_STRIDE + s * 4 + KIND_CODE[k] for s, k, m in map(_FIELDS, parts)]


def _compile(schedule: Schedule) -> Plan | None:
    """Number the actions, check what the fast path assumes, keep cross-rank inputs only."""
    S, M = schedule.num_stages, schedule.M
    ops = list(chain.from_iterable(schedule.ranks))
    bounds = [0, *accumulate(map(len, schedule.ranks))]
    rank_of = list(chain.from_iterable(map(repeat, range(schedule.P),
                                           map(len, schedule.ranks))))
    parts, op_of, first_part = _parts(ops)
    keys = _keys(parts)
    cls = list(map(and_, keys, repeat(_MB_STRIDE - 1)))
    present = set(cls)
    if parts and (min(keys) < 0 or max(keys) >= M * _MB_STRIDE or max(present) >= 4 * S):
        return None                                  # a stage or microbatch out of range
    pos = dict(zip(keys, count()))
    if len(pos) < len(keys):
        return None                                  # an action run twice
    if {1, 2} <= {c & 3 for c in present} and \
            len({k + (k & 3 == 1) for k in keys}) < len(keys):
        return None                                  # both B and I for one action
    if not _placed(schedule, cls, rank_of if op_of is None else op_of, rank_of):
        return None
    own, same, cross = _tables(schedule, present)
    at = (lambda js: js) if op_of is None else (lambda js: list(map(op_of.__getitem__, js)))
    for offsets in (own, same):                      # each must exist and run earlier
        found = _find(keys, cls, pos, offsets)
        if found is None or any(map(int.__gt__, at(found[1]), at(found[0]))):
            return None
    found = _find(keys, cls, pos, cross)
    if found is None:
        return None                                  # nobody makes an input
    return _cross_plan(ops, rank_of, bounds, op_of, first_part, cls, *found)


def _placed(schedule: Schedule, cls, op_of_part, rank_of) -> bool:
    """Whether every action runs on the rank its stage is placed on."""
    part_rank = map(rank_of.__getitem__, op_of_part) if op_of_part is not rank_of else rank_of
    place = [schedule.stage_to_rank[c >> 2] for c in range(4 * schedule.num_stages)]
    return not any(map(int.__ne__, map(place.__getitem__, cls), part_rank))


def _find(keys, cls, pos, offsets) -> tuple[list[int], list[int]] | None:
    """``(js, ds)``: the actions with an entry in ``offsets`` and the action each waits on,
    or None if one is missing. A backward whose B is missing waits on the I instead."""
    off = list(map(offsets.__getitem__, cls))
    has = list(map(is_not, off, repeat(None)))
    want = list(map(add, compress(keys, has), compress(off, has)))
    ds = list(map(pos.get, want))
    if None in ds:
        ds = [pos.get(k + 1) if d is None and k & 3 == 1 else d for k, d in zip(want, ds)]
        if None in ds:
            return None
    return list(compress(count(), has)), ds


def _cross_plan(ops, rank_of, bounds, op_of, first_part, cls, js, ds) -> Plan:
    """The plan from each cross-rank input ``ds[n]`` of action ``js[n]``."""
    n = len(ops)
    if op_of is None:
        dep, op_cls = [-1] * n, cls
        for j, d in zip(js, ds):
            dep[j] = d
        part, two = [0] * n, {}
    else:
        takers = list(map(op_of.__getitem__, js))
        makers = list(map(op_of.__getitem__, ds))
        which = list(map(sub, ds, map(first_part.__getitem__, makers)))
        first = dict(zip(reversed(takers), zip(reversed(makers), reversed(which))))
        two = {i: (first[i], (o, p)) for i, o, p in zip(takers, makers, which)
               if first[i] != (o, p)}
        dep = [first[i][0] if i in first else -1 for i in range(n)]
        part = [first[i][1] if i in first else 0 for i in range(n)]
        for i in two:
            dep[i] = -2                              # an overlapped pair with two inputs
        op_cls = list(map(cls.__getitem__, first_part[:-1]))
        for i in compress(count(), map(int.__eq__, map(sub, first_part[1:], first_part),
                                       repeat(2))):
            op_cls[i] = (op_cls[i], cls[first_part[i] + 1])
    first = dict(zip(reversed(op_cls), range(n - 1, -1, -1)))    # class -> its first op
    number = {c: j for j, c in enumerate(first)}
    return Plan(ops, rank_of, dep, part, two, list(map(number.__getitem__, op_cls)),
                [ops[i] for i in first.values()], bounds)


def first_run(pl: Plan, dur: list[float], comm: float, P: int):
    """The reference's worklist on the plan: ``(start, end, order)``, or None if stuck.

    A rank runs until an input from another rank is missing, then waits for that op; the
    run order is kept as one range of ops per such stretch."""
    dep, two, bounds = pl.dep, pl.two, pl.bounds
    n = len(dep)
    start, end, stretches = [0.0] * n, [None] * n, []
    pointer, free_at = bounds[:P], [0.0] * P
    waiting: dict[int, list] = {}
    todo = list(range(P))
    while todo:
        rank = todo.pop()
        i0 = i = pointer[rank]
        stop, t = bounds[rank + 1], free_at[rank]
        while i < stop:
            d = dep[i]
            if d >= 0:
                e = end[d]
                if e is None:
                    waiting.setdefault(d, []).append((pl.part[i], rank))
                    break
                e += comm
                if e > t:
                    t = e
            elif d == -2:
                blocked = _pair_ready(two[i], end, comm, t)
                if type(blocked) is tuple:
                    waiting.setdefault(blocked[0], []).append((blocked[1], rank))
                    break
                t = blocked
            start[i] = t
            t += dur[i]
            end[i] = t
            if i in waiting:
                woken = waiting.pop(i)
                if len(woken) > 1:
                    woken.sort(key=itemgetter(0))      # the reference wakes part by part
                todo.extend(map(itemgetter(1), woken))
            i += 1
        stretches.append(range(i0, i))
        pointer[rank], free_at[rank] = i, t
    order = list(chain.from_iterable(stretches))
    return None if len(order) < n else (start, end, order)


def _pair_ready(deps, end, comm, t):
    """An overlapped pair's ready time, or the ``(op, part)`` it still waits for."""
    for d, p in deps:
        e = end[d]
        if e is None:
            return d, p
        e += comm
        if e > t:
            t = e
    return t


def rerun(pl: Plan, dur: list[float], comm: float):
    """Times along the recorded run order: one straight pass, every input already done."""
    dep, two, bounds = pl.dep, pl.two, pl.bounds
    n = len(dep)
    start, end = [0.0] * n, [0.0] * n
    firsts = set(bounds)
    for i in pl.order:
        t = 0.0 if i in firsts else end[i - 1]
        d = dep[i]
        if d >= 0:
            e = end[d] + comm
            if e > t:
                t = e
        elif d == -2:
            t = _pair_ready(two[i], end, comm, t)
        start[i] = t
        end[i] = t + dur[i]
    return start, end


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
            if not all(x >= 0 for x in table):    # NaN too: the reference decides
                return None
            dur = list(map(table.__getitem__, pl.cls))
        else:
            dur = list(map(duration, pl.ops))
            if not all(x >= 0 for x in dur):
                return None
        if pl.order is None:
            done = first_run(pl, dur, comm, schedule.P)
            if done is None:
                return None
            start, end, pl.order = done
            pl.by_order = (list(map(pl.rank.__getitem__, pl.order)),
                           list(map(pl.ops.__getitem__, pl.order)))
        else:
            start, end = rerun(pl, dur, comm)
        order, (ranks, ops) = pl.order, pl.by_order
        return list(map(_new_event, zip(ranks, ops, map(start.__getitem__, order),
                                        map(end.__getitem__, order))))
