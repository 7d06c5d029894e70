"""Everything a run does on purpose wrong, kept out of the worker's loop: injected faults
(tests of failure reporting) and the negative controls that must fail the gradient check."""
from __future__ import annotations

import os
import signal

from ..ir import Comm, Item


class Controls:
    """``fault``: {"rank", "op", "step", "kind": "raise"|"kill"}; ``control``: "seed" (the
    reference uses another seed), "drop" (the last microbatch's loss counts 0) or "misorder"
    (one receive posted before an earlier one from the same peer)."""

    def __init__(self, rank: int, fault: dict | None, control: str | None):
        self.rank, self.fault, self.control = rank, fault or {}, control

    def before_op(self, step_no: int, idx: int, op) -> None:
        f = self.fault
        if not f or int(f.get("rank", -1)) != self.rank or int(f.get("op", 0)) != idx \
                or int(f.get("step", 0)) != step_no:
            return
        if f.get("kind") == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"injected fault on rank {self.rank} at step {idx} ({op})")

    def loss_scale(self, global_mb: int, M: int) -> float:
        return 0.0 if self.control == "drop" and global_mb == M - 1 else 1.0 / M

    def reference_seed(self, seed: int) -> int:
        return seed + (1 if self.control == "seed" else 0)

    def program(self, row: list[Item], peer_of) -> list[Item]:
        """The lowered list to run: with "misorder", this rank's second receive from a peer
        moves just before its first. Both are posted in time, but an in-order transport
        matches by order, so each buffer gets the other microbatch's tensor."""
        if self.control != "misorder":
            return row
        row = list(row)
        first = {}
        for i, x in enumerate(row):
            if not isinstance(x, Comm) or x.is_send:
                continue
            peer = peer_of(x)
            if peer not in first:
                first[peer] = i
                continue
            row.insert(first[peer], row.pop(i))
            return row
        return row
