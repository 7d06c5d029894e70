"""Communication as its own stream: a schedule's *lowered* lists (pplab/lower.py, the lists the
real worker runs) played with compute and communication apart.

Each rank runs its list in order. A compute op waits for its inputs; a SEND posts its message
and moves on; a RECV posts a receive and moves on, unless receives are ``blocking``, when the
rank stops there until the data is in. A message costs ``latency + bytes / bandwidth``.

Two transports:

* tag-matched (``in_order=None``, gloo): a message leaves when its SEND is posted, one after
  another on the sender's send stream (``bytes / bandwidth`` each), lands ``latency`` later
  and is there for the receiver once its RECV is posted too. Nothing waits behind anything.
* in-order (``in_order="pair"`` or ``"rank"``, NCCL): every message sits in a queue on both of
  its ranks (one queue per pair of ranks, or one per rank, as a single communication stream)
  and runs only when it heads both queues and both sides have posted it; a receive at the
  head blocks whatever is queued behind it (head-of-line blocking).

Expert parallelism: a forward or backward on an MoE stage also runs an all-to-all
(``ep_a2a``). Alone it is exposed: the op lasts compute + all-to-all. In DualPipe's
overlapped pair each half's all-to-all hides under the other half's compute, so the pair
lasts its longest chain, ``max(tf + tb, a2a_f + a2a_b, tf + a2a_f, tb + a2a_b)``
(``pplab.sim.overlap.pair_time``): F&B comes out of the model. A ``Costs.tfb`` given by
hand still overrides it.

With infinite bandwidth, zero latency and no all-to-all this is ``simulate`` exactly; with
``latency = comm`` on the tag-matched transport it is today's per-hop ``comm`` model
(tests/core/test_streams.py checks both on every schedule).

The first run of a schedule and lowering is a worklist over the lowered lists
(``worklist.py``); on the tag-matched transport it is recorded, and a later run with other
costs or link numbers (a slider) replays it in one straight pass (``replay.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

from ..ir import Item, Schedule, gc_paused, op_of_key
from ..lower import LOWERINGS, lower
from ..memory.activations import boundary_activation_bytes
from ..sim.costs import Costs
from ..sim.overlap import pair_time
from ..sim.compiled import CompiledSchedule, Inputs, compile_schedule
from ..timeline import Timeline
from .replay import Recording, ReplayedTransfers, recording, replay
from .worklist import StreamRun, compile_rows

QUEUES = (None, "pair", "rank")


@dataclass(frozen=True)
class Link:
    """How pipeline messages travel (units: those of the costs, e.g. ms, and bytes).

    ``act_bytes`` / ``grad_bytes``: one activation forward / one gradient backward across a
    stage boundary (``pplab.memory.boundary_activation_bytes``; ``Link.for_shape`` from a model
    shape); ``ep_a2a``: the time of one chunk's expert-parallel all-to-all in its (forward,
    backward), 0 for a dense model; ``moe_stages``: which stages have experts (None: all).
    ``lowering`` picks the posting order (pplab/lower.py); ``in_order`` the queueing (module
    doc); ``blocking`` makes a RECV wait where it is posted, as a plain ``recv()`` does.
    """
    latency: float = 0.0
    bandwidth: float = math.inf
    act_bytes: float = 0.0
    grad_bytes: float | None = None
    ep_a2a: tuple[float, float] = (0.0, 0.0)
    moe_stages: frozenset[int] | None = None
    lowering: str = "up-front"
    in_order: str | None = None
    blocking: bool = False

    def __post_init__(self):
        for name in ("latency", "bandwidth", "act_bytes"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"Link {name} must be ≥ 0, got {getattr(self, name)}")
        if self.bandwidth == 0:
            raise ValueError("Link bandwidth must be > 0 (math.inf for free transfers)")
        if self.grad_bytes is not None and self.grad_bytes < 0:
            raise ValueError(f"Link grad_bytes must be ≥ 0, got {self.grad_bytes}")
        if len(self.ep_a2a) != 2 or min(self.ep_a2a) < 0:
            raise ValueError(f"ep_a2a is (forward, backward) all-to-all times ≥ 0, "
                             f"got {self.ep_a2a}")
        if self.lowering not in LOWERINGS:
            raise ValueError(f"lowering must be one of {', '.join(LOWERINGS)}, "
                             f"got {self.lowering!r}")
        if self.in_order not in QUEUES:
            raise ValueError(f"in_order must be None, 'pair' or 'rank', got {self.in_order!r}")

    @classmethod
    def for_shape(cls, seq: int, microbatch: int, hidden: int, tp: int = 1,
                  bytes_per_value: float = 2, **kw) -> "Link":
        """A link whose messages (activations and gradients alike) carry one stage boundary's
        hidden states for this model shape; ``kw``: latency, bandwidth, ... as above."""
        return cls(act_bytes=boundary_activation_bytes(seq, microbatch, hidden, tp,
                                                       bytes_per_value), **kw)

    def transfer_time(self, nbytes: float) -> float:
        """Seconds (cost units) one message of ``nbytes`` keeps its stream busy, latency
        not included."""
        return 0.0 if self.bandwidth == math.inf else nbytes / self.bandwidth

    def bytes_of(self, kind: str) -> float:
        return self.act_bytes if kind == "act" or self.grad_bytes is None else self.grad_bytes


def _durations(schedule: Schedule, costs, link: Link):
    """``op -> (duration, a2a intervals as (offset, length, label))``."""
    base = costs.duration_fn(schedule)
    fa, fb = link.ep_a2a
    moe = link.moe_stages
    cache: dict = {}

    def a2a(action) -> float:
        if moe is not None and action.stage not in moe:
            return 0.0
        t = fa if action.kind == "F" else fb if action.kind in ("B", "I") else 0.0
        return t * schedule.chunk_fraction(action.stage)

    def duration(op):
        key = (op.kind, tuple(a.stage for a in op.parts))
        if key in cache:
            d, parts = cache[key]
            return d, parts
        d = base(op)
        if op.kind == "FB":
            f, b = op.parts
            af, ab = a2a(f), a2a(b)
            # the pair hides each all-to-all under compute; with none to hide, it keeps the
            # duration rule's own tf + tb, to the bit
            if costs.tfb is None and af + ab:
                compute = d - costs.fixed
                fc = compute * costs.tf / (costs.tf + costs.tb) if compute else 0.0
                d = costs.fixed + pair_time(fc, compute - fc, af, ab)
            parts = [(0.0, ab, "B"), (ab, af, "F")] if af + ab else []
        else:
            t = a2a(op)
            parts = [(d, t, op.kind)] if t else []
            d += t
        cache[key] = (d, parts)
        return d, parts
    return duration


class CompiledStreams(NamedTuple):
    """One schedule and lowering compiled for the stream model, kept by the caller to run it
    again with other costs or link numbers (a slider): the lowered lists as the worklist
    reads them (``rows``), the schedule compiled for the fast executor, and, on the
    tag-matched transport, a recorded run (``recording``) that a later run replays. Its
    order depends on the schedule, the lowering and ``blocking`` alone, never on a time."""
    schedule: Schedule
    lowering: str
    blocking: bool
    rows: tuple
    compiled: CompiledSchedule | None
    recording: Recording | None


def compile_streams(schedule: Schedule, lowering: str = "up-front",
                    blocking: bool = False) -> CompiledStreams:
    """``schedule`` lowered (``link.lowering``) and compiled for ``simulate_streams``, with
    its run recorded where a tag-matched link can replay it."""
    link = Link(lowering=lowering, blocking=blocking)
    with gc_paused():
        rows = compile_rows(schedule, lower(schedule, lowering))
        compiled = compile_schedule(schedule)
        run = _full_run(schedule, rows, _durations(schedule, Costs(), link), link)
        rec = None if run.steps is None or compiled is None else recording(run.steps,
                                                                            run.msgs)
    return CompiledStreams(schedule, lowering, blocking, rows, compiled, rec)


def simulate_streams(schedule: Schedule, costs=None, link: Link | None = None,
                     lowered: Sequence[Sequence[Item]] | None = None, *,
                     compiled: CompiledStreams | None = None, **cost_kw) -> Timeline:
    """Simulate ``schedule``'s lowered lists (``lowered``, or ``link.lowering``'s) on
    ``link``; returns a Timeline whose ``transfers`` hold every message and all-to-all.

    ``compiled``: what ``compile_streams(schedule, link.lowering, link.blocking)`` returned,
    kept by the caller; on a tag-matched link its recorded run is replayed with these costs
    and link numbers (``replay.py``), as fast as a slider needs."""
    if costs is None:
        costs = Costs(**cost_kw)
    link = link or Link()
    duration = _durations(schedule, costs, link)
    meta = {"schedule": schedule.name, "P": schedule.P, "M": schedule.M, "V": schedule.V,
            "costs": {"tf": costs.tf, "tb": costs.tb, "tw": costs.tw, "tfb": costs.tfb,
                      "fixed": costs.fixed},
            "link": {"latency": link.latency, "bandwidth": link.bandwidth,
                     "act_bytes": link.act_bytes, "ep_a2a": list(link.ep_a2a),
                     "lowering": link.lowering, "in_order": link.in_order,
                     "blocking": link.blocking}}
    if compiled is not None and (compiled.schedule is not schedule or lowered is not None
                                 or (compiled.lowering, compiled.blocking)
                                 != (link.lowering, link.blocking)):
        raise ValueError("compiled= is compile_streams(schedule, link.lowering, "
                         "link.blocking) of this schedule, without lowered=")
    with gc_paused():        # tens of thousands of small objects, no cycles
        if compiled is not None and compiled.recording is not None and link.in_order is None:
            return _replayed(schedule, compiled.compiled.inputs, compiled.recording, duration, link,
                             meta)
        rows = (compiled.rows if compiled is not None else
                compile_rows(schedule, lowered if lowered is not None else
                             lower(schedule, link.lowering)))
        run = _full_run(schedule, rows, duration, link)
        return Timeline.of_events(schedule.P, run.events, "simulated", schedule, meta,
                                  run.transfers)


def _full_run(schedule: Schedule, compiled, duration, link: Link) -> StreamRun:
    run = StreamRun(schedule, *compiled, duration, link)
    run.go()
    return run


def _replayed(schedule: Schedule, pl: Inputs, rec, duration, link: Link,
              meta: dict) -> Timeline:
    """``rec`` replayed with these durations and this link's numbers, as columns."""
    per_class = {c: duration(op_of_key(c)) for c in set(pl.cls)}
    op_time = {c: d for c, (d, _) in per_class.items()}
    send_time = {kind: link.transfer_time(link.bytes_of(kind)) for kind in ("act", "grad")}
    run, leave, arrive = replay(rec, pl, list(map(op_time.__getitem__, pl.cls)),
                                list(map(send_time.__getitem__, rec.kinds)), link.latency)
    a2a = {c: parts for c, (_, parts) in per_class.items()}
    return Timeline.from_run(schedule, run, "simulated", meta,
                             ReplayedTransfers(rec, pl.cls, a2a, run.start, leave,
                                               arrive))


def all_to_all_split(timeline: Timeline) -> dict[str, float]:
    """Expert all-to-all time summed over ranks, split into ``exposed``
    (inside a plain F or B: the rank waits for it) and ``hidden`` (inside an F&B pair, under
    the other half's compute)."""
    pairs: dict[int, list[tuple[float, float]]] = {}
    for e in timeline.events:
        if e.op.kind == "FB":
            pairs.setdefault(e.rank, []).append((e.start, e.end))
    out = {"exposed": 0.0, "hidden": 0.0}
    for t in timeline.transfers:
        if t.kind == "a2a":
            inside = any(a <= t.start < b for a, b in pairs.get(t.src, ()))
            out["hidden" if inside else "exposed"] += t.end - t.start
    return out


def warmup_end(timeline: Timeline) -> float:
    """When the first gradient is back at stage 0: the start of stage 0's first backward,
    from the timeline's start (the end of the warm-up, where a front-loaded receive shows)."""
    starts = [e.start for e in timeline.events for a in e.op.parts
              if a.stage == 0 and a.kind in ("B", "I")]
    if not starts:
        raise ValueError("the timeline has no backward on stage 0")
    return min(starts) - timeline.start
