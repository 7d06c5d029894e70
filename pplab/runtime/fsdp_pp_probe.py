"""FSDP2 inside torch's pipelining, counted on a real run: how many times per step one
block's parameters are all-gathered and its gradients reduce-scattered.

Two processes on gloo (CPU): a 2-stage pipeline whose stages are ``fully_shard``-ed (every block,
then the stage) on a data-parallel mesh of one rank each, run for one step by torch's
``Schedule1F1B``. The counts are read by wrapping FSDP2's two collectives; what the data-parallel
width changes is the bytes of each, not their number. Lesson 12 compares them with
``pplab.memory.fsdp_pp.fsdp_pp_collectives``.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile


def _worker(job_path: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.fsdp._fully_shard import _fsdp_param_group as pg
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    from ..registry import make_schedule
    from .model import TinyConfig, build_stage_modules, make_batch
    from .torch_bridge import _loss_fn
    job = json.load(open(job_path))
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, M = dist.get_rank(), job["M"]
    mesh = init_device_mesh("cpu", (2, 1), mesh_dim_names=("pp", "dp"))
    counts = {"all_gather": {}, "reduce_scatter": {}}
    unshard, post_backward = pg.FSDPParamGroup.unshard, pg.FSDPParamGroup.post_backward

    def counted_unshard(self, *args, **kwargs):
        # an all-gather is issued when unshard leaves a pending result behind (on a one-rank
        # mesh FSDP2 stands in a no-op result for the collective at the same point)
        before = self._all_gather_result
        unshard(self, *args, **kwargs)
        if before is None and self._all_gather_result is not None:
            counts["all_gather"][id(self)] = counts["all_gather"].get(id(self), 0) + 1

    def counted_post_backward(self, *args, **kwargs):
        # gradients are reduce-scattered only when FSDP2's gradient sync is on
        if self.reduce_grads:
            counts["reduce_scatter"][id(self)] = counts["reduce_scatter"].get(id(self), 0) + 1
        return post_backward(self, *args, **kwargs)
    pg.FSDPParamGroup.unshard = counted_unshard
    pg.FSDPParamGroup.post_backward = counted_post_backward

    cfg = TinyConfig()
    sched = make_schedule("1f1b", 2, M)
    mod = build_stage_modules(sched, cfg, 0, [rank])[rank]
    for block in mod.layers.values():
        fully_shard(block, mesh=mesh["dp"], reshard_after_forward=job["reshard_after_forward"])
    fully_shard(mod, mesh=mesh["dp"], reshard_after_forward=job["reshard_after_forward"])
    stage = PipelineStage(mod, rank, 2, torch.device("cpu"), group=mesh.get_group("pp"))
    pipe = Schedule1F1B(stage, n_microbatches=M, loss_fn=_loss_fn())
    for step in range(2):            # count the second step: the first also infers shapes
        for c in counts.values():
            c.clear()
        inputs, targets = make_batch(cfg, M, 0, step)
        pipe.step(inputs) if rank == 0 else pipe.step(target=targets)
    blocks = [id(b._get_fsdp_state()._fsdp_param_group) for b in mod.layers.values()]
    per_block = {k: [counts[k].get(g, 0) for g in blocks] for k in counts}
    assert all(len(set(v)) == 1 for v in per_block.values()), per_block   # every block alike
    out = {"rank": rank, "all_gathers_per_block": per_block["all_gather"][0],
           "reduce_scatters_per_block": per_block["reduce_scatter"][0]}
    gathered = [None, None]
    dist.all_gather_object(gathered, out)
    if rank == 0:
        with open(job["out"], "w") as f:
            json.dump(gathered, f)
    dist.barrier()
    # gloo's threads with FSDP2 + pipelining sometimes abort in teardown ("terminate called
    # without an active exception", about 1 run in 4 here): the counts are written, so
    # leave without tearing down; the sockets close with the process
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def count_fsdp_pp_collectives(M: int = 4, reshard_after_forward: bool = True,
                              timeout: float = 300.0) -> list[dict]:
    """Run the 2-process FSDP2 + 1F1B step under torchrun; per rank, the all-gathers and
    reduce-scatters of one block's parameters in that step."""
    from .torchrun_job import run_module_job
    return run_module_job("pplab.runtime.fsdp_pp_probe", 2,
                          {"M": M, "reshard_after_forward": reshard_after_forward},
                          "the FSDP2 + PP run", timeout)


if __name__ == "__main__":
    import sys
    _worker(sys.argv[1])
