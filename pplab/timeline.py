"""Timeline: what ran where and when. The simulator and the real runtime both return one.

Keeping a single type is the point of the course: a measured run and a simulated run of the
same schedule can be compared number for number and drawn one over the other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, partial, reduce
from itertools import accumulate, chain, repeat
from operator import add, and_, attrgetter, sub
from typing import Iterable, NamedTuple

from . import keys
from .ir import Op, Schedule, gc_paused, parse_op
from .keys import KIND_MASK, KINDS, PAIR_BASE


class Event(NamedTuple):
    """One op's run on one rank. A tuple, because a simulation builds one per action and a
    tuple is several times quicker to make than a frozen dataclass."""
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


_START_END = attrgetter("start", "end")


class InflightWalk(NamedTuple):
    """``inflight_walk``'s answer, one entry per part of each op of a run order."""
    levels: list[float]          # the weight alive after it
    whole: list[int]             # activations alive whole after it
    waiting: list[int]           # activations waiting for their W after it
    op_last: list[int]           # per op, the index of its last part


def inflight_walk(ops: Iterable[Op], full: dict[int, float] | None = None,
                  pending_w: dict[int, float] | None = None) -> InflightWalk:
    """The in-flight rule, the one place it is written (the timeline, the scene's in-flight
    lines and the memory accounting all walk a run order through it).

    A forward leaves its activation alive until the backward that consumes it has finished:
    a ``B`` frees it; a split backward's ``I`` keeps it, shrunk to ``pending_w[stage]``
    (default: unchanged), until its ``W`` frees that. ``full`` maps a stage to what one
    activation counts (default 1). Read after every part of every op, so an overlapped
    pair's forward counts before its backward frees.
    """
    whole: set = set()
    waiting: set = set()
    level, n_whole, n_waiting = 0.0, 0, 0
    levels, wholes, waitings, op_last = [], [], [], []
    add_level, add_whole, add_waiting = levels.append, wholes.append, waitings.append
    for op in ops:
        for a in op.parts:
            kind = a.kind
            w = 1.0 if full is None else full[a.stage]
            if kind == "F":
                whole.add((a.stage, a.microbatch))
                level += w
                n_whole = len(whole)
            else:
                key = (a.stage, a.microbatch)
                if kind == "I" and key in whole:
                    whole.remove(key)
                    waiting.add(key)
                    n_whole, n_waiting = n_whole - 1, n_waiting + 1
                    if pending_w is not None:
                        level += pending_w[a.stage] - w
                elif kind == "W" and key in waiting:
                    waiting.remove(key)
                    n_waiting -= 1
                    level -= w if pending_w is None else pending_w[a.stage]
                elif kind in ("B", "W") and key in whole:
                    whole.remove(key)
                    n_whole -= 1
                    level -= w
            add_level(level)
            add_whole(n_whole)
            add_waiting(n_waiting)
        op_last.append(len(levels) - 1)
    return InflightWalk(levels, wholes, waitings, op_last)


def inflight_profile(ops: Iterable[Op], weights: dict[int, float] | None = None) -> list[float]:
    """Activations alive after each part of each op of one rank's run order (``inflight_walk``;
    ``weights`` maps a stage to how much one of its activations counts, default 1)."""
    return inflight_walk(ops, weights).levels


