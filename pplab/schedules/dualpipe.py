"""DualPipe and DualPipeV (DeepSeek-V3, 2024): bidirectional pipelines with overlapped F&B.

Both run the same eight-phase order on each rank (DeepSeek-V3 §3.2.1 and the reference
implementation's step comments): fill forwards, cross the two flows, a zero-bubble warm-up,
a steady state of overlapped forward+backward pairs, then drain with W's filling the gaps.
They differ in what the two "phases" of a rank are:

* DualPipe keeps two copies of the model. Copy 0 flows rank 0 → P−1, copy 1 flows
  P−1 → 0, each with M/2 microbatches. A rank's phase 0 is the copy in which it sits
  nearer the start.
* DualPipeV folds one model into a V on P ranks: phase 0 is stage r, phase 1 stage 2P−1−r.
"""
from __future__ import annotations

from collections import deque

from .. import keys
from ..ir import Schedule
from ._common import Streams, check_basics, suggest, v_placement


def _eight_phase_order(n: int, k: int, chunks: int, stages: tuple[int, int]) -> Streams:
    """One rank's ops as keys (``Streams``). ``n`` ranks per flow, ``k`` this
    rank's depth in phase 0 (0 = first), ``chunks`` microbatches per phase, ``stages`` the
    stage ids of phase 0 and phase 1. Phases 1-5 are patterns repeated, each kind and stage
    taking its microbatches in order (``Streams``); 6-8 are O(n) ops, written out."""
    s0, s1 = stages
    f0, b0, f1, b1 = ("F", s0), ("B", s0), ("F", s1), ("B", s1)
    out = Streams()
    out.repeat([f0], (n - k - 1) * 2)                       # 1: forwards of phase 0
    out.repeat([f0, f1], k + 1)                             # 2: forwards of both phases
    out.repeat([("I", s1), ("W", s1), f1], n - k - 1)       # 3: I, W, F of phase 1
    steady = chunks - 2 * n + k + 1                         # 4: steady, overlapped pairs
    if steady > 0 and k == n - 1:                           #    (middle rank: no overlap at
        out.repeat([f0, b1, (f1, b0)], 1)                   #     first, it would stall)
        steady -= 1
    out.repeat([(f0, b1), (f1, b0)], steady)
    out.repeat([b1, (f1, b0)], n - k - 1)                   # 5: drain phase 1 forwards
    _drain(out, n, k, stages)
    return out


def _drain(out: Streams, n: int, k: int, stages: tuple[int, int]) -> None:
    """Phases 6-8: backwards of both phases, the later half split into I and a W queued for
    a bubble; then W then B of phase 0; then the W's left."""
    s0, s1 = stages
    half, at = (k + 1) // 2, len(out.keys)
    out.repeat([("B", s1), ("B", s0)], half)               # 6: backwards, the first half
    if k % 2:                                              #    whole, the later half split
        out.repeat([("I", s1), ("I", s0)], k + 1 - half)   #    (an even k splits phase 0's
    else:                                                  #    one step before phase 1's)
        out.repeat([("B", s1), ("I", s0)], 1)
        out.repeat([("I", s1), ("I", s0)], k - half)
    pending_w = deque(keys.with_kind(i, "W") for i in keys.of_kind(out.keys[at:], "I"))
    for _ in range(n - k - 1):                             # 7: W then B of phase 0
        out.weight(pending_w.popleft())
        pending_w.append(keys.with_kind(out.one("I", s0), "W"))
    for w in pending_w:                                    # 8: remaining W's
        out.weight(w)


def dualpipe(P: int, M: int, V: int = 1) -> Schedule:
    """DualPipe: two model copies fed from both ends; M counts both directions.

    Source: DeepSeek-V3 technical report §3.2.1, Table 2. Bubble (P/2−1)(T_F&B + T_B − 3T_W)
    with T_B the full backward; it does not shrink as M grows. Parameters are held twice.
    Constraints: P even and M even (half per direction), all the report asks for; M ≥ 2P is
    the rule of DeepSeek's reference code (``DualPipe.step`` in deepseek-ai/DualPipe), whose
    warm-up this generator follows. One stage per copy per rank.
    """
    check_basics("dualpipe", P, M, V)
    if V != 1:
        raise ValueError(f"dualpipe holds one stage of each model copy per rank, got V={V}; "
                         "use V=1 (or dualpipev for a V-shape)")
    if P % 2:
        raise ValueError(f"dualpipe needs an even number of ranks, got P={P}; "
                         f"{suggest('P', P - 1, P + 1)}")
    if M % 2 or M < 2 * P:
        good = max(2 * P, M + M % 2)
        raise ValueError(f"dualpipe needs M even and M ≥ 2P (M counts both directions), got "
                         f"M={M}, P={P}; try M={good}")
    half = P // 2
    ranks = []
    for r in range(P):
        k = min(r, P - 1 - r)
        if r < half:
            stages = (r, P + (P - 1 - r))      # phase 0: copy 0 at depth r
        else:
            stages = (P + (P - 1 - r), r)      # phase 0: copy 1 at depth P-1-r
        ranks.append(_eight_phase_order(half, k, M // 2, stages))
    placement = list(range(P)) + [P - 1 - i for i in range(P)]
    return Schedule.from_keys("dualpipe", P, M, placement, [r.keys for r in ranks], 1,
                              copies=2, streams=[r.runs for r in ranks])


def dualpipev(P: int, M: int, V: int = 2) -> Schedule:
    """DualPipeV: DualPipe "cut in half" — one model folded in a V over P ranks.

    Source: DualPipe repository (DualPipeV, after Sea AI's "cut-in-half" note). Same
    eight-phase order as DualPipe with rank r holding stages r and 2P−1−r; one copy of the
    parameters. Constraints: exactly 2 stages per rank (V = 2, or leave V out); M ≥ 2P
    (the number of stages).
    """
    if V is None:
        V = 2
    check_basics("dualpipev", P, M, V)
    if V != 2:
        raise ValueError(f"dualpipev always has 2 stages per rank (a V shape), got V={V}; use V=2")
    if M < 2 * P:
        raise ValueError(f"dualpipev needs M ≥ 2P (the number of stages), got M={M}, P={P}; "
                         f"try M={2 * P}")
    ranks = [_eight_phase_order(P, r, M, (r, 2 * P - 1 - r)) for r in range(P)]
    return Schedule.from_keys("dualpipev", P, M, v_placement(P), [r.keys for r in ranks], 2,
                              streams=[r.runs for r in ranks])
