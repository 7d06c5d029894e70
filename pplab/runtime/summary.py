"""What rank 0 reports about a run: the steps it gathered, the gradients checked against one
process's, and one clock for every rank's events (worker.py runs the steps)."""
from __future__ import annotations

import socket
import statistics
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ..ir import Schedule

now = time.perf_counter


def rel_error(grads: dict, ref: dict) -> tuple[float, str]:
    worst, name = 0.0, ""
    for n, gr in ref.items():
        g = grads.get(n)
        if g is None:
            return float("inf"), n
        denom = float(gr.norm())
        err = float((g - gr).norm()) / (denom if denom > 0 else 1.0)
        if err > worst:
            worst, name = err, n
    return worst, name


@dataclass
class Record:
    """What rank 0 collects over the steps of a run."""
    losses: list = field(default_factory=list)
    ref_losses: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    worst: list = field(default_factory=list)
    times: list = field(default_factory=list)
    first: list | None = None
    last: list | None = None
    fastest: list | None = None       # the timed step whose events span least
    fastest_step: int | None = None
    fastest_span: float = float("inf")

    def add(self, runner, k: int, out: dict, gathered: list) -> None:
        self.losses.append(sum(g["loss"] for g in gathered))
        span = events_span([e for g in gathered for e in g["events"]])
        if self.fastest_step in (None, 0) or span < self.fastest_span:
            # step 0 (the warm-up) only stands in until a timed step comes
            self.fastest, self.fastest_step, self.fastest_span = gathered, k, span
        self.times.append(out["step_time"])
        if runner.ref is not None:
            rl, rg = runner.reference_step(k)
            merged = {}
            for g in gathered:
                merged.update(g["grads"] or {})
            e, n = rel_error(merged, rg)
            self.ref_losses.append(rl)
            self.errors.append(e)
            self.worst.append(n)
        self.last = gathered
        self.first = self.first or gathered

    def summary(self, s: Schedule) -> dict:
        warm = self.times[1:] if len(self.times) > 1 else self.times
        last = self.last or []
        return {"schedule": s.name, "P": s.P, "M": s.M, "V": s.V, "losses": self.losses,
                "reference_losses": self.ref_losses, "grad_errors": self.errors,
                "worst_parameter": self.worst, "step_times": self.times,
                "step_time_s": statistics.median(warm) if warm else None,
                "events": [e for g in last for e in g["events"]],
                # the least disturbed timed step: on a shared machine other programs stall
                # a step by milliseconds now and then (pplab calibrate reads this one)
                "fastest_step": self.fastest_step,
                "fastest_events": [e for g in (self.fastest or []) for e in g["events"]],
                "peak_saved_bytes": [g["peak_saved"] for g in (self.first or [])],
                "cuda_peak_bytes": (None if not last or last[0]["cuda_peak"] is None
                                    else [g["cuda_peak"] for g in last])}


def events_span(events) -> float:
    """First start to last end of ``(rank, action, start, end)`` events (0 when none)."""
    if not events:
        return 0.0
    return max(e[3] for e in events) - min(e[2] for e in events)


def clock_offset(rank: int, world: int, device: torch.device) -> float:
    """Offset to subtract from this rank's perf_counter so all ranks share rank 0's clock.

    On one host perf_counter is CLOCK_MONOTONIC, shared by all processes: offset 0. Across
    hosts: after a barrier every rank reads its clock and rank 0's reading is broadcast; the
    error is the barrier's exit skew (tens of µs on a LAN). Median of 5 rounds."""
    hosts = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    if len(set(hosts)) == 1:
        return 0.0
    diffs = []
    for _ in range(5):
        dist.barrier()
        t = torch.tensor([now()], dtype=torch.float64, device=device)   # NCCL: CUDA tensors
        ts = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(world)]
        dist.all_gather(ts, t)
        diffs.append(float(ts[rank] - ts[0]))
    return statistics.median(diffs)
