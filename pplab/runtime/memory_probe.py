"""Measure, in this process, the bytes autograd saves for one microbatch through one stage.

The memory model (pplab.memory) predicts per-rank peaks as "activations alive per the
schedule × bytes per stage". Its analytic per-layer bytes assume Megatron's 16-bit ops; the
tiny float32 model saves a different set of tensors. So we calibrate the per-stage bytes
here, with the same saved-tensor tracker the runtime's workers use, and let the schedule
supply the in-flight count. The test that compares both is tests/runtime/test_memory_measured.py.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .model import StageModule, TinyConfig, TinyGPT
from .worker import SavedTensorTracker


def stage_saved_bytes(cfg: TinyConfig, num_layers: int, first: bool, last: bool,
                      recompute: str = "none", seed: int = 0) -> int:
    """Bytes saved for backward by one microbatch's forward through such a stage."""
    full = TinyGPT(replace(cfg, layers=max(cfg.layers, num_layers)), seed)
    stage = StageModule(full, range(num_layers), first, last, recompute)
    tracker = SavedTensorTracker()
    tracker.exclude = {p.untyped_storage().data_ptr() for p in stage.parameters()}
    g = torch.Generator().manual_seed(seed)
    b, s = cfg.microbatch_size, cfg.seq
    if first:
        x = torch.randint(cfg.vocab, (b, s), generator=g)
    else:
        x = torch.randn(b, s, cfg.hidden, generator=g, dtype=cfg.torch_dtype).requires_grad_()
    targets = torch.randint(cfg.vocab, (b, s), generator=g)
    with tracker.hooks():
        out = stage(x, targets) if last else stage(x)
    saved = tracker.current
    del out
    return saved


@dataclass(frozen=True)
class SavedBytesCalibration:
    """bytes(stage) = per_stage + layers × per_layer (+ first_extra) (+ last_extra)."""
    per_layer: int
    per_stage: int
    first_extra: int
    last_extra: int


def calibrate(cfg: TinyConfig = TinyConfig(), recompute: str = "none") -> SavedBytesCalibration:
    """Four one-off measurements: middle stages of 1 and 2 layers, a first and a last stage."""
    mid1 = stage_saved_bytes(cfg, 1, False, False, recompute)
    mid2 = stage_saved_bytes(cfg, 2, False, False, recompute)
    first1 = stage_saved_bytes(cfg, 1, True, False, recompute)
    last1 = stage_saved_bytes(cfg, 1, False, True, recompute)
    per_layer = mid2 - mid1
    return SavedBytesCalibration(per_layer, mid1 - per_layer, first1 - mid1, last1 - mid1)
