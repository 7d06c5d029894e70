"""Interleaved zero bubble: Megatron's looped placement with each backward split into I and W.

Source: PyTorch's ``ScheduleInterleavedZeroBubble`` (torch.distributed.pipelining, after Zero
Bubble's ZB-1P, Qi et al. 2024). pplab builds the same per-rank order, action for action;
tests/test_interleaved_zb.py compares it with the order torch computes.
"""
from __future__ import annotations

from collections import defaultdict

from ..ir import Op, Schedule
from ._common import F, I, W, build, check_basics, looped_placement, suggest


def _rounds(P: int, M: int) -> tuple[int, int]:
    """Microbatches go round the ranks in ``rounds`` groups of ``per_round`` (≥ 1 group)."""
    rounds = max(1, M // P)
    if M % rounds:
        ok = lambda m: m % max(1, m // P) == 0
        lo = next(m for m in range(M - 1, 0, -1) if ok(m))
        hi = next(m for m in range(M + 1, 2 * M + P) if ok(m))
        raise ValueError(f"interleaved-zb needs M to be a multiple of its {rounds} rounds "
                         f"(max(1, M // P)), got M={M}, P={P}; {suggest('M', lo, hi)}")
    return rounds, M // rounds


def _rank_order(P: int, M: int, V: int, r: int, per_round: int) -> list[Op]:
    """Warm-up forwards, then F+I pairs; rank r holds its first r weight passes back so they
    fill the cool-down, like ZB-H1 does on one stage per rank."""
    total = M * V
    warmup = min((V - 1) * per_round + (P - 1 - r), total)

    def fwd_stage(step):
        return (step // per_round) % V * P + r

    def bwd_stage(step):
        return (V - 1 - (step - warmup) // per_round % V) * P + r

    count = {k: defaultdict(int) for k in "FIW"}
    ops: list[Op] = []

    def emit(kind, stage):
        ops.append({"F": F, "I": I, "W": W}[kind](stage, count[kind][stage]))
        count[kind][stage] += 1

    backward_steps: list[int] = []
    for step in range(total + warmup):
        if step < total:
            emit("F", fwd_stage(step))
        if step < warmup:
            continue
        emit("I", bwd_stage(step))
        backward_steps.append(step)
        if step - warmup >= r:
            emit("W", bwd_stage(backward_steps[sum(count["W"].values())]))
    while sum(count["W"].values()) < len(backward_steps):
        emit("W", bwd_stage(backward_steps[sum(count["W"].values())]))
    return ops


def interleaved_zb(P: int, M: int, V: int = 2) -> Schedule:
    """Interleaved 1F1B with split backwards (PyTorch's ScheduleInterleavedZeroBubble).

    Rank r warms up with (V−1)·n + P−1−r chunk-forwards (n microbatches per round), then
    runs forward + input-grad pairs; its weight-grad passes lag r behind, so they fill the
    cool-down. Bubble about interleaved 1F1B's (P−1)(tf+tb)/V with tb shortened by tw.
    Constraints: M a multiple of max(1, M // P) (e.g. any M ≤ P, or a multiple of P); V ≥ 1.
    """
    check_basics("interleaved-zb", P, M, V)
    _, per_round = _rounds(P, M)
    ranks = [_rank_order(P, M, V, r, per_round) for r in range(P)]
    return build("interleaved-zb", P, M, looped_placement(P, V), ranks, V=V)
