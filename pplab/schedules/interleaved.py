"""Virtual stages: each rank holds V non-adjacent chunks of layers (looped placement)."""
from __future__ import annotations

from ..ir import Schedule
from ._common import B, F, Streams, build, check_basics, looped_placement, suggest


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


def _chunk_runs(P: int, M: int, V: int, rank: int, group: int, backward: bool):
    """``_chunk_order`` as runs ``(stage, count)``: ``count`` microbatches in a row through
    one chunk (forwards visit the chunks up, backwards down)."""
    chunks = range(V - 1, -1, -1) if backward else range(V)
    return [(c * P + rank, min(group, M - g0)) for g0 in range(0, M, group) for c in chunks]


def _split(runs, n: int):
    """The first ``n`` microbatches of ``runs``, and the rest, as two lists of runs."""
    head = []
    for i, (stage, count) in enumerate(runs):
        if n < count:
            if n:
                head.append((stage, n))
            return head, [(stage, count - n)] + runs[i + 1:]
        head.append((stage, count))
        n -= count
    return head, []


def _in_turn(forwards, backwards):
    """One forward, one backward, in turn, from two lists of runs of equal total length:
    ``((forward stage, backward stage), count)`` runs."""
    out, f, b = [], list(forwards), list(backwards)
    i = j = 0
    while i < len(f) and j < len(b):
        (sf, nf), (sb, nb) = f[i], b[j]
        n = min(nf, nb)
        out.append(((sf, sb), n))
        f[i], b[j] = (sf, nf - n), (sb, nb - n)
        if nf == n:
            i += 1
        if nb == n:
            j += 1
    return out


def _depth_first_rank(P: int, M: int, V: int, r: int, group: int) -> Streams:
    """One rank of Megatron's interleaved order with microbatches taken ``group`` at a time:
    a warm-up of forwards, then one forward one backward, then the remaining backwards
    (``Streams``: each stage's microbatches come in order, a run at a time)."""
    total = M * V
    # Megatron's warm-up depth; with V = 1 it must reduce to plain 1F1B's P−r−1.
    depth = P - r - 1 if V == 1 else (P - r - 1) * 2 + (V - 1) * group
    warmup = min(total, depth)
    warm, forwards = _split(_chunk_runs(P, M, V, r, group, False), warmup)
    steady, cool = _split(_chunk_runs(P, M, V, r, group, True), total - warmup)
    out = Streams()
    for stage, count in warm:
        out.repeat([("F", stage)], count)
    for (forward, backward), count in _in_turn(forwards, steady):
        out.repeat([("F", forward), ("B", backward)], count)
    for stage, count in cool:
        out.repeat([("B", stage)], count)
    return out


def interleaved(P: int, M: int, V: int = 2) -> Schedule:
    """Megatron-LM's interleaved 1F1B: V chunks per rank, stage s on rank s mod P.

    Source: Narayanan et al. 2021 §2.2.2. Each chunk does 1/V of the rank's work, so the
    warm-up and cool-down shrink by V: bubble (P−1)/(V·M) of the ideal, at the price of more
    point-to-point messages: (P·V − 1)/(P − 1) times 1F1B's in all, V times on a middle rank
    (``closed_forms.interleaved_messages``). Rank r warms up with (P−r−1)·2 + (V−1)·P chunk-forwards
    (P−r−1 when V = 1, where the schedule is exactly 1F1B).
    Constraints: M must be a multiple of P (microbatches go round in groups of P); V ≥ 1
    (V = 1 is plain 1F1B).
    """
    check_basics("interleaved", P, M, V)
    if M % P:
        lo, hi = max(P, M - M % P), M + P - M % P
        raise ValueError(f"interleaved needs M to be a multiple of P (microbatches go round the "
                         f"ranks in groups of P), got M={M}, P={P}; {suggest('M', lo, hi)}")
    ranks = [_depth_first_rank(P, M, V, r, group=P) for r in range(P)]
    return Schedule.from_keys("interleaved", P, M, looped_placement(P, V),
                              [out.keys for out in ranks], V, streams=[out.runs for out in ranks])


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
    return Schedule.from_keys("bfs-1f1b", P, M, looped_placement(P, V),
                              [out.keys for out in ranks], V, streams=[out.runs for out in ranks])
