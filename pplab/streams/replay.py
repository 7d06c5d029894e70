"""The stream model at slider speed: a recorded run replayed with other numbers.

``worklist.StreamRun`` records, on the tag-matched transport, the steps that move a rank's
clock in the order they ran: an op, or a blocking receive's wait. That order depends on the
schedule, its lowering and whether receives block, never on a time. A later simulation of
the same schedule and lowering with other costs, latency or bandwidth (a slider) walks the
steps in one straight pass over arrays, the way ``fast.timing_pass`` walks the executor's
run order, with the run's own float operations, so the times are equal, not close
(tests/core/test_streams.py holds the two together on random costs and links):

* an op starts when its rank is free and every message it waits for has arrived (its
  receive was posted earlier on the same rank, so never later than that), and lasts its
  duration;
* a blocking receive moves its rank's clock to its message's arrival;
* a message posted after a step leaves at the rank's clock, or when the rank's send stream
  is free (one message after another, ``bytes / bandwidth`` each), and lands ``latency``
  after it is sent.

The result is columns (``timeline.RunColumns``, message times): the timeline makes its Event
and Transfer objects only when they are read.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Iterator, NamedTuple

from ..lower import Message
from ..sim.compiled import Inputs
from ..timeline import RunColumns, Transfer
from .worklist import WAIT


class Recording(NamedTuple):
    """A run's steps (``StreamRun.steps``), its messages by id (and their kinds, "act" or
    "grad") and its ops' run order."""
    steps: list
    messages: list[Message]
    kinds: list[str]
    order: list[int]


def recording(steps, messages: list[Message]) -> Recording:
    return Recording(steps, messages, [m.kind for m in messages],
                     [i for _, i, _, _ in steps if i != WAIT])


def replay(rec: Recording, pl: Inputs, duration: list[float], send_time: list[float],
           latency: float):
    """``(RunColumns, message leave times, message arrivals)`` for durations per op and send
    times per message (module doc)."""
    n, P = pl.n, len(pl.bounds) - 1
    start, end = [0.0] * n, [0.0] * n
    leave, arrive = [0.0] * len(rec.messages), [0.0] * len(rec.messages)
    now, send_free = [0.0] * P, [0.0] * P
    for rank, i, needs, sends in rec.steps:
        t = now[rank]
        for m in needs:
            a = arrive[m]
            if a > t:
                t = a
        if i != WAIT:
            start[i] = t
            t += duration[i]
            end[i] = t
        now[rank] = t
        for m in sends:
            s, free = t, send_free[rank]
            if free > s:
                s = free
            leave[m] = s
            free = send_free[rank] = s + send_time[m]
            arrive[m] = free + latency
    run = RunColumns(rec.order, pl.rank, start, end, pl.bounds, pl.keys)
    return run, leave, arrive


class ReplayedTransfers(Sequence):
    """A replay's transfers, a read-only sequence made when read, in the order the run lists
    them: per step, its op's all-to-alls (``a2a[cls[i]]``: ``(offset, length, label)``
    each, by the op's duration class), then the messages posted after it. Nothing is kept
    between reads: a slider move that draws no lane pays for none."""

    def __init__(self, rec: Recording, cls: list[int], a2a: dict, start: list[float], leave,
                 arrive):
        self._made = (rec, cls, a2a, start, leave, arrive)

    def __iter__(self) -> Iterator[Transfer]:
        rec, cls, a2a, start, leave, arrive = self._made
        msgs = rec.messages
        for rank, i, _, sends in rec.steps:
            if i != WAIT:
                t = start[i]
                for off, length, label in a2a[cls[i]]:
                    yield Transfer(rank, rank, "a2a", f"{label} all-to-all", t + off,
                                   t + off + length)
            for m in sends:
                msg = msgs[m]
                what = f"{msg.stage}{'F' if msg.kind == 'act' else 'B'}{msg.microbatch}"
                yield Transfer(msg.src, msg.dst, msg.kind, what, leave[m], arrive[m])

    def __len__(self) -> int:
        rec, cls, a2a = self._made[:3]
        return sum(len(sends) + (len(a2a[cls[i]]) if i != WAIT else 0)
                   for _, i, _, sends in rec.steps)

    def __getitem__(self, j):
        return list(self)[j]

    def __eq__(self, other) -> bool:
        if isinstance(other, (Sequence, list, tuple)) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None
