"""Graders for exercise 02: interleaved layer placement, a hand-written split-backward
schedule that beats a bubble target, fixing a deadlock, and counting point-to-point messages."""
from __future__ import annotations

from collections import Counter
from typing import Callable, Sequence

from ..partition import stage_layers
from ..registry import make_schedule
from ..sim import Costs, simulate
from ..timeline import peak_inflight
from .bubble import _call, _fail, student_schedule
from .guard import graded
from .normalise import schedule_rows

#: (L, P, V) cases for layer placement: remainders, V=1, P=1, the notebook's own example
PLACEMENT_CASES = [(32, 4, 2), (8, 1, 2), (12, 3, 1), (10, 2, 2), (30, 4, 2), (24, 4, 3),
                   (72, 8, 3), (72, 8, 9), (17, 2, 4), (40, 5, 2), (9, 3, 3)]
#: (P, M, V) cases for message counts: P=1 sends nothing, V=1 is plain 1F1B
P2P_CASES = [(1, 4, 1), (1, 3, 2), (2, 2, 1), (2, 4, 2), (3, 3, 3), (4, 8, 1), (4, 8, 2),
             (4, 12, 4), (5, 5, 2), (8, 16, 3)]
#: the costs of the bubble-target task: a full backward of 2, of which W (weight grads) is 1
SPLIT_COSTS = Costs(tf=1.0, tb=2.0, tw=1.0)


def _reference_layers(L: int, P: int, V: int, r: int) -> list[int]:
    sched = make_schedule("interleaved", P, P, V)
    ranges = stage_layers(sched, L)
    return sorted(x for s in sched.stages_of_rank(r) for x in ranges[s])


@graded
def check_layer_placement(layers_on_rank: Callable[[int, int, int, int], Sequence[int]],
                          cases=PLACEMENT_CASES) -> bool:
    """``layers_on_rank(L, P, V, r)``: the layers rank r holds when L layers are cut into P·V
    stages (even split, remainder to the first stages) placed round-robin, stage s on rank
    s mod P. Checked against :func:`pplab.partition.stage_layers`."""
    n = 0
    for L, P, V in cases:
        for r in range(P):
            want = _reference_layers(L, P, V, r)
            got = _call(layers_on_rank, L, P, V, r)
            if isinstance(got, (list, tuple, range)) and len(got) > L:     # sets stay small
                _fail(f"layers_on_rank({L}, {P}, {V}, {r}) returned {len(got)} layer numbers, "
                      f"but the model has only {L} layers")
            try:
                got = sorted(int(x) for x in got)
            except (TypeError, ValueError):
                _fail(f"layers_on_rank({L}, {P}, {V}, {r}) returned {got!r}; return a list of "
                      "layer numbers, e.g. [0, 1, 2, 3, 16, 17, 18, 19]")
            if got != want:
                missing = sorted(set(want) - set(got))
                extra = sorted(set(got) - set(want))
                hint = ("Hint: cut the L layers into P·V stages with sizes differing by at most "
                        "one, larger first (L // (P·V) each plus one for the first L % (P·V)); "
                        "rank r holds stages r, r+P, r+2P, …")
                if L % (P * V) and len(got) < len(want):
                    hint += (f" Here {L} layers do not divide into {P * V} stages: dropping the "
                             f"remainder loses {L % (P * V)} layers from the model.")
                _fail(f"layers_on_rank(L={L}, P={P}, V={V}, r={r}) returned {got}, expected "
                      f"{want} (missing {missing}, not on this rank {extra}). {hint}")
            n += 1
    print(f"interleaved placement: {n} ranks over {len(cases)} (L, P, V) cases ✓")
    return True


def _rows(rows, P):
    if rows is None or rows is Ellipsis:
        _fail("write your schedule first: one string of actions per rank")
    rows = schedule_rows(rows)
    if len(rows) != P:
        _fail(f"expected {P} rows (one per rank), got {len(rows)}")
    return rows


