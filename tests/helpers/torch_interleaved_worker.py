"""torch 2.13's ScheduleInterleaved1F1B on P gloo ranks (V = 2, the tiny model's 8 layers):
``run(P, M, other)`` runs a step of M microbatches and returns its gradients' largest relative
error against one process, with torch's refusal of ``other`` microbatches (None if it takes
them). Lesson 11 says torch runs P = 4, M = 6 and refuses M = 9; this checks both."""
from __future__ import annotations

import tempfile


def _rank(rank: int, P: int, M: int, other: int, store: str, queue) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S

    from pplab.registry import make_schedule
    from pplab.runtime.model import TinyConfig, TinyGPT, build_stage_modules, make_batch
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=P)
    try:
        cfg = TinyConfig()
        place = make_schedule("interleaved", P, P, 2)        # the stage placement only
        mine = place.stages_of_rank(rank)
        mods = build_stage_modules(place, cfg, 0, mine)
        stages = [PipelineStage(mods[s], s, place.num_stages, torch.device("cpu")) for s in mine]

        def loss(logits, target):
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1))
        try:
            S.ScheduleInterleaved1F1B(stages, n_microbatches=other, loss_fn=loss)
            refusal = None
        except ValueError as e:
            refusal = str(e)
        pipe = S.ScheduleInterleaved1F1B(stages, n_microbatches=M, loss_fn=loss)
        inputs, targets = make_batch(cfg, M, 0, 0)
        kw = {"target": targets, "losses": []} if any(place.is_last(s) for s in mine) else {}
        if any(place.is_first(s) for s in mine):
            pipe.step(inputs, **kw)
        else:
            pipe.step(**kw)
        grads = {n: p.grad for m in mods.values() for n, p in m.named_parameters()}
        got = [None] * P if rank == 0 else None
        dist.gather_object(grads, got, dst=0)
        if rank == 0:
            full = TinyGPT(cfg, 0)
            full(inputs, targets).backward()
            merged = {k: v for g in got for k, v in g.items()}
            queue.put((max(float((merged[n] - p.grad).norm() / p.grad.norm())
                           for n, p in full.named_parameters()), refusal))
    finally:
        dist.destroy_process_group()


def run(P: int, M: int, other: int):
    import torch.multiprocessing as mp
    store = tempfile.NamedTemporaryFile(prefix="pplab-il-", delete=False).name
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_rank, args=(P, M, other, store, queue), nprocs=P, start_method="spawn")
    return queue.get()
