"""The schedule IR: actions, overlapped pairs, and a Schedule (placement + per-rank order).

Text form of an action is ``{stage}{kind}{microbatch}``: ``0F1`` is the forward of microbatch 1
through stage 0, ``3B0`` the full backward of microbatch 0 on stage 3. The number before the
kind is always the *stage*; which rank runs it is the schedule's placement. ``I`` is the
backward for inputs and ``W`` the backward for weights (zero-bubble schedules split ``B`` into
the two). An overlapped forward+backward pair, as DualPipe runs it, prints ``(0F3;5B1)``.

A *lowered* schedule (pplab/lower.py) adds the point-to-point half-messages as ``Comm``
items, in torch.distributed.pipelining's spelling: ``1SEND_F0`` (stage 1 sends the
activation of microbatch 0), ``2RECV_F0`` (stage 2 receives it), ``2SEND_B0`` / ``1RECV_B0``
for the gradient going back.
"""
from __future__ import annotations

import gc
import re
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Iterator, Sequence, Union

from . import keys
from .keys import KINDS

#: each kind's name in words, for legends and messages
KIND_NAMES = {"F": "forward", "B": "backward", "I": "backward (inputs)",
              "W": "backward (weights)", "FB": "overlapped forward+backward"}


@dataclass(frozen=True, order=True)
class Action:
    """One unit of work: a forward or (part of a) backward of one microbatch on one stage."""
    stage: int
    kind: str
    microbatch: int

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown action kind {self.kind!r}; kinds are F, B, I, W")

    @property
    def parts(self) -> tuple["Action", ...]:
        """Its parts: itself (an Overlap has two), so a walk over ``op.parts`` reads both alike."""
        return (self,)

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"


@dataclass(frozen=True)
class Overlap:
    """A forward and a full backward run as one overlapped unit (DualPipe's F&B chunk)."""
    forward: Action
    backward: Action

    def __post_init__(self):
        if self.forward.kind != "F" or self.backward.kind not in ("B", "I"):
            raise ValueError("an overlapped pair is a forward then a backward, e.g. (0F3;5B1)")

    kind = "FB"

    @property
    def parts(self) -> tuple[Action, Action]:
        """The forward, then the backward: the order the in-flight rule counts them in."""
        return (self.forward, self.backward)

    def __str__(self) -> str:
        return f"({self.forward};{self.backward})"


#: torch's names; the stage is the sender's for SEND_*, the receiver's for RECV_*
COMM_KINDS = ("SEND_F", "RECV_F", "SEND_B", "RECV_B")


@dataclass(frozen=True, order=True)
class Comm:
    """One side of a point-to-point message in a lowered schedule (see the module doc)."""
    stage: int
    kind: str
    microbatch: int

    def __post_init__(self):
        if self.kind not in COMM_KINDS:
            raise ValueError(f"unknown comm kind {self.kind!r}; kinds are {', '.join(COMM_KINDS)}")

    @property
    def is_send(self) -> bool:
        """True for the sending half of the message."""
        return self.kind.startswith("SEND")

    @property
    def forward(self) -> bool:
        """True for the activation (F) direction, False for the gradient (B) direction."""
        return self.kind.endswith("F")

    @property
    def peer_stage(self) -> int:
        """The stage at the other end: activations flow up the stages, gradients down."""
        return self.stage + (1 if self.forward == self.is_send else -1)

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"


#: one entry of a rank's run order: an action, or an overlapped pair run as one unit
Op = Union[Action, Overlap]


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while a large schedule or timeline is built.

    Building one makes ~100 000 small objects that form no cycles, and the collector would
    otherwise sweep the growing heap hundreds of times on the way (a third of the time of a
    P=64, M=256 make + simulate). It runs again, as before, afterwards."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
