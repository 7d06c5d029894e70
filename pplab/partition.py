"""Which transformer layers each pipeline stage holds.

The default split is even with the remainder going to the first stages (so 10 layers on
4 stages is 3, 3, 2, 2). The runtime builds stage modules from this, and the memory model
counts parameters from it, so both always agree.
"""
from __future__ import annotations

from typing import Sequence

from .ir import Schedule


def even_split(num_layers: int, num_parts: int) -> list[range]:
    """Contiguous layer ranges, sizes differing by at most one, larger ones first."""
    if num_parts < 1:
        raise ValueError(f"need at least one stage, got {num_parts}")
    if num_layers < num_parts:
        raise ValueError(f"{num_parts} stages need at least {num_parts} layers (one each), got "
                         f"{num_layers} layers; use at most {num_layers} stages or more layers")
    base, extra = divmod(num_layers, num_parts)
    out, start = [], 0
    for i in range(num_parts):
        size = base + (1 if i < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def balanced_split(costs: Sequence[float], num_parts: int) -> list[range]:
    """Contiguous split minimising the most expensive part (dynamic programming, O(n²·k)).

    Use it when layers differ in cost, e.g. the embedding and LM head made heavier.
    """
    n = len(costs)
    if num_parts < 1 or n < num_parts:
        raise ValueError(f"cannot split {n} items into {num_parts} non-empty stages")
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    INF = float("inf")
    best = [[INF] * (n + 1) for _ in range(num_parts + 1)]
    cut = [[0] * (n + 1) for _ in range(num_parts + 1)]
    best[0][0] = 0.0
    for k in range(1, num_parts + 1):
        for j in range(k, n + 1):
            for i in range(k - 1, j):
                v = max(best[k - 1][i], prefix[j] - prefix[i])
                if v < best[k][j]:
                    best[k][j], cut[k][j] = v, i
    bounds, j = [], n
    for k in range(num_parts, 0, -1):
        i = cut[k][j]
        bounds.append(range(i, j))
        j = i
    return bounds[::-1]


def stage_layers(schedule: Schedule, num_layers: int) -> list[range]:
    """Layer range of every stage of ``schedule`` (stage id → range).

    Stages are numbered along the model inside each copy (for DualPipe both copies get the
    same split), so interleaved and V-shape placements just look the range up by position.
    """
    per_copy = schedule.stages_per_copy
    if num_layers < per_copy:
        raise ValueError(f"{schedule.name} with P={schedule.P}, V={schedule.V} cuts the model "
                         f"into {per_copy} stages but it has only {num_layers} layers; use at "
                         f"least {per_copy} layers or fewer stages")
    split = even_split(num_layers, per_copy)
    return [split[schedule.position(s)] for s in range(schedule.num_stages)]
