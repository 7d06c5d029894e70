"""Shared helpers for the schedule generators: argument checks and placements."""
from __future__ import annotations

# A derive-it task blocks every function this module holds (generators' helpers), re-exports
# included, except those of ir and keys: the guard never sweeps those up
# (pplab.exercises.guard.SHARED), so the simulator stays whole in the sandbox.
from ..ir import Op, Schedule, action_maker
from ..keys import (ALONE, PAIR_BACKWARD, PAIR_FORWARD, POSTPONED_W, key_run, pair_keys,
                    stream_of, stream_of_key)


#: the largest schedules built: far past any real pipeline (Llama 3 405B: P = 16, V = 8,
#: M = 16..64; Megatron-LM's Table 1: P ≤ 64), small enough to build and print in seconds
MAX_P, MAX_M, MAX_V = 1024, 16384, 64
MAX_STAGE_MICROBATCHES = 1 << 20       # P·V·M: each becomes an F and a backward


def check_basics(name: str, P: int, M: int, V: int) -> None:
    """Reject the inputs no schedule accepts, with a message that says what would work."""
    for label, value, top in (("P (pipeline ranks)", P, MAX_P), ("M (microbatches)", M, MAX_M),
                              ("V (virtual stages per rank)", V, MAX_V)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name}: {label} must be a whole number, got {value!r}")
        if value < 1:
            raise ValueError(f"{name}: {label} must be at least 1, got {value}; try 1")
        if value > top:
            raise ValueError(f"{name}: {label} must be at most {top}, got {value}")
    if P * V * M > MAX_STAGE_MICROBATCHES:
        raise ValueError(f"{name}: P·V·M = {P * V * M:,} stage-microbatches is more than the "
                         f"{MAX_STAGE_MICROBATCHES:,} a schedule may have; "
                         f"{suggest('M', max(1, MAX_STAGE_MICROBATCHES // (P * V)))}")


def suggest(label: str, *values: int) -> str:
    """"try M=4 or M=8" for the distinct values ≥ 1 in order: never "try M=4 or M=4"."""
    seen = [v for i, v in enumerate(values) if v >= 1 and v not in values[:i]]
    return "try " + " or ".join(f"{label}={v}" for v in seen)


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


#: constructors of each kind's actions, ``F(stage, microbatch)`` (``ir.action_maker``)
F, B, W = action_maker("F"), action_maker("B"), action_maker("W")
I = action_maker("I")  # noqa: E741 - the kind's name in the literature


def build(name: str, P: int, M: int, placement, ranks: list[list[Op]], V: int = 1,
          copies: int = 1) -> Schedule:
    return Schedule(name, P, M, tuple(placement), tuple(tuple(r) for r in ranks), V, copies)


class Streams:
    """One rank's op order written as repeated patterns of streams. A stream is one kind on
    one stage (a stage's B's and I's share one: each microbatch has one backward, full or
    split; ``keys.stream_of``), whose microbatches come 0, 1, 2, ... in order, so a pattern
    repeated K times is filled with one slice assignment per stream: a 64-rank,
    256-microbatch schedule is ~100 000 keys, made without a Python step per op."""

    def __init__(self):
        self.keys: list = []
        self.next: dict[int, int] = {}
        #: per stream, where its ops sit: ``(first position, step, count, how)`` runs in the
        #: order written; ``how`` is one of ``keys.ALONE``, ``PAIR_FORWARD``,
        #: ``PAIR_BACKWARD`` and ``POSTPONED_W`` (a W written by ``weight``)
        self.runs: dict[int, list] = {}

    def repeat(self, pattern, times: int) -> None:
        """Append ``times`` rounds of ``pattern`` (``(kind, stage)`` each, or a tuple of
        two of those for an overlapped pair); each stream at most once per round."""
        if times <= 0 or not pattern:
            return
        L, out, at = len(pattern), [0] * (len(pattern) * times), len(self.keys)
        for t, item in enumerate(pattern):
            if type(item[0]) is tuple:
                forward, backward = item
                out[t::L] = pair_keys(
                    self._run(*forward, times, (at + t, L, PAIR_FORWARD)),
                    self._run(*backward, times, (at + t, L, PAIR_BACKWARD)))
            else:
                out[t::L] = self._run(*item, times, (at + t, L, ALONE))
        self.keys += out

    def _run(self, kind: str, stage: int, times: int, where) -> range:
        stream = stream_of(kind, stage)
        first = self.next.get(stream, 0)
        self.next[stream] = first + times
        pos, step, how = where
        self.runs.setdefault(stream, []).append((pos, step, times, how))
        return key_run(kind, stage, first, times)

    def one(self, kind: str, stage: int) -> int:
        """Append one action; its microbatch number is its stream's next."""
        k = self._run(kind, stage, 1, (len(self.keys), 1, ALONE))[0]
        self.keys.append(k)
        return k

    def weight(self, k: int) -> None:
        """Append the W whose key is ``k`` (a W postponed from its I: W's need not come in
        microbatch order, nothing waits for one)."""
        stream = stream_of_key(k)
        self.runs.setdefault(stream, []).append((len(self.keys), 1, 1, POSTPONED_W))
        self.keys.append(k)
