"""Graders that run real code: a stage's send/receive over torch.distributed (two gloo
processes whose gradients must equal one process's), and a gradient-scaling bug hunt (a
pipeline's gradients must equal non-pipelined training).

Each grader draws its model and batch from a seed (``cases``: a list of seeds; the visible
check uses seed 0, hidden tests draw fresh ones at grading time). The grader builds the
model itself and hands each rank only its own inputs, as data (:func:`ranks_request`); the
harness (:mod:`.exercise_worker`) runs the student's function *source* on them and reports
what it measured, which :func:`measure` reads strictly before any comparison. Graded, the
ranks run in a fresh sandbox the trusted grader starts, so nothing the student's kernel did
reaches them (docs/teaching.md, threat model).
"""
from __future__ import annotations

import inspect
import random
import textwrap

import torch
import torch.nn as nn

from ..exercises.bubble import _fail
from ..exercises.guard import graded
from .exercise_worker import (build_stages, make_data, module_spec, run_cases,
                              student_functions)
from .rank_data import read_results, tensor_data
from .rank_launch import launch

P2P_TIMEOUT = 60.0


def _shape(seed: int, M: int = 1) -> dict:
    rng = random.Random(seed)
    dims = [rng.randint(3, 10), rng.randint(4, 16), rng.randint(1, 4)]
    return {"seed": seed, "dims": dims, "batch": M * rng.randint(2, 5), "M": M}


def reference_grads(seed: int, dims, batch) -> tuple[float, list[dict]]:
    """One process, whole batch, mean loss: the loss and each stage's gradients."""
    stages = build_stages(seed, dims)
    x, y = make_data(seed, batch, dims)
    loss = nn.functional.mse_loss(stages[1](stages[0](x)), y)
    loss.backward()
    grads = [{n: p.grad.clone() for n, p in s.named_parameters()} for s in stages]
    return float(loss.detach()), grads


def _source(fn, name: str) -> str:
    if not callable(fn):
        _fail(f"{name} is not a function yet: define it with def")
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        _fail(f"cannot read the source of {name}: define it with def in a notebook cell")


# ---- what each task hands its ranks, and what it must get back ---------------------------

def _names(module) -> dict:
    return {n: list(p.shape) for n, p in module.named_parameters()}


def _p2p_plan(task: str, seed: int) -> tuple[list[dict], list[dict]]:
    """Per rank: its inputs (its own stage; the batch on rank 0, the targets on rank 1)
    and what it must report (the loss on the last rank only)."""
    shape = _shapes(task, [seed])[0]
    dims, batch, M = shape["dims"], shape["batch"], shape["M"]
    stages = build_stages(seed, dims)
    x, y = make_data(seed, batch, dims)
    sizes = [len(c) for c in torch.arange(batch).chunk(M)]
    inputs, wants = [], []
    for rank, stage in enumerate(stages):
        inputs.append({"modules": [module_spec(rank, stage)], "M": M, "sizes": sizes,
                       "in_shape": [batch, dims[1]], "x": tensor_data(x) if rank == 0 else None,
                       "y": tensor_data(y) if rank == len(stages) - 1 else None})
        wants.append({"loss": rank == len(stages) - 1, "modules": [_names(stage)]})
    return inputs, wants


def _full_batch_plan(uneven: bool, seed: int):
    M, batch, dims = _bug_case(seed, uneven)
    stages = build_stages(seed, dims)
    x, y = make_data(seed, batch, dims)
    return ([{"modules": [module_spec(i, s) for i, s in enumerate(stages)], "M": M,
              "x": tensor_data(x), "y": tensor_data(y)}],
            [{"loss": False, "modules": [_names(s) for s in stages]}])


def _dp_replicas(seed: int) -> list[list[nn.Module]]:
    """Each replica's stages after a backward on its own shard of the batch."""
    M, batch, dims = _bug_case(seed, False)
    dp = 2 + seed % 3
    x, y = make_data(seed, dp * batch, dims)
    replicas = [build_stages(seed, dims) for _ in range(dp)]
    for stages, xs, ys in zip(replicas, x.chunk(dp), y.chunk(dp)):
        nn.functional.mse_loss(stages[1](stages[0](xs)), ys).backward()
    return replicas


