"""The memory-controllable V-shape family: V-Min, V-Half and V-ZB.

Source: Qi, Wan, Amar, Lin 2024, "Pipeline Parallelism with Controllable Memory" (NeurIPS).
Every rank holds two chunks in a V (stages r and 2P−1−r, as ZB-V) and each backward is
split into I and W. A schedule is one *building block* (when each of a microbatch's passes
starts, stage by stage) repeated every microbatch; a chunk's activations live from its F to
its W, so the offsets between passes on neighbouring stages set the peak memory.

At t_F = t_I = t_W every pass of a half-size chunk takes one slot and a rank does six passes
per microbatch, so the block repeats every six slots. ``BLOCKS`` gives the slots between
neighbouring stages on the V's four legs (forward down, forward up, input-grad down,
input-grad up) and the waits at its three turns (bottom of the forward, top, bottom of the
backward). A rank's two lifespans add up to about (sum of the legs)·P slots, i.e. (sum of the
legs)/12 of 1F1B's memory:

* V-Min, legs 1, 1, 1, 1: a third of 1F1B's activations, (P+4)//3 stage-equivalents;
* V-Half, legs 2, 1, 2, 1: half, (P+2)//2;
* V-ZB, legs 5, 1, 5, 1: 1F1B's P. The up legs stay at one slot as in the other two and the
  down legs take the rest of the budget, which gives each chunk ZB-V's steady-state lifespan.

V-Min's and V-Half's legs and turns are the authors' blocks (their code's v-min and v-half
patterns); V-ZB's are derived from the lifespan rule above. Each W takes the rank's next free
slot. The repeated blocks are then squeezed and their warm-up and cool-down reordered under
the steady state's peak (``squeeze.py``), the paper's steps for all three.

Bubbles, as the paper counts them: idle over the longest rank's span (its first op's start to
its last op's end, ``Timeline.bubble_rate_span``) at t_F = t_I = t_W. The paper gives ≈ 0 for
V-ZB, ≈ B/2 for V-Half and ≈ 2B/3 for V-Min, B being 1F1B's rate on that count,
(P−1)/(M+P−1) (≈ p/m; 1F1B's rank 0 spans the whole step). Measured at P=8, M=32: V-ZB 0 %
(of the span and of the ideal), V-Half 8.1 % (B/2 = 9.0 %), V-Min 12.3 % (2B/3 = 12.0 %).
Over the whole step V-ZB still pays the V's start-up trip, (P−1)·t_F/2 = 3.6 % of the ideal
there, like ZB-V: no V schedule of one flushed step avoids it (the last rank cannot start
before the first microbatch reaches it), which is why "zero bubble" is a per-span figure.
"""
from __future__ import annotations

import collections

from ..ir import Schedule
from ._common import build, check_basics, v_placement
from .squeeze import Passes, rank_orders, reorder, squeeze

PERIOD = 6                   # slots per microbatch per rank: F, I, W on two chunks
Times = tuple[tuple[int, ...], tuple[int, ...]]
#: legs (forward down, forward up, input-grad down, input-grad up) and the turns' waits
BLOCKS = {
    "v-min": ((1, 1, 1, 1), lambda P: (0, 2 if P % 3 == 0 else 0, 0)),
    "v-half": ((2, 1, 2, 1), lambda P: (0, 3 if P % 2 == 0 else 0, 1)),
    "v-zb": ((5, 1, 5, 1), lambda P: (0, 0, 0)),
}


def _block(P: int, legs: tuple[int, ...], turns: tuple[int, int, int]) -> Times:
    """Start slot of microbatch 0's F and I on every stage. ``turns`` are the extra waits at
    the V's bottom (forward), its top (forward to backward) and its bottom (backward)."""
    down_f, up_f, down_b, up_b = legs
    bottom_f, top, bottom_b = turns
    f = [s * down_f for s in range(P)]
    f += [f[-1] + 1 + bottom_f + k * up_f for k in range(P)]
    i = [0] * (2 * P)
    for k in range(P):                      # chunk 1's stages, from the last one down
        i[2 * P - 1 - k] = f[-1] + 1 + top + k * down_b
    for k in range(P):                      # chunk 0's stages, back up to stage 0
        i[P - 1 - k] = i[P] + 1 + bottom_b + k * up_b
    return tuple(f), tuple(i)


