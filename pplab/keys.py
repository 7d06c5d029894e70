"""Integer keys: an action, or an overlapped pair, written as one int.

A 64-rank, 256-microbatch schedule has ~100 000 actions. Kept as ints, a generator makes them
in bulk, the simulator numbers them and the timeline reads their kinds without building an
object per action. The layout is named here and used through these names everywhere:

    action key  = microbatch · KEY_STRIDE + class        class = stage · KIND_SLOTS + kind code
    pair key    = forward key + backward key · PAIR_BASE

Kind codes: F 0, B 1, I 2, W 3 (``KINDS``). An action's *class* (its stage and kind: all its
duration depends on) is ``key & CLASS_MASK``; keys of one class come ``KEY_STRIDE`` apart, one
per microbatch, so a run of microbatches is a ``range``. An action key stays below
``PAIR_BASE``, so a key at or above it is a pair, and ``key & PAIR_CLASS_MASK`` is a pair's
class (both halves' classes). A *stream* is what the simulator walks in microbatch order: one
class, except that a stage's B's and I's share one (each microbatch has one backward, whole
or split).
"""
from __future__ import annotations

from itertools import repeat
from operator import lshift, or_

KINDS = ("F", "B", "I", "W")
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
KIND_SLOTS = 4                                 # kind codes per stage
KIND_MASK = KIND_SLOTS - 1                     # key & KIND_MASK: the kind code
MICROBATCH_SHIFT = 20                          # key >> MICROBATCH_SHIFT: the microbatch
KEY_STRIDE = 1 << MICROBATCH_SHIFT             # from one microbatch's key to the next's
CLASS_MASK = KEY_STRIDE - 1                    # key & CLASS_MASK: the class
PAIR_SHIFT = 40
PAIR_BASE = 1 << PAIR_SHIFT                    # keys from here on are overlapped pairs
ACTION_MASK = PAIR_BASE - 1                    # pair & ACTION_MASK: its forward half
PAIR_CLASS_MASK = CLASS_MASK | CLASS_MASK << PAIR_SHIFT

#: how one run of a stream's keys sits in a rank's list (``schedules._common.Streams.runs``,
#: read by the fast simulator): on its own, as the forward or the backward half of overlapped
#: pairs, or one W postponed out of its stream's order (its microbatch is its key's)
ALONE, PAIR_FORWARD, PAIR_BACKWARD, POSTPONED_W = ("alone", "pair forward", "pair backward",
                                                   "postponed W")


def class_of(kind: str, stage: int) -> int:
    """The class of ``kind`` on ``stage``: the key of its microbatch 0."""
    return stage * KIND_SLOTS + KIND_CODE[kind]


def key_of(kind: str, stage: int, microbatch: int = 0) -> int:
    return microbatch * KEY_STRIDE + stage * KIND_SLOTS + KIND_CODE[kind]


def key_run(kind: str, stage: int, first: int, count: int) -> range:
    """The keys of ``count`` actions of one kind and stage, microbatches ``first`` on."""
    k = first * KEY_STRIDE + stage * KIND_SLOTS + KIND_CODE[kind]
    return range(k, k + count * KEY_STRIDE, KEY_STRIDE)


def stage_of(key: int) -> int:
    """The stage of an action's key (or of a class)."""
    return (key & CLASS_MASK) // KIND_SLOTS


def kind_code_of(key: int) -> int:
    return key & KIND_MASK


def kind_of(key: int) -> str:
    return KINDS[key & KIND_MASK]


def microbatch_of(key: int) -> int:
    return key >> MICROBATCH_SHIFT


def with_kind(key: int, kind: str) -> int:
    """The key of the action of ``kind`` on the same stage and microbatch (an I's W)."""
    return key - (key & KIND_MASK) + KIND_CODE[kind]


def pair_key(forward: int, backward: int) -> int:
    """An overlapped pair's key from its halves' keys."""
    return forward | backward << PAIR_SHIFT


def pair_keys(forwards, backwards):
    """``pair_key`` of each forward and backward, in bulk (no Python step per pair)."""
    return map(or_, forwards, map(lshift, backwards, repeat(PAIR_SHIFT)))


def is_pair(key: int) -> bool:
    return key >= PAIR_BASE


def halves(key: int) -> tuple[int, int]:
    """A pair key's (forward, backward) action keys."""
    return key & ACTION_MASK, key >> PAIR_SHIFT


#: per kind code, the kind code of its stream: a stage's I's count as its B's
_STREAM_CODE = (KIND_CODE["F"], KIND_CODE["B"], KIND_CODE["B"], KIND_CODE["W"])


def stream_of(kind: str, stage: int) -> int:
    """The stream ``kind`` on ``stage`` belongs to (module doc), named by its first class."""
    return stage * KIND_SLOTS + _STREAM_CODE[KIND_CODE[kind]]


def stream_of_key(key: int) -> int:
    """The stream of an action's key (or of a class)."""
    code = key & KIND_MASK
    return (key & CLASS_MASK) - code + _STREAM_CODE[code]


def of_kind(op_keys, kind: str) -> list[int]:
    """The keys of ``kind``'s actions among ``op_keys`` (pairs left out), in order."""
    code = KIND_CODE[kind]
    return [k for k in op_keys if k < PAIR_BASE and k & KIND_MASK == code]
