"""Graders that run real code: a stage's send/receive over torch.distributed (two gloo
processes whose gradients must equal one process's), and a gradient-scaling bug hunt (a
pipeline's gradients must equal non-pipelined training).

Each grader draws its model and batch from a seed (``cases``: a list of seeds; the visible
check uses seed 0, hidden tests draw fresh ones at grading time).
"""
from __future__ import annotations

import inspect
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time

import torch
import torch.nn as nn

from ..exercises.bubble import _call, _fail
from ..exercises.guard import derive_without
from .exercise_worker import build_stages, make_data
from .launcher import _free_port
from .supervise import kill_session

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


def _wait(procs) -> None:
    deadline = time.monotonic() + P2P_TIMEOUT
    for rank, proc in enumerate(procs):
        try:
            out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                kill_session(p)
            _fail(f"rank {rank} did not finish within {P2P_TIMEOUT:g} s: a receive with no "
                  "matching send (or two ranks both receiving first) waits forever")
        if proc.returncode != 0:
            for p in procs:
                kill_session(p)
            tail = [ln for ln in out.decode(errors="replace").splitlines() if ln.strip()]
            _fail(f"rank {rank} failed: {tail[-1] if tail else f'exit {proc.returncode}'}")


def run_two_ranks(task: str, sources: dict, cases: list[dict]) -> list[list[dict]]:
    """Launch the 2 gloo processes for ``task`` on every case at once; per case, what each
    rank saved."""
    with tempfile.TemporaryDirectory(prefix="pplab-p2p-") as tmp:
        spec = dict(task=task, cases=cases, sources=sources, dir=tmp, port=_free_port(),
                    timeout=P2P_TIMEOUT)
        path = os.path.join(tmp, "spec.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        procs = [subprocess.Popen([sys.executable, "-m", "pplab.runtime.exercise_worker", path,
                                   str(r)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  start_new_session=True, env=env) for r in range(2)]
        _wait(procs)
        per_rank = [torch.load(os.path.join(tmp, f"out_{r}.pt")) for r in range(2)]
        return [list(pair) for pair in zip(*per_rank)]


def _compare_grads(outs, want: list[dict], label: str) -> None:
    for rank, (out, ref) in enumerate(zip(outs, want)):
        for name, g in ref.items():
            got = out["grads"].get(name)
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


def _as_data(t):
    return t.detach().tolist() if isinstance(t, torch.Tensor) else t


def _as_tensor(x):
    return x if isinstance(x, torch.Tensor) or x is None else torch.tensor(x)


def _collect_p2p(task: str):
    """Run the student's functions on 2 gloo processes; per case and rank, the loss and
    gradients as plain data (the grading sandbox runs this; the grader compares)."""
    def run(fns: dict, cases) -> list:
        sources = {name: _source(fn, name) for name, fn in fns.items()}
        return [[{"loss": float(o["loss"]) if o.get("loss") is not None else None,
                  "grads": {n: _as_data(g) for n, g in o.get("grads", {}).items()}}
                 for o in outs]
                for outs in run_two_ranks(task, sources, _shapes(task, cases))]
    return run


def collect(kind: str, fns: dict, cases) -> list:
    """What the student's functions produce on ``cases``: computed here, or by the grading
    sandbox when the functions live there (they are then remote handles)."""
    remote = next((f for f in fns.values() if hasattr(f, "collect")), None)
    if remote is not None:
        return remote.collect(kind, fns, list(cases))
    return COLLECTORS[kind](fns, list(cases))


