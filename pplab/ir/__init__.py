"""The schedule IR: actions, overlapped pairs, and a Schedule (placement + per-rank order).

The text form of actions and messages is described in ``actions.py``.

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
