"""DualPipe trains two copies of the model: after the step, both copies of a layer get the sum
of the two copies' gradients, so the copies stay bit-identical."""
from __future__ import annotations

import torch
import torch.distributed as dist

from ..ir import Schedule


def sum_copy_grads(s: Schedule, rank: int, params: dict, watchdog) -> None:
    """``params``: stage → its parameters on this rank. A no-op for one copy."""
    if s.copies == 1:
        return
    mine = {}
    for st, ps in params.items():
        for p in ps:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        mine[st] = torch.cat([p.grad.reshape(-1) for p in ps])
    bufs, works = _exchange(s, rank, mine)
    with watchdog.watching("while exchanging DualPipe copy gradients"):
        for w in works:
            w.wait()
    for st, ps in params.items():
        total = None
        for c in range(s.copies):          # same order on both ranks: identical sums
            other = c * s.stages_per_copy + s.position(st)
            t = mine[st] if other == st else bufs[(st, other)]
            total = t.clone() if total is None else total + t
        off = 0
        for p in ps:
            p.grad.copy_(total[off:off + p.numel()].view_as(p))
            off += p.numel()


def _exchange(s: Schedule, rank: int, mine: dict) -> tuple[dict, list]:
    """Post every copy-gradient send and receive. By layer position, so two ranks sharing
    several positions agree on the order; per pair the lower rank sends first and the higher
    receives first, so an in-order transport (NCCL) finds each send's receive at the head of
    the peer's queue."""
    base = 2 * s.num_stages * s.microbatches_per_copy + 2    # above every pipeline tag
    bufs, works = {}, []
    for st in sorted(mine, key=s.position):
        for c in range(s.copies):
            other = c * s.stages_per_copy + s.position(st)
            if other == st:
                continue
            dst = s.stage_to_rank[other]
            if dst == rank:
                bufs[(st, other)] = mine[other]
                continue
            buf = bufs[(st, other)] = torch.empty_like(mine[st])
            send_first = rank < dst
            for sending in (send_first, not send_first):
                works.append(dist.isend(mine[st], dst=dst, tag=base + st) if sending
                             else dist.irecv(buf, src=dst, tag=base + other))
    return bufs, works
