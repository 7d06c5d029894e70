"""Timeline: what ran where and when. The simulator and the real runtime both return one.

Keeping a single type is the point of the course: a measured run and a simulated run of the
same schedule can be compared number for number and drawn one over the other.

Its one storage is columns (:class:`RunColumns`): per op its integer key (``pplab.keys``),
rank, start and end, rank by rank in run order. A 64-rank pipeline's ~100 000 ops stay
numbers; ``Timeline.events`` is a read-only view that makes each :class:`Event` when read,
and every metric is worked out from the columns when asked (nothing is kept on the side).

Peaks of activations held count by the in-flight rule (:mod:`pplab.inflight`, re-exported
here under the names the lessons use).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial, reduce
from itertools import accumulate, chain, repeat
from operator import add, and_, itemgetter, sub
from typing import Iterable, Iterator, NamedTuple

from . import keys
from .ir import Op, OpRow, Schedule, gc_paused, op_key, op_of_key, parse_op
from .inflight import (INFLIGHT_RULE, InflightWalk, inflight_profile,  # noqa: F401
                       inflight_walk, peak_inflight, peak_inflight_of)
from .keys import KIND_MASK, KINDS, PAIR_BASE


class Event(NamedTuple):
    """One op's run on one rank. A tuple, because a view over 100 000 ops makes one per op
    and a tuple is several times quicker to make than a frozen dataclass."""
    rank: int
    op: Op
    start: float
    end: float

    @property
    def duration(self) -> float:
        """Seconds (or cost units, simulated) the op ran."""
        return self.end - self.start

    def to_dict(self) -> dict:
        """JSON form; the op as its text (``0F1``)."""
        return {"rank": self.rank, "action": str(self.op), "start": self.start, "end": self.end}


class Transfer(NamedTuple):
    """Communication seen on one rank's lane: a point-to-point message (``kind`` "act" or
    "grad", from ``src`` to ``dst``) or an expert-parallel all-to-all (``kind`` "a2a",
    ``src == dst``, the rank doing it), from its start to the moment its data is there.
    Simulated by :mod:`pplab.streams`; a measured run may record them too."""
    src: int
    dst: int
    kind: str
    what: str
    start: float
    end: float

    def to_dict(self) -> dict:
        """JSON form, as ``Timeline.to_dict`` writes it."""
        return {"src": self.src, "dst": self.dst, "kind": self.kind, "what": self.what,
                "start": self.start, "end": self.end}


# ---- the storage -----------------------------------------------------------------------------

class RunColumns(NamedTuple):
    """A run as columns, the one storage of a :class:`Timeline` (and what the fast
    simulator returns): ops are numbered rank by rank, each rank's in the order they ran
    (so its starts never decrease);
    op ``i`` (key ``keys[i]``) ran on ``rank[i]`` from ``start[i]`` to ``end[i]``;
    ``bounds[r]`` .. ``bounds[r + 1] - 1`` are rank r's ops; ``order`` lists the op numbers in
    the order the events read (the reference simulator's, or the order a run was recorded in).
    Read-only by contract: the simulator hands over its own lists rather than pay for copies."""
    order: Sequence[int]
    rank: Sequence[int]
    start: Sequence[float]
    end: Sequence[float]
    bounds: Sequence[int]
    keys: Sequence[int]


def columns_of_events(num_ranks: int, events: Iterable[Event]) -> RunColumns:
    """Events (in any order) as columns: each rank's ops in (start, end) order, the order
    they ran; ``order`` keeps the events' own. ValueError for a rank outside the timeline."""
    events = list(events)
    per_rank: list[list[int]] = [[] for _ in range(num_ranks)]
    for j, e in enumerate(events):
        if not 0 <= e.rank < num_ranks:
            raise ValueError(f"event {e.op} on rank {e.rank}: the timeline has ranks "
                             f"0..{num_ranks - 1}")
        per_rank[e.rank].append(j)
    for row in per_rank:
        row.sort(key=lambda j: (events[j].start, events[j].end))
    taken = list(chain.from_iterable(per_rank))
    position = [0] * len(events)
    for i, j in enumerate(taken):
        position[j] = i
    picked = [events[j] for j in taken]
    return RunColumns(order=position, rank=[e.rank for e in picked],
                      start=[e.start for e in picked], end=[e.end for e in picked],
                      bounds=list(accumulate(map(len, per_rank), initial=0)),
                      keys=[op_key(e.op) for e in picked])


class Events(Sequence):
    """A timeline's events: a read-only view of its columns, in their ``order``; each
    :class:`Event` is made when it is read (the columns are the only copy)."""
    __slots__ = ("_columns",)

    def __init__(self, columns: RunColumns):
        object.__setattr__(self, "_columns", columns)

    def __setattr__(self, name, value):
        raise AttributeError("a timeline's events are read-only; make a new Timeline")

    def __len__(self) -> int:
        return len(self._columns.order)

    def __getitem__(self, j):
        c = self._columns
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(len(self)))]
        i = c.order[j]
        return Event(c.rank[i], op_of_key(c.keys[i]), c.start[i], c.end[i])

    def __iter__(self) -> Iterator[Event]:
        return iter(events_in(self._columns, self._columns.order))

    def __eq__(self, other) -> bool:
        if isinstance(other, Events):
            return self._columns == other._columns or list(self) == list(other)
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"Events({len(self)} events)"


