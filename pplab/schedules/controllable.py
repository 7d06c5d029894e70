"""The memory-controllable V-shape family: V-Min, V-Half and V-ZB.

Source: Qi, Wan, Amar, Lin 2024, "Pipeline Parallelism with Controllable Memory" (NeurIPS).
Every rank holds two chunks in a V (stages r and 2P−1−r, as ZB-V) and each backward is
split into I and W. A schedule is one *building block* (when each of a microbatch's passes
starts, stage by stage) repeated every microbatch; a chunk's activations live from its F to
its W, so the offsets between passes on neighbouring stages set the peak memory.

V-Min and V-Half are built that way here. At t_F = t_I = t_W every pass of a half-size chunk
takes one slot and a rank does six passes per microbatch, so the block repeats every six
slots. ``LEGS`` gives the slots between neighbouring stages on the four legs of the V
(forward down, forward up, input-grad down, input-grad up): all 1 for V-Min (the shortest
lifespans, a third of 1F1B's memory), 2 on the two down legs for V-Half (half). Where two
passes of one rank would land in the same slot of the period, the block waits at one of the
V's three turns (found by ``_turns``); each W takes the rank's next free slot. The order of
the repeated blocks is the schedule; the simulator then starts every pass as soon as its
inputs allow, which squeezes the idle slots of the warm-up out.

V-ZB (1F1B's memory, zero bubble) is Zero Bubble's list scheduler under a cap of 2P chunks.
"""
from __future__ import annotations

import itertools
from functools import lru_cache

from ..ir import Action, Op, Schedule
from ._common import build, check_basics, v_placement
from .greedy import Problem, list_schedule

PERIOD = 6                   # slots per microbatch per rank: F, I, W on two chunks
#: slots between neighbouring stages: forward down, forward up, backward down, backward up
LEGS = {"v-min": (1, 1, 1, 1), "v-half": (2, 1, 2, 1)}
Times = tuple[tuple[int, ...], tuple[int, ...]]


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


def _rank_order(P: int, M: int, r: int, times: Times) -> list[Op]:
    """Rank r's passes in block order: F and I at their slots, each W (oldest first) in the
    next slot no F or I claims."""
    f, i = times
    at = {}
    for mb in range(M):
        for s in (r, 2 * P - 1 - r):
            at[f[s] + PERIOD * mb] = Action(s, "F", mb)
            at[i[s] + PERIOD * mb] = Action(s, "I", mb)
    order: list[Op] = []
    pending: list[Action] = []
    last = max(at)
    for slot in itertools.count():
        if slot > last and not pending:
            return order
        op = at.get(slot)
        if op is None and pending:
            done = pending.pop(0)
            op = Action(done.stage, "W", done.microbatch)
        elif op is not None and op.kind == "I":
            pending.append(op)
        if op is not None:
            order.append(op)
    raise AssertionError("unreachable")


def _peak(order: list[Op]) -> int:
    """Most chunks alive at once (F run, W not yet) in one rank's order."""
    alive = peak = 0
    for op in order:
        alive += {"F": 1, "W": -1}.get(op.kind, 0)
        peak = max(peak, alive)
    return peak


@lru_cache(maxsize=None)
def _turns(P: int, legs: tuple[int, ...]) -> Times:
    """The block for P ranks: the waits at the turns that fit the period with the smallest
    peak; then the smallest wait at the top (it delays every backward), then the smallest
    total wait. Peaks are read off a run long enough to reach the steady state."""
    best = None
    for turns in itertools.product(range(PERIOD), repeat=3):
        times = _block(P, legs, turns)
        if not _fits_period(P, times):
            continue
        peak = max(_peak(_rank_order(P, P + 4, r, times)) for r in range(P))
        key = (peak, turns[1], sum(turns), turns)
        if best is None or key < best[0]:
            best = (key, times)
    assert best is not None, f"no block fits P={P}"
    return best[1]


def _v_block_schedule(name: str, P: int, M: int, V: int) -> Schedule:
    _check_v(name, P, M, V)
    times = _turns(P, LEGS[name])
    ranks = [_rank_order(P, M, r, times) for r in range(P)]
    return build(name, P, M, v_placement(P), ranks, V=2)


def _check_v(name: str, P: int, M: int, V: int | None) -> None:
    check_basics(name, P, M, 2 if V is None else V)
    if V is not None and V != 2:
        raise ValueError(f"{name} always has 2 stages per rank (a V shape), got V={V}; use V=2")


def v_zb(P: int, M: int, V: int = 2) -> Schedule:
    """V-ZB: the V shape at 1F1B's activation peak (2P chunks = P·M_B), zero bubble once
    M is large enough at t_F = t_I = t_W. Constraints: V = 2."""
    _check_v("v-zb", P, M, V)
    pb = Problem(P, M, v_placement(P), lambda kind, stage: 0.5, cap=2 * P)
    return build("v-zb", P, M, v_placement(P), list_schedule(pb), V=2)


def v_half(P: int, M: int, V: int = 2) -> Schedule:
    """V-Half: half of 1F1B's activations ((P+2)//2 stage-equivalents, as Qi et al.), bubble
    about P/(2M) of the ideal at t_F = t_I = t_W. Constraints: V = 2."""
    return _v_block_schedule("v-half", P, M, V)


def v_min(P: int, M: int, V: int = 2) -> Schedule:
    """V-Min: a third of 1F1B's activations ((P+4)//3 stage-equivalents, as Qi et al.),
    bubble about 2P/(3M) of the ideal at t_F = t_I = t_W. Constraints: V = 2."""
    return _v_block_schedule("v-min", P, M, V)
