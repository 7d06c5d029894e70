"""Zero-bubble schedules: split each backward into I (input grads) and W (weight grads).

I is on the critical path — the previous stage waits for it — but W is not, so W can be
moved into time that would otherwise be a bubble. Source: Qi et al. 2024, "Zero Bubble
Pipeline Parallelism" (ICLR), §3 (ZB-H1/H2) and §6 (ZB-V).
"""
from __future__ import annotations

from collections import deque

from .. import keys
from ..ir import Op, Schedule
from ..inflight import INFLIGHT_RULE
from ._common import F, I, W, Streams, build, check_basics, no_virtual, v_placement


def zb_h1(P: int, M: int, V: int = 1) -> Schedule:
    """ZB-H1: 1F1B's order with B split into I and W, and W's postponed on later ranks.

    Rank r keeps up to r weight-gradient passes waiting, so every rank holds at most
    min(P, M) microbatches — 1F1B's peak on rank 0, no more memory than 1F1B needs — while
    the postponed W's fill the cool-down. Bubble (P−1)(T_F + T_I − T_W) with T_I the
    input-grad time, i.e. (P−1)(t_f + t_b − 2·t_w) with t_b the full backward, valid for
    M ≥ P while t_w ≤ t_f and t_w ≤ t_b − t_w (the paper assumes W is no longer than F or
    I; at t_I = 0 the formula would promise the impossible). Constraints: V = 1.
    """
    check_basics("zb-h1", P, M, V)
    no_virtual("zb-h1", V)
    ranks = []
    for r in range(P):
        warmup = min(P - r - 1, M)
        defer = r                       # W's rank r may keep waiting
        ops: list[Op] = [F(r, mb) for mb in range(warmup)]
        waiting: deque[int] = deque()
        for i in range(M - warmup):
            ops += [F(r, warmup + i), I(r, i)]
            waiting.append(i)
            if len(waiting) > defer:
                ops.append(W(r, waiting.popleft()))
        for mb in range(M - warmup, M):
            ops.append(I(r, mb))
            waiting.append(mb)
            if len(waiting) > defer:
                ops.append(W(r, waiting.popleft()))
        ops += [W(r, mb) for mb in waiting]
        ranks.append(ops)
    return build("zb-h1", P, M, range(P), ranks)


def zbv(P: int, M: int, V: int = 2) -> Schedule:
    """ZB-V: two chunks per rank in a V (rank r holds stages r and 2P−1−r), B split in I, W.

    Because the last stage sits on rank 0 next to the first, the turn-around costs no hop
    and warm-up and cool-down overlap; with t_f = t_i = t_w the bubble vanishes once
    M ≥ 2P−1 (Zero Bubble §6). Peak activation memory matches 1F1B's rank 0.
    Constraints: exactly 2 stages per rank (V = 2, or leave V out). Any M ≥ 1: the order is
    built for max(M, 2P−1) microbatches and the extra ones are dropped.
    """
    if V is None:
        V = 2
    check_basics("zbv", P, M, V)
    if V != 2:
        raise ValueError(f"zbv always has 2 stages per rank (a V shape), got V={V}; use V=2")
    n = max(M, 2 * P - 1)
    ranks = [_zbv_rank(P, n, r) for r in range(P)]
    if n != M:                                        # drop the extra microbatches
        rows = [[k for k in out.keys if keys.microbatch_of(k) < M] for out in ranks]
        return Schedule.from_keys("zbv", P, M, v_placement(P), rows, 2)
    return Schedule.from_keys("zbv", P, M, v_placement(P), [out.keys for out in ranks], 2,
                              streams=[out.runs for out in ranks])