def peak_inflight_of(schedule: Schedule, stage_equivalents: bool = False) -> list[float]:
    """Per-rank peak of microbatch activations held at once, read off the schedule's run
    order (``Timeline.peak_inflight`` reads it off the order a run's events took).

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


#: the name the lessons call (``from pplab import peak_inflight``)
peak_inflight = peak_inflight_of


@dataclass
class Timeline:
    """Events per rank plus the metrics the course talks about.

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
    events: list[Event]
    source: str = "simulated"
    schedule: Schedule | None = None
    meta: dict = field(default_factory=dict)
    #: communication intervals (empty unless the stream model or a trace recorded them);
    #: the metrics below read compute events only
    transfers: list[Transfer] = field(default_factory=list)

    # ---- columns: a simulation's events before any is read ------------------------------
    @classmethod
    def from_run(cls, schedule: Schedule, run, source: str = "simulated",
                 meta: dict | None = None, transfers=None) -> "Timeline":
        """A timeline kept as the simulator's columns (``sim.fast.Run``: per op its
        rank, start and end, plus the run order). ``events`` is made on first read; the
        metrics, the per-rank figures and the canvases' strips read the columns, so a
        64-rank pipeline's slider move never builds its ~100 000 Event objects.
        ``transfers``: a list, or a function that makes it on first read (the stream model's
        messages)."""
        tl = cls.__new__(cls)
        tl.__dict__.update(num_ranks=schedule.P, source=source, schedule=schedule,
                           meta={} if meta is None else meta, _run=run)
        if callable(transfers):
            tl.__dict__["_make_transfers"] = transfers
        else:
            tl.__dict__["transfers"] = [] if transfers is None else transfers
        return tl

    def __getattr__(self, name):
        made = self.__dict__
        if name == "events" and made.get("_run") is not None:
            events = made["events"] = run_events(made["_run"], self.schedule)
            return events
        if name == "transfers" and "_make_transfers" in made:
            transfers = made["transfers"] = made.pop("_make_transfers")()
            return transfers
        raise AttributeError(name)

    def _columns(self):
        """The simulator's columns while no event has been read (then the events rule:
        a caller may have changed them)."""
        return None if "events" in self.__dict__ else self.__dict__.get("_run")

    def _rank_slices(self, run):
        """Per rank, its ops' starts and ends in run order."""
        b, start, end = run.bounds, run.start, run.end
        return [(start[lo:hi], end[lo:hi]) for lo, hi in zip(b, b[1:])]

    # ---- metrics -------------------------------------------------------------------------
    def _extent(self) -> tuple[float, float, list[float]]:
        """(first start, last end, busy time per rank) in one pass over the events."""
        run = self._columns()
        if run is not None:                 # the columns never change: worked out once
            extent = self.__dict__.get("_run_extent")
            if extent is None:
                extent = self.__dict__["_run_extent"] = _run_extent(self, run)
            return extent[0], extent[1], list(extent[2])
        start, end, busy = float("inf"), float("-inf"), [0.0] * self.num_ranks
        for e in self.events:
            if e.start < start:
                start = e.start
            if e.end > end:
                end = e.end
            busy[e.rank] += e.end - e.start
        return (start, end, busy) if self.events else (0.0, 0.0, busy)

    @property
    def start(self) -> float:
        """When the first op starts (0 for a measured step, which is shifted there)."""
        return self._extent()[0]

    @property
    def makespan(self) -> float:
        """First start to last end: one step's time, the figure every bubble metric divides."""
        start, end, _ = self._extent()
        return end - start

    def rank_events(self, rank: int) -> list[Event]:
        """``rank``'s events in the order they ran (``events_by_rank`` for all ranks at once)."""
        return sorted((e for e in self.events if e.rank == rank), key=_START_END)

    def events_by_rank(self) -> list[list[Event]]:
        """``rank_events(r)`` for every rank in one pass over the events (a loop over
        ``rank_events`` reads all events once per rank, slow at P = 64)."""
        run = self._columns()
        if run is not None:           # a rank's run order is its (start, end) order
            new, ops, b = partial(tuple.__new__, Event), _flat_ops(self.schedule), run.bounds
            with gc_paused():
                return [list(map(new, zip(repeat(r), ops[lo:hi], run.start[lo:hi],
                                          run.end[lo:hi])))
                        for r, (lo, hi) in enumerate(zip(b, b[1:]))]
        out: list[list[Event]] = [[] for _ in range(self.num_ranks)]
        for e in self.events:
            out[e.rank].append(e)
        for evs in out:
            evs.sort(key=_START_END)
        return out

    @property
    def busy(self) -> list[float]:
        """Per rank, the time its ops ran (compute only, not transfers)."""
        return self._extent()[2]

    def _capacity_and_work(self) -> tuple[float, float]:
        """(ranks × makespan, busy time summed over ranks): every bubble metric is made of
        these two."""
        start, end, busy = self._extent()
        return self.num_ranks * (end - start), sum(busy)

    @property
    def idle(self) -> float:
        """Rank-time spent waiting: P × makespan − Σ busy, the bubble in time units."""
        capacity, work = self._capacity_and_work()
        return capacity - work

    @property
    def bubble_fraction(self) -> float:
        """idle ÷ (P × makespan): GPipe's bubble, (P−1)/(M+P−1) for GPipe."""
        capacity, work = self._capacity_and_work()
        return (capacity - work) / capacity if capacity > 0 else 0.0

    @property
    def bubble_ratio(self) -> float:
        """idle ÷ busy: Megatron-LM's bubble, (P−1)/M for GPipe."""
        capacity, work = self._capacity_and_work()
        return (capacity - work) / work if work > 0 else 0.0

    @property
    def spans(self) -> list[float]:
        """Per rank: first op's start to last op's end (0 for a rank that ran nothing)."""
        run = self._columns()
        if run is not None:
            return [max(e) - min(s) if s else 0.0 for s, e in self._rank_slices(run)]
        first = [float("inf")] * self.num_ranks
        last = [float("-inf")] * self.num_ranks
        for e in self.events:
            if e.start < first[e.rank]:
                first[e.rank] = e.start
            if e.end > last[e.rank]:
                last[e.rank] = e.end
        return [b - a if b >= a else 0.0 for a, b in zip(first, last)]

    @property
    def bubble_rate_span(self) -> float:
        """Zero Bubble's bubble rate: (longest span − busiest rank's work) ÷ longest span."""
        span = max(self.spans, default=0.0)
        return (span - max(self.busy, default=0.0)) / span if span > 0 else 0.0

    @property
    def peak_inflight(self) -> list[int]:
        """Per-rank peak of activations alive, in the order the events actually ran."""
        run = self._columns()
        if run is not None:                 # a fast run's order per rank is the schedule's
            return run_peaks(run)
        return [int(round(max(inflight_profile(e.op for e in evs), default=0)))
                for evs in self.events_by_rank()]

    def rank_order(self, rank: int) -> list[str]:
        """``rank``'s ops as text in the order they ran: what to compare with its schedule row."""
        return [str(e.op) for e in self.rank_events(rank)]

    def rank_orders(self) -> list[list[str]]:
        """``rank_order`` for every rank, in one pass over the events."""
        return [[str(e.op) for e in evs] for evs in self.events_by_rank()]

    def metrics(self) -> dict:
        """The figures the CLI's ``--json`` and a run's result report, by name."""
        return {"makespan": self.makespan, "bubble_fraction": self.bubble_fraction,
                "bubble_ratio": self.bubble_ratio,
                "bubble_rate_span": self.bubble_rate_span, "busy": self.busy,
                "peak_inflight": self.peak_inflight}

    # ---- conversion ----------------------------------------------------------------------
    def shifted(self, offset: float) -> "Timeline":
        """A copy with every event and transfer moved by ``offset`` (measured steps start at 0)."""
        moved = [Event(e.rank, e.op, e.start + offset, e.end + offset) for e in self.events]
        xfers = [t._replace(start=t.start + offset, end=t.end + offset) for t in self.transfers]
        return Timeline(self.num_ranks, moved, self.source, self.schedule, dict(self.meta),
                        xfers)

    def to_dict(self) -> dict:
        """JSON form, times from the first start; ``from_dict`` reads it back."""
        t0 = self.start
        out = {"source": self.source, "num_ranks": self.num_ranks, **self.metrics(),
               "ranks": self.rank_orders(),
               "events": [dict(e.to_dict(), start=e.start - t0, end=e.end - t0)
                          for e in sorted(self.events, key=lambda e: (e.start, e.rank))],
               "meta": self.meta}
        if self.transfers:                 # absent when empty: older readers see no change
            out["transfers"] = [dict(t.to_dict(), start=t.start - t0, end=t.end - t0)
                                for t in self.transfers]
        return out

    def ops_per_rank(self) -> list[int]:
        """How many ops each rank ran (read off the columns where there are any)."""
        run = self._columns()
        if run is not None:
            b = run.bounds
            return list(map(sub, b[1:], b))
        return list(map(len, self.events_by_rank()))

    def rank_strip_columns(self):
        """Per rank ``(starts, ends, kinds)`` in run order, read off the columns where
        there are any (``scene.panels.rank_strips`` draws a 64-rank pipeline from these)."""
        run = self._columns()
        if run is None:
            return [([e.start for e in evs], [e.end for e in evs], [e.op.kind for e in evs])
                    for evs in self.events_by_rank()]
        kinds, b = op_kinds(run.keys), run.bounds
        return [(s, e, kinds[lo:hi]) for (s, e), lo, hi in zip(self._rank_slices(run), b, b[1:])]

    @classmethod
    def measured(cls, schedule: Schedule, rows, meta: dict) -> "Timeline":
        """A real step's ``(rank, action text, start, end)`` rows, moved to start at 0."""
        events = [Event(int(rk), parse_op(a), float(s), float(e)) for rk, a, s, e in rows]
        tl = cls(schedule.P, events, "measured", schedule, meta)
        return tl.shifted(-tl.start)

    @classmethod
    def from_dict(cls, d: dict, schedule: Schedule | None = None) -> "Timeline":
        """Back from ``to_dict`` (a saved or published run), with ``schedule`` if known."""
        events = [Event(int(e["rank"]), parse_op(e["action"]), float(e["start"]), float(e["end"]))
                  for e in d["events"]]
        xfers = [Transfer(int(t["src"]), int(t["dst"]), t["kind"], t["what"],
                          float(t["start"]), float(t["end"])) for t in d.get("transfers", ())]
        return cls(int(d["num_ranks"]), events, d.get("source", "measured"), schedule,
                   dict(d.get("meta", {})), xfers)


