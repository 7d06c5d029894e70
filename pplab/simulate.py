"""Discrete-event simulation: every rank runs its list in order, each op as soon as its inputs
are ready. The validator runs the same executor, so "validates" and "simulates" never disagree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from . import simulate_fast
from .ir import Action, Op, Schedule
from .timeline import Event, Timeline, run_events


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


#: the earlier part of its own stage that each kind waits for (a backward needs its forward)
OWN_PART = {"F": None, "B": "F", "I": "F", "W": "I"}


def dependency_keys(schedule: Schedule, stage: int, kind: str, microbatch: int) -> list[tuple]:
    """What must have finished before an action can start, as ``(stage, kind, microbatch)``:
    its own stage's earlier part (a backward needs its forward) and its input from a
    neighbouring stage (``Schedule.input_key``)."""
    own = OWN_PART[kind]
    deps = [(stage, own, microbatch)] if own else []
    src = schedule.input_key(stage, kind, microbatch)
    return deps + ([src] if src is not None else [])


def dependencies(schedule: Schedule, action: Action) -> list[Action]:
    """``dependency_keys`` as actions."""
    return [Action(*k) for k in dependency_keys(schedule, action.stage, action.kind,
                                                 action.microbatch)]


def _compile(schedule: Schedule):
    """The dependency graph with integers for actions, built once per schedule.

    Returns ``(steps, owned, missing)``: ``steps[rank][step] = (part ids, dependency ids)``
    (a dependency inside the same overlapped pair is left out); ids below ``owned`` are
    actions some rank runs, ids from ``owned`` on are dependencies nobody runs (``missing``
    lists those actions, for the error message). Integer look-ups instead of hashing
    actions make the simulator several times faster, which a slider redraw needs.
    """
    keys = [[[(a.stage, a.kind, a.microbatch) for a in op.parts] for op in ops]
            for ops in schedule.ranks]
    ids: dict[tuple, int] = {}
    for row in keys:
        for mine in row:
            for k in mine:
                ids.setdefault(k, len(ids))
    owned, missing, steps = len(ids), [], []
    for row in keys:
        out = []
        for mine in row:
            deps = []
            for k in mine:
                for dep in dependency_keys(schedule, *k):
                    i = ids.get(dep)
                    if i is None:
                        i = ids[dep] = len(ids)
                        missing.append(Action(*dep))
                    if dep not in mine:           # not the other half of an overlapped pair
                        deps.append(i)
            out.append((tuple(ids[k] for k in mine), tuple(deps)))
        steps.append(out)
    return steps, owned, missing


#: which executor ``execute`` and ``simulate`` use: "auto" (the fast one wherever it gives
#: the reference's answer, else the reference), "fast" (same, named) or "reference"
EXECUTORS = ("auto", "fast", "reference")


def execute(schedule: Schedule, duration: Callable[[Op], float], comm: float = 0.0,
            executor: str = "auto", by_class: bool = False) -> list[Event]:
    """Run every rank's list in order; return events. Raises DeadlockError if stuck.

    An op starts when its rank is free and all its dependencies have finished (plus
    ``comm`` for a dependency produced on another rank). ``executor`` picks the
    implementation (``EXECUTORS``); the fast one (``pplab.simulate_fast``) returns the
    reference's events, in the same order, and hands every schedule it cannot take (errors
    included) back to the reference. ``by_class``: ``duration`` depends only on an op's kind
    and stages, so it may be asked once per (kind, stage).
    """
    run = _fast_run(schedule, duration, comm, executor, by_class)
    if run is not None:
        return run_events(run, schedule)
    return execute_reference(schedule, duration, comm)


def _fast_run(schedule: Schedule, duration, comm: float, executor: str, by_class: bool):
    """The fast executor's columns (``simulate_fast.Run``), or None where the reference
    answers: asked for by name, or a schedule the fast one steps aside from."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if executor == "reference":
        return None
    return simulate_fast.run(schedule, duration, comm, by_class)


