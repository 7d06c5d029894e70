"""The harness of a graded real-code exercise: one rank (``python -m
pplab.runtime.exercise_worker``, its request as JSON on stdin). It loads before any of the
student's code, builds only the modules the grader handed this rank (parameters as data,
never a seed), runs the student's source on them and reports what it measured (this rank's
loss and gradients, :mod:`.rank_data`) on a descriptor of its own; the student's prints go
to stderr. Exercise 06 runs two ranks over gloo, one stage each; exercise 07 runs one.
The trusted grader starts the ranks in a fresh sandbox and compares what they report with
what it computed itself (:mod:`pplab.runtime.exercises`).

What the student's code running inside a rank can still do: everything this process can.
It may patch this harness, torch and torch.distributed, write its own report, or read
what its rank was given. It cannot see the expected answer (computed only by the trusted
grader), another rank's inputs (sent on that rank's own pipe; every rank, and the launcher
holding all inputs, turns non-dumpable before student code runs, so neither ptrace nor
/proc reach them), or the seed the model was drawn from; and what it reports is read
strictly (counts, names, shapes, dtype) by the trusted side. So on exercise 06 a report
can only be right if the ranks sent each other over gloo what the answer depends on (the
activations and gradients the task is about, or the other stage's parameters and data)
and computed from it; on 07 only if the student's code computed the right gradients from
the data it was given. It can still fail its own grade (crash, hang until the timeout,
report junk) and use the sandbox's resources within its limits.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

from ..exercises import guard
from ..exercises.tasks import TASKS as GRADED
from .rank_data import tensor_data, tensor_from
from .rank_launch import undumpable

#: what the student's code may not call, on top of every task's answer key: what the task
#: table's real-code rows block (the runtime's worker already moves tensors)
BLOCKED = tuple(dict.fromkeys(p for t in GRADED.values() if t.module == "runtime.exercises"
                              for p in t.blocks))


def build_stages(seed: int, dims: list[int]) -> list[nn.Module]:
    """Two stages, same weights in every process: Linear+tanh, then Linear."""
    torch.manual_seed(seed)
    return [nn.Sequential(nn.Linear(dims[0], dims[1]), nn.Tanh()), nn.Linear(dims[1], dims[2])]


def make_data(seed: int, batch: int, dims: list[int]):
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randn(batch, dims[0], generator=g), torch.randn(batch, dims[2], generator=g)


def module_spec(index: int, module: nn.Module, with_grads: bool = False) -> dict:
    """Stage ``index`` (0: Linear+tanh, 1: Linear) as data for a rank to rebuild."""
    params = dict(module.named_parameters())
    weight = params["0.weight" if index == 0 else "weight"]
    spec = {"index": index, "dims": [weight.shape[1], weight.shape[0]],
            "params": {n: tensor_data(p) for n, p in params.items()}}
    if with_grads:
        spec["grads"] = {n: tensor_data(p.grad) for n, p in params.items()}
    return spec


def stage_module(spec: dict) -> nn.Module:
    """A stage rebuilt from the grader's data: this rank's parameters and nothing else."""
    a, b = spec["dims"]
    module = nn.Sequential(nn.Linear(a, b), nn.Tanh()) if spec["index"] == 0 else nn.Linear(a, b)
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(tensor_from(spec["params"][name]))
    for name, p in module.named_parameters():
        if spec.get("grads"):
            p.grad = tensor_from(spec["grads"][name])
    return module


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


def student_functions(sources: dict, names: dict) -> dict:
    """The student's functions by role, from their source only (torch, dist and nn in
    scope): nothing else of the notebook comes along."""
    space = {"torch": torch, "dist": dist, "nn": nn}
    for role, src in sources.items():
        exec(compile(src, f"<your {names[role]}>", "exec"), space)
    missing = [n for n in names.values() if not callable(space.get(n))]
    if missing:
        raise NameError(f"the source given does not define {missing[0]}")
    return {role: space[name] for role, name in names.items()}


def _optional(data):
    return None if data is None else tensor_from(data)


def _microbatches(stage, fwd, bwd, case, rank, world):
    """GPipe over M microbatches with the given forward/backward; returns the mean loss."""
    M, sizes, width = case["M"], case["sizes"], case["in_shape"][1]
    x, y_true = _optional(case["x"]), _optional(case["y"])
    xs = x.split(sizes) if x is not None else [None] * M
    ys = y_true.split(sizes) if y_true is not None else [None] * M
    saved, total = [], 0.0
    for m in range(M):
        saved.append(guard.call(fwd, stage, xs[m], (sizes[m], width)))
    for m in range(M):
        inp, out = saved[m]
        loss = None
        if rank == world - 1:
            loss = nn.functional.mse_loss(out, ys[m]) / M
            total += float(loss)
        guard.call(bwd, inp, out, loss)
    return total


def _p2p(task: str):
    """Exercise 06: this rank's stage, over gloo with the other rank."""
    def run(case, space, rank, world):
        stage = stage_module(case["modules"][0])
        fwd = reference_forward if task == "backward" else space["stage_forward"]
        if task == "forward":
            x, y_true = _optional(case["x"]), _optional(case["y"])
            _, out = guard.call(fwd, stage, x, tuple(case["in_shape"]))
            loss = float(nn.functional.mse_loss(out, y_true)) if rank == world - 1 else None
        else:
            loss = _microbatches(stage, fwd, space["stage_backward"], case, rank, world)
            loss = loss if rank == world - 1 else None
        return loss, [stage]
    return run


