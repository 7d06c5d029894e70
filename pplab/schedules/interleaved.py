"""Virtual stages: each rank holds V non-adjacent chunks of layers (looped placement)."""
from __future__ import annotations

from itertools import chain

from ..ir import Schedule
from ._common import B, F, build, check_basics, key_run, looped_placement


def _chunk_order(P: int, M: int, V: int, rank: int, group: int, backward: bool):
    """The (stage, microbatch) sequence a rank visits, microbatches taken ``group`` at a time.

    Megatron runs microbatches in groups of P: P microbatches through chunk 0, the same P
    through chunk 1, ..., then the next P. Backwards visit the chunks in reverse.
    """
    order = []
    for g0 in range(0, M, group):
        chunks = range(V - 1, -1, -1) if backward else range(V)
        for c in chunks:
            for mb in range(g0, min(g0 + group, M)):
                order.append((c * P + rank, mb))
    return order


def _chunk_keys(P: int, M: int, V: int, rank: int, group: int, kind: str) -> list[int]:
    """``_chunk_order`` as action keys of one kind (forwards visit the chunks up, backwards
    down), one run of keys per group and chunk."""
    chunks = range(V - 1, -1, -1) if kind == "B" else range(V)
    return list(chain.from_iterable(
        key_run(kind, c * P + rank, g0, min(group, M - g0))
        for g0 in range(0, M, group) for c in chunks))


def _depth_first_rank(P: int, M: int, V: int, r: int, group: int) -> list[int]:
    """One rank of Megatron's interleaved order with microbatches taken ``group`` at a time:
    a warm-up of forwards, then one forward one backward, then the remaining backwards."""
    total = M * V
    # Megatron's warm-up depth; with V = 1 it must reduce to plain 1F1B's P−r−1.
    depth = P - r - 1 if V == 1 else (P - r - 1) * 2 + (V - 1) * group
    warmup = min(total, depth)
    forwards, backwards = (_chunk_keys(P, M, V, r, group, k) for k in "FB")
    steady = [0] * (2 * (total - warmup))              # one forward, one backward, in turn
    steady[0::2], steady[1::2] = forwards[warmup:], backwards[:total - warmup]
    return forwards[:warmup] + steady + backwards[total - warmup:]


def interleaved(P: int, M: int, V: int = 2) -> Schedule:
    """Megatron-LM's interleaved 1F1B: V chunks per rank, stage s on rank s mod P.

    Source: Narayanan et al. 2021 §2.2.2. Each chunk does 1/V of the rank's work, so the
    warm-up and cool-down shrink by V: bubble (P−1)/(V·M) of the ideal, at the price of V×
    more point-to-point traffic. Rank r warms up with (P−r−1)·2 + (V−1)·P chunk-forwards
    (P−r−1 when V = 1, where the schedule is exactly 1F1B).
    Constraints: M must be a multiple of P (microbatches go round in groups of P); V ≥ 1
    (V = 1 is plain 1F1B).
    """
    check_basics("interleaved", P, M, V)
    if M % P:
        lo, hi = max(P, M - M % P), M + P - M % P
        raise ValueError(f"interleaved needs M to be a multiple of P (microbatches go round the "
                         f"ranks in groups of P), got M={M}, P={P}; try M={lo} or M={hi}")
    ranks = [_depth_first_rank(P, M, V, r, group=P) for r in range(P)]
    return Schedule.from_keys("interleaved", P, M, looped_placement(P, V), ranks, V)


def breadth_first(P: int, M: int, V: int = 2) -> Schedule:
    """Looped breadth-first (GPipe over virtual stages): every microbatch through chunk 0,
    then all through chunk 1, ...; backwards in reverse.

    Source: Lamy-Poirier 2023 "Breadth-First Pipeline Parallelism" (its looped, all-forward
    variant). Same bubble as interleaved but every rank holds all M·V chunk activations, in
    exchange for overlapping data-parallel communication better. What Llama 3 and Megatron
    actually run is ``bfs_1f1b`` below. Constraints: none beyond P, M, V ≥ 1.
    """
    check_basics("bfs", P, M, V)
    ranks = []
    for r in range(P):
        ops = [F(*sm) for sm in _chunk_order(P, M, V, r, M, backward=False)]
        ops += [B(*sm) for sm in _chunk_order(P, M, V, r, M, backward=True)]
        ranks.append(ops)
    return build("bfs", P, M, looped_placement(P, V), ranks, V=V)


def bfs_1f1b(P: int, M: int, V: int = 2) -> Schedule:
    """Breadth-first with a 1F1B steady state: all M microbatches go through chunk 0 before
    any enters chunk 1 (breadth-first), but backwards start as soon as the warm-up is done.

    Source: Megatron-LM's interleaved schedule with ``microbatch_group_size_per_vp_stage =
    M``, the knob Llama 3 §3.3.2 tunes between depth-first (group P, ``interleaved``) and
    breadth-first. Rank r warms up with 2(P−r−1) + (V−1)·M chunk-forwards, so it holds
    more activations than interleaved 1F1B but far fewer than looped BFS's M·V, and each
    chunk's gradients are complete earlier, which lets data-parallel reduction overlap.
    Constraints: M ≥ P (a group must cover the pipeline, as Megatron requires); V ≥ 1
    (V = 1 is plain 1F1B).
    """
    check_basics("bfs-1f1b", P, M, V)
    if M < P:
        raise ValueError(f"bfs-1f1b needs M ≥ P (one group of microbatches must fill the "
                         f"pipeline), got M={M}, P={P}; try M={P}")
    ranks = [_depth_first_rank(P, M, V, r, group=M) for r in range(P)]
    return Schedule.from_keys("bfs-1f1b", P, M, looped_placement(P, V), ranks, V)
