"""The in-flight rule, its one home: how many microbatches' activations a rank holds at each
moment of its run order.

The timeline's peaks, the scene's in-flight lines, the memory accounting and the generators
that cap what a rank holds all count through :data:`INFLIGHT_RULE` (read by
:func:`inflight_profile` and :func:`inflight_walk` only), so they cannot disagree;
tests/core/test_inflight_rule.py changes the rule and watches every reader follow.
"""
from __future__ import annotations

from itertools import accumulate, repeat
from operator import and_
from typing import Iterator, NamedTuple, Sequence

from . import keys
from .ir import OpRow, Schedule
from .keys import CLASS_MASK, KIND_MASK, KIND_SLOTS, KINDS, PAIR_BASE

#: The in-flight rule, its one home: what one part of an op does to the activations its rank
#: holds, as (whole, waiting for their W). A forward's activation stays alive until the
#: backward that consumes it: a B frees it; a split backward's I keeps it, shrunk to what its
#: W still needs, until the W frees that. Counted over a run order that validates (each B, I
#: and W after its forward), so a count is "forwards done minus B's and W's done".
INFLIGHT_RULE = {"F": (1, 0), "B": (-1, 0), "I": (-1, 1), "W": (0, -1)}


class InflightWalk(NamedTuple):
    """``inflight_walk``'s answer, one entry per part of each op of a run order."""
    levels: list[float]          # the weight alive after it
    whole: list[int]             # activations alive whole after it
    waiting: list[int]           # activations waiting for their W after it
    op_last: list[int]           # per op, the index of its last part


def _row_keys(ops) -> tuple[int, ...]:
    """A rank's ops as their keys: an ``OpRow``'s own, else each op's."""
    return ops.keys if type(ops) is OpRow else OpRow.of_ops(ops).keys


def _parts(row_keys) -> tuple[Sequence[int], list[int]]:
    """Each op's parts as action keys (a pair: its forward, then its backward, the order
    the rule counts them in) and, per op, the index of its last part."""
    if not row_keys or max(row_keys) < PAIR_BASE:
        return row_keys, list(range(len(row_keys)))
    parts: list[int] = []
    op_last = []
    for k in row_keys:
        if k >= PAIR_BASE:
            parts += keys.halves(k)
        else:
            parts.append(k)
        op_last.append(len(parts) - 1)
    return parts, op_last


def _level_steps(parts, full, pending_w) -> Iterator[float]:
    """Per part, what the rule does to the weight alive: a whole activation weighs
    ``full[stage]`` (default 1), one waiting for its W ``pending_w[stage]`` (default: as
    much as whole)."""
    if full is None and pending_w is None:          # a count: the kind alone decides
        count = [whole + waiting for whole, waiting in map(INFLIGHT_RULE.__getitem__, KINDS)]
        return map(count.__getitem__, map(and_, parts, repeat(KIND_MASK)))
    step: dict[int, float] = {}
    for c in set(map(and_, parts, repeat(CLASS_MASK))):
        stage, kind = divmod(c, KIND_SLOTS)
        w = 1.0 if full is None else full[stage]
        whole, waiting = INFLIGHT_RULE[KINDS[kind]]
        step[c] = whole * w + waiting * (w if pending_w is None else pending_w[stage])
    return map(step.__getitem__, map(and_, parts, repeat(CLASS_MASK)))


def inflight_profile(ops, full: dict[int, float] | None = None,
                     pending_w: dict[int, float] | None = None) -> list[float]:
    """The weight of activations alive after each part of each op of one rank's run order
    (``ops``: an ``OpRow`` or any ops), by :data:`INFLIGHT_RULE`; ``full`` maps a stage to
    what one of its activations counts, ``pending_w`` to what one waiting for its W counts
    (default: as much). With neither, a count (ints)."""
    parts, _ = _parts(_row_keys(ops))
    return list(accumulate(_level_steps(parts, full, pending_w)))


def inflight_walk(ops, full: dict[int, float] | None = None,
                  pending_w: dict[int, float] | None = None) -> InflightWalk:
    """``inflight_profile`` with the counts beside it: after every part, the weight alive,
    the activations alive whole and those waiting for their W; read after every part, so an
    overlapped pair's forward counts before its backward frees."""
    parts, op_last = _parts(_row_keys(ops))
    codes = list(map(and_, parts, repeat(KIND_MASK)))
    rule = [INFLIGHT_RULE[k] for k in KINDS]
    whole = list(accumulate(rule[c][0] for c in codes))
    waiting = list(accumulate(rule[c][1] for c in codes))
    return InflightWalk(list(accumulate(_level_steps(parts, full, pending_w))), whole,
                        waiting, op_last)


def peak_inflight_of(schedule: Schedule, stage_equivalents: bool = False) -> list[float]:
    """Per-rank peak of microbatch activations held at once, read off the schedule's run
    order (``Timeline.peak_inflight`` reads it off the order a run's ops took).

    With ``stage_equivalents`` each chunk counts by its share of the rank's layers (1/V for an
    interleaved chunk), which is what activation memory is proportional to.
    """
    weights = None
    if stage_equivalents:
        weights = {s: schedule.chunk_fraction(s) for s in range(schedule.num_stages)}
    peaks = [max(inflight_profile(ops, weights), default=0.0) for ops in schedule.ranks]
    return peaks if stage_equivalents else [int(round(p)) for p in peaks]


#: the name the lessons call (``from pplab import peak_inflight``)
peak_inflight = peak_inflight_of