def events_in(columns: RunColumns, numbers: Iterable[int]) -> list[Event]:
    """The Events of the ops ``numbers`` (op numbers of ``columns``), in that order."""
    numbers = list(numbers)
    new = partial(tuple.__new__, Event)
    with gc_paused():
        return list(map(new, zip(map(columns.rank.__getitem__, numbers),
                                 map(op_of_key, map(columns.keys.__getitem__, numbers)),
                                 map(columns.start.__getitem__, numbers),
                                 map(columns.end.__getitem__, numbers))))


def run_events(run: RunColumns) -> list[Event]:
    """A simulation's Event objects from its columns, in the reference's order (the
    simulator's last step: ``execute``'s answer)."""
    return events_in(run, run.order)


def op_kinds(op_keys) -> list[str]:
    """Each op's kind (``"FB"`` for an overlapped pair) from its integer key."""
    if op_keys and max(op_keys) >= PAIR_BASE:
        return ["FB" if keys.is_pair(k) else keys.kind_of(k) for k in op_keys]
    return list(map(KINDS.__getitem__, map(and_, op_keys, repeat(KIND_MASK))))


# ---- the timeline ----------------------------------------------------------------------------

class Totals(NamedTuple):
    """What every bubble metric is made of, read off the columns in one pass
    (``Timeline.totals``); each metric is written here once."""
    num_ranks: int
    start: float                 # the first op's start
    end: float                   # the last op's end
    busy: list[float]            # per rank, the time its ops ran
    spans: list[float]           # per rank, its first op's start to its last op's end

    @property
    def makespan(self) -> float:
        """First start to last end: one step's time, the figure every bubble metric divides."""
        return self.end - self.start

    @property
    def idle(self) -> float:
        """Rank-time spent waiting: P × makespan − Σ busy, the bubble in time units."""
        return self.num_ranks * self.makespan - sum(self.busy)

    @property
    def bubble_fraction(self) -> float:
        """idle ÷ (P × makespan): GPipe's bubble, (P−1)/(M+P−1) for GPipe."""
        capacity = self.num_ranks * self.makespan
        return (capacity - sum(self.busy)) / capacity if capacity > 0 else 0.0

    @property
    def bubble_ratio(self) -> float:
        """idle ÷ busy: Megatron-LM's bubble, (P−1)/M for GPipe."""
        work = sum(self.busy)
        return (self.num_ranks * self.makespan - work) / work if work > 0 else 0.0

    @property
    def bubble_rate_span(self) -> float:
        """Zero Bubble's bubble rate: (longest span − busiest rank's work) ÷ longest span."""
        span = max(self.spans, default=0.0)
        return (span - max(self.busy, default=0.0)) / span if span > 0 else 0.0


