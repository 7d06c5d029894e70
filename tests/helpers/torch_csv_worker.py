"""Run pplab schedules, written as CSV, under torch.distributed.pipelining's own loader and
runtime: ``torchrun ... tests/helpers/torch_csv_worker.py JOB.json`` (see test_torch_csv.py).

For each case every rank writes the CSV, ``_PipelineScheduleRuntime._load_csv`` reads it
("compute_only" goes through ``PipelineScheduleMulti._load_csv`` and torch's own lowering;
"compute_comms" is pplab's lowered form, run as written), one step runs on gloo, and rank 0
compares the gathered gradients with one process's.
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

from pplab.torch_format import from_csv
from pplab.runtime.model import TinyConfig, TinyGPT, build_stage_modules, make_batch


def _loss(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1))


def run_case(case: dict, rank: int, tmp: str) -> dict:
    sched = from_csv(case["csv"])
    cfg = TinyConfig()
    mine = sched.stages_of_rank(rank)
    mods = build_stage_modules(sched, cfg, 0, mine)
    stages = [PipelineStage(mods[s], s, sched.num_stages, torch.device("cpu")) for s in mine]
    pipe = _PipelineScheduleRuntime(stages, n_microbatches=sched.M, loss_fn=_loss)
    path = os.path.join(tmp, f"{case['name']}-{case['fmt']}-{rank}.csv")
    with open(path, "w") as f:
        f.write(case["csv"])
    try:
        pipe._load_csv(path, format=case["fmt"])
    except Exception as e:   # noqa: BLE001 - a refusal is a result, reported by name
        return {"refused": f"{type(e).__name__}: {e}"}
    inputs, targets = make_batch(cfg, sched.M, 0, 0)
    kw = {"target": targets, "losses": []} if any(sched.is_last(s) for s in mine) else {}
    args = (inputs,) if any(sched.is_first(s) for s in mine) else ()
    pipe.step(*args, **kw)
    return {n: p.grad for m in mods.values() for n, p in m.named_parameters()}


def main(job_path: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    full = TinyGPT(TinyConfig(), 0)
    inputs, targets = make_batch(TinyConfig(), job["M"], 0, 0)
    full(inputs, targets).backward()
    results = {}
    for case in job["cases"]:
        out = run_case(case, rank, os.path.dirname(job_path))
        gathered = [None] * dist.get_world_size() if rank == 0 else None
        dist.gather_object(out, gathered, dst=0)
        if rank == 0:
            results[f"{case['name']}/{case['fmt']}"] = _compare(gathered, full)
        dist.barrier()
    if rank == 0:
        with open(job["out"], "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def _compare(gathered: list, full: TinyGPT) -> dict:
    refused = [g["refused"] for g in gathered if "refused" in g]
    if refused:
        return {"refused": refused[0]}
    merged = {}
    for g in gathered:
        merged.update(g)
    err = max(float((merged[n] - p.grad).norm() / p.grad.norm())
              for n, p in full.named_parameters())
    return {"grad_err": err}


if __name__ == "__main__":
    main(sys.argv[1])
