"""Timeline: what ran where and when. The simulator and the real runtime both return one.

Keeping a single type is the point of the course: a measured run and a simulated run of the
same schedule can be compared number for number and drawn one over the other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .ir import Op, Schedule, parse_op


@dataclass(frozen=True)
class Event:
    rank: int
    op: Op
    start: float
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start

    def to_dict(self) -> dict:
        return {"rank": self.rank, "action": str(self.op), "start": self.start, "end": self.end}


def inflight_profile(ops: Iterable[Op], weights: dict[int, float] | None = None) -> list[float]:
    """Activations alive after each op of one rank's run order.

    A forward leaves its activations behind until the backward that consumes them has finished
    (``B``, or ``W`` when the backward is split into ``I`` then ``W``). ``weights`` maps a
    stage to how much one of its activations counts (default 1 per microbatch-chunk).
    """
    alive: set = set()
    level, profile = 0.0, []
    for op in ops:
        for a in op.parts:
            w = 1.0 if weights is None else weights[a.stage]
            key = (a.stage, a.microbatch)
            if a.kind == "F":
                alive.add(key)
                level += w
                profile.append(level)
            elif a.kind in ("B", "W") and key in alive:
                alive.discard(key)
                level -= w
        profile.append(level)
    return profile


def peak_inflight(schedule: Schedule, stage_equivalents: bool = False) -> list[float]:
    """Per-rank peak of microbatch activations held at once, read off the run order.

    With ``stage_equivalents`` each chunk counts by its share of the rank's layers (1/V for an
    interleaved chunk), which is what activation memory is proportional to.
    """
    weights = None
    if stage_equivalents:
        weights = {s: schedule.chunk_fraction(s) for s in range(schedule.num_stages)}
    peaks = []
    for ops in schedule.ranks:
        prof = inflight_profile(ops, weights)
        peak = max(prof, default=0.0)
        peaks.append(peak if stage_equivalents else int(round(peak)))
    return peaks


@dataclass
class Timeline:
    """Events per rank plus the metrics the course talks about.

    ``bubble_fraction`` is idle ÷ (P × makespan): the share of all rank-time spent waiting
    (GPipe paper's denominator). ``bubble_ratio`` is idle ÷ busy: the extra time relative to
    the ideal, perfectly packed run (Megatron-LM's denominator). Same idle time, two
    denominators: (P−1)/(M+P−1) and (P−1)/M for GPipe.
    """
    num_ranks: int
    events: list[Event]
    source: str = "simulated"
    schedule: Schedule | None = None
    meta: dict = field(default_factory=dict)

    # ---- metrics -------------------------------------------------------------------------
    @property
    def start(self) -> float:
        return min((e.start for e in self.events), default=0.0)

    @property
    def makespan(self) -> float:
        if not self.events:
            return 0.0
        return max(e.end for e in self.events) - self.start

    def rank_events(self, rank: int) -> list[Event]:
        return sorted((e for e in self.events if e.rank == rank), key=lambda e: (e.start, e.end))

    @property
    def busy(self) -> list[float]:
        busy = [0.0] * self.num_ranks
        for e in self.events:
            busy[e.rank] += e.duration
        return busy

    @property
    def idle(self) -> float:
        return self.num_ranks * self.makespan - sum(self.busy)

    @property
    def bubble_fraction(self) -> float:
        total = self.num_ranks * self.makespan
        return self.idle / total if total > 0 else 0.0

    @property
    def bubble_ratio(self) -> float:
        busy = sum(self.busy)
        return self.idle / busy if busy > 0 else 0.0

    @property
    def peak_inflight(self) -> list[int]:
        """Per-rank peak of activations alive, in the order the events actually ran."""
        return [int(round(max(inflight_profile(e.op for e in self.rank_events(r)), default=0)))
                for r in range(self.num_ranks)]

    def rank_order(self, rank: int) -> list[str]:
        return [str(e.op) for e in self.rank_events(rank)]

    def metrics(self) -> dict:
        return {"makespan": self.makespan, "bubble_fraction": self.bubble_fraction,
                "bubble_ratio": self.bubble_ratio, "busy": self.busy,
                "peak_inflight": self.peak_inflight}

    # ---- conversion ----------------------------------------------------------------------
    def shifted(self, offset: float) -> "Timeline":
        moved = [Event(e.rank, e.op, e.start + offset, e.end + offset) for e in self.events]
        return Timeline(self.num_ranks, moved, self.source, self.schedule, dict(self.meta))

    def to_dict(self) -> dict:
        t0 = self.start
        return {"source": self.source, "num_ranks": self.num_ranks, **self.metrics(),
                "ranks": [self.rank_order(r) for r in range(self.num_ranks)],
                "events": [dict(e.to_dict(), start=e.start - t0, end=e.end - t0)
                           for e in sorted(self.events, key=lambda e: (e.start, e.rank))],
                "meta": self.meta}

    @classmethod
    def from_dict(cls, d: dict, schedule: Schedule | None = None) -> "Timeline":
        events = [Event(int(e["rank"]), parse_op(e["action"]), float(e["start"]), float(e["end"]))
                  for e in d["events"]]
        return cls(int(d["num_ranks"]), events, d.get("source", "measured"), schedule,
                   dict(d.get("meta", {})))