def _fits_period(P: int, times: Times) -> bool:
    """No rank is asked to run two of its F/I passes in the same slot of the period."""
    f, i = times
    for r in range(P):
        slots = {t[s] % PERIOD for s in (r, 2 * P - 1 - r) for t in (f, i)}
        if len(slots) < 4:
            return False
    return True


def _rank_slots(P: int, M: int, r: int, times: Times, slots: list[int]) -> None:
    """Put rank r's passes in ``slots`` (by pass number, ``Passes``): F and I where the
    repeated block puts them, each W (oldest first) in the next slot no F or I claims."""
    f, i = times
    S = 2 * P
    ends = [t[s] for s in (r, S - 1 - r) for t in (f, i)]
    at = [-1] * (max(ends) + PERIOD * (M - 1) + 1)    # pass number per slot, -1: free
    for s in (r, S - 1 - r):
        for kind, start in ((0, f[s]), (1, i[s])):     # microbatch mb's is start + 6·mb
            at[start:start + PERIOD * M:PERIOD] = range(3 * s + kind, 3 * S * M, 3 * S)
    pending: collections.deque[int] = collections.deque()
    for slot, a in enumerate(at):
        if a >= 0:
            slots[a] = slot
            if a % 3 == 1:
                pending.append(a)
        elif pending:
            slots[pending.popleft() + 1] = slot         # the oldest I's W
    for slot in range(len(at), len(at) + len(pending)):
        slots[pending.popleft() + 1] = slot


def block_times(name: str, P: int) -> Times:
    """Schedule ``name``'s building block for P ranks (it repeats without collisions)."""
    legs, turns = BLOCKS[name]
    times = _block(P, legs, turns(P))
    assert _fits_period(P, times), f"{name}'s block collides with itself at P={P}"
    return times


def _v_block_schedule(name: str, P: int, M: int, V: int | None) -> Schedule:
    """Repeat the block M times, squeeze, reorder the warm-up and cool-down."""
    _check_v(name, P, M, V)
    times = block_times(name, P)
    placement = v_placement(P)
    passes = Passes(P, M, placement)
    slots = [-1] * passes.count
    for r in range(P):
        _rank_slots(P, M, r, times, slots)
    slots = reorder(squeeze(slots, passes), passes)
    return build(name, P, M, placement, rank_orders(slots, passes), V=2)


def _check_v(name: str, P: int, M: int, V: int | None) -> None:
    check_basics(name, P, M, 2 if V is None else V)
    if V is not None and V != 2:
        raise ValueError(f"{name} always has 2 stages per rank (a V shape), got V={V}; use V=2")


def v_zb(P: int, M: int, V: int = 2) -> Schedule:
    """V-ZB: the V shape at 1F1B's activation peak (P stage-equivalents), no bubble in any
    rank's span once M ≥ 2P at t_F = t_I = t_W. Constraints: V = 2."""
    return _v_block_schedule("v-zb", P, M, V)


def v_half(P: int, M: int, V: int = 2) -> Schedule:
    """V-Half: half of 1F1B's activations ((P+2)//2 stage-equivalents, as Qi et al.), about
    half of 1F1B's bubble at t_F = t_I = t_W. Constraints: V = 2."""
    return _v_block_schedule("v-half", P, M, V)


def v_min(P: int, M: int, V: int = 2) -> Schedule:
    """V-Min: a third of 1F1B's activations ((P+4)//3 stage-equivalents, as Qi et al.),
    about two thirds of 1F1B's bubble at t_F = t_I = t_W. Constraints: V = 2."""
    return _v_block_schedule("v-min", P, M, V)
