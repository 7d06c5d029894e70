"""Gradient accumulation, checked in one process: why a pipeline scales each loss by 1/M.

A pipeline's optimizer steps once, after all M microbatches: their gradients add up in
``.grad``. With each microbatch loss scaled by 1/M, the sum equals the gradient of the mean loss
over the whole batch, so pipelining changes when work happens, not what is learned.
"""
from __future__ import annotations

import torch

from .model import TinyConfig, TinyGPT, make_batch, microbatch


def accumulation_error(M: int, scale_by_1_over_M: bool = True, cfg: TinyConfig = TinyConfig(),
                       seed: int = 0) -> float:
    """Max over parameters of ‖g_acc − g_batch‖ / ‖g_batch‖. ``g_batch`` comes from one backward
    of the mean loss over M microbatches. ``g_acc`` is summed over M backwards, one per
    microbatch, each loss times 1/M (or times 1 if ``scale_by_1_over_M`` is False)."""
    if M < 1:
        raise ValueError(f"M must be ≥ 1, got {M}")
    torch.manual_seed(seed)
    model = TinyGPT(cfg, seed)
    batch = make_batch(cfg, M, seed, 0)
    model(*batch).backward()
    whole = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    for i in range(M):
        loss = model(*microbatch(batch, cfg, i))
        (loss / M if scale_by_1_over_M else loss).backward()
    return max(float((p.grad - whole[n]).norm() / whole[n].norm())
               for n, p in model.named_parameters())
