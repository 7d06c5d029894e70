"""What torch's own ScheduleInterleaved1F1B decides at construction, read in one process
(lesson 05): the order of one rank's actions with its sends and receives, and whether it
takes M microbatches on P ranks.

torch's ``fake`` process-group backend lets one process stand as any rank of a P-rank group
without talking to the others; building the schedule needs no communication, so the order
is torch's own, computed by the pinned torch's ``_add_send_recv`` (and, with
``defer_pp_recv=True``, its ``_defer_recv_ops``).
"""
from __future__ import annotations


def torch_interleaved_order(P: int, M: int, V: int = 2, rank: int = 1,
                            defer_pp_recv: bool = False) -> list[str]:
    """Rank ``rank``'s actions in torch's ScheduleInterleaved1F1B, communication included
    (``1RECV_F0`` = stage 1 receives microbatch 0's activation). Raises torch's ValueError
    when it refuses M."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from ..registry import make_schedule
    from .model import TinyConfig, build_stage_modules
    place = make_schedule("interleaved", P, P, V)             # torch's looped placement
    mine = place.stages_of_rank(rank)
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=P)
    try:
        mods = build_stage_modules(place, TinyConfig(), 0, mine)
        stages = [PipelineStage(mods[s], s, place.num_stages, torch.device("cpu"))
                  for s in mine]
        pipe = S.ScheduleInterleaved1F1B(stages, n_microbatches=M,
                                         loss_fn=lambda out, target: out.sum(),
                                         defer_pp_recv=defer_pp_recv)
        return [str(a) for a in pipe.pipeline_order_with_comms[rank]
                if a is not None and "SHARD" not in str(a)]
    finally:
        dist.destroy_process_group()


def torch_takes(P: int, M: int, V: int = 2) -> str:
    """'runs' if torch's ScheduleInterleaved1F1B takes M microbatches on P ranks, else its
    refusal, in one line."""
    try:
        torch_interleaved_order(P, M, V, rank=0)
    except ValueError as e:
        return " ".join(str(e).split())
    return "runs"
