"""Derivations checked on random (P, M): the bubble, makespan and activation peak of a
schedule the lessons never show — "1F1B, weights last": 1F1B's order with every backward
split, the input-gradient part (I) where 1F1B runs B, and all weight-gradient parts (W) at
the end of the rank's list.

The student derives closed forms; the graders build the schedule here and simulate it at
tf = 1, tb = 2, tw = 1 (so I = 1), on cases drawn at grading time.
"""
from __future__ import annotations

import math

from ..ir import Action, Schedule
from ..sim import Costs, simulate
from ..timeline import peak_inflight
from .bubble import _call, _fail
from .guard import graded

DERIVE_COSTS = Costs(tf=1.0, tb=2.0, tw=1.0)
#: visible cases: P = 1, M < P, M = P, larger
VISIBLE = [(1, 3), (2, 2), (3, 2), (4, 4), (4, 8), (6, 3), (8, 16)]


def weights_last(P: int, M: int) -> Schedule:
    """1F1B's order with B → I and every W moved to the end of the rank."""
    ranks = []
    for r in range(P):
        warm = min(P - r - 1, M)
        order = [Action(r, "F", m) for m in range(warm)]
        for i in range(M - warm):
            order += [Action(r, "F", warm + i), Action(r, "I", i)]
        order += [Action(r, "I", m) for m in range(M - warm, M)]
        order += [Action(r, "W", m) for m in range(M)]
        ranks.append(tuple(order))
    return Schedule("1f1b-weights-last", P, M, tuple(range(P)), tuple(ranks))


def _close(a, b) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    except (TypeError, ValueError):
        return False


def _check(fn, label, truth, hint, cases) -> bool:
    for P, M in cases:
        want = truth(P, M)
        got = _call(fn, P, M)
        if not _close(got, want):
            _fail(f"{label}(P={P}, M={M}) returned {got!r}, but the simulated schedule gives "
                  f"{want:.6g}. Hint: {hint}")
    print(f"{label}: matches the simulated schedule on {len(cases)} (P, M) cases ✓")
    return True


def reference_makespan(P: int, M: int) -> float:
    return simulate(weights_last(P, M), DERIVE_COSTS).makespan


def reference_bubble(P: int, M: int) -> float:
    return simulate(weights_last(P, M), DERIVE_COSTS).bubble_ratio


def reference_peak(P: int, M: int) -> float:
    return float(max(peak_inflight(weights_last(P, M))))


@graded
def check_derived_makespan(makespan, cases=VISIBLE) -> bool:
    """``makespan(P, M)``: the simulated makespan of 1F1B-weights-last."""
    return _check(makespan, "makespan", reference_makespan,
                  "rank 0 is the last to finish: its forwards and input-gradients follow the "
                  "1F1B pattern with I in B's place, then it runs all M weight-gradients.",
                  cases)


@graded
def check_derived_bubble(bubble, cases=VISIBLE) -> bool:
    """``bubble(P, M)``: idle time ÷ busy time of 1F1B-weights-last."""
    return _check(bubble, "bubble", reference_bubble,
                  "idle = P × makespan − busy, busy = P·M·(tf + tb); every rank ends when "
                  "its own W's end, but the step ends when the last rank does.", cases)


@graded
def check_derived_peak(peak, cases=VISIBLE) -> bool:
    """``peak(P, M)``: the largest number of microbatch activations any rank holds."""
    return _check(peak, "peak", reference_peak,
                  "an activation is freed by its W, not by its I.", cases)
