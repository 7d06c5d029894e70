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


def uneven_split(num_layers: int, num_parts: int, first: int | None = None,
                 last: int | None = None) -> list[range]:
    """Even split, except that the first and/or last stage hold the given layer counts.

    Megatron-LM's ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``:
    the first stage also runs the embedding and the last the LM head and loss, so giving them
    fewer layers balances the pipeline. The stages in between share the rest evenly. A count
    of 0 leaves that stage the embedding (or the head and loss) alone: Llama 3 405B's first
    and last interleaved chunks (Llama 3 paper §3.3.2).
    """
    if first is None and last is None:
        return even_split(num_layers, num_parts)
    for name, v in (("first", first), ("last", last)):
        if v is not None and v < 0:
            raise ValueError(f"{name} stage layers must be ≥ 0 (0: the embedding or the head "
                             f"alone), got {v}")
    if num_parts < 2:
        raise ValueError(f"first/last stage layer counts need ≥ 2 pipeline stages, got "
                         f"{num_parts}")
    fixed = [v for v in (first, last) if v is not None]
    rest, n_rest = num_layers - sum(fixed), num_parts - len(fixed)
    if n_rest == 0 and rest != 0:
        raise ValueError(f"first {first} + last {last} layers ≠ the model's {num_layers} "
                         f"layers with 2 stages; make them add up to {num_layers}")
    if n_rest and rest < n_rest:
        raise ValueError(f"first/last stages take {sum(fixed)} of {num_layers} layers, leaving "
                         f"{rest} for {n_rest} other stages; each needs at least one")
    sizes = [len(r) for r in even_split(rest, n_rest)] if n_rest else []
    sizes = ([first] if first is not None else []) + sizes + ([last] if last is not None else [])
    out, start = [], 0
    for size in sizes:
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


def stage_layers(schedule: Schedule, num_layers: int, first: int | None = None,
                 last: int | None = None) -> list[range]:
    """Layer range of every stage of ``schedule`` (stage id → range).

    Stages are numbered along the model inside each copy (for DualPipe both copies get the
    same split), so interleaved and V-shape placements just look the range up by position.
    ``first``/``last`` fix the layer counts of the model's first and last stage
    (``uneven_split``).
    """
    per_copy = schedule.stages_per_copy
    if num_layers < per_copy - (first == 0) - (last == 0):
        raise ValueError(f"{schedule.name} with P={schedule.P}, V={schedule.V} cuts the model "
                         f"into {per_copy} stages but it has only {num_layers} layers; use at "
                         f"least {per_copy} layers or fewer stages")
    split = uneven_split(num_layers, per_copy, first, last)
    return [split[schedule.position(s)] for s in range(schedule.num_stages)]
