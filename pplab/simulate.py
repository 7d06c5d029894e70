"""Discrete-event simulation: every rank runs its list in order, each op as soon as its inputs
are ready. The validator runs the same executor, so "validates" and "simulates" never disagree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from .ir import Action, Op, Schedule
from .timeline import Event, Timeline


class DeadlockError(ValueError):
    """Ranks wait on each other in a cycle; the message walks the cycle in plain words."""


@dataclass(frozen=True)
class Costs:
    """Durations for one microbatch through one rank's worth of layers (L/P of them).

    ``tb`` is the full backward; a split backward runs I for ``tb - tw`` and W for ``tw``.
    ``tfb`` is an overlapped forward+backward pair (DualPipe), ``tf + tb`` unless given.
    ``comm`` is added between dependent ops on different ranks. ``fixed`` is a per-op
    overhead (kernel launches, optimizer-free bookkeeping) that does not shrink with smaller
    chunks — the reason more, smaller microbatches can be slower. ``stage_scale`` multiplies
    one stage's durations (imbalance, e.g. the embedding or LM head).
    """
    tf: float = 1.0
    tb: float = 2.0
    tw: float = 0.0
    tfb: float | None = None
    comm: float = 0.0
    fixed: float = 0.0
    stage_scale: Sequence[float] | None = None

    def __post_init__(self):
        for name in ("tf", "tb", "tw", "comm", "fixed"):
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
        stage = op.parts[-1].stage if op.kind == "FB" else op.stage
        scale = schedule.chunk_fraction(stage)
        if self.stage_scale is not None:
            if op.kind == "FB":
                scale *= max(self.stage_scale[a.stage] for a in op.parts)
            else:
                scale *= self.stage_scale[stage]
        return self.base(op.kind) * scale + self.fixed


def dependencies(schedule: Schedule, action: Action, backward_kind: dict) -> list[Action]:
    """What must have finished before ``action`` can start."""
    s, mb = action.stage, action.microbatch
    if action.kind == "F":
        return [] if schedule.is_first(s) else [Action(s - 1, "F", mb)]
    if action.kind == "W":
        return [Action(s, "I", mb)]
    deps = [Action(s, "F", mb)]
    if not schedule.is_last(s):
        nxt = s + 1
        deps.append(Action(nxt, backward_kind.get((nxt, mb), "B"), mb))
    return deps


def _backward_kinds(schedule: Schedule) -> dict:
    kinds = {}
    for _, _, op in schedule.actions():
        for a in op.parts:
            if a.kind in ("B", "I"):
                kinds[(a.stage, a.microbatch)] = a.kind
    return kinds


def execute(schedule: Schedule, duration: Callable[[Op], float],
            comm: float = 0.0) -> list[Event]:
    """Run every rank's list in order; return events. Raises DeadlockError if stuck.

    An op starts when its rank is free and all its dependencies have finished (plus
    ``comm`` for a dependency produced on another rank). Each rank is re-tried only when
    something it waits on finishes, so the cost is linear in the number of ops.
    """
    bkinds = _backward_kinds(schedule)
    owner = schedule.owners()                    # action -> (rank, step) that runs it
    done: dict[Action, tuple[float, int]] = {}   # action -> (end time, rank)
    pointer = [0] * schedule.P
    free_at = [0.0] * schedule.P
    waiting: dict[Action, list[int]] = {}
    events: list[Event] = []
    todo = list(range(schedule.P))
    while todo:
        rank = todo.pop()
        ops = schedule.ranks[rank]
        while pointer[rank] < len(ops):
            op = ops[pointer[rank]]
            ready, blocked = free_at[rank], None
            inner = set(op.parts)
            for a in op.parts:
                for dep in dependencies(schedule, a, bkinds):
                    if dep in inner:
                        continue
                    if dep not in done:
                        blocked = dep
                        break
                    end, dep_rank = done[dep]
                    ready = max(ready, end + (comm if dep_rank != rank else 0.0))
                if blocked:
                    break
            if blocked is not None:
                if blocked not in owner:
                    raise ValueError(f"rank {rank} step {pointer[rank]}: {op} needs {blocked}, "
                                     "which no rank runs")
                waiting.setdefault(blocked, []).append(rank)
                break
            end = ready + duration(op)
            events.append(Event(rank, op, ready, end))
            free_at[rank] = end
            pointer[rank] += 1
            for a in op.parts:
                done[a] = (end, rank)
                todo.extend(waiting.pop(a, ()))
    stuck = [r for r in range(schedule.P) if pointer[r] < len(schedule.ranks[r])]
    if stuck:
        raise DeadlockError(_describe_deadlock(schedule, pointer, owner, bkinds, stuck))
    return events


def _describe_deadlock(schedule, pointer, owner, bkinds, stuck) -> str:
    """Follow 'waits on' links from the first stuck rank until they loop."""
    def head_wait(rank):
        op = schedule.ranks[rank][pointer[rank]]
        inner = set(op.parts)
        for a in op.parts:
            for dep in dependencies(schedule, a, bkinds):
                if dep not in inner and owner.get(dep) is not None:
                    dr, ds = owner[dep]
                    if ds >= pointer[dr]:
                        return op, dep, dr, ds
        return op, None, None, None

    seen, rank, lines = [], stuck[0], []
    while rank not in seen and rank is not None:
        seen.append(rank)
        op, dep, dr, ds = head_wait(rank)
        if dep is None:
            break
        blocker = schedule.ranks[dr][pointer[dr]]
        if dr == rank:
            lines.append(f"rank {rank} step {pointer[rank]}: {op} needs {dep}, which this same "
                         f"rank runs later, at step {ds}")
            break
        lines.append(f"rank {rank} step {pointer[rank]}: {op} needs {dep}, which rank {dr} runs "
                     f"only after waiting on {blocker}")
        rank = dr
    return "; ".join(lines) + " — deadlock"


def simulate(schedule: Schedule, costs: Costs | None = None, **cost_kw) -> Timeline:
    """Simulate ``schedule`` under ``costs`` (or keyword costs, e.g. ``tf=1, tb=2``)."""
    if costs is None:
        costs = Costs(**cost_kw)
    elif cost_kw:
        raise TypeError("pass either a Costs object or keyword costs, not both")
    if costs.stage_scale is not None and len(costs.stage_scale) != schedule.num_stages:
        raise ValueError(f"stage_scale has {len(costs.stage_scale)} entries but the schedule has "
                         f"{schedule.num_stages} stages")
    events = execute(schedule, lambda op: costs.duration(schedule, op), costs.comm)
    return Timeline(schedule.P, events, "simulated", schedule,
                    {"schedule": schedule.name, "P": schedule.P, "M": schedule.M,
                     "V": schedule.V, "costs": _costs_dict(costs)})


def _costs_dict(c: Costs) -> dict:
    return {"tf": c.tf, "tb": c.tb, "tw": c.tw, "tfb": c.overlapped, "comm": c.comm,
            "fixed": c.fixed}
