"""Schedule generators by name, as the command line and the canvases call them."""
from __future__ import annotations

from typing import Callable

from ..ir import Schedule
from .classic import gpipe, naive, one_f_one_b
from .dualpipe import dualpipe, dualpipev
from .interleaved import breadth_first, interleaved
from .zero_bubble import zb_h1, zb_h2, zbv

GENERATORS: dict[str, Callable[..., Schedule]] = {
    "naive": naive,
    "gpipe": gpipe,
    "1f1b": one_f_one_b,
    "interleaved": interleaved,
    "bfs": breadth_first,
    "zb-h1": zb_h1,
    "zb-h2": zb_h2,
    "zbv": zbv,
    "dualpipe": dualpipe,
    "dualpipev": dualpipev,
}
# Schedules whose placement fixes the number of stages per rank; V defaults accordingly.
FIXED_V = {"zbv": 2, "dualpipev": 2}
VIRTUAL_OK = {"interleaved", "bfs", "zbv", "dualpipev"}


def make_schedule(name: str, P: int, M: int, V: int | None = None) -> Schedule:
    """Build the named schedule; raises ValueError naming the rule broken and a valid value."""
    key = name.lower().replace("_", "-")
    key = {"afab": "gpipe", "pipedream-flush": "1f1b", "zb-v": "zbv", "zb1p": "zb-h1",
           "breadth-first": "bfs", "interleaved-1f1b": "interleaved"}.get(key, key)
    if key not in GENERATORS:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(GENERATORS)}")
    if V is None:
        V = FIXED_V.get(key, 2 if key in ("interleaved", "bfs") else 1)
    return GENERATORS[key](P, M, V)


__all__ = ["GENERATORS", "FIXED_V", "VIRTUAL_OK", "make_schedule"]
