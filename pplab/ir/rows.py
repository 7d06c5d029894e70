"""A rank's run order kept as integer keys (``pplab.keys``): ``OpRow``, a read-only sequence
of ops whose one storage is the keys; each op is made when it is read.

A 64-rank, 256-microbatch schedule is ~100 000 actions. The generators write them as keys in
bulk, the simulator compiles the keys and the timeline reads kinds off them, so a slider
never pays for an object it does not show.
"""
from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Iterable, Iterator

from .. import keys
from .actions import Action, Op, Overlap

#: the largest stage and microbatch a key holds (``pplab.keys``' layout)
MAX_STAGE = keys.KEY_STRIDE // keys.KIND_SLOTS - 1
MAX_MICROBATCH = (keys.PAIR_BASE >> keys.MICROBATCH_SHIFT) - 1


def action_key(a: Action) -> int:
    """The integer key (``pplab.keys``) the simulator knows ``a`` by. ValueError for a stage
    or microbatch the layout cannot hold (negative, or past ``MAX_STAGE`` / ``MAX_MICROBATCH``)."""
    if not (0 <= a.stage <= MAX_STAGE and 0 <= a.microbatch <= MAX_MICROBATCH):
        raise ValueError(f"{a}: stages run 0..{MAX_STAGE} and microbatches 0..{MAX_MICROBATCH}")
    return keys.key_of(a.kind, a.stage, a.microbatch)


def op_key(op: Op) -> int:
    """The key of an Action, or of an Overlap (``keys.pair_key`` of its halves)."""
    t = type(op)
    if t is Action:
        return action_key(op)
    if t is Overlap:
        return keys.pair_key(action_key(op.forward), action_key(op.backward))
    raise TypeError(f"a rank's run order holds actions and overlapped pairs, not {op!r}")


def action_maker(kind: str):
    """A constructor of ``kind`` actions, ``make(stage, microbatch)``, for the generators: it
    skips the dataclass ``__init__``'s kind check (the kind is known valid here)."""
    if kind not in keys.KINDS:
        raise ValueError(f"unknown action kind {kind!r}")
    new = object.__new__

    def make(stage: int, microbatch: int) -> Action:
        a = new(Action)
        a.__dict__.update(stage=stage, kind=kind, microbatch=microbatch)
        return a
    make.__name__ = kind
    return make


def action_of_key(key: int) -> Action:
    """The Action an integer key stands for."""
    a = object.__new__(Action)
    a.__dict__.update(stage=keys.stage_of(key), kind=keys.kind_of(key),
                      microbatch=keys.microbatch_of(key))
    return a


def op_of_key(key: int) -> Op:
    """The Action, or for a pair's key the Overlap, a key stands for."""
    if key >= keys.PAIR_BASE:
        forward, backward = keys.halves(key)
        return Overlap(action_of_key(forward), action_of_key(backward))
    return action_of_key(key)


class OpRow(Sequence):
    """One rank's ops in run order: a read-only sequence of Actions and Overlaps whose one
    storage is ``keys``, a tuple of integer keys. ``row[k]`` and iteration make the ops.

    ``stream_runs``: where each stream's ops sit in the row, as its generator wrote them
    (``schedules._common.Streams.runs``), or None; the simulator's compile reads it instead
    of looking every key up. It is a fact about ``keys``, so rows with equal keys are equal.
    """
    __slots__ = ("keys", "stream_runs")

    def __init__(self, row_keys: Iterable[int], stream_runs=None):
        object.__setattr__(self, "keys", tuple(row_keys))
        object.__setattr__(self, "stream_runs", None if stream_runs is None else
                           MappingProxyType({s: tuple(r) for s, r in stream_runs.items()}))

    @classmethod
    def of_ops(cls, ops: Iterable[Op]) -> "OpRow":
        """The row of these Actions and Overlaps (their keys)."""
        return cls(map(op_key, ops))

    def __reduce__(self):
        runs = None if self.stream_runs is None else dict(self.stream_runs)
        return OpRow, (self.keys, runs)

    def __setattr__(self, name, value):
        raise AttributeError(f"an OpRow is read-only; {name} cannot be set")

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(map(op_of_key, self.keys[i]))
        return op_of_key(self.keys[i])

    def __iter__(self) -> Iterator[Op]:
        return map(op_of_key, self.keys)

    def __contains__(self, op) -> bool:
        try:
            return op_key(op) in self.keys
        except (TypeError, ValueError):
            return False

    def __add__(self, other) -> tuple:
        """``row + other``: the ops of both, as a tuple (as two rows of tuples added)."""
        return tuple(self) + tuple(other)

    def __radd__(self, other) -> tuple:
        return tuple(other) + tuple(self)

    def __eq__(self, other) -> bool:
        if isinstance(other, OpRow):
            return self.keys == other.keys
        if isinstance(other, (tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.keys)

    def __repr__(self) -> str:
        return f"OpRow({' '.join(map(str, self))})"
