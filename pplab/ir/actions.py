"""The IR's items: actions, overlapped pairs, and the two halves of a message.

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
from typing import Union

from ..keys import KINDS

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