def _zbv_rank(P: int, n: int, r: int) -> Streams:
    """Rank r's ZB-V order for n microbatches as keys: each phase is a pattern of (kind,
    chunk) repeated, each kind and chunk taking its microbatches in order."""
    f0, i0, w0 = ("F", r), ("I", r), ("W", r)                 # the chunk on the way down
    f1, i1, w1 = ("F", 2 * P - 1 - r), ("I", 2 * P - 1 - r), ("W", 2 * P - 1 - r)   # up
    out = Streams()
    out.repeat([f0], 2 * (P - r) - 1)               # fill the way down
    out.repeat([f1, f0], r)                         # the way up starts arriving
    out.repeat([f1, i1, w1], P - r)                 # first backwards, W at once
    out.repeat([f0, i0, w0, f1, i1, w1], n - 2 * P + r + 1)     # steady state
    out.repeat([i0, w0, f1, i1, w1], P - r - 1)     # the last forwards on the way up
    out.repeat([i0, i1], r)                         # cool-down: input grads first
    out.repeat([i0, w0], P - r)
    out.repeat([w1], r)                             # the W's the cool-down postponed
    out.repeat([w0], r)
    return out


def _greedy_order(P: int, M: int, cap: int) -> list[list[Op]]:
    """List-schedule one stage per rank at unit costs (t_F = t_I = t_W = 1).

    Each rank takes whichever op it can start soonest; at equal times it prefers I (the
    previous rank waits on it), then F (while it holds fewer than ``cap`` microbatches), then
    the oldest pending W. Across ranks the earliest start goes first, then the lower rank, so
    the order is deterministic.
    """
    next_f, next_i = [0] * P, [0] * P
    pending_w: list[deque] = [deque() for _ in range(P)]
    f_end: dict = {}
    i_end: dict = {}
    alive, free = [0] * P, [0] * P
    ops: list[list[Op]] = [[] for _ in range(P)]

    def best(r):
        """(start, priority, kind) of the op rank r could start soonest (ties: I, F, W)."""
        options = []
        mb = next_i[r]
        if mb < M and (r, mb) in f_end and (r == P - 1 or (r + 1, mb) in i_end):
            up = i_end[(r + 1, mb)] if r < P - 1 else 0
            options.append((max(free[r], f_end[(r, mb)], up), 0, "I"))
        mb = next_f[r]
        if mb < M and alive[r] < cap and (r == 0 or (r - 1, mb) in f_end):
            options.append((max(free[r], f_end[(r - 1, mb)] if r else 0), 1, "F"))
        if pending_w[r]:
            options.append((free[r], 2, "W"))
        return min(options) if options else None

    choice = [best(r) for r in range(P)]
    for _ in range(3 * P * M):
        r = min((c[0], c[1], r) for r, c in enumerate(choice) if c is not None)[2]
        start, _, kind = choice[r]
        if kind == "I":
            mb = next_i[r]; next_i[r] += 1
            i_end[(r, mb)] = start + 1
            pending_w[r].append(mb)
            ops[r].append(I(r, mb))
        elif kind == "F":
            mb = next_f[r]; next_f[r] += 1
            f_end[(r, mb)] = start + 1
            ops[r].append(F(r, mb))
        else:
            mb = pending_w[r].popleft()
            ops[r].append(W(r, mb))
        alive[r] += sum(INFLIGHT_RULE[kind])              # the in-flight rule's count
        free[r] = start + 1
        for q in (r - 1, r, r + 1):          # only neighbours' options change
            if 0 <= q < P:
                choice[q] = best(q)
    return ops


def zb_h2(P: int, M: int, V: int = 1) -> Schedule:
    """ZB-H2: more warm-up forwards (up to 2P−1 microbatches alive) so the first backward
    never waits, and W's moved to the tail.

    Source: Zero Bubble §3.1 (ZB-H2), Table 2: bubble (P−1)(T_F + T_I − 2T_W) with peak
    memory (2P−1)·M_B. That figure assumes consecutive iterations overlap (the paper's
    optimizer post-validation). For one flushed step nothing can beat (P−1)·t_f — the last
    rank waits that long for its first input — so what pplab's simulator shows is
    max((P−1)·t_f, (P−1)(t_f + t_I − 2t_w)) for M ≥ 2P−1. The order is a greedy list
    schedule at unit costs (prefer I, then F under the memory cap, then W).
    Constraints: V = 1.
    """
    check_basics("zb-h2", P, M, V)
    no_virtual("zb-h2", V)
    return build("zb-h2", P, M, range(P), _greedy_order(P, M, 2 * P - 1))