@dataclass(frozen=True)
class Timeline:
    """Ops per rank, as columns, plus the metrics the course talks about.

    Make one from events with :meth:`of_events` (a measured run, the reference simulator)
    or from the fast simulator's columns with :meth:`from_run`. Nothing is written into it
    afterwards: each metric is worked out from the columns when read (``totals()`` gives
    several at once, one pass).

    Three bubble metrics, because three papers measure it three ways:

    * ``bubble_fraction`` = idle ÷ (P × makespan): the share of all rank-time spent waiting
      in one flushed step (GPipe's denominator); (P−1)/(M+P−1) for GPipe.
    * ``bubble_ratio`` = idle ÷ busy: the extra time relative to the perfectly packed run
      (Megatron-LM's denominator); (P−1)/M for GPipe.
    * ``bubble_rate_span`` = (span − work) ÷ span, where span is the longest time any one
      rank is occupied, from its first op's start to its last op's end, and work that rank
      count's busiest total (Zero Bubble §5.3, "the largest execution time of all stages").
      Ranks that start late and finish early are not charged for it: consecutive steps
      could overlap there. It equals the makespan-based figures for 1F1B, where rank 0
      spans the whole step, and is smaller for ZB-H2, whose last rank starts late.
    """
    num_ranks: int
    columns: RunColumns
    source: str = "simulated"
    schedule: Schedule | None = None
    meta: dict = field(default_factory=dict)
    #: communication intervals (empty unless the stream model or a trace recorded them), a
    #: read-only sequence; the metrics read compute ops only
    transfers: Sequence[Transfer] = ()

    def __post_init__(self):
        if not isinstance(self.columns, RunColumns):
            raise TypeError("Timeline(num_ranks, columns, ...) takes RunColumns; for a list "
                            "of events use Timeline.of_events(num_ranks, events, ...)")

    @classmethod
    def of_events(cls, num_ranks: int, events: Iterable[Event], source: str = "simulated",
                  schedule: Schedule | None = None, meta: dict | None = None,
                  transfers: Iterable[Transfer] = ()) -> "Timeline":
        """A timeline of these events (any order; ``events`` reads them back in it)."""
        return cls(num_ranks, columns_of_events(num_ranks, events), source, schedule,
                   {} if meta is None else meta, _read_only(transfers))

    @classmethod
    def from_run(cls, schedule: Schedule, run: RunColumns, source: str = "simulated",
                 meta: dict | None = None, transfers: Iterable[Transfer] = ()) -> "Timeline":
        """The simulator's columns as a timeline, no Event made (a 64-rank slider move
        never builds its ~100 000). ``transfers``: a list, or a read-only sequence that
        makes them when read (the stream model's replay)."""
        return cls(schedule.P, run, source, schedule, {} if meta is None else meta,
                   _read_only(transfers))

    # ---- views of the columns -----------------------------------------------------------
    @property
    def events(self) -> Events:
        """Every op's Event, in the columns' ``order`` (read-only; made when read)."""
        return Events(self.columns)

    def _slices(self) -> Iterator[tuple[int, int]]:
        b = self.columns.bounds
        return zip(b, b[1:])

    def rank_events(self, rank: int) -> list[Event]:
        """``rank``'s events in the order they ran (``events_by_rank`` for all ranks at once)."""
        b = self.columns.bounds
        return events_in(self.columns, range(b[rank], b[rank + 1]))

    def events_by_rank(self) -> list[list[Event]]:
        """``rank_events(r)`` for every rank."""
        every = events_in(self.columns, range(len(self.columns.keys)))
        return [every[lo:hi] for lo, hi in self._slices()]

    def ops_per_rank(self) -> list[int]:
        """How many ops each rank ran."""
        b = self.columns.bounds
        return list(map(sub, b[1:], b))

    def rank_strip_columns(self):
        """Per rank ``(starts, ends, kinds)`` in run order (``scene.panels.rank_strips``
        draws a 64-rank pipeline from these)."""
        c = self.columns
        kinds = op_kinds(c.keys)
        return [(c.start[lo:hi], c.end[lo:hi], kinds[lo:hi]) for lo, hi in self._slices()]

    def rank_order(self, rank: int) -> list[str]:
        """``rank``'s ops as text in the order they ran: what to compare with its schedule row."""
        b = self.columns.bounds
        return [str(op_of_key(k)) for k in self.columns.keys[b[rank]:b[rank + 1]]]

    def rank_orders(self) -> list[list[str]]:
        """``rank_order`` for every rank."""
        return [self.rank_order(r) for r in range(self.num_ranks)]

    # ---- metrics --------------------------------------------------------------------------
    def totals(self) -> Totals:
        """Start, end, busy time and span per rank in one pass over the columns (each rank's
        busy time added up op by op in run order)."""
        c = self.columns
        busy, firsts, lasts = [], [], []
        for lo, hi in self._slices():
            s, e = c.start[lo:hi], c.end[lo:hi]
            busy.append(reduce(add, map(sub, e, s), 0.0))
            firsts.append(s[0] if s else None)
            lasts.append(max(e) if e else None)
        spans = [0.0 if a is None else b - a for a, b in zip(firsts, lasts)]
        ran = [a for a in firsts if a is not None]
        start = min(ran, default=0.0)
        end = max((b for b in lasts if b is not None), default=0.0)
        return Totals(self.num_ranks, start, end, busy, spans)

    @property
    def start(self) -> float:
        """When the first op starts (0 for a measured step, which is shifted there)."""
        c = self.columns
        return min((c.start[lo] for lo, hi in self._slices() if hi > lo), default=0.0)

    @property
    def end(self) -> float:
        """When the last op ends."""
        return max(self.columns.end, default=0.0)

    @property
    def makespan(self) -> float:
        """First start to last end: one step's time, the figure every bubble metric divides."""
        return self.end - self.start

    @property
    def busy(self) -> list[float]:
        """Per rank, the time its ops ran (compute only, not transfers)."""
        return self.totals().busy

    @property
    def spans(self) -> list[float]:
        """Per rank: first op's start to last op's end (0 for a rank that ran nothing)."""
        return self.totals().spans

    @property
    def idle(self) -> float:
        """``Totals.idle``."""
        return self.totals().idle

    @property
    def bubble_fraction(self) -> float:
        """``Totals.bubble_fraction``: idle ÷ (P × makespan)."""
        return self.totals().bubble_fraction

    @property
    def bubble_ratio(self) -> float:
        """``Totals.bubble_ratio``: idle ÷ busy."""
        return self.totals().bubble_ratio

    @property
    def bubble_rate_span(self) -> float:
        """``Totals.bubble_rate_span``: Zero Bubble's bubble rate."""
        return self.totals().bubble_rate_span

    @property
    def peak_inflight(self) -> list[int]:
        """Per-rank peak of activations alive (:data:`INFLIGHT_RULE`), in the order the ops ran."""
        k = self.columns.keys
        return [int(round(max(inflight_profile(OpRow(k[lo:hi])), default=0)))
                for lo, hi in self._slices()]

    def metrics(self) -> dict:
        """The figures the CLI's ``--json`` and a run's result report, by name."""
        t = self.totals()
        return {"makespan": t.makespan, "bubble_fraction": t.bubble_fraction,
                "bubble_ratio": t.bubble_ratio, "bubble_rate_span": t.bubble_rate_span,
                "busy": t.busy, "peak_inflight": self.peak_inflight}

    # ---- conversion ----------------------------------------------------------------------
    def shifted(self, offset: float) -> "Timeline":
        """A copy with every op and transfer moved by ``offset`` (measured steps start at 0)."""
        c = self.columns
        moved = c._replace(start=[s + offset for s in c.start],
                           end=[e + offset for e in c.end])
        xfers = tuple(t._replace(start=t.start + offset, end=t.end + offset)
                      for t in self.transfers)
        return replace(self, columns=moved, meta=dict(self.meta), transfers=xfers)

    def with_meta(self, **meta) -> "Timeline":
        """A copy whose ``meta`` has these entries added."""
        return replace(self, meta={**self.meta, **meta})

    def to_dict(self) -> dict:
        """JSON form, times from the first start; ``from_dict`` reads it back."""
        t0 = self.start
        out = {"source": self.source, "num_ranks": self.num_ranks, **self.metrics(),
               "ranks": self.rank_orders(),
               "events": [dict(e.to_dict(), start=e.start - t0, end=e.end - t0)
                          for e in sorted(self.events, key=itemgetter(2, 0))],
               "meta": self.meta}
        if self.transfers:                 # absent when empty: older readers see no change
            out["transfers"] = [dict(t.to_dict(), start=t.start - t0, end=t.end - t0)
                                for t in self.transfers]
        return out

    @classmethod
    def measured(cls, schedule: Schedule, rows, meta: dict) -> "Timeline":
        """A real step's ``(rank, action text, start, end)`` rows, moved to start at 0."""
        events = [Event(int(rk), parse_op(a), float(s), float(e)) for rk, a, s, e in rows]
        tl = cls.of_events(schedule.P, events, "measured", schedule, meta)
        return tl.shifted(-tl.start)

    @classmethod
    def from_dict(cls, d: dict, schedule: Schedule | None = None) -> "Timeline":
        """Back from ``to_dict`` (a saved or published run), with ``schedule`` if known."""
        events = [Event(int(e["rank"]), parse_op(e["action"]), float(e["start"]), float(e["end"]))
                  for e in d["events"]]
        xfers = [Transfer(int(t["src"]), int(t["dst"]), t["kind"], t["what"],
                          float(t["start"]), float(t["end"])) for t in d.get("transfers", ())]
        return cls.of_events(int(d["num_ranks"]), events, d.get("source", "measured"),
                             schedule, dict(d.get("meta", {})), xfers)


def _read_only(transfers) -> Sequence[Transfer]:
    """A list of transfers as a tuple; a read-only sequence (a replay's) as it is."""
    return tuple(transfers) if isinstance(transfers, (list, tuple)) else transfers
