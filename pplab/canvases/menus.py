"""Which schedules each lesson canvas offers in its menu, in the registry's teaching order.

A menu follows from a schedule's facts where it can (a free V: the interleaved canvas; a
split backward: the zero-bubble canvas); the rest are the lessons' own choices, listed here.
A new schedule in :mod:`pplab.registry` reaches the timeline, compare and run canvases, and
the menus its facts imply, with nothing to add here.
"""
from __future__ import annotations

from ..registry import NAMES, SPECS


def _where(fact) -> tuple[str, ...]:
    return tuple(s.name for s in SPECS if fact(s))


MENUS: dict[str, tuple[str, ...]] = {
    "timeline": NAMES,
    "interleaved": _where(lambda s: s.stages_per_rank == "any"),
    # the split-backward schedules, and 1F1B as their baseline (lesson 06)
    "zero-bubble": _where(lambda s: s.split_backward or s.name == "1f1b"),
    # the schedules whose simulated points sit on a closed-form curve (lesson 03)
    "bubble-curve": ("gpipe", "1f1b", "interleaved"),
    # the planner extrapolates each in M (``ScheduleSpec.planner``), so the bars keep up
    "memory": ("gpipe", "1f1b", "interleaved", "zb-h1", "zbv", "dualpipev"),
}


def menu(canvas: str) -> tuple[str, ...]:
    """The schedules ``canvas`` offers; ValueError naming the canvases for an unknown one."""
    if canvas not in MENUS:
        raise ValueError(f"unknown canvas {canvas!r}; choose one of {', '.join(MENUS)}")
    return MENUS[canvas]


__all__ = ["MENUS", "menu"]