def _dp_plan(seed: int):
    modules = [(i, s) for stages in _dp_replicas(seed) for i, s in enumerate(stages)]
    return ([{"modules": [module_spec(i, s, with_grads=True) for i, s in modules]}],
            [{"loss": False, "modules": [_names(s) for _, s in modules]}])


def _clip_plan(seed: int):
    stages, clip = _after_one_backward(seed)
    return ([{"modules": [module_spec(i, s, with_grads=True) for i, s in enumerate(stages)],
              "max_norm": clip}],
            [{"loss": False, "modules": [_names(s) for s in stages]}])


PLANS = {
    "p2p-forward": lambda seed: _p2p_plan("forward", seed),
    "p2p-backward": lambda seed: _p2p_plan("backward", seed),
    "p2p-step": lambda seed: _p2p_plan("step", seed),
    "full-batch": lambda seed: _full_batch_plan(False, seed),
    "full-batch-uneven": lambda seed: _full_batch_plan(True, seed),
    "dp-average": _dp_plan, "global-clip": _clip_plan,
}


def ranks_request(kind: str, cases) -> tuple[dict, list[list[dict]]]:
    """What the ranks are handed for ``cases`` (per rank, per case: its own inputs only),
    and what each must report (``rank_data.read_results``'s ``expected``)."""
    plans = [PLANS[kind](seed) for seed in cases]
    world = len(plans[0][0])
    request = {"task": kind, "ranks": [[p[0][r] for p in plans] for r in range(world)]}
    return request, [[p[1][r] for p in plans] for r in range(world)]


def _run_here(request: dict, fns: dict) -> list:
    """The public check's run: two gloo processes for exercise 06, this process for 07
    (from the functions' source either way, so a missing helper shows here too)."""
    names = {role: getattr(fn, "__name__", role) for role, fn in fns.items()}
    request = dict(request, names=names,
                   sources={role: _source(fn, names[role]) for role, fn in fns.items()})
    if len(request["ranks"]) > 1:
        return launch(request, P2P_TIMEOUT)
    try:
        space = student_functions(request["sources"], names)
        return [run_cases(dict(request, world=1, cases=request["ranks"][0]), space, 0)]
    except NotImplementedError as e:
        _fail(f"your function is not implemented yet ({e}) — replace the `raise "
              "NotImplementedError` line")
    except AssertionError:
        raise
    except Exception as e:                  # noqa: BLE001 — the student's error, one line
        _fail(f"{', '.join(names.values())} raised {type(e).__name__}: {e}")


def measure(kind: str, fns: dict, cases) -> list[list[dict]]:
    """Per case, per rank: the loss and gradients the harness measured on the student's
    functions, read strictly (exactly the ranks, cases, parameters and shapes asked for).

    Graded, the functions are remote handles: the trusted side takes their source and
    runs the ranks in a fresh sandbox (:meth:`pplab.grading.verdict.Remote.measure`)."""
    cases = list(cases)
    if not cases:
        _fail("no cases to check: the grader fails closed")
    request, expected = ranks_request(kind, cases)
    remote = next((f for f in fns.values() if hasattr(f, "measure")), None)
    raw = remote.measure(kind, fns, request) if remote is not None else _run_here(request, fns)
    return read_results(raw, expected)


def _grade_p2p(task: str, fns: dict, cases, label: str) -> bool:
    cases = list(cases)
    outputs = measure(f"p2p-{task}", fns, cases)
    for shape, outs in zip(_shapes(task, cases), outputs, strict=True):
        loss, grads = reference_grads(shape["seed"], shape["dims"], shape["batch"])
        got = outs[-1]["loss"]
        if not abs(got - loss) <= 1e-5 * max(1.0, abs(loss)):
            _fail(f"{label}: the last rank's loss is {got}, one process gets "
                  f"{loss:.6g}. Hint: rank 1 must receive rank 0's output (dist.recv into a "
                  "tensor of the right shape) and run its stage on it.")
        if task != "forward":
            _compare_grads(outs, grads, label)
    print(f"{label}: 2 gloo processes match one-process training on {len(cases)} "
          "model(s) ✓")
    return True