def _grade_p2p(task: str, fns: dict, cases, label: str) -> bool:
    outputs = collect(f"p2p-{task}", fns, cases)
    for shape, outs in zip(_shapes(task, cases), outputs):
        outs = [{"loss": o["loss"], "grads": {n: _as_tensor(g) for n, g in o["grads"].items()}}
                for o in outs]
        loss, grads = reference_grads(shape["seed"], shape["dims"], shape["batch"])
        if outs[1]["loss"] is None or abs(outs[1]["loss"] - loss) > 1e-5 * max(1.0, abs(loss)):
            _fail(f"{label}: the last rank's loss is {outs[1]['loss']}, one process gets "
                  f"{loss:.6g}. Hint: rank 1 must receive rank 0's output (dist.recv into a "
                  "tensor of the right shape) and run its stage on it.")
        if task != "forward":
            _compare_grads(outs, grads, label)
    print(f"{label}: 2 gloo processes match one-process training on {len(cases)} "
          "model(s) ✓")
    return True


@derive_without("runtime.worker.*")
def check_stage_forward(stage_forward, cases=(0,)) -> bool:
    """``stage_forward(stage, x, in_shape)`` under 2 real processes: the loss must equal one
    process's."""
    return _grade_p2p("forward", {"stage_forward": stage_forward}, cases, "stage_forward")


@derive_without("runtime.worker.*")
def check_stage_backward(stage_backward, cases=(0,)) -> bool:
    """``stage_backward(x, y, loss)`` (with the grader's forward): gradients must equal one
    process's."""
    return _grade_p2p("backward", {"stage_backward": stage_backward}, cases, "stage_backward")


@derive_without("runtime.worker.*")
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


def _grads_of(stages) -> list[dict]:
    return [{n: (p.grad.clone() if p.grad is not None else None)
             for n, p in s.named_parameters()} for s in stages]


def _grads_data(stages) -> list[dict]:
    return [{n: _as_data(g) for n, g in w.items()} for w in _grads_of(stages)]


def _grads_back(data) -> list[dict]:
    return [{n: _as_tensor(g) for n, g in w.items()} for w in data]


def _collect_full_batch(uneven: bool):
    """Each case's stage gradients after the student's ``fn(stages, x, y, M)``."""
    def run(fns: dict, cases) -> list:
        out = []
        for seed in cases:
            M, batch, dims = _bug_case(seed, uneven)
            stages = build_stages(seed, dims)
            x, y = make_data(seed, batch, dims)
            _call(fns["fn"], stages, x, y, M)
            out.append(_grads_data(stages))
        return out
    return run


def _check_against_full_batch(fn, cases, uneven: bool, label: str, hint: str) -> bool:
    outputs = collect("full-batch-uneven" if uneven else "full-batch", {"fn": fn}, cases)
    for seed, data in zip(cases, outputs):
        M, batch, dims = _bug_case(seed, uneven)
        _, want = reference_grads(seed, dims, batch)
        for s, (got, ref) in enumerate(zip(_grads_back(data), want)):
            for name, g in ref.items():
                if got.get(name) is None or not torch.allclose(got[name], g, rtol=1e-4,
                                                                atol=1e-6):
                    ratio = (float(got[name].norm() / g.norm()) if got.get(name) is not None
                             else 0.0)
                    _fail(f"{label}: with M={M} microbatches of a batch of {batch}, stage {s}'s "
                          f"{name} gradient is {ratio:.3g}× the non-pipelined one. Hint: {hint}")
    print(f"{label}: gradients equal non-pipelined training on {len(cases)} drawn case(s) ✓")
    return True


@derive_without()
def check_loss_scaling(pipelined_grads, cases=(0,)) -> bool:
    """``pipelined_grads(stages, x, y, M)``: accumulate over M equal microbatches."""
    return _check_against_full_batch(
        pipelined_grads, cases, False, "pipelined_grads",
        "each microbatch's loss is a mean over its own samples; summing M of them counts "
        "the batch M times")


@derive_without()
def check_uneven_microbatches(pipelined_grads, cases=(0,)) -> bool:
    """Same, but the batch does not divide by M (``x.tensor_split(M)``)."""
    return _check_against_full_batch(
        pipelined_grads, cases, True, "pipelined_grads (uneven)",
        "with unequal microbatches, dividing by M weights a small microbatch's samples more "
        "than a large one's; weight each microbatch by its share of the samples")


