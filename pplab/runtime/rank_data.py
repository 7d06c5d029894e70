"""Tensors as plain data between the trusted grader and the ranks of a graded real-code
exercise, and the strict reading of what the ranks report.

The trusted side builds each rank's inputs (its stage's parameters, its share of the batch)
with :func:`tensor_data`; a rank reports its gradients the same way. :func:`read_results`
runs on the trusted side: it accepts exactly the results it asked for (how many ranks and
cases, which parameters, their shapes and dtype) and raises :class:`ResultError` with one
line on anything else, before any comparison, so a short, missing or odd result fails
closed instead of passing a loop over nothing.
"""
from __future__ import annotations

import math

import torch

DTYPE = "torch.float32"


class ResultError(AssertionError):
    """What the ranks reported is not what the grader asked for: the task scores 0."""


def tensor_data(t: torch.Tensor | None) -> dict | None:
    """A tensor as JSON-able data (shape, dtype, flat values); None stays None."""
    if t is None:
        return None
    t = t.detach().cpu()
    return {"shape": list(t.shape), "dtype": str(t.dtype), "data": t.reshape(-1).tolist()}


def tensor_from(d: dict) -> torch.Tensor:
    """The grader's own data back as a float32 tensor (inputs the trusted side wrote)."""
    return torch.tensor(d["data"], dtype=torch.float32).reshape(d["shape"])


def _fail(where: str, what: str):
    raise ResultError(f"{where}: {what}; the grader asked for something else, so the task "
                      "scores 0")


def _exact_list(value, n: int, where: str, what: str) -> list:
    if type(value) is not list:
        _fail(where, f"{what} is a {type(value).__name__}, not a list")
    if len(value) != n:
        _fail(where, f"{len(value)} {what} instead of {n}")
    return value


def _read_tensor(value, shape: list[int], where: str) -> torch.Tensor | None:
    """A reported gradient: None, or exactly ``shape`` of float32 numbers."""
    if value is None:
        return None
    if type(value) is not dict or set(value) != {"shape", "dtype", "data"}:
        _fail(where, "a gradient is not shape, dtype and data")
    if value["shape"] != list(shape) or value["dtype"] != DTYPE:
        _fail(where, f"a gradient is {value['shape']} {value['dtype']}, expected "
                     f"{list(shape)} {DTYPE}")
    data = _exact_list(value["data"], math.prod(shape), where, "gradient values")
    if not all(type(v) is float for v in data):
        _fail(where, "a gradient holds something that is not a float")
    return torch.tensor(data, dtype=torch.float32).reshape(shape)


def _read_loss(value, wanted: bool, where: str) -> float | None:
    if not wanted:
        if value is not None:
            _fail(where, "a loss came from a rank that has none")
        return None
    if type(value) is not float:
        _fail(where, f"the loss is a {type(value).__name__}, not a float")
    return value


def _read_case(value, want: dict, where: str) -> dict:
    if type(value) is not dict or set(value) != {"loss", "modules"}:
        _fail(where, "a case's result is not a loss and its modules")
    modules = _exact_list(value["modules"], len(want["modules"]), where, "modules")
    grads = []
    for m, (got, names) in enumerate(zip(modules, want["modules"])):
        if type(got) is not dict or set(got) != set(names):
            _fail(f"{where}, module {m}", "the parameters reported are not the stage's")
        grads.append({n: _read_tensor(got[n], shape, f"{where}, module {m}, {n}")
                      for n, shape in names.items()})
    return {"loss": _read_loss(value["loss"], want["loss"], where), "grads": grads}


def read_results(raw, expected: list[list[dict]]) -> list[list[dict]]:
    """Per case, per rank: ``{"loss": float | None, "grads": [{name: tensor | None}]}``.

    ``expected[rank][case]`` says what that rank must report for that case: ``{"loss":
    bool, "modules": [{name: shape}]}``. Anything else raises :class:`ResultError`."""
    ranks = _exact_list(raw, len(expected), "the results", "ranks")
    per_rank = []
    for r, (got, want) in enumerate(zip(ranks, expected)):
        if type(got) is not dict or set(got) != {"cases"}:
            _fail(f"rank {r}", "its report is not a list of cases")
        cases = _exact_list(got["cases"], len(want), f"rank {r}", "cases")
        per_rank.append([_read_case(c, w, f"rank {r}, case {i}")
                         for i, (c, w) in enumerate(zip(cases, want))])
    return [list(case) for case in zip(*per_rank)]
