"""Ranks that share a few CPU cores: the simulator's optional contention model.

Why: a pipeline of P processes on a machine with C < P cores (a laptop, a 2-core CI box)
time-slices the cores, so an op runs faster while the other ranks idle than while they all
compute. Per-op costs cannot say that; the executor has to. The model is processor sharing:
while ``k`` ops compute at once, each progresses at rate ``min(1, C / k)``. A message's
latency (``comm``) and a rank waiting for its input use no core.

``execute`` runs the same rules as ``pplab.sim.reference.execute_reference`` (each rank's list in
order, an op as soon as its rank is free and its inputs have arrived), advancing a clock from
one start or finish to the next. It keeps ``lag``, the time the shared cores have cost so far
(wall time minus the work a lone op would have done): while every op runs at full speed the
lag does not move, so with ``C ≥ P`` the events are the reference's to the bit.

It reads the dependency graph ``pplab.sim.dependencies.compile_graph`` builds (passed in,
so this module does not import the simulator that dispatches to it) and returns ``None`` when
ranks are stuck (a deadlock, a missing producer): the caller then runs the reference, whose error
message names the cycle.
"""
from __future__ import annotations

import heapq
from ..ir import Schedule
from ..timeline import Event


def check_cores(cores) -> float:
    """``cores`` as a positive number; ValueError in one line otherwise."""
    if isinstance(cores, bool) or not isinstance(cores, (int, float)) or not cores > 0:
        raise ValueError(f"cores must be a positive number (the CPU cores the ranks share), "
                         f"got {cores!r}")
    return float(cores)


def execute(schedule: Schedule, durations: list[list[float]], comm: float, cores: float,
            compiled) -> list[Event] | None:
    """Events of ``schedule`` when its ranks share ``cores`` cores; None when ranks get stuck.

    ``durations[rank][step]`` is that op's time alone on a core; ``compiled`` is
    ``pplab.sim.dependencies.compile_graph(schedule)``.
    """
    steps, owned, missing = compiled
    P = schedule.P
    end_of: list[float | None] = [None] * (owned + len(missing))
    rank_of = [0] * owned
    pointer, free_at = [0] * P, [0.0] * P
    waiting: dict[int, list[int]] = {}
    pending: list[tuple[float, int]] = []           # (time its inputs are there, rank)
    running: list[tuple[float, int]] = []           # (work clock at which it ends, rank)
    started: dict[int, float] = {}                   # rank -> start time of its running op
    events: list[Event] = []

    def queue(rank: int) -> None:
        """Put the rank's next op in ``pending``, or park the rank on a missing input."""
        if pointer[rank] >= len(steps[rank]):
            return
        ready = free_at[rank]
        for d in steps[rank][pointer[rank]][1]:
            end = end_of[d]
            if end is None:
                waiting.setdefault(d, []).append(rank)
                return
            if rank_of[d] != rank:
                end += comm
            if end > ready:
                ready = end
        heapq.heappush(pending, (ready, rank))

    for r in range(P):
        queue(r)
    t = lag = 0.0
    while pending or running:
        rate = cores / len(running) if len(running) > cores else 1.0    # min(1, C / k)
        t_start = pending[0][0] if pending else float("inf")
        t_end = float("inf")
        if running:
            work_end = running[0][0]
            t_end = work_end + lag if rate == 1.0 else t + (work_end - (t - lag)) / rate
            if t > t_end:
                t_end = t
        if t_end <= t_start:                         # the next thing to happen is a finish
            lag += (t_end - t) * (1.0 - rate)
            t = t_end
            while running and running[0][0] == work_end:
                _, rank = heapq.heappop(running)
                parts = steps[rank][pointer[rank]][0]
                events.append(Event(rank, schedule.ranks[rank][pointer[rank]],
                                    started.pop(rank), t))
                free_at[rank] = t
                pointer[rank] += 1
                queue(rank)
                for a in parts:
                    end_of[a], rank_of[a] = t, rank
                    for w in waiting.pop(a, ()):
                        queue(w)
        else:                                        # the next thing is an op starting
            lag += (t_start - t) * (1.0 - rate)
            t = t_start
            while pending and pending[0][0] <= t:
                _, rank = heapq.heappop(pending)
                started[rank] = t
                heapq.heappush(running, ((t - lag) + durations[rank][pointer[rank]], rank))
    if any(pointer[r] < len(steps[r]) for r in range(P)):
        return None
    return events