def execute_reference(schedule: Schedule, duration: Callable[[Op], float],
                      comm: float = 0.0) -> list[Event]:
    """The reference executor, kept as the oracle the fast one is tested against.

    Each rank is re-tried only when something it waits on finishes, so the cost is linear
    in the number of ops.
    """
    steps, owned, missing = _compile(schedule)
    end_of: list[float | None] = [None] * (owned + len(missing))   # action id -> end time
    rank_of = [0] * owned                                          # action id -> its rank
    pointer = [0] * schedule.P
    free_at = [0.0] * schedule.P
    waiting: dict[int, list[int]] = {}
    events: list[Event] = []
    todo = list(range(schedule.P))
    while todo:
        rank = todo.pop()
        ops, row = schedule.ranks[rank], steps[rank]
        while pointer[rank] < len(ops):
            parts, deps = row[pointer[rank]]
            ready, blocked = free_at[rank], -1
            for d in deps:
                end = end_of[d]
                if end is None:
                    blocked = d
                    break
                if rank_of[d] != rank:
                    end += comm
                if end > ready:
                    ready = end
            if blocked >= 0:
                if blocked >= owned:
                    op = ops[pointer[rank]]
                    raise ValueError(f"rank {rank} step {pointer[rank]}: {op} needs "
                                     f"{missing[blocked - owned]}, which no rank runs")
                waiting.setdefault(blocked, []).append(rank)
                break
            op = ops[pointer[rank]]
            end = ready + duration(op)
            events.append(Event(rank, op, ready, end))
            free_at[rank] = end
            pointer[rank] += 1
            for a in parts:
                end_of[a], rank_of[a] = end, rank
                todo.extend(waiting.pop(a, ()))
    stuck = [r for r in range(schedule.P) if pointer[r] < len(schedule.ranks[r])]
    if stuck:
        raise DeadlockError(_describe_deadlock(schedule, pointer, schedule.owners(), stuck))
    return events


def _describe_deadlock(schedule, pointer, owner, stuck) -> str:
    """Follow 'waits on' links from the first stuck rank until they loop."""
    def head_wait(rank):
        op = schedule.ranks[rank][pointer[rank]]
        inner = set(op.parts)
        for a in op.parts:
            for dep in dependencies(schedule, a):
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


def simulate(schedule: Schedule, costs: Costs | None = None, *, executor: str = "auto",
             network=None, cores: float | None = None, **cost_kw) -> Timeline:
    """Simulate ``schedule`` under ``costs`` (or keyword costs, e.g. ``tf=1, tb=2``);
    ``executor`` as for :func:`execute` (every choice gives the same timeline).
    ``network``: a ``pplab.streams.Link``, to play the lowered lists with communication as
    its own stream instead (``costs.comm`` is then unused: the link's latency is the hop).
    ``cores``: the ranks share that many CPU cores (``pplab.contention``); None, the
    default, gives each rank its own. The two models are separate: give one or neither."""
    if costs is None:
        costs = Costs(**cost_kw)
    elif cost_kw:
        raise TypeError("pass either a Costs object or keyword costs, not both")
    if costs.stage_scale is not None and len(costs.stage_scale) != schedule.num_stages:
        raise ValueError(f"stage_scale has {len(costs.stage_scale)} entries but the schedule has "
                         f"{schedule.num_stages} stages")
    if network is not None:           # duck-typed: the stream model imports this module
        if cores is not None:
            raise ValueError("give either network= (communication streams) or cores= (shared "
                             "CPU cores), not both: the two models are not combined")
        return network.simulate(schedule, costs)
    meta = {"schedule": schedule.name, "P": schedule.P, "M": schedule.M, "V": schedule.V,
            "costs": _costs_dict(costs)}
    if cores is None:
        duration = costs.duration_fn(schedule)
        run = _fast_run(schedule, duration, costs.comm, executor, by_class=True)
        if run is not None:          # columns; the events are made when first read
            return Timeline.from_run(schedule, run, "simulated", meta)
        events = execute_reference(schedule, duration, costs.comm)
    else:
        events = _shared_cores(schedule, costs, cores)
    return Timeline(schedule.P, events, "simulated", schedule,
                    meta if cores is None else dict(meta, cores=cores))


def _shared_cores(schedule: Schedule, costs: Costs, cores: float) -> list[Event]:
    """The contention executor's events; the reference raises for a schedule it cannot run."""
    from . import contention
    duration = costs.duration_fn(schedule)
    events = contention.execute(schedule, duration, costs.comm,
                                contention.check_cores(cores), _compile(schedule))
    return events if events is not None else execute_reference(schedule, duration, costs.comm)


def _costs_dict(c: Costs) -> dict:
    d = {"tf": c.tf, "tb": c.tb, "tw": c.tw, "tfb": c.overlapped, "comm": c.comm,
         "fixed": c.fixed}
    if c.msg:
        d["msg"] = c.msg
    return d