def _compare_grads(outs, want: list[dict], label: str) -> None:
    for rank, (out, ref) in enumerate(zip(outs, want, strict=True)):
        for name, g in ref.items():
            got = out["grads"][0][name]
            if got is None:
                _fail(f"{label}: rank {rank}'s {name} has no gradient — did the backward run "
                      "on this rank, with the gradient received from the next rank?")
            if not torch.allclose(got, g, rtol=1e-4, atol=1e-6):
                ratio = float(got.norm() / g.norm()) if float(g.norm()) else float("nan")
                _fail(f"{label}: rank {rank}'s {name} gradient differs from one-process "
                      f"training (norm ratio {ratio:.3g}). Hint: the gradient you send back "
                      "is the input's .grad, and the receiving rank calls "
                      "output.backward(received_gradient).")


def _shapes(task: str, cases) -> list[dict]:
    return [_shape(seed, 1 if task != "step" else 2 + seed % 3) for seed in cases]


@graded
def check_stage_forward(stage_forward, cases=(0,)) -> bool:
    """``stage_forward(stage, x, in_shape)`` under 2 real processes: the loss must equal one
    process's."""
    return _grade_p2p("forward", {"stage_forward": stage_forward}, cases, "stage_forward")


@graded
def check_stage_backward(stage_backward, cases=(0,)) -> bool:
    """``stage_backward(x, y, loss)`` (with the grader's forward): gradients must equal one
    process's."""
    return _grade_p2p("backward", {"stage_backward": stage_backward}, cases, "stage_backward")


@graded
def check_pipeline_step(stage_forward, stage_backward, cases=(0,)) -> bool:
    """Both functions over M microbatches (GPipe order, loss / M): gradients equal."""
    return _grade_p2p("step", {"stage_forward": stage_forward,
                               "stage_backward": stage_backward}, cases, "pipeline step")


# ---- the bug hunt: gradients must equal non-pipelined training ----------------------------

def _bug_case(seed: int, uneven: bool):
    rng = random.Random(seed)
    M = rng.randint(2, 6)
    batch = M * rng.randint(2, 4) + (rng.randint(1, M - 1) if uneven else 0)
    dims = [rng.randint(3, 10), rng.randint(4, 16), rng.randint(1, 4)]
    return M, batch, dims


def _stage_grads(outputs) -> list[list[dict]]:
    """Per case, the one process's module gradients."""
    return [outs[0]["grads"] for outs in outputs]


def _same(got, ref, atol: float) -> bool:
    return got is not None and torch.allclose(got, ref, rtol=1e-4, atol=atol)


def _check_against_full_batch(fn, cases, uneven: bool, label: str, hint: str) -> bool:
    cases = list(cases)
    outputs = _stage_grads(measure("full-batch-uneven" if uneven else "full-batch",
                                   {"fn": fn}, cases))
    for seed, grads in zip(cases, outputs, strict=True):
        M, batch, dims = _bug_case(seed, uneven)
        _, want = reference_grads(seed, dims, batch)
        for s, (got, ref) in enumerate(zip(grads, want, strict=True)):
            for name, g in ref.items():
                if not _same(got[name], g, 1e-6):
                    ratio = float(got[name].norm() / g.norm()) if got[name] is not None else 0.0
                    _fail(f"{label}: with M={M} microbatches of a batch of {batch}, stage {s}'s "
                          f"{name} gradient is {ratio:.3g}× the non-pipelined one. Hint: {hint}")
    print(f"{label}: gradients equal non-pipelined training on {len(cases)} drawn case(s) ✓")
    return True


