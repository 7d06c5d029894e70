"""Shared helpers for the schedule generators: argument checks and placements."""
from __future__ import annotations

from itertools import repeat
from operator import lshift, or_

# ir as a module, not its functions: a derive-it task blocks every function this module
# holds (generators' helpers), and the simulator needs ir's own (key_of) in the sandbox
from .. import ir
from ..ir import KEY_STRIDE, KIND_CODE, PAIR_SHIFT, Action, Op, Schedule


def check_basics(name: str, P: int, M: int, V: int) -> None:
    """Reject the inputs no schedule accepts, with a message that says what would work."""
    for label, value in (("P (pipeline ranks)", P), ("M (microbatches)", M),
                         ("V (virtual stages per rank)", V)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name}: {label} must be a whole number, got {value!r}")
        if value < 1:
            raise ValueError(f"{name}: {label} must be at least 1, got {value}; try 1")


def no_virtual(name: str, V: int) -> None:
    if V != 1:
        raise ValueError(f"{name} has one stage per rank, got V={V}; use V=1, or the "
                         "'interleaved' schedule for virtual stages")


def looped_placement(P: int, V: int) -> tuple[int, ...]:
    """Megatron's interleaved placement: stage s lives on rank s mod P (rank r: r, r+P, ...)."""
    return tuple(s % P for s in range(P * V))


def v_placement(P: int) -> tuple[int, ...]:
    """V-shape: rank r holds stages r and 2P-1-r, so the first and last stage share rank 0."""
    return tuple(s if s < P else 2 * P - 1 - s for s in range(2 * P))


def _action(kind: str):
    """A constructor for one kind that skips dataclass ``__init__``: generators build one
    Action per op (about 100 000 at P=64, M=256) and the kind is known to be valid. It also
    caches the action's integer key (``ir.KEY_STRIDE``), which the fast simulator reads."""
    new, code = object.__new__, KIND_CODE[kind]

    def make(stage: int, mb: int) -> Action:
        a = new(Action)
        d = a.__dict__
        d["stage"], d["kind"], d["microbatch"] = stage, kind, mb
        d["_key"] = mb * KEY_STRIDE + stage * 4 + code     # ir.key_of, inlined: per action
        return a
    make.__name__ = kind
    return make


F, B, W = _action("F"), _action("B"), _action("W")
I = _action("I")  # noqa: E741 - the kind's name in the literature


def build(name: str, P: int, M: int, placement, ranks: list[list[Op]], V: int = 1,
          copies: int = 1) -> Schedule:
    return Schedule(name, P, M, tuple(placement), tuple(tuple(r) for r in ranks), V, copies)


def key_run(kind: str, stage: int, first: int, count: int) -> range:
    """The keys of ``count`` actions of one kind and stage, microbatches ``first`` on."""
    k = ir.key_of(kind, stage, first)
    return range(k, k + count * KEY_STRIDE, KEY_STRIDE)


class Streams:
    """One rank's op order written as repeated patterns of streams. A stream is one kind on
    one stage (a stage's B's and I's share one: each microbatch has one backward, full or
    split), whose microbatches come 0, 1, 2, ... in order, so a pattern repeated K times
    is filled with one slice assignment per stream: a 64-rank, 256-microbatch schedule is
    ~100 000 keys, made without a Python step per op."""

    def __init__(self):
        self.keys: list = []
        self.next: dict[tuple[str, int], int] = {}
        #: per stream, where its ops sit: ``(first position, step, count, half)`` runs in
        #: the order written (half 3 and 1: the forward and the backward half of an
        #: overlapped pair; 2: a W written by ``weight``, out of its stream's count)
        self.runs: dict[tuple[str, int], list] = {}

    def repeat(self, pattern, times: int) -> None:
        """Append ``times`` rounds of ``pattern`` (``(kind, stage)`` each, or a tuple of
        two of those for an overlapped pair); each stream at most once per round."""
        if times <= 0 or not pattern:
            return
        L, out, at = len(pattern), [0] * (len(pattern) * times), len(self.keys)
        for t, item in enumerate(pattern):
            if type(item[0]) is tuple:
                out[t::L] = map(or_, self._run(*item[0], times, (at + t, L, 3)), map(
                    lshift, self._run(*item[1], times, (at + t, L, 1)), repeat(PAIR_SHIFT)))
            else:
                out[t::L] = self._run(*item, times, (at + t, L, 0))
        self.keys += out

    def _run(self, kind: str, stage: int, times: int, where) -> range:
        stream = ("B" if kind == "I" else kind, stage)
        first = self.next.get(stream, 0)
        self.next[stream] = first + times
        pos, step, half = where
        self.runs.setdefault(stream, []).append((pos, step, times, half))
        return key_run(kind, stage, first, times)

    def one(self, kind: str, stage: int) -> int:
        """Append one action; its microbatch number is its stream's next."""
        k = self._run(kind, stage, 1, (len(self.keys), 1, 0))[0]
        self.keys.append(k)
        return k

    def weight(self, k: int) -> None:
        """Append the W whose key is ``k`` (a W postponed from its I: W's need not come in
        microbatch order, nothing waits for one)."""
        stage = (k & (KEY_STRIDE - 1)) >> 2           # half 2: its microbatch is its key's
        self.runs.setdefault(("W", stage), []).append((len(self.keys), 1, 1, 2))
        self.keys.append(k)