def _full_batch(case, space, rank, world):
    """Exercise 07: ``fn(stages, x, y, M)`` accumulates the stages' gradients."""
    stages = [stage_module(s) for s in case["modules"]]
    guard.call(space["fn"], stages, tensor_from(case["x"]), tensor_from(case["y"]), case["M"])
    return None, stages


def _dp_average(case, space, rank, world):
    """Exercise 07: ``fn(replicas)`` averages replicas whose gradients the grader set."""
    modules = [stage_module(s) for s in case["modules"]]
    guard.call(space["fn"], [modules[i:i + 2] for i in range(0, len(modules), 2)])
    return None, modules


def _global_clip(case, space, rank, world):
    """Exercise 07: ``fn(stages, max_norm)`` clips gradients the grader set."""
    stages = [stage_module(s) for s in case["modules"]]
    guard.call(space["fn"], stages, case["max_norm"])
    return None, stages


TASKS = {"p2p-forward": _p2p("forward"), "p2p-backward": _p2p("backward"),
         "p2p-step": _p2p("step"), "full-batch": _full_batch,
         "full-batch-uneven": _full_batch, "dp-average": _dp_average,
         "global-clip": _global_clip}


def _report(loss, modules) -> dict:
    grads = [{n: tensor_data(p.grad) for n, p in m.named_parameters()} for m in modules]
    return {"loss": None if loss is None else float(loss), "modules": grads}


def run_cases(request: dict, space: dict, rank: int) -> dict:
    """Every case of this rank's request: what the grader reads (``rank_data``)."""
    run, world = TASKS[request["task"]], request["world"]
    with guard.blocking(BLOCKED):
        return {"cases": [_report(*run(case, space, rank, world))
                          for case in request["cases"]]}


def _join(request: dict) -> None:
    dist.init_process_group("gloo", rank=request["rank"], world_size=request["world"],
                            init_method=f"tcp://127.0.0.1:{request['port']}",
                            timeout=timedelta(seconds=request["timeout"]))


def _one_line(e: Exception) -> str:
    if isinstance(e, NotImplementedError):
        return ("NotImplementedError: your function is not implemented yet — replace the "
                "`raise NotImplementedError` line")
    return f"{type(e).__name__}: {str(e)[:500]}"


def main() -> None:
    undumpable()
    request = json.loads(sys.stdin.read())
    report = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)                       # the student's prints go to stderr, not the report
    multi = request["world"] > 1
    if multi:
        _join(request)
    try:
        space = student_functions(request["sources"], request["names"])
        out = run_cases(request, space, request["rank"])
    except Exception as e:              # noqa: BLE001 — the student's error, in one line
        traceback.print_exc(limit=2)
        print(_one_line(e), file=sys.stderr, flush=True)
        sys.exit(1)
    report.write(json.dumps(out))
    report.close()
    if multi:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