def _flat_ops(schedule: Schedule) -> list[Op]:
    return list(chain.from_iterable(schedule.ranks))


def run_events(run, schedule: Schedule) -> list[Event]:
    """A simulation's Event objects from its columns, in the reference's order."""
    order, ops = run.order, _flat_ops(schedule)
    new = partial(tuple.__new__, Event)
    with gc_paused():
        return list(map(new, zip(map(run.rank.__getitem__, order), map(ops.__getitem__, order),
                                 map(run.start.__getitem__, order),
                                 map(run.end.__getitem__, order))))


def _run_extent(tl: Timeline, run) -> tuple[float, float, list[float]]:
    """``Timeline._extent`` from columns, with the same float sums (each rank's busy time
    added up op by op in run order, as the loop over events does)."""
    slices = tl._rank_slices(run)
    busy = [reduce(add, map(sub, e, s), 0.0) for s, e in slices]
    if not run.order:
        return 0.0, 0.0, busy
    return (min(min(s) for s, _ in slices if s), max(max(e) for s, e in slices if e), busy)


def op_kinds(op_keys) -> list[str]:
    """Each op's kind (``"FB"`` for an overlapped pair) from its integer key."""
    if op_keys and max(op_keys) >= PAIR_BASE:
        return ["FB" if keys.is_pair(k) else keys.kind_of(k) for k in op_keys]
    return list(map(KINDS.__getitem__, map(and_, op_keys, repeat(KIND_MASK))))


