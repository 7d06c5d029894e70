"""Checkpoints that reshard: one file per stage, full-model parameter names, optimizer state.

A checkpoint is a directory holding ``meta.json`` and ``stage-{i}-of-{n}.pt`` files. Each file
maps full-model parameter names (``layers.5.mlp.fc1.weight``) to tensors, plus the optimizer
state of those parameters by the same names. Loading merges every file of the directory, so a
run with a different P (4 → 2 → 1 and back) picks exactly the parameters its stages hold.
"""
from __future__ import annotations

import glob
import json
import os
from typing import Iterable, Mapping

import torch

META = "meta.json"


def _files(directory: str) -> list[str]:
    return sorted(glob.glob(os.path.join(directory, "stage-*-of-*.pt")))


def clear_checkpoint(directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    for path in _files(directory) + [os.path.join(directory, META)]:
        if os.path.exists(path):
            os.remove(path)


def optimizer_state_by_name(named_params: Mapping[str, torch.nn.Parameter],
                            optimizer: torch.optim.Optimizer | None) -> dict:
    if optimizer is None:
        return {}
    out = {}
    for name, p in named_params.items():
        st = optimizer.state.get(p)
        if st:
            out[name] = {k: (v.detach().cpu().clone() if torch.is_tensor(v) else v)
                         for k, v in st.items()}
    return out


def save_stage(directory: str, index: int, count: int,
               named_params: Mapping[str, torch.nn.Parameter],
               optimizer: torch.optim.Optimizer | None) -> str:
    """Write one stage's parameters (by full-model name) and their optimizer state."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"stage-{index:03d}-of-{count:03d}.pt")
    torch.save({"params": {n: p.detach().cpu().clone() for n, p in named_params.items()},
                "optim": optimizer_state_by_name(named_params, optimizer)}, path)
    return path


def write_meta(directory: str, meta: dict) -> None:
    with open(os.path.join(directory, META), "w") as f:
        json.dump(meta, f, indent=1)


def read_checkpoint(directory: str) -> tuple[dict, dict, dict]:
    """(params by name, optimizer state by name, meta) merged over every stage file."""
    files = _files(directory)
    if not files:
        raise ValueError(f"no checkpoint in {directory!r}: expected stage-*-of-*.pt files")
    counts = {os.path.basename(f).rsplit("-of-", 1)[1] for f in files}
    if len(counts) != 1:
        raise ValueError(f"checkpoint {directory!r} mixes stage files of different splits "
                         f"({sorted(counts)}); save into an empty directory")
    params, optim = {}, {}
    for f in files:
        d = torch.load(f, map_location="cpu", weights_only=False)
        params.update(d["params"])
        optim.update(d["optim"])
    meta = {}
    mp = os.path.join(directory, META)
    if os.path.exists(mp):
        with open(mp) as fh:
            meta = json.load(fh)
    return params, optim, meta


def check_matches(expected: Iterable[tuple[str, torch.Size]], params: Mapping[str, torch.Tensor],
                  directory: str = "") -> None:
    """ValueError naming the first parameter whose name or shape differs."""
    expected = list(expected)
    names = {n for n, _ in expected}
    for name, shape in expected:
        if name not in params:
            raise ValueError(f"checkpoint {directory} does not match the model: parameter "
                             f"{name!r} (shape {list(shape)}) is missing from it")
        if tuple(params[name].shape) != tuple(shape):
            raise ValueError(f"checkpoint {directory} does not match the model: first "
                             f"mismatching parameter {name!r} has shape "
                             f"{list(params[name].shape)} in the checkpoint but {list(shape)} "
                             "in the model")
    extra = [n for n in params if n not in names]
    if extra:
        raise ValueError(f"checkpoint {directory} does not match the model: it has parameter "
                         f"{extra[0]!r}, which the model does not")


def load_into(named_params: Mapping[str, torch.nn.Parameter], params: Mapping[str, torch.Tensor],
              optim: Mapping[str, dict], optimizer: torch.optim.Optimizer | None) -> None:
    """Copy the named tensors in place and restore the optimizer state by name."""
    with torch.no_grad():
        for name, p in named_params.items():
            p.copy_(params[name].to(p.device, p.dtype))
    if optimizer is not None:
        for name, p in named_params.items():
            if name in optim:
                optimizer.state[p] = {k: (v.to(p.device).clone() if torch.is_tensor(v)
                                          and v.dim() > 0 else (v.clone() if torch.is_tensor(v)
                                                                else v))
                                      for k, v in optim[name].items()}


def save_checkpoint(directory: str, modules, optimizer=None, meta: dict | None = None) -> None:
    """Single-process convenience: save a list of stage modules (or one full model)."""
    clear_checkpoint(directory)
    modules = list(modules) if isinstance(modules, (list, tuple)) else [modules]
    for i, m in enumerate(modules):
        save_stage(directory, i, len(modules), dict(m.named_parameters()), optimizer)
    write_meta(directory, dict(meta or {}))


def load_checkpoint(directory: str, modules, optimizer=None, expected=None) -> dict:
    """Single-process convenience: load into a list of stage modules (or one full model).

    ``expected`` lists (name, shape) of the whole model for the mismatch check; by default
    the modules' own parameters are checked (and must all be present). Returns the meta.
    """
    params, optim, meta = read_checkpoint(directory)
    modules = list(modules) if isinstance(modules, (list, tuple)) else [modules]
    named = {n: p for m in modules for n, p in m.named_parameters()}
    if expected is None:
        for n, p in named.items():
            check_matches([(n, p.shape)], {n: params[n]} if n in params else {}, directory)
    else:
        check_matches(expected, params, directory)
    load_into(named, params, optim, optimizer)
    return meta


def load_rank(runner, directory: str) -> None:
    """A pipeline rank's stages (every model copy) and its reference model, if it keeps one,
    from ``directory``; the step count goes on from the saved one. ``runner``: a
    ``worker.RankRunner``."""
    params, optim, meta = read_checkpoint(directory)
    check_matches([(n, p.shape) for n, p in runner.full.named_parameters()], params, directory)
    for st in runner.stages:   # every copy loads the same weights
        load_into(dict(runner.modules[st].named_parameters()), params, optim, runner.opt)
    if runner.ref is not None:
        load_into(dict(runner.ref.named_parameters()), params, optim, runner.ref_opt)
    runner.start_step = int(meta.get("step", 0))


def save_rank(runner, directory: str) -> None:
    """Every rank writes its copy-0 stages; rank 0 clears the folder first and writes the
    meta last (barriers between), so a reader never sees a half-written checkpoint."""
    import torch.distributed as dist
    s = runner.sched
    if runner.rank == 0:
        clear_checkpoint(directory)
    dist.barrier()
    for st in runner.stages:
        if s.copy_of(st) == 0:
            save_stage(directory, s.position(st), s.stages_per_copy,
                       dict(runner.modules[st].named_parameters()), runner.opt)
    dist.barrier()
    if runner.rank == 0:
        write_meta(directory, {"model": runner.cfg.model.to_dict(), "seed": runner.cfg.seed,
                               "step": runner.start_step + runner.steps_done,
                               "optimizer": runner.cfg.optimizer,
                               "saved_with": {"schedule": s.name, "P": s.P, "V": s.V}})
