"""Small, cheap contacts with ``torch.distributed.pipelining`` for lesson 12.

Everything here runs in the calling process on gloo with world size 1 (one stage), so a
notebook cell can show torch's API and its ``scale_grads`` switch in about a second. The
multi-process comparison of orders and gradients is ``benchmarks/bench_runtime_vs_torch.py``.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager

#: pplab's schedule name → the torch.distributed.pipelining class that runs the same idea


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


def _csv_worker(job_path: str) -> None:
    """One torchrun rank: load the CSV into torch's runtime schedule, run one step, and (rank
    0) compare the gathered gradients with one process."""
    import json

    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S

    from ..ir import Schedule
    from .model import TinyConfig, TinyGPT, build_stage_modules, make_batch
    job = json.load(open(job_path))
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    rows = [ln for ln in open(job["csv"]).read().splitlines() if ln.strip()]
    sched = Schedule.from_text(rows, num_microbatches=job["M"])
    cfg, my = TinyConfig(), sched.stages_of_rank(rank)
    mods = build_stage_modules(sched, cfg, 0, my)
    stages = [PipelineStage(mods[s], s, sched.num_stages, torch.device("cpu")) for s in my]
    pipe = S._PipelineScheduleRuntime(stages, n_microbatches=job["M"], loss_fn=_loss_fn())
    pipe._load_csv(job["csv"], format="compute_only")
    inputs, targets = make_batch(cfg, job["M"], 0, 0)
    kw = {"target": targets} if any(sched.is_last(s) for s in my) else {}
    pipe.step(inputs, **kw) if any(sched.is_first(s) for s in my) else pipe.step(**kw)
    grads = {n: p.grad.clone() for m in mods.values() for n, p in m.named_parameters()}
    gathered = [None] * dist.get_world_size() if rank == 0 else None
    dist.gather_object(grads, gathered, dst=0)
    if rank == 0:
        full = TinyGPT(cfg, 0)
        full(inputs, targets).backward()
        merged = {k: v for g in gathered for k, v in g.items()}
        err = max(float((merged[n] - p.grad).norm() / p.grad.norm())
                  for n, p in full.named_parameters())
        order = {r: [str(a) for a in acts] for r, acts in pipe.pipeline_order.items()}
        json.dump({"grad_max_rel_error": err, "order": order}, open(job["out"], "w"))
    dist.destroy_process_group()


def run_csv_in_torch(csv_text: str, M: int, timeout: float = 300.0) -> dict:
    """Run a compute-only CSV schedule (one row per rank) with torch's own runtime under
    torchrun; returns torch's per-rank order and the gradient error against one process.

    A failed job raises RuntimeError with the tail of torch's output."""
    from .torchrun_job import run_module_job
    P = len([ln for ln in csv_text.splitlines() if ln.strip()])
    folder = tempfile.mkdtemp(prefix="pplab-csv-")
    path = os.path.join(folder, "schedule.csv")
    with open(path, "w") as f:
        f.write(csv_text)
    try:
        return run_module_job("pplab.runtime.torch_bridge", P, {"csv": path, "M": M},
                              "torch's CSV run", timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    import sys
    _csv_worker(sys.argv[1])
