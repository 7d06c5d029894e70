"""FSDP2 inside a pipeline stage: how often the stage's parameters are all-gathered and its
gradients reduce-scattered per step, and what keeping them gathered costs — the trade-off
behind ``reshard_after_forward``."""
from __future__ import annotations

from ..registry import make_schedule


def fsdp_pp_collectives(schedule: str, P: int, M: int, rank: int = 0,
                        reshard_after_forward: bool = True,
                        torch_pipelining: bool = True) -> tuple[int, int]:
    """(all-gathers, reduce-scatters) of one FSDP2-sharded block of ``rank``'s stage per step.

    ``torch_pipelining``: what ``torch.distributed.pipelining``'s stage does — every backward
    but the step's last runs with ``reshard_after_backward`` and gradient sync off, and one
    reduce-scatter follows the last backward. A forward then gathers only when the parameters
    were freed (at the start, or after a forward under ``reshard_after_forward=True``); a
    backward gathers only after such a forward. 1F1B: M + 1 gathers (1 with
    ``reshard_after_forward=False``) and one reduce-scatter.

    Otherwise: a hand-written accumulation loop with FSDP2's defaults, which reshards after
    every forward and backward and reduce-scatters every backward: 2·M and M on 1F1B.
    """
    ops = [a.kind for op in make_schedule(schedule, P, M).ranks[rank] for a in op.parts]
    if not torch_pipelining:
        gathers = sum(k in "FBI" for k in ops) if reshard_after_forward else 1
        return gathers, sum(k in "BI" for k in ops)
    gathers, sharded = 0, True
    for k in ops:
        if k in "FBI":               # W needs activations and gradients, not the weights
            gathers += sharded
            sharded = k == "F" and reshard_after_forward
    return gathers, 1


def fsdp_pp_gathers(schedule: str, P: int, M: int, rank: int = 0,
                    reshard_after_forward: bool = True, torch_pipelining: bool = True) -> int:
    """All-gathers of one block's parameters per step on ``rank`` (``fsdp_pp_collectives``)."""
    return fsdp_pp_collectives(schedule, P, M, rank, reshard_after_forward, torch_pipelining)[0]


def fsdp_pp_traffic(stage_param_bytes: float, dp: int, gathers: int) -> float:
    """Bytes each GPU receives for those all-gathers (ring: (dp−1)/dp of the full size each)."""
    return gathers * stage_param_bytes * (dp - 1) / dp
