"""FSDP / ZeRO-3's gather → compute → free walk as data (pure: canvases and drawings use it)."""
from __future__ import annotations


def fsdp_frames(layers: int, layer_bytes: float, dp: int, prefetch: bool = False,
                other_bytes: float = 0.0) -> list[dict]:
    """FSDP / ZeRO-3 walk: forward over layers 0..L−1, then backward L−1..0.

    Every GPU keeps its 1/N_d shard of each layer's parameters. Before a layer runs, its
    shards are all-gathered into the full layer (and, with ``prefetch``, the next layer's too);
    after it runs, the gathered copy is freed. Each frame says which layers are full and the
    parameter bytes resident on one GPU.
    """
    if layers < 1 or dp < 1:
        raise ValueError("need at least one layer and one GPU")
    order = [("forward", i) for i in range(layers)] + \
            [("backward", i) for i in reversed(range(layers))]
    frames = []
    for k, (phase, i) in enumerate(order):
        full = {i}
        if prefetch and k + 1 < len(order):
            full.add(order[k + 1][1])
        resident = (other_bytes + layers * layer_bytes / dp
                    + len(full) * layer_bytes * (1 - 1 / dp))
        frames.append({"step": k, "phase": phase, "layer": i, "full": sorted(full),
                       "resident": resident})
    return frames
