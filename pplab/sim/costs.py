"""What an op costs: ``Costs`` (the numbers a slider moves) and the duration rule that turns
them into one op's time on its rank. The executors ask only ``duration(op)``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..ir import Op, Schedule


@dataclass(frozen=True)
class Costs:
    """Durations for one microbatch through one rank's worth of layers (L/P of them).

    ``tb`` is the full backward; a split backward runs I for ``tb - tw`` and W for ``tw``.
    ``tfb`` is an overlapped forward+backward pair (DualPipe), ``tf + tb`` unless given.
    ``comm`` is added between dependent ops on different ranks. ``fixed`` is a per-op
    overhead (kernel launches, optimizer-free bookkeeping) that does not shrink with smaller
    chunks — the reason more, smaller microbatches can be slower. ``stage_scale`` multiplies
    one stage's durations (imbalance, e.g. the embedding or LM head). ``msg`` is the rank's
    own CPU time per message an op receives from or sends to another rank (posting it,
    copying, completing it: gloo does this on the rank's cores), so an op whose neighbours
    sit on other ranks costs more than one with a neighbour on its own rank; ``comm`` is
    the time on the wire, which costs the rank nothing.
    """
    tf: float = 1.0
    tb: float = 2.0
    tw: float = 0.0
    tfb: float | None = None
    comm: float = 0.0
    fixed: float = 0.0
    stage_scale: Sequence[float] | None = None
    msg: float = 0.0

    def __post_init__(self):
        for name in ("tf", "tb", "tw", "comm", "fixed", "msg"):
            if getattr(self, name) < 0:
                raise ValueError(f"cost {name} must be ≥ 0, got {getattr(self, name)}")
        if self.tw > self.tb:
            raise ValueError(f"tw (weight-grad part) cannot exceed tb (full backward): "
                             f"tw={self.tw}, tb={self.tb}")
        if self.tfb is not None and self.tfb < 0:
            raise ValueError(f"cost tfb must be ≥ 0, got {self.tfb}")

    @property
    def overlapped(self) -> float:
        return self.tf + self.tb if self.tfb is None else self.tfb

    def base(self, kind: str) -> float:
        return {"F": self.tf, "B": self.tb, "I": self.tb - self.tw, "W": self.tw,
                "FB": self.overlapped}[kind]

    def duration(self, schedule: Schedule, op: Op) -> float:
        return self.duration_fn(schedule)(op)

    def duration_fn(self, schedule: Schedule) -> Callable[[Op], float]:
        """``duration(op)`` for this schedule, with the per-stage scales and per-kind bases
        worked out once (the simulator asks for every op)."""
        frac = [schedule.chunk_fraction(s) for s in range(schedule.num_stages)]
        bases = {k: self.base(k) for k in ("F", "B", "I", "W", "FB")}
        stage_scale, fixed = self.stage_scale, self.fixed
        messages = messages_per_op(schedule) if self.msg else None

        def duration(op: Op) -> float:
            stage = op.parts[-1].stage if op.kind == "FB" else op.stage
            scale = frac[stage]
            if stage_scale is not None:
                if op.kind == "FB":
                    scale *= max(stage_scale[a.stage] for a in op.parts)
                else:
                    scale *= stage_scale[stage]
            extra = fixed
            if self.msg:
                extra += self.msg * op_messages(op, messages)
            return bases[op.kind] * scale + extra
        return duration


def op_messages(op: Op, messages: list[int]) -> int:
    """Cross-rank messages one op receives and sends (``messages``: ``messages_per_op``);
    an overlapped pair counts both halves, a W none."""
    return sum(messages[a.stage] for a in op.parts if a.kind != "W")


def messages_per_op(schedule: Schedule) -> list[int]:
    """Per stage: how many messages its F (and likewise its B or I) receives and sends across
    ranks: one for each neighbouring stage placed on another rank. A W sends nothing."""
    first, last = schedule._stage_ends
    place = schedule.stage_to_rank
    out = []
    for s in range(schedule.num_stages):
        up = None if first[s] else schedule.input_key(s, "F", 0)[0]
        down = None if last[s] else schedule.input_key(s, "B", 0)[0]
        out.append(sum(n is not None and place[n] != place[s] for n in (up, down)))
    return out