#: one entry of a lowered rank list: compute or one side of a message
Item = Union[Action, Overlap, Comm]
_ACTION_RE = re.compile(r"^\s*(\d+)\s*([FBIW])\s*(\d+)\s*$")
_OVERLAP_RE = re.compile(r"^\s*\(([^;()]+);([^;()]+)\)\s*(OVERLAP_F_B)?\s*$")
_COMM_RE = re.compile(r"^\s*(\d+)(SEND_F|RECV_F|SEND_B|RECV_B)(\d+)\s*$")


def parse_op(text: str) -> Op:
    """Parse ``'0F1'`` or ``'(0F3;5B1)'`` into an Action or Overlap."""
    m = _OVERLAP_RE.match(text)
    if m:
        return Overlap(parse_op(m.group(1)), parse_op(m.group(2)))
    m = _ACTION_RE.match(text)
    if not m:
        raise ValueError(f"cannot read action {text!r}: expected stage, kind, microbatch "
                         "like '0F1', '3B0', '2W5' or an overlapped pair '(0F3;5B1)'")
    return Action(int(m.group(1)), m.group(2), int(m.group(3)))


def parse_item(text: str) -> Item:
    """Parse a lowered entry: a compute op (torch's ``(0F3;5B1)OVERLAP_F_B`` too) or a
    ``Comm`` like ``1SEND_F0``."""
    m = _COMM_RE.match(text)
    if m:
        return Comm(int(m.group(1)), m.group(2), int(m.group(3)))
    return parse_op(text)


