"""Squeezing and reordering a repeated building block (Qi et al. 2024, §3 and §4).

Repeating a block every period gives a valid pipeline that idles in its warm-up and
cool-down. Two steps take the idle out, both in *slots* (one slot per pass of a half-size
chunk, t_F = t_I = t_W):

* **squeeze**: every pass starts as soon as its inputs and its rank allow, in the same
  order per rank;
* **reorder**: walking the passes in time order, a pass of the warm-up or the cool-down
  moves to the earliest free slot of its rank after its inputs, when that does not raise
  the rank's activations above the steady state's peak (the warm-up and cool-down hold
  fewer chunks, so the memory is there to spend). The steady state is left as it is. A
  second pass sets the W's aside, moves the cool-down's F and I passes up (the backward
  chain is the cool-down's critical path) and lets the W's fill the slots left over.

The result is each rank's order; the simulator then times it under any costs.

Speed (issue 21: 64 ranks, 256 microbatches, about 100 000 passes, under a slider): a pass
is a number, ``Passes.id(stage, kind, microbatch)``, so its inputs are a fixed offset away
(the previous stage's F is 3 before, the next stage's I 3 after, its own F or I 1 before);
a schedule is a list of slots indexed by pass (-1: not in it) and each rank keeps a list of
its slots (the pass in each, -1: free). Every step is then one walk over the passes with
list lookups, no hashing, and the reorder updates a rank's activation levels in place
rather than recounting them.
"""
from __future__ import annotations

import collections
import gc

from ..ir import Action
from ..inflight import INFLIGHT_RULE
from ._common import F, I, W

KINDS = "FIW"                               # a pass's kind is its number mod 3
_MAKE = (F, I, W)
Slots = list[int]                           # slot per pass number, -1 where absent


class Passes:
    """Numbering of the passes of a V-shaped pipeline: ``(microbatch·2P + stage)·3 + kind``
    (kind 0 F, 1 I, 2 W), with each number's rank looked up once."""

    def __init__(self, P: int, M: int, rank_of):
        S = len(rank_of)
        self.P, self.M, self.last, self.count = P, M, S - 1, 3 * S * M
        self.rank = [rank_of[s] for s in range(S) for _ in KINDS] * M
        self.stage = [s for s in range(S) for _ in KINDS] * M

    def id(self, stage: int, kind: int, mb: int) -> int:
        return (mb * (self.last + 1) + stage) * 3 + kind

    def ready_at(self, a: int, out: Slots) -> int:
        """First slot after ``a``'s inputs in ``out`` (F: the previous stage's F; I: own F
        and the next stage's I; W: own I); inputs not in ``out`` (-1) are ignored."""
        kind, s = a % 3, self.stage[a]
        t = 0
        if kind == 0:
            if s > 0:
                t = out[a - 3] + 1
        else:
            t = out[a - 1] + 1
            if kind == 1 and s < self.last and out[a + 3] >= t:
                t = out[a + 3] + 1
        return t

    def occupancy(self, slots: Slots) -> list[list[int]]:
        """Each rank's slots, holding the pass that runs there or -1."""
        T = max(slots) + 1
        occ = [[-1] * T for _ in range(self.P)]
        rank = self.rank
        for a, t in enumerate(slots):
            if t >= 0:
                occ[rank[a]][t] = a
        return occ

    def in_time_order(self, slots: Slots) -> list[int]:
        return sorted([a for a, t in enumerate(slots) if t >= 0], key=slots.__getitem__)


def squeeze(slots: Slots, ps: Passes) -> Slots:
    """Start every pass as early as its inputs and its rank's previous pass allow, keeping
    each rank's order (the given slots are a valid schedule, so time order is safe)."""
    out = [-1] * ps.count
    free_from = [0] * ps.P
    rank, stage, last = ps.rank, ps.stage, ps.last
    for a in ps.in_time_order(slots):       # ``ready_at`` written out: 100 000 calls saved
        r, kind = rank[a], a % 3
        t = free_from[r]
        if kind == 0:
            if stage[a] > 0 and out[a - 3] >= t:
                t = out[a - 3] + 1
        else:
            if out[a - 1] >= t:
                t = out[a - 1] + 1
            if kind == 1 and stage[a] < last and out[a + 3] >= t:
                t = out[a + 3] + 1
        out[a] = t
        free_from[r] = t + 1
    return out


def _alive_steps() -> tuple[int, int, int]:
    """What an F, I and W pass does to the chunks alive on its rank, read off the in-flight
    rule (``inflight.INFLIGHT_RULE``: an F adds one, its W frees it)."""
    return tuple(sum(INFLIGHT_RULE[k]) for k in KINDS)


def _levels(ops: list[int]) -> list[int]:
    """Chunks alive after each slot of one rank (``_alive_steps``)."""
    step = _alive_steps()
    levels, alive = [], 0
    for a in ops:
        if a >= 0:
            alive += step[a % 3]
        levels.append(alive)
    return levels


