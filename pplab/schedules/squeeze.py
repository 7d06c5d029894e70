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

The result is each rank's order; the simulator then times it under any costs. Passes are
plain ``(stage, kind, microbatch)`` tuples here (hashing them is several times cheaper than
hashing ``Action``s, and P = 64 moves about 100 000 of them).
"""
from __future__ import annotations

from ..ir import Action
from ._common import F, I, W

Pass = tuple[int, str, int]                 # (stage, kind, microbatch)
Slots = dict[Pass, int]
_MAKE = {"F": F, "I": I, "W": W}
_STEP = {"F": 1, "W": -1, "I": 0}


def _inputs(a: Pass, last_stage: int) -> list[Pass]:
    """The passes ``a`` waits for (F: the previous stage's F; I: own F and the next stage's
    I; W: own I)."""
    s, kind, mb = a
    if kind == "F":
        return [(s - 1, "F", mb)] if s > 0 else []
    if kind == "I":
        return [(s, "F", mb), (s + 1, "I", mb)] if s < last_stage else [(s, "F", mb)]
    return [(s, "I", mb)]


def squeeze(slots: Slots, rank_of, last_stage: int) -> Slots:
    """Start every pass as early as its inputs and its rank's previous pass allow, keeping
    each rank's order (the given slots are a valid schedule, so time order is safe)."""
    out: Slots = {}
    free_from: dict[int, int] = {}
    for a in sorted(slots, key=slots.__getitem__):
        r = rank_of[a[0]]
        t = max([free_from.get(r, 0)] + [out[d] + 1 for d in _inputs(a, last_stage)])
        out[a] = t
        free_from[r] = t + 1
    return out


def _levels(ops: dict[int, Pass]) -> list[int]:
    """Chunks alive after each slot of one rank: an F adds one, a W (the chunk's last pass)
    frees one."""
    levels, alive = [], 0
    for t in range(max(ops, default=-1) + 1):
        a = ops.get(t)
        if a is not None:
            alive += _STEP[a[1]]
        levels.append(alive)
    return levels


def _reorder(slots: Slots, rank_of, last_stage: int, movable, cap: int | None) -> Slots:
    """Walk the passes in time order; move each movable one to the earliest free slot of its
    rank after its inputs where (with a ``cap``) the rank never holds more than ``cap``."""
    by_rank = _by_rank(slots, rank_of)
    levels = {r: _levels(ops) for r, ops in by_rank.items()}
    out: Slots = {}
    for a in sorted(slots, key=lambda x: (slots[x], rank_of[x[0]])):
        t = out[a] = slots[a]
        if not movable(t):
            continue
        r = rank_of[a[0]]
        ops, level = by_rank[r], levels[r]
        ready = max([0] + [out[d] + 1 for d in _inputs(a, last_stage) if d in out])
        if cap is not None and a[1] == "F":      # an earlier F holds one more chunk till t
            lo = t
            while lo > ready and level[lo - 1] < cap:
                lo -= 1
            ready = lo
        for s in range(ready, t):
            if s in ops:
                continue
            del ops[t]
            ops[s], out[a] = a, s
            step = _STEP[a[1]]
            for u in range(s, t):
                level[u] += step
            break
    return out


def reorder(slots: Slots, rank_of, last_stage: int, M: int) -> Slots:
    """Move warm-up and cool-down passes into earlier free slots under the steady state's
    peak; then, with the W's set aside, move the cool-down's passes once more (the backward
    chain is the cool-down's critical path) and let the W's fill what is left (``fill_w``).
    The warm-up ends when the first microbatch's backward reaches stage 0; the cool-down
    starts after stage 0's last forward. The second step is kept only where it holds the
    peak (with few microbatches warm-up and cool-down overlap and it may not)."""
    cap = _peak(slots, rank_of)
    first_back = slots[(0, "I", 0)]
    last_fwd = slots[(0, "F", M - 1)]
    once = _reorder(slots, rank_of, last_stage, lambda t: not first_back <= t <= last_fwd, cap)
    no_w = {a: t for a, t in once.items() if a[1] != "W"}
    no_w = _reorder(no_w, rank_of, last_stage, lambda t: t > last_fwd, None)
    twice = fill_w(no_w, rank_of, last_stage, cap)
    if _peak(twice, rank_of) <= cap and _length(twice, rank_of) <= _length(once, rank_of):
        return twice
    return once


def _peak(slots: Slots, rank_of) -> int:
    return max(max(_levels(ops)) for ops in _by_rank(slots, rank_of).values())


def _length(slots: Slots, rank_of) -> tuple[int, int]:
    """(longest rank span, makespan) in slots."""
    spans = [max(ops) - min(ops) + 1 for ops in _by_rank(slots, rank_of).values()]
    return max(spans), max(slots.values()) + 1


def _by_rank(slots: Slots, rank_of) -> dict[int, dict[int, Pass]]:
    by_rank: dict[int, dict[int, Pass]] = {}
    for a, t in slots.items():
        by_rank.setdefault(rank_of[a[0]], {})[t] = a
    return by_rank


def fill_w(slots: Slots, rank_of, last_stage: int, cap: int) -> Slots:
    """Run each rank's F and I passes in their slot order, each as soon as its inputs are
    done; a W (oldest first) takes any slot where the next pass is not ready yet, or comes
    first when the next forward would hold more than ``cap`` chunks."""
    orders: dict[int, list[Pass]] = {}
    for a in sorted(slots, key=slots.__getitem__):
        orders.setdefault(rank_of[a[0]], []).append(a)
    nxt = {r: 0 for r in orders}
    pending: dict[int, list[Pass]] = {r: [] for r in orders}
    alive = {r: 0 for r in orders}
    out: Slots = {}
    left = len(slots) + sum(a[1] == "I" for a in slots)
    t = 0
    while left:
        for r, order in orders.items():
            head = order[nxt[r]] if nxt[r] < len(order) else None
            ready = head is not None and all(out.get(d, t) < t for d in _inputs(head, last_stage))
            full = head is not None and head[1] == "F" and alive[r] >= cap
            if pending[r] and (not ready or full):
                stage, _, mb = pending[r].pop(0)
                out[(stage, "W", mb)] = t
                alive[r] -= 1
            elif ready:
                out[head] = t
                nxt[r] += 1
                if head[1] == "I":
                    pending[r].append(head)
                alive[r] += head[1] == "F"
            else:
                continue
            left -= 1
        t += 1
    return out


def rank_orders(slots: Slots, rank_of, P: int) -> list[list[Action]]:
    """Each rank's passes in slot order, as ``Action``s."""
    ranks: list[list[tuple[int, Pass]]] = [[] for _ in range(P)]
    for a, t in slots.items():
        ranks[rank_of[a[0]]].append((t, a))
    return [[_MAKE[k](s, mb) for _, (s, k, mb) in sorted(r)] for r in ranks]