def _kind_delta(kind: str) -> int:
    """What one ``kind`` part does to the count of activations alive, read off the rule."""
    walk = inflight_walk([parse_op("0F0"), parse_op(f"0{kind}0")])
    return int(walk.levels[-1]) - 1


@cache
def _deltas() -> tuple[int, ...]:
    """Per kind code, what an op does to its rank's live activations (F +1, B -1, I 0,
    W -1): ``run_peaks``' integer form of ``inflight_walk``, read on first use (not at
    import, where a grading edition that cuts the rule could not run it)."""
    return tuple(map(_kind_delta, KINDS))


def run_peaks(run) -> list[int]:
    """``inflight_profile``'s peak per rank, from the keys of a run the simulator accepted
    (so each B or W frees a forward run earlier on its rank); an overlapped pair counts
    its forward's activation before its backward frees one, as the profile does."""
    b, out, delta = run.bounds, [], _deltas()
    for lo, hi in zip(b, b[1:]):
        row = run.keys[lo:hi]
        if row and max(row) >= PAIR_BASE:
            steps = chain.from_iterable(
                (delta[k & KIND_MASK],) if k < PAIR_BASE else
                (1, delta[keys.kind_code_of(keys.halves(k)[1])]) for k in row)
        else:
            steps = map(delta.__getitem__, map(and_, row, repeat(KIND_MASK)))
        out.append(max(accumulate(steps), default=0))
    return out