@dataclass(frozen=True)
class Schedule:
    """Which rank runs which stage, and the order each rank runs its actions in.

    ``copies`` is 1 except for DualPipe, which trains two copies of the model in opposite
    directions: stages ``0..S-1`` form copy 0, ``S..2S-1`` copy 1, and each copy sees
    ``M / copies`` microbatches numbered from 0. ``num_microbatches`` counts all of them.
    """
    name: str
    num_ranks: int
    num_microbatches: int
    stage_to_rank: tuple[int, ...]
    ranks: tuple[tuple[Op, ...], ...]
    virtual: int = 1
    copies: int = 1

    # ---- shape -------------------------------------------------------------------------
    @property
    def P(self) -> int:
        """Pipeline ranks (the papers' P)."""
        return self.num_ranks

    @property
    def M(self) -> int:
        """Microbatches per step, over all copies (the papers' M)."""
        return self.num_microbatches

    @property
    def V(self) -> int:
        """Stages (chunks) per rank and copy: 1, or V when interleaved."""
        return self.virtual

    @property
    def num_stages(self) -> int:
        """Stages of all copies together."""
        return len(self.stage_to_rank)

    @cached_property
    def stages_per_copy(self) -> int:            # asked for every action the simulator runs
        """Stages one copy of the model is cut into (all of them unless DualPipe)."""
        return self.num_stages // self.copies

    @property
    def microbatches_per_copy(self) -> int:
        """Microbatches each copy sees (DualPipe's copies share M)."""
        return self.num_microbatches // self.copies

    def stages_of_rank(self, rank: int) -> list[int]:
        """The stages placed on ``rank``, in stage order."""
        return [s for s, r in enumerate(self.stage_to_rank) if r == rank]

    def copy_of(self, stage: int) -> int:
        """Which copy of the model ``stage`` belongs to (0 unless DualPipe)."""
        return stage // self.stages_per_copy

    def position(self, stage: int) -> int:
        """Index of the stage inside its copy of the model (0 = holds the embedding)."""
        return stage % self.stages_per_copy

    def is_first(self, stage: int) -> bool:
        """Whether ``stage`` holds its copy's embedding (its input comes from data)."""
        return self.position(stage) == 0

    def is_last(self, stage: int) -> bool:
        """Whether ``stage`` holds its copy's loss (its backward starts the chain)."""
        return self.position(stage) == self.stages_per_copy - 1

    @property
    def stage_share(self) -> float:
        """Share of one rank's layers (L/P) that each stage holds: P / stages per copy, 1/V
        when interleaved. The same for every stage, because a pplab schedule splits a
        copy's layers evenly over its stages (uneven splits live in the memory model)."""
        return self.num_ranks / self.stages_per_copy

    def chunk_fraction(self, stage: int) -> float:
        """``stage_share``, asked of one stage: the simulator and the memory model weigh
        each stage's work and activations by it. ValueError for a stage the schedule lacks,
        so a wrong stage is an error rather than a plausible answer."""
        if not 0 <= stage < len(self.stage_to_rank):
            raise ValueError(f"{self.name} has stages 0..{len(self.stage_to_rank) - 1}, "
                             f"not {stage}")
        return self.num_ranks / self.stages_per_copy

    def global_microbatch(self, stage: int, microbatch: int) -> int:
        """Index into the whole batch: DualPipe's copy 1 takes the second half."""
        return self.copy_of(stage) * self.microbatches_per_copy + microbatch

    def actions(self) -> Iterator[tuple[int, int, Op]]:
        """(rank, step, op) for every op in run order per rank."""
        for rank, ops in enumerate(self.ranks):
            for step, op in enumerate(ops):
                yield rank, step, op

    def owners(self) -> dict[Action, tuple[int, int]]:
        """Which (rank, step) runs each action (both parts of an overlapped pair map to it)."""
        return {a: (rank, step) for rank, step, op in self.actions() for a in op.parts}

    @cached_property
    def _backward_kind(self) -> dict[tuple[int, int], str]:
        return {(a.stage, a.microbatch): a.kind for _, _, op in self.actions()
                for a in op.parts if a.kind in ("B", "I")}

    def input_of(self, action: Action) -> Action | None:
        """The action on a neighbouring stage whose output ``action`` consumes, or None (a
        copy's first forward, its last backward, any W). The one place that answers "who
        makes my input": the simulator, the lowering and the worker all ask here."""
        key = self.input_key(action.stage, action.kind, action.microbatch)
        return None if key is None else Action(*key)

    def input_key(self, stage: int, kind: str, microbatch: int) -> tuple | None:
        """``input_of`` as a plain ``(stage, kind, microbatch)`` tuple: the simulator asks
        for every action, and tuples are quicker to build and hash than actions."""
        first, last = self._stage_ends
        if kind == "F":
            return None if first[stage] else (stage - 1, "F", microbatch)
        if kind == "W" or last[stage]:
            return None
        return (stage + 1, self._backward_kind.get((stage + 1, microbatch), "B"), microbatch)

    @cached_property
    def _stage_ends(self) -> tuple[list[bool], list[bool]]:
        """``is_first`` and ``is_last`` per stage, looked up once."""
        stages = range(self.num_stages)
        return [self.is_first(s) for s in stages], [self.is_last(s) for s in stages]

    @property
    def num_actions(self) -> int:
        """Actions over all ranks, a pair's two halves counted apart."""
        return sum(len(op.parts) for ops in self.ranks for op in ops)

    # ---- text ----------------------------------------------------------------------------
    def rank_texts(self) -> list[list[str]]:
        """Each rank's ops as text (``0F1``, ``(0F3;5B1)``), the form files and jobs carry."""
        return [[str(op) for op in ops] for ops in self.ranks]

    def to_text(self) -> str:
        """A ranks × steps grid, one row per rank, columns aligned."""
        texts = self.rank_texts()
        width = max((len(t) for row in texts for t in row), default=3)
        lines = [f"{self.name}: P={self.P} M={self.M} V={self.V} "
                 f"placement stage->rank {list(self.stage_to_rank)}"]
        for rank, row in enumerate(texts):
            lines.append(f"rank {rank}: " + " ".join(t.rjust(width) for t in row))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    @classmethod
    def from_text(cls, rows: Union[str, Sequence[Union[str, Sequence[str]]]], *,
                  stage_to_rank: Sequence[int] | None = None, num_microbatches: int | None = None,
                  name: str = "custom", virtual: int | None = None, copies: int = 1) -> "Schedule":
        """Build a schedule from per-rank action text, e.g. ``["0F0 0F1 0B0 0B1", "1F0 ..."]``.

        ``rows`` may also be one string with a line per rank (``rank 0:`` prefixes allowed).
        Without ``stage_to_rank`` the placement is read off the rows (each stage must appear on
        exactly one rank); without ``num_microbatches`` it is one more than the largest seen.
        """
        if isinstance(rows, str):
            rows = [ln for ln in rows.strip().splitlines() if ln.strip()]
        ranks: list[tuple[Op, ...]] = []
        for row in rows:
            if isinstance(row, str):
                row = re.sub(r"^\s*rank\s*\d+\s*:", "", row)
                tokens = re.findall(r"\([^)]*\)|[^\s,]+", row)
            else:
                tokens = list(row)
            ranks.append(tuple(parse_op(t) if isinstance(t, str) else t for t in tokens))
        parts = [a for ops in ranks for op in ops for a in op.parts]
        if stage_to_rank is None:
            found: dict[int, int] = {}
            for rank, ops in enumerate(ranks):
                for op in ops:
                    for a in op.parts:
                        if found.setdefault(a.stage, rank) != rank:
                            raise ValueError(f"stage {a.stage} appears on rank "
                                             f"{found[a.stage]} and rank {rank}; a stage "
                                             "lives on one rank")
            n = max(found, default=-1) + 1
            missing = [s for s in range(n) if s not in found]
            if missing:
                raise ValueError(f"stage {missing[0]} never appears; pass stage_to_rank explicitly")
            stage_to_rank = [found[s] for s in range(n)]
        if num_microbatches is None:
            num_microbatches = (max((a.microbatch for a in parts), default=-1) + 1) * copies
        if virtual is None:
            virtual = max(1, len(stage_to_rank) // max(1, len(ranks)) // copies)
        return cls(name, len(ranks), num_microbatches, tuple(stage_to_rank), tuple(ranks),
                   virtual, copies)

    # ---- interchange ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain JSON-able form (the runtime's job file carries it to every rank)."""
        return {"name": self.name, "P": self.P, "M": self.M, "V": self.V, "copies": self.copies,
                "stage_to_rank": list(self.stage_to_rank), "ranks": self.rank_texts()}

    @classmethod
    def from_dict(cls, d: dict) -> "Schedule":
        """Back from ``to_dict`` (the runtime's job file, a saved schedule)."""
        ranks = tuple(tuple(parse_op(t) for t in row) for row in d["ranks"])
        return cls(d["name"], int(d["P"]), int(d["M"]), tuple(d["stage_to_rank"]), ranks,
                   int(d.get("V", 1)), int(d.get("copies", 1)))

    # ---- integer keys (pplab/keys.py) ----------------------------------------------------
    @classmethod
    def from_keys(cls, name: str, P: int, M: int, stage_to_rank, rank_keys, V: int = 1,
                  copies: int = 1, streams=None) -> "Schedule":
        """A schedule given as each rank's integer keys (``pplab.keys``): its Action objects
        are made only when ``ranks`` is first read. A 64-rank, 256-microbatch schedule is
        ~100 000 actions; the simulator and the canvases read the keys, so a slider never
        pays for objects it does not show. ``streams``: per rank, where each stream's ops
        sit (``schedules._common.Streams.runs``), which lets the simulator find each op's
        input without looking keys up.
        """
        s = object.__new__(KeyedSchedule)
        s.__dict__.update(name=name, num_ranks=P, num_microbatches=M,
                          stage_to_rank=tuple(stage_to_rank), virtual=V, copies=copies,
                          _keys=tuple(rank_keys),
                          _streams=None if streams is None else tuple(streams))
        return s

    def rank_keys(self) -> tuple[list, ...] | None:
        """Each rank's ops as integer keys (``keys.pair_key`` for a pair), or None where an
        op is not an Action or Overlap (a lowered schedule's Comm)."""
        if "rank keys" not in self.derived:
            self.derived["rank keys"] = _keys_of(self.ranks)
        return self.derived["rank keys"]

    def stream_runs(self) -> tuple[dict, ...] | None:
        """Where each stream's ops sit per rank, as its generator wrote them
        (``Schedule.from_keys(streams=...)``), or None."""
        return None

    @cached_property
    def derived(self) -> dict:
        """What is worked out from this schedule alone, kept with it (the schedule never
        changes): its keys, the simulator's compiled plan, the stream model's lowered lists.
        A slider that moves only costs reuses them."""
        return {}


def action_key(a: Action) -> int:
    """The integer key (``pplab.keys``) the simulator knows ``a`` by."""
    return keys.key_of(a.kind, a.stage, a.microbatch)


def _keys_of(ranks) -> tuple[list, ...] | None:
    out = []
    for ops in ranks:
        row = []
        for op in ops:
            t = type(op)
            if t is Action:
                k = op.__dict__.get("_key")             # set by action_maker's actions
                row.append(action_key(op) if k is None else k)
            elif t is Overlap:
                row.append(keys.pair_key(action_key(op.forward), action_key(op.backward)))
            else:
                return None
        out.append(row)
    return tuple(out)


def action_maker(kind: str):
    """A constructor of ``kind`` actions, ``make(stage, microbatch)``, for the generators:
    it skips the dataclass ``__init__`` (the kind is known valid; a generator makes ~100 000
    actions at P=64, M=256) and keeps each action's integer key on it as ``_key`` (not a
    field: equality, hashing and printing ignore it), which the simulator reads."""
    new, cls = object.__new__, keys.class_of(kind, 0)
    stride, slots = keys.KEY_STRIDE, keys.KIND_SLOTS

    def make(stage: int, microbatch: int) -> Action:
        a = new(Action)
        d = a.__dict__
        d["stage"], d["kind"], d["microbatch"] = stage, kind, microbatch
        d["_key"] = microbatch * stride + stage * slots + cls      # keys.key_of, inlined
        return a
    make.__name__ = kind
    return make


def action_of_key(key: int) -> Action:
    """The Action an integer key stands for (its key kept on it, as ``action_maker`` does)."""
    a = object.__new__(Action)
    a.__dict__.update(stage=keys.stage_of(key), kind=keys.kind_of(key),
                      microbatch=keys.microbatch_of(key), _key=key)
    return a


def op_of_key(key) -> Op:
    """The Action, or for a pair's key the Overlap, a key stands for."""
    if keys.is_pair(key):
        forward, backward = keys.halves(key)
        return Overlap(action_of_key(forward), action_of_key(backward))
    return action_of_key(key)


class KeyedSchedule(Schedule):
    """A Schedule made by ``Schedule.from_keys``: ``ranks`` is built on first read. Equal to
    (and hashes as) the plain Schedule with the same fields."""

    @cached_property
    def ranks(self) -> tuple[tuple[Op, ...], ...]:
        """Each rank's ops, made from the keys on first read (the keys stay the source)."""
        with gc_paused():
            return tuple(tuple(map(op_of_key, row)) for row in self._keys)

    def rank_keys(self) -> tuple[list, ...]:
        """The keys the schedule was given, as they were given."""
        return self._keys

    def stream_runs(self) -> tuple[dict, ...] | None:
        """The stream positions the generator gave (``from_keys(streams=...)``)."""
        return self._streams

    def __eq__(self, other):
        if not isinstance(other, Schedule):
            return NotImplemented
        return _fields(self) == _fields(other)

    def __hash__(self):
        return hash(_fields(self))


def _fields(s: Schedule) -> tuple:
    return (s.name, s.num_ranks, s.num_microbatches, s.stage_to_rank, s.ranks, s.virtual,
            s.copies)
