"""Shared helpers for the schedule generators: argument checks and placements."""
from __future__ import annotations

from ..ir import KEY_STRIDE, KIND_CODE, Action, Op, Schedule


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
        d["_key"] = mb * KEY_STRIDE + stage * 4 + code
        return a
    make.__name__ = kind
    return make


def actions(kind: str, pairs) -> list[Action]:
    """Actions of one kind for ``(stage, microbatch)`` pairs, made in one loop: no Python
    call per action, which is a third of what a P=64, M=256 schedule costs to build."""
    new, code, out = object.__new__, KIND_CODE[kind], []
    append = out.append
    for stage, mb in pairs:
        a = new(Action)
        d = a.__dict__
        d["stage"], d["kind"], d["microbatch"] = stage, kind, mb
        d["_key"] = mb * KEY_STRIDE + stage * 4 + code
        append(a)
    return out


F, B, W = _action("F"), _action("B"), _action("W")
I = _action("I")  # noqa: E741 - the kind's name in the literature


def build(name: str, P: int, M: int, placement, ranks: list[list[Op]], V: int = 1,
          copies: int = 1) -> Schedule:
    return Schedule(name, P, M, tuple(placement), tuple(tuple(r) for r in ranks), V, copies)