def _collect_dp_average(fns: dict, cases) -> list:
    """Each case's replicas' gradients after the student's ``fn(replicas)``."""
    out = []
    for seed in cases:
        M, batch, dims = _bug_case(seed, False)
        dp = 2 + seed % 3
        x, y = make_data(seed, dp * batch, dims)
        replicas = [build_stages(seed, dims) for _ in range(dp)]
        for stages, xs, ys in zip(replicas, x.chunk(dp), y.chunk(dp)):
            nn.functional.mse_loss(stages[1](stages[0](xs)), ys).backward()
        _call(fns["fn"], replicas)
        out.append([_grads_data(stages) for stages in replicas])
    return out


@derive_without()
def check_dp_average(allreduce_grads, cases=(0,)) -> bool:
    """``allreduce_grads(replicas)``: after each data-parallel replica (a list of stages) ran
    its shard, make every replica's gradients those of the whole batch."""
    outputs = collect("dp-average", {"fn": allreduce_grads}, cases)
    for seed, data in zip(cases, outputs):
        M, batch, dims = _bug_case(seed, False)
        dp = 2 + seed % 3
        _, want = reference_grads(seed, dims, dp * batch)
        for r, grads in enumerate(data):
            for s, (got, ref) in enumerate(zip(_grads_back(grads), want)):
                for name, g in ref.items():
                    if got.get(name) is None or not torch.allclose(got[name], g, rtol=1e-4,
                                                                    atol=1e-6):
                        _fail(f"allreduce_grads: with DP={dp}, replica {r} stage {s}'s {name} "
                              "is not the whole batch's gradient. Hint: each replica's loss is "
                              "a mean over its shard; the all-reduce sums, so divide by DP.")
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
    return _grads_of(stages), clip


def _collect_global_clip(fns: dict, cases) -> list:
    out = []
    for seed in cases:
        stages, clip = _after_one_backward(seed)
        _call(fns["fn"], stages, clip)
        out.append(_grads_data(stages))
    return out


@derive_without()
def check_global_clip(clip_pipeline_grads, cases=(0,)) -> bool:
    """``clip_pipeline_grads(stages, max_norm)``: clip by the norm over *all* stages, as one
    model would (each pipeline rank sees only its own stage)."""
    outputs = collect("global-clip", {"fn": clip_pipeline_grads}, cases)
    for seed, data in zip(cases, outputs):
        want, max_norm = _unclipped(seed)
        norms = [sum(float(g.pow(2).sum()) for g in w.values()) ** 0.5 for w in want]
        total = sum(n * n for n in norms) ** 0.5
        scale = min(1.0, max_norm / (total + 1e-6))
        want = [{n: g * scale for n, g in w.items()} for w in want]
        for s, (got, ref) in enumerate(zip(_grads_back(data), want)):
            for name, g in ref.items():
                if got.get(name) is None or not torch.allclose(got[name], g, rtol=1e-4,
                                                                atol=1e-7):
                    _fail(f"clip_pipeline_grads: stage {s}'s {name} is not what clipping the "
                          f"whole model to {max_norm:.4g} gives (stage norms {norms}). Hint: "
                          "the norm is the square root of the sum of every stage's squared "
                          "norm; scale all stages by the same factor.")
    print(f"clip_pipeline_grads: matches whole-model clipping on {len(cases)} drawn case(s) ✓")
    return True


#: what the grading sandbox may be asked to run on the student's functions
COLLECTORS = {
    "p2p-forward": _collect_p2p("forward"), "p2p-backward": _collect_p2p("backward"),
    "p2p-step": _collect_p2p("step"),
    "full-batch": _collect_full_batch(False), "full-batch-uneven": _collect_full_batch(True),
    "dp-average": _collect_dp_average, "global-clip": _collect_global_clip,
}
