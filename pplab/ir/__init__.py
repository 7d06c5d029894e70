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

``actions.py`` holds the items and their text, ``rows.py`` a rank's run order kept as
integer keys (``OpRow``), ``schedule.py`` the Schedule.
"""
from ..keys import KINDS
from .actions import (COMM_KINDS, KIND_NAMES, Action, Comm, Item, Op, Overlap, gc_paused,
                      parse_item, parse_op)
from .rows import OpRow, action_key, action_maker, action_of_key, op_key, op_of_key
from .schedule import Schedule

__all__ = ["COMM_KINDS", "KINDS", "KIND_NAMES", "Action", "Comm", "Item", "Op", "OpRow",
           "Overlap", "Schedule", "action_key", "action_maker", "action_of_key", "gc_paused",
           "op_key", "op_of_key", "parse_item", "parse_op"]
