"""Small, cheap contacts with ``torch.distributed.pipelining`` for lesson 12.

Everything here runs in the calling process on gloo with world size 1 (one stage), so a
notebook cell can show torch's API and its ``scale_grads`` switch in about a second. The
multi-process comparison of orders and gradients is ``benchmarks/bench_runtime_vs_torch.py``.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager


@contextmanager
def one_process_group():
    """A gloo process group of one rank, torn down afterwards (even on error)."""
    import torch.distributed as dist
    if dist.is_initialized():
        yield
        return
    store = tempfile.NamedTemporaryFile(prefix="pplab-pg-", delete=False).name
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()
        if os.path.exists(store):
            os.unlink(store)


def _loss_fn():
    import torch.nn.functional as F

    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1))
    return loss_fn


def torch_pipeline_grad_ratio(M: int = 4, scale_grads: bool = True,
                              schedule: str = "Schedule1F1B") -> float:
    """Run the tiny model as a one-stage torch pipeline over M microbatches and return
    ‖pipeline gradient‖ / ‖full-batch gradient‖ (1.0 when they agree)."""
    import torch
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S

    from ..registry import make_schedule
    from .model import TinyConfig, TinyGPT, build_stage_modules, make_batch
    cfg = TinyConfig()
    inputs, targets = make_batch(cfg, M, 0, 0)
    with one_process_group():
        mod = build_stage_modules(make_schedule("1f1b", 1, M), cfg, 0, [0])[0]
        stage = PipelineStage(mod, 0, 1, torch.device("cpu"))
        pipe = getattr(S, schedule)(stage, n_microbatches=M, loss_fn=_loss_fn(),
                                    scale_grads=scale_grads)
        pipe.step(inputs, target=targets)
        got = torch.cat([p.grad.flatten() for p in mod.parameters()])
    full = TinyGPT(cfg, 0)
    full(inputs, targets).backward()
    want = torch.cat([p.grad.flatten() for p in full.parameters()])
    return float(got.norm() / want.norm())


def torch_refuses(schedule: str = "Schedule1F1B", P: int = 4, M: int = 2) -> str | None:
    """torch's own message when ``schedule`` refuses M microbatches on P stages, else None.

    Builds stage 0 of a P-stage pipeline in a one-rank group: torch checks M against the
    number of stages when the schedule is constructed, before any communication."""
    import torch
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S

    from ..registry import make_schedule
    from .model import TinyConfig, build_stage_modules
    with one_process_group():
        mod = build_stage_modules(make_schedule("1f1b", 1, 1), TinyConfig(), 0, [0])[0]
        stage = PipelineStage(mod, 0, P, torch.device("cpu"))
        try:
            getattr(S, schedule)(stage, n_microbatches=M, loss_fn=_loss_fn())
        except ValueError as e:
            return " ".join(str(e).split())
    return None
