"""interleaved-zb is PyTorch's ScheduleInterleavedZeroBubble, action for action."""
from types import SimpleNamespace

import pytest

from pplab import make_schedule

torch_schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
KIND = {"FORWARD": "F", "BACKWARD_INPUT": "I", "BACKWARD_WEIGHT": "W"}


def torch_order(P: int, M: int, V: int) -> list[list[str]]:
    """Torch's per-rank order (its timing gaps dropped), computed without any process group."""
    cls = torch_schedules.ScheduleInterleavedZeroBubble
    rounds = max(1, M // P)
    fake = SimpleNamespace(n_local_stages=V, pp_group_size=P,
                           microbatches_per_round=M // rounds, _n_microbatches=M)
    return [[f"{a.stage_index}{KIND[a.computation_type.name]}{a.microbatch_index}"
             for a in cls._calculate_single_rank_operations(fake, r) if a is not None]
            for r in range(P)]


def test_same_order_as_torch_everywhere():
    checked = 0
    for P in (1, 2, 3, 4, 8):
        for V in (1, 2, 3, 4):
            for M in range(1, 25):
                if M % max(1, M // P):
                    continue
                assert make_schedule("interleaved-zb", P, M, V).rank_texts() == \
                    torch_order(P, M, V), (P, M, V)
                checked += 1
    assert checked > 300
