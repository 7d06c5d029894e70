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
lasts ``max(tf + tb, a2a_f + a2a_b)`` (pplab/overlap.py): F&B comes out of the model. A
``Costs.tfb`` given by hand still overrides it.

With infinite bandwidth, zero latency and no all-to-all this is ``simulate`` exactly; with
``latency = comm`` on the tag-matched transport it is today's per-hop ``comm`` model
(tests/core/test_streams.py checks both on every schedule).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .ir import Comm, Item, Schedule, gc_paused
from .lower import LOWERINGS, Message, lower, message_of
from .memory.activations import boundary_activation_bytes
from .simulate import Costs, DeadlockError, dependency_keys
from .timeline import Event, Timeline, Transfer

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

    def simulate(self, schedule: Schedule, costs) -> Timeline:
        """``simulate(schedule, costs, network=link)`` lands here."""
        return simulate_streams(schedule, costs, self)


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
            if costs.tfb is None:            # the pair hides each all-to-all under compute
                d += max(0.0, af + ab - (d - costs.fixed))
            parts = [(0.0, ab, "B"), (ab, af, "F")] if af + ab else []
        else:
            t = a2a(op)
            parts = [(d, t, op.kind)] if t else []
            d += t
        cache[key] = (d, parts)
        return d, parts
    return duration


def simulate_streams(schedule: Schedule, costs=None, link: Link | None = None,
                     lowered: Sequence[Sequence[Item]] | None = None, **cost_kw) -> Timeline:
    """Simulate ``schedule``'s lowered lists (``lowered``, or ``link.lowering``'s) on
    ``link``; returns a Timeline whose ``transfers`` hold every message and all-to-all."""
    if costs is None:
        costs = Costs(**cost_kw)
    link = link or Link()
    with gc_paused():        # tens of thousands of small objects, no cycles
        if lowered is None:
            rows, msgs = _compiled(schedule, link.lowering)
        else:
            rows, msgs = _compile_all(schedule, lowered)
        run = _Run(schedule, rows, msgs, _durations(schedule, costs, link), link)
        run.go()
    meta = {"schedule": schedule.name, "P": schedule.P, "M": schedule.M, "V": schedule.V,
            "costs": {"tf": costs.tf, "tb": costs.tb, "tw": costs.tw, "tfb": costs.tfb,
                      "fixed": costs.fixed},
            "link": {"latency": link.latency, "bandwidth": link.bandwidth,
                     "act_bytes": link.act_bytes, "ep_a2a": list(link.ep_a2a),
                     "lowering": link.lowering, "in_order": link.in_order,
                     "blocking": link.blocking}}
    return Timeline(schedule.P, run.events, "simulated", schedule, meta, run.transfers)


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


def _compile(s: Schedule, rank: int, row, ids: dict[Message, int]) -> list[tuple]:
    """Each item of a lowered row as ("op", op, deps on this rank, ids of the messages it
    needs) or ("send"/"recv", message id); ``ids`` numbers the messages (integer keys make
    the run several times quicker than hashing dataclasses)."""
    out = []
    for x in row:
        if isinstance(x, Comm):
            m = message_of(s, x)
            if rank not in (m.src, m.dst):
                raise ValueError(f"rank {rank} lists {x}, a message of ranks {m.src} "
                                 f"and {m.dst}")
            out.append(("send" if x.is_send else "recv", ids.setdefault(m, len(ids))))
            continue
        inner = {(a.stage, a.kind, a.microbatch) for a in x.parts}
        local, msgs = [], []
        for a in x.parts:
            for dep in dependency_keys(s, a.stage, a.kind, a.microbatch):
                if dep in inner:
                    continue
                src = s.stage_to_rank[dep[0]]
                if src == rank:
                    local.append(dep)
                else:
                    kind = "act" if a.kind == "F" else "grad"
                    m = Message(kind, a.stage, a.microbatch, src, rank)
                    msgs.append(ids.setdefault(m, len(ids)))
        out.append(("op", x, local, msgs))
    return out


def _compile_all(schedule: Schedule, rows) -> tuple[list[list[tuple]], list[Message]]:
    """(compiled rows, the messages by id)."""
    ids: dict[Message, int] = {}
    out = [_compile(schedule, r, row, ids) for r, row in enumerate(rows)]
    return out, list(ids)


def _compiled(schedule: Schedule, lowering: str):
    """``_compile_all`` of one of ``lower``'s orders, kept on the schedule (as the fast
    executor keeps its plan): a cost or link slider lowers and compiles once."""
    kept = schedule.__dict__.setdefault("_stream_rows", {})
    if lowering not in kept:
        kept[lowering] = _compile_all(schedule, lower(schedule, lowering))
    return kept[lowering]