@graded
def check_loss_scaling(pipelined_grads, cases=(0,)) -> bool:
    """``pipelined_grads(stages, x, y, M)``: accumulate over M equal microbatches."""
    return _check_against_full_batch(
        pipelined_grads, cases, False, "pipelined_grads",
        "each microbatch's loss is a mean over its own samples; summing M of them counts "
        "the batch M times")


@graded
def check_uneven_microbatches(pipelined_grads, cases=(0,)) -> bool:
    """Same, but the batch does not divide by M (``x.tensor_split(M)``)."""
    return _check_against_full_batch(
        pipelined_grads, cases, True, "pipelined_grads (uneven)",
        "with unequal microbatches, dividing by M weights a small microbatch's samples more "
        "than a large one's; weight each microbatch by its share of the samples")


@graded
def check_dp_average(allreduce_grads, cases=(0,)) -> bool:
    """``allreduce_grads(replicas)``: after each data-parallel replica (a list of stages) ran
    its shard, make every replica's gradients those of the whole batch."""
    cases = list(cases)
    outputs = _stage_grads(measure("dp-average", {"fn": allreduce_grads}, cases))
    for seed, grads in zip(cases, outputs, strict=True):
        M, batch, dims = _bug_case(seed, False)
        dp = 2 + seed % 3
        _, want = reference_grads(seed, dims, dp * batch)
        for i, (got, ref) in enumerate(zip(grads, want * dp, strict=True)):
            for name, g in ref.items():
                if not _same(got[name], g, 1e-6):
                    _fail(f"allreduce_grads: with DP={dp}, replica {i // 2} stage {i % 2}'s "
                          f"{name} is not the whole batch's gradient. Hint: each replica's "
                          "loss is a mean over its shard; the all-reduce sums, so divide by "
                          "DP.")
    print(f"allreduce_grads: every replica holds the whole batch's gradient on {len(cases)} "
          "drawn case(s) ✓")
    return True


def _after_one_backward(seed: int):
    """A case's stages after one whole-batch backward, and the clip: half the largest stage
    norm, so clipping always bites."""
    M, batch, dims = _bug_case(seed, False)
    stages = build_stages(seed, dims)
    x, y = make_data(seed, batch, dims)
    nn.functional.mse_loss(stages[1](stages[0](x)), y).backward()
    norms = [sum(float(p.grad.pow(2).sum()) for p in st.parameters()) ** 0.5 for st in stages]
    return stages, 0.5 * max(norms)


def _unclipped(seed: int):
    stages, clip = _after_one_backward(seed)
    return [{n: p.grad.clone() for n, p in s.named_parameters()} for s in stages], clip


@graded
def check_global_clip(clip_pipeline_grads, cases=(0,)) -> bool:
    """``clip_pipeline_grads(stages, max_norm)``: clip by the norm over *all* stages, as one
    model would (each pipeline rank sees only its own stage)."""
    cases = list(cases)
    outputs = _stage_grads(measure("global-clip", {"fn": clip_pipeline_grads}, cases))
    for seed, grads in zip(cases, outputs, strict=True):
        want, max_norm = _unclipped(seed)
        norms = [sum(float(g.pow(2).sum()) for g in w.values()) ** 0.5 for w in want]
        total = sum(n * n for n in norms) ** 0.5
        scale = min(1.0, max_norm / (total + 1e-6))
        want = [{n: g * scale for n, g in w.items()} for w in want]
        for s, (got, ref) in enumerate(zip(grads, want, strict=True)):
            for name, g in ref.items():
                if not _same(got[name], g, 1e-7):
                    _fail(f"clip_pipeline_grads: stage {s}'s {name} is not what clipping the "
                          f"whole model to {max_norm:.4g} gives (stage norms {norms}). Hint: "
                          "the norm is the square root of the sum of every stage's squared "
                          "norm; scale all stages by the same factor.")
    print(f"clip_pipeline_grads: matches whole-model clipping on {len(cases)} drawn case(s) ✓")
    return True
