"""One rank of a graded point-to-point exercise (``python -m pplab.runtime.exercise_worker
SPEC.json RANK``): run the student's functions on a 2-stage model over gloo, save what the
grader compares (loss, this stage's gradients) to ``out_RANK.pt``.

The student's source is executed here, in a fresh process, so nothing the notebook patched
reaches the run; the library's own point-to-point helpers are blocked while it runs.
"""
from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

from ..exercises import guard

#: what the student's p2p code may not call: the runtime's worker already moves tensors
BLOCKED = ("runtime.worker.*", "runtime.exercises.reference_*")


def build_stages(seed: int, dims: list[int]) -> list[nn.Module]:
    """Two stages, same weights in every process: Linear+tanh, then Linear."""
    torch.manual_seed(seed)
    return [nn.Sequential(nn.Linear(dims[0], dims[1]), nn.Tanh()), nn.Linear(dims[1], dims[2])]


def make_data(seed: int, batch: int, dims: list[int]):
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randn(batch, dims[0], generator=g), torch.randn(batch, dims[2], generator=g)


def reference_forward(stage, x, in_shape):
    """The grader's forward, used when only the student's backward is graded."""
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank > 0:
        x = torch.empty(in_shape)
        dist.recv(x, src=rank - 1)
        x.requires_grad_()
    y = stage(x)
    if rank < world - 1:
        dist.send(y.detach(), dst=rank + 1)
    return x, y


def _student(sources: dict) -> dict:
    space = {"torch": torch, "dist": dist, "nn": nn}
    for name, src in sources.items():
        exec(compile(src, f"<your {name}>", "exec"), space)
    return space


def _microbatches(stage, fwd, bwd, x, y_true, M, in_shape, rank, world):
    """GPipe over M microbatches with the given forward/backward; returns the mean loss."""
    xs = x.chunk(M) if rank == 0 else [None] * M
    ys = y_true.chunk(M)
    saved, total = [], 0.0
    for m in range(M):
        shape = (ys[m].shape[0],) + tuple(in_shape[1:])
        saved.append(guard.call(fwd, stage, xs[m], shape))
    for m in range(M):
        inp, out = saved[m]
        loss = None
        if rank == world - 1:
            loss = nn.functional.mse_loss(out, ys[m]) / M
            total += float(loss)
        guard.call(bwd, inp, out, loss)
    return total


def run_case(spec: dict, case: dict, space: dict, rank: int, world: int) -> dict:
    """One model and batch: run the task, return the loss and this stage's gradients."""
    stage = build_stages(case["seed"], case["dims"])[rank]
    x, y_true = make_data(case["seed"], case["batch"], case["dims"])
    task = spec["task"]
    fwd = reference_forward if task == "backward" else space["stage_forward"]
    bwd = None if task == "forward" else space["stage_backward"]
    M = case["M"] if task == "step" else 1
    in_shape = (case["batch"], case["dims"][1])
    with guard.blocking(BLOCKED):
        if bwd is None:
            _, out = guard.call(fwd, stage, x if rank == 0 else None, in_shape)
            loss = float(nn.functional.mse_loss(out, y_true)) if rank == world - 1 else 0.0
        else:
            loss = _microbatches(stage, fwd, bwd, x, y_true, M, in_shape, rank, world)
    grads = {n: p.grad.clone() if p.grad is not None else None
             for n, p in stage.named_parameters()}
    return {"loss": loss, "grads": grads}


def run(spec: dict, rank: int) -> None:
    world = 2
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method=(
        f"tcp://127.0.0.1:{spec['port']}"), timeout=timedelta(seconds=spec["timeout"]))
    space = _student(spec["sources"])
    outs = [run_case(spec, case, space, rank, world) for case in spec["cases"]]
    torch.save(outs, os.path.join(spec["dir"], f"out_{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        run(json.load(f), int(sys.argv[2]))