class _Run:
    """One pass over the lowered lists. Like the reference executor, a rank runs until it
    needs something not yet known, and is woken when that becomes known (linear time)."""

    def __init__(self, schedule: Schedule, rows, msgs: list[Message], duration, link: Link):
        self.s, self.duration, self.link = schedule, duration, link
        self.rows, self.msgs = rows, msgs
        self.pos, self.now = [0] * schedule.P, [0.0] * schedule.P
        self.end_of: dict[tuple, float] = {}
        n = len(msgs)                             # per message id:
        self.sent: list[float | None] = [None] * n     # send posted at
        self.posted: list[float | None] = [None] * n   # receive posted at
        self.arrive: list[float | None] = [None] * n   # data there (at the receiver)
        self.send_free = [0.0] * schedule.P
        self.queues: dict = {}                    # in-order: queue key -> [message ids], head
        self.q_free: dict = {}
        self.waiting: dict[int, list[int]] = {}
        self.events: list[Event] = []
        self.transfers: list[Transfer] = []

    # ---- messages ------------------------------------------------------------------------
    def _queue_key(self, rank: int, m: Message):
        return rank if self.link.in_order == "rank" else (rank, m.dst if rank == m.src else m.src)

    def _post(self, rank: int, i: int, send: bool) -> None:
        t = self.now[rank]
        (self.sent if send else self.posted)[i] = t
        if self.link.in_order is None:
            if send:
                link = self.link
                start = max(t, self.send_free[rank])
                self.send_free[rank] = start + link.transfer_time(link.bytes_of(self.msgs[i].kind))
                self._land(i, start, self.send_free[rank] + link.latency)
            return
        q = self.queues.setdefault(self._queue_key(rank, self.msgs[i]), [[], 0])
        q[0].append(i)
        self._resolve(i)

    def _resolve(self, i: int) -> None:
        """In-order: run message ``i`` if it heads both its queues, then whatever that
        unblocks."""
        todo = [i]
        while todo:
            i = todo.pop()
            if self.arrive[i] is not None or self.sent[i] is None or self.posted[i] is None:
                continue
            m = self.msgs[i]
            keys = [self._queue_key(r, m) for r in (m.src, m.dst)]
            qs = [self.queues[k] for k in keys]
            if any(q[0][q[1]] != i for q in qs):
                continue
            start = max(self.sent[i], self.posted[i], *(self.q_free.get(k, 0.0) for k in keys))
            end = start + self.link.transfer_time(self.link.bytes_of(m.kind)) + self.link.latency
            for k, q in zip(keys, qs):
                self.q_free[k] = end
                q[1] += 1
                if q[1] < len(q[0]):
                    todo.append(q[0][q[1]])
            self._land(i, start, end)

    def _land(self, i: int, start: float, end: float) -> None:
        m = self.msgs[i]
        self.arrive[i] = end
        self.transfers.append(Transfer(m.src, m.dst, m.kind,
                                       f"{m.stage}{'F' if m.kind == 'act' else 'B'}"
                                       f"{m.microbatch}", start, end))
        woken = self.waiting.pop(i, None)
        if woken:
            self.todo.extend(woken)

    def _ready(self, rank: int, i: int, op=None) -> float | None:
        """When message ``i``'s data is there for ``rank`` (None: not known yet)."""
        posted, arrive = self.posted[i], self.arrive[i]
        if posted is None:
            what = f"runs {op}" if op is not None else "waits"
            raise ValueError(f"rank {rank}: the lowered list {what} before posting the "
                             f"receive of the {self.msgs[i]}")
        if arrive is None:
            self.waiting.setdefault(i, []).append(rank)
            return None
        return arrive if arrive > posted else posted

    # ---- ranks ---------------------------------------------------------------------------
    def _step(self, rank: int) -> bool:
        """Run rank's next item; False when it must wait."""
        entry = self.rows[rank][self.pos[rank]]
        kind = entry[0]
        if kind == "send":
            m = self.msgs[entry[1]]
            if self._made(m) is None:
                raise ValueError(f"rank {rank}: the lowered list sends the {m} before the op "
                                 f"that makes it runs")
            self._post(rank, entry[1], True)
        elif kind == "recv":
            self._post(rank, entry[1], False)
            if self.link.blocking:
                t = self._ready(rank, entry[1])
                if t is None:
                    return False
                self.now[rank] = max(self.now[rank], t)
        else:
            return self._compute(rank, *entry[1:])
        return True

    def _made(self, m: Message) -> float | None:
        """End time of the op that makes ``m``'s data (None: not run yet)."""
        if m.kind == "act":
            return self.end_of.get((m.stage - 1, "F", m.microbatch))
        nxt = m.stage + 1
        return self.end_of.get((nxt, "B", m.microbatch),
                               self.end_of.get((nxt, "I", m.microbatch)))

    def _compute(self, rank: int, op, local, msgs) -> bool:
        start = self.now[rank]
        for dep in local:
            end = self.end_of.get(dep)
            if end is None:
                self.stuck_on[rank] = f"{op} needs {dep[0]}{dep[1]}{dep[2]}, not run before it"
                return False
            start = max(start, end)
        for i in msgs:
            t = self._ready(rank, i, op)
            if t is None:
                return False
            start = max(start, t)
        d, a2a = self.duration(op)
        end = start + d
        self.events.append(Event(rank, op, start, end))
        for off, length, label in a2a:
            self.transfers.append(Transfer(rank, rank, "a2a", f"{label} all-to-all",
                                           start + off, start + off + length))
        for a in op.parts:
            self.end_of[(a.stage, a.kind, a.microbatch)] = end
        self.now[rank] = end
        return True

    def go(self) -> None:
        self.todo = list(range(self.s.P))[::-1]
        self.stuck_on: dict[int, str] = {}
        while self.todo:
            rank = self.todo.pop()
            row = self.rows[rank]
            while self.pos[rank] < len(row) and self._step(rank):
                self.pos[rank] += 1
        stuck = [r for r in range(self.s.P) if self.pos[r] < len(self.rows[r])]
        if stuck:
            raise DeadlockError("; ".join(self._why(r) for r in stuck) + " — deadlock")

    def _why(self, rank: int) -> str:
        if rank in self.stuck_on:
            return f"rank {rank}: {self.stuck_on[rank]}"
        entry = self.rows[rank][self.pos[rank]]
        waits = [self.msgs[i] for i, rs in self.waiting.items() if rank in rs]
        what = f"the {waits[0]}" if waits else "a message"
        head = entry[1] if entry[0] == "op" else f"{entry[0]} of the {self.msgs[entry[1]]}"
        return f"rank {rank} at {head} waits for {what}"
