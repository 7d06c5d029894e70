"""FSDP2 inside a pipeline stage: how often the stage's parameters are all-gathered per step,
and what keeping them gathered costs — the trade-off behind ``reshard_after_forward``."""
from __future__ import annotations

from ..registry import make_schedule


def fsdp_pp_gathers(schedule: str, P: int, M: int, rank: int = 0,
                    reshard_after_forward: bool = True) -> int:
    """All-gathers of one stage's parameters per step on ``rank``.

    Resharding after every forward frees the full parameters between actions, so each forward
    and each backward of each microbatch gathers them again (2·M on a 1F1B rank). Without
    resharding the first forward gathers them and they stay until the step's last backward.
    """
    if not reshard_after_forward:
        return 1
    sched = make_schedule(schedule, P, M)
    return sum(1 for op in sched.ranks[rank] for a in op.parts if a.kind in "FBI")


def fsdp_pp_traffic(stage_param_bytes: float, dp: int, gathers: int) -> float:
    """Bytes each GPU receives for those all-gathers (ring: (dp−1)/dp of the full size each)."""
    return gathers * stage_param_bytes * (dp - 1) / dp
