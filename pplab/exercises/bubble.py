"""Graders for exercise 01: the bubble (two denominators), 1F1B's order, in-flight counts,
and a schedule written by hand."""
from __future__ import annotations

import math
from typing import Callable, Sequence

from ..ir import Schedule
from ..registry import make_schedule
from ..sim import simulate
from ..timeline import peak_inflight
from . import guard
from .guard import graded
from .normalise import Unreadable, as_data, schedule_rows

#: (P, M) cases the graders use: small, P=1, M<P, M=P, odd sizes, the notebook's own example
CASES = [(1, 1), (1, 5), (2, 1), (2, 2), (2, 3), (3, 2), (3, 7), (4, 8), (5, 3), (5, 5),
         (5, 16), (8, 4), (8, 8), (8, 32)]


def _fail(msg: str):
    raise AssertionError(msg)


def _call(fn, *args):
    """Call the student's function with the grader's library paths blocked and read its
    answer with :func:`~.normalise.as_data` (the grade reads it alike after the wire); an
    unimplemented stub or an unreadable answer becomes a clear AssertionError."""
    if not callable(fn):
        _fail(f"expected a function, got {type(fn).__name__}: define it with def")
    if getattr(fn, "remote", False):        # the grading sandbox's handle: no guard needed
        return _readable(as_data(fn(*args)), fn)
    try:
        got = guard.call(lambda *a: as_data(fn(*a)), *args)    # a generator runs guarded too
    except NotImplementedError as e:
        raise AssertionError(f"{getattr(fn, '__name__', 'your function')} is not implemented "
                             f"yet ({e}) — replace the `raise NotImplementedError` line") from None
    return _readable(got, fn)


def _readable(got, fn):
    if isinstance(got, Unreadable):
        _fail(f"{getattr(fn, '__name__', 'your function')} returned something that cannot be "
              f"graded: {got.text}")
    return got


def _close(a, b) -> bool:
    return isinstance(a, (int, float)) and math.isclose(float(a), float(b), rel_tol=1e-9,
                                                        abs_tol=1e-12)


@graded
def check_bubble_formulas(bubble_of_total: Callable[[int, int], float],
                          bubble_of_ideal: Callable[[int, int], float], cases=CASES) -> bool:
    """Both of the student's formulas must match the simulated GPipe and 1F1B bubble.

    ``bubble_of_total(P, M)`` is idle ÷ (P × makespan); ``bubble_of_ideal(P, M)`` is
    idle ÷ busy time. Checked against the simulator (tf=1, tb=2, no communication).
    """
    for P, M in cases:
        for name in ("gpipe", "1f1b"):
            tl = simulate(make_schedule(name, P, M))
            got_t, got_i = _call(bubble_of_total, P, M), _call(bubble_of_ideal, P, M)
            if not _close(got_t, tl.bubble_fraction):
                _fail(f"bubble_of_total({P}, {M}) returned {got_t!r}, but the simulated {name} "
                      f"run idles {tl.bubble_fraction:.6f} of all rank-time (P × makespan = "
                      f"{P} × {tl.makespan:g}). Hint: idle time per rank is (P−1)·(tf+tb); the "
                      "total is that plus the busy time M·(tf+tb).")
            if not _close(got_i, tl.bubble_ratio):
                _fail(f"bubble_of_ideal({P}, {M}) returned {got_i!r}, but the simulated {name} "
                      f"run's idle time is {tl.bubble_ratio:.6f} of its busy time. Hint: divide "
                      "the same idle time by the ideal (busy) time M·(tf+tb) instead.")
    print(f"bubble formulas: correct on {len(cases)} (P, M) cases, both gpipe and 1f1b ✓")
    return True


@graded
def check_one_f_one_b_rank(one_f_one_b_rank: Callable[[int, int, int], Sequence[str]],
                           cases=CASES) -> bool:
    """``one_f_one_b_rank(P, M, rank)`` must give that rank's 1F1B run order as action text."""
    n = 0
    for P, M in cases:
        ref = make_schedule("1f1b", P, M).rank_texts()
        for r in range(P):
            got = _call(one_f_one_b_rank, P, M, r)
            if isinstance(got, str):
                got = got.split()
            got = [str(x).strip() for x in got]
            if got != ref[r]:
                first = next((i for i, (a, b) in enumerate(zip(got, ref[r])) if a != b),
                             min(len(got), len(ref[r])))
                _fail(f"one_f_one_b_rank(P={P}, M={M}, rank={r}) differs from 1F1B at position "
                      f"{first}: got {got[first:first + 4]}…, expected {ref[r][first:first + 4]}…\n"
                      f"  expected: {' '.join(ref[r])}\n  got:      {' '.join(got)}\n"
                      f"Hint: rank {r} first runs min(P−rank−1, M) = {min(P - r - 1, M)} "
                      "warm-up forwards, then alternates one forward and one backward, then "
                      "drains the remaining backwards.")
            n += 1
    print(f"1F1B order: all {n} ranks over {len(cases)} (P, M) cases match ✓")
    return True


