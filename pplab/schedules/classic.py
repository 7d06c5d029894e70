"""The three schedules every course starts with: naive, GPipe and 1F1B (one stage per rank)."""
from __future__ import annotations

from ..ir import Schedule
from ._common import B, F, build, check_basics, no_virtual


def naive(P: int, M: int, V: int = 1) -> Schedule:
    """One microbatch at a time through the whole pipeline: forward down, backward up.

    Source: plain model parallelism (Megatron-LM §2.2; GPipe §1). Only one rank works at any
    moment, so the bubble is (P−1)/P of the total whatever M is. Constraints: V = 1.
    """
    check_basics("naive", P, M, V)
    no_virtual("naive", V)
    ranks = [[op for mb in range(M) for op in (F(r, mb), B(r, mb))] for r in range(P)]
    return build("naive", P, M, range(P), ranks)


def gpipe(P: int, M: int, V: int = 1) -> Schedule:
    """All forwards, then all backwards (AFAB), with a flush before the optimizer step.

    Source: Huang et al. 2019, GPipe. Bubble (P−1)/(M+P−1) of the total; every rank holds
    the activations of all M microbatches at the turn. Constraints: V = 1.
    """
    check_basics("gpipe", P, M, V)
    no_virtual("gpipe", V)
    ranks = [[F(r, mb) for mb in range(M)] + [B(r, mb) for mb in range(M)] for r in range(P)]
    return build("gpipe", P, M, range(P), ranks)


def one_f_one_b(P: int, M: int, V: int = 1) -> Schedule:
    """PipeDream-Flush: a short warm-up of forwards, then one forward one backward in turn.

    Source: Narayanan et al. 2021 (PipeDream-2BW / Megatron-LM §2.2.1). Rank r runs
    min(P−r−1, M) warm-up forwards, so it holds at most min(P−r, M) microbatches — the same
    bubble as GPipe with far less activation memory. Works for any M ≥ 1 (with M < P the
    later ranks simply never reach a steady state). Constraints: V = 1.
    """
    check_basics("1f1b", P, M, V)
    no_virtual("1f1b", V)
    ranks = []
    for r in range(P):
        warmup = min(P - r - 1, M)
        ops = [F(r, mb) for mb in range(warmup)]
        for i in range(M - warmup):
            ops += [F(r, warmup + i), B(r, i)]
        ops += [B(r, mb) for mb in range(M - warmup, M)]
        ranks.append(ops)
    return build("1f1b", P, M, range(P), ranks)