@graded
def check_split_backward_schedule(rows, P: int = 2, M: int = 4,
                                  max_bubble_of_ideal: float = 0.10,
                                  max_peak: int | None = None) -> bool:
    """A hand-written schedule with split backwards (I and W) at tf=1, tb=2 (I=1, W=1): it
    must validate, keep bubble ÷ ideal ≤ the target and hold at most ``max_peak`` (default
    P, 1F1B's rank 0) microbatches on any rank."""
    rows = _rows(rows, P)
    sched = student_schedule(rows, P, M)
    max_peak = P if max_peak is None else max_peak
    tl = simulate(sched, SPLIT_COSTS)
    ref = simulate(make_schedule("1f1b", P, M), SPLIT_COSTS)
    peaks = peak_inflight(sched)
    if tl.bubble_ratio > max_bubble_of_ideal + 1e-9:
        _fail(f"your schedule validates, but its bubble is {tl.bubble_ratio:.1%} of the ideal "
              f"(makespan {tl.makespan:g}, ideal {M * 3:g}); the target is ≤ "
              f"{max_bubble_of_ideal:.1%} (1F1B: {ref.bubble_ratio:.1%}). Hint: split each "
              "backward on the first rank into I and W (e.g. 0I0 0W0): the last rank only waits "
              "for I, and W can fill the slots where the rank would otherwise idle.")
    if max(peaks) > max_peak:
        _fail(f"your schedule beats the bubble target but holds {max(peaks)} microbatches on a "
              f"rank (per rank {peaks}); keep it at most {max_peak}, 1F1B's peak. Hint: a "
              "microbatch's activations are freed by its W — start fewer forwards before it.")
    print(f"your schedule validates: makespan {tl.makespan:g} (1F1B {ref.makespan:g}), bubble "
          f"{tl.bubble_ratio:.1%} of ideal, peak in-flight {peaks} ✓")
    return True


@graded
def check_fixed_schedule(rows, broken: Sequence[str], P: int, M: int) -> bool:
    """The fixed schedule must validate and run exactly the broken schedule's actions on each
    rank — only the order may change."""
    rows, broken = _rows(rows, P), schedule_rows(broken)
    for r, (mine, theirs) in enumerate(zip(rows, broken)):
        a, b = Counter(str(mine).split()), Counter(str(theirs).split())
        if a != b:
            _fail(f"rank {r} must run the same actions as before, only in another order: "
                  f"missing {sorted((b - a).elements())}, extra {sorted((a - b).elements())}")
    sched = student_schedule(rows, P, M)
    tl = simulate(sched)
    print(f"fixed: validates; makespan {tl.makespan:g}, peak in-flight {tl.peak_inflight} ✓")
    return True


def count_p2p(P: int, M: int, V: int) -> int:
    """Messages one interleaved step sends (V=1: plain 1F1B), counted from the schedule."""
    from ..lower import p2p_messages
    return p2p_messages(make_schedule("interleaved", P, M, V))


@graded
def check_p2p_messages(p2p_messages: Callable[[int, int, int], int],
                       cases=P2P_CASES) -> bool:
    """``p2p_messages(P, M, V)``: point-to-point messages (activations forward, gradients
    backward) one step of interleaved 1F1B sends in total; V = 1 is 1F1B."""
    for P, M, V in cases:
        want = count_p2p(P, M, V)
        got = _call(p2p_messages, P, M, V)
        if got != want:
            _fail(f"p2p_messages(P={P}, M={M}, V={V}) returned {got!r}; counting the schedule's "
                  f"sends gives {want}. Hint: a microbatch crosses P·V − 1 stage boundaries on "
                  "the way forward and the same number on the way back, and every boundary "
                  "is between two different ranks when P > 1; with P = 1 nothing leaves the "
                  "rank.")
    print(f"message counts: {len(cases)} (P, M, V) cases match the schedules ✓")
    return True