def _reorder(slots: Slots, occ: list[list[int]], ps: Passes, fixed: tuple[int, int],
             cap: int | None, levels: list[list[int]] | None) -> Slots:
    """Walk the passes in time order; move each one outside the ``fixed`` slots (inclusive)
    to the earliest free slot of its rank after its inputs where (with a ``cap``) the rank
    never holds more than ``cap``. A pass only moves to a slot already walked past, so the
    walk order (by the given slots) stays valid, and a pass's inputs are settled (walked or
    fixed) when it is reached. ``occ`` (each rank's slots) and ``levels``
    (chunks alive after each slot, needed only under a cap) are updated in place, so they
    describe the result afterwards."""
    lo_fixed, hi_fixed = fixed
    out = slots[:]                          # fixed passes stay; only the others are walked
    movable = [a for a, t in enumerate(slots) if t > hi_fixed or 0 <= t < lo_fixed]
    movable.sort(key=slots.__getitem__)
    rank, ready_at, steps = ps.rank, ps.ready_at, _alive_steps()
    for a in movable:
        t = slots[a]
        r = rank[a]
        ops = occ[r]
        ready = ready_at(a, out)
        kind = a % 3
        if levels is not None and kind == 0 and ready < t:
            # an earlier F holds one more chunk till t: start after the last slot at the
            # cap (levels never exceed it), found by a reversed search at C speed
            seg = levels[r][ready:t]
            seg.reverse()
            try:
                ready = t - seg.index(cap)
            except ValueError:              # never at the cap since ready
                pass
        if ready >= t:
            continue
        try:
            s = ops.index(-1, ready, t)
        except ValueError:
            continue
        ops[t], ops[s], out[a] = -1, a, s
        if levels is not None and kind != 1:
            step, level = steps[kind], levels[r]
            level[s:t] = [x + step for x in level[s:t]]
    return out


def reorder(slots: Slots, ps: Passes) -> list[list[int]]:
    """Move warm-up and cool-down passes into earlier free slots under the steady state's
    peak; then, with the W's set aside, move the cool-down's passes once more (the backward
    chain is the cool-down's critical path) and let the W's fill what is left (``fill_w``).
    The warm-up ends when the first microbatch's backward reaches stage 0; the cool-down
    starts after stage 0's last forward. The second step is kept only where it holds the
    peak (with few microbatches warm-up and cool-down overlap and it may not). Returns each
    rank's passes in slot order."""
    occ = ps.occupancy(slots)
    levels = [_levels(ops) for ops in occ]
    cap = max(max(level) for level in levels)
    first_back = slots[ps.id(0, 1, 0)]
    last_fwd = slots[ps.id(0, 0, ps.M - 1)]
    once = _reorder(slots, occ, ps, (first_back, last_fwd), cap, levels)
    once_orders = [[a for a in ops if a >= 0] for ops in occ]
    no_w = once[:]
    no_w[2::3] = [-1] * (ps.count // 3)
    occ = [[-1 if a % 3 == 2 else a for a in ops] for ops in occ]
    _reorder(no_w, occ, ps, (0, last_fwd), None, None)
    twice, twice_orders, twice_peak = fill_w([[a for a in ops if a >= 0] for ops in occ], ps, cap)
    if twice_peak <= cap and _length(twice, twice_orders) <= _length(once, once_orders):
        return twice_orders
    return once_orders


def _length(slots: Slots, orders: list[list[int]]) -> tuple[int, int]:
    """(longest rank span, makespan) in slots, from each rank's passes in slot order."""
    ends = [(slots[order[-1]], slots[order[0]]) for order in orders]
    return max(last - first + 1 for last, first in ends), max(last for last, _ in ends) + 1


def fill_w(orders: list[list[int]], ps: Passes, cap: int) -> tuple[Slots, list[list[int]], int]:
    """Run each rank's F and I passes in their given order, each as soon as its inputs are
    done; a W (oldest first) takes any slot where the next pass is not ready yet, or comes
    first when the next forward would hold more than ``cap`` chunks. Returns the slots, each
    rank's passes in slot order and the peak of chunks alive on any rank."""
    ranks = [r for r, order in enumerate(orders) if order]
    left = sum(len(order) + sum(a % 3 == 1 for a in order) for order in orders)
    orders = [order + [-1] for order in orders]     # -1: the rank's F and I are all placed
    nxt = [0] * ps.P
    pending = [collections.deque() for _ in range(ps.P)]
    alive, step = [0] * ps.P, _alive_steps()
    out = [-1] * ps.count
    stage, last = ps.stage, ps.last
    placed: list[list[int]] = [[] for _ in range(ps.P)]
    peak = t = 0
    while left:
        for r in ranks:
            n = nxt[r]
            head = orders[r][n]
            ready = False
            if head >= 0:                   # every input placed (not -1) before t
                if head % 3 == 0:
                    ready = stage[head] == 0 or -1 < out[head - 3] < t
                else:
                    ready = -1 < out[head - 1] < t and (stage[head] == last
                                                        or -1 < out[head + 3] < t)
            full = head >= 0 and head % 3 == 0 and alive[r] >= cap
            if pending[r] and (not ready or full):
                head = pending[r].popleft() + 1
            elif ready:
                nxt[r] = n + 1
                if head % 3 == 1:
                    pending[r].append(head)
            else:
                continue
            alive[r] += step[head % 3]
            if alive[r] > peak:
                peak = alive[r]
            out[head] = t
            placed[r].append(head)
            left -= 1
        t += 1
    return out, placed, peak


def rank_orders(orders: list[list[int]], ps: Passes) -> list[list[Action]]:
    """Each rank's passes as ``Action``s. At P=64, M=256 that allocates about 200 000
    objects (each Action and its ``__dict__``), during which the cyclic garbage collector
    would walk the growing heap again and again (two thirds of the time here); none of them
    can be part of a cycle, so it is paused for the loop and restored after."""
    S, stage = ps.last + 1, ps.stage
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return [[_MAKE[a % 3](stage[a], a // 3 // S) for a in order] for order in orders]
    finally:
        if was_enabled:
            gc.enable()