@graded
def check_inflight(inflight_peak: Callable[[Sequence[str]], int],
                   peak_1f1b: Callable[[int, int, int], int] | None = None,
                   cases=CASES) -> bool:
    """``inflight_peak(actions)``: peak activations held by one rank running ``actions`` in
    order; ``peak_1f1b(P, M, rank)``: the closed form for 1F1B. Checked on gpipe, 1f1b,
    zb-h1 (split backward: W frees the activation) and interleaved schedules."""
    n = 0
    for name in ("gpipe", "1f1b", "zb-h1", "interleaved"):
        for P, M in cases:
            try:
                sched = make_schedule(name, P, M)
            except ValueError:
                continue
            peaks = peak_inflight(sched)
            for r, texts in enumerate(sched.rank_texts()):
                got = _call(inflight_peak, list(texts))
                if got != peaks[r]:
                    _fail(f"inflight_peak on {name} P={P} M={M} rank {r} returned {got!r}, "
                          f"expected {peaks[r]}. Actions: {' '.join(texts[:12])}"
                          f"{' …' if len(texts) > 12 else ''}\nHint: a forward adds one "
                          "activation (per stage and microbatch); a B, or the W of a split "
                          "backward, frees it; an I frees nothing.")
                n += 1
    if peak_1f1b is not None:
        for P, M in cases:
            peaks = peak_inflight(make_schedule("1f1b", P, M))
            for r in range(P):
                got = _call(peak_1f1b, P, M, r)
                if got != peaks[r]:
                    _fail(f"peak_1f1b(P={P}, M={M}, rank={r}) returned {got!r}, but the 1F1B run "
                          f"order holds at most {peaks[r]} activations on that rank. Per-rank "
                          f"peaks for P={P}, M={M}: {peaks}. "
                          "Hint: look at what happens when M < P.")
                n += 1
    print(f"in-flight counts: {n} rank checks passed ✓")
    return True


def student_schedule(rows: Sequence[str], P: int, M: int) -> Schedule:
    """Parse a student's per-rank action text (one stage per rank) and validate it; any
    problem becomes an AssertionError that says what to fix."""
    from ..validate import ScheduleError, validate
    if rows is None or rows is Ellipsis:
        _fail("write your schedule first: one string of actions per rank")
    rows = schedule_rows(rows)
    if len(rows) != P:
        _fail(f"expected {P} rows (one per rank), got {len(rows)}")
    try:
        sched = Schedule.from_text(rows, stage_to_rank=list(range(P)), num_microbatches=M,
                                   name="yours")
        validate(sched)
    except (ScheduleError, ValueError) as e:
        _fail(f"your schedule does not validate: {e}")
    return sched


@graded
def check_text_schedule(rows: Sequence[str], P: int, M: int,
                        max_bubble_of_ideal: float | None = None) -> bool:
    """A hand-written schedule must parse, have P ranks and M microbatches, validate (complete,
    deadlock-free) and, if given, keep its simulated bubble ÷ ideal at or under the target."""
    sched = student_schedule(rows, P, M)
    tl = simulate(sched)
    if max_bubble_of_ideal is not None and tl.bubble_ratio > max_bubble_of_ideal + 1e-9:
        _fail(f"your schedule validates, but its bubble is {tl.bubble_ratio:.1%} of the ideal "
              f"(makespan {tl.makespan:g}); the target is ≤ {max_bubble_of_ideal:.1%}. Hint: start "
              "forwards of later microbatches before the first backward.")
    print(f"your schedule validates: makespan {tl.makespan:g}, bubble {tl.bubble_fraction:.1%} of "
          f"total, {tl.bubble_ratio:.1%} of ideal, peak in-flight {tl.peak_inflight} ✓")
    return True
