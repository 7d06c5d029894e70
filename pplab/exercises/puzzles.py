"""Puzzles with targets: write a schedule whose simulated makespan is at most T and whose
activation peak is at most K on every rank. The targets are chosen so that no schedule in the
registry meets both (``tests/test_puzzles.py`` proves it and shows an answer that does).

Activation peaks count stage-equivalents (``peak_inflight(sched, stage_equivalents=True)``):
a V-shaped rank's half-size chunks count one half each.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Schedule
from ..registry import SPECS, make_schedule
from ..sim import Costs, simulate
from ..timeline import peak_inflight
from ..validate import ScheduleError, validate
from .bubble import _fail
from .guard import graded
from .normalise import schedule_rows

PUZZLE_COSTS = Costs(tf=1.0, tb=2.0, tw=1.0)


@dataclass(frozen=True)
class Puzzle:
    """One puzzle: shape, placement (stage -> rank), copies, the targets and a hint."""
    title: str
    P: int
    M: int
    placement: tuple[int, ...]
    max_makespan: float
    max_peak: float
    hint: str
    copies: int = 1


PUZZLES = {
    "memory-capped": Puzzle(
        "1F1B's speed on a memory diet", 4, 8, (0, 1, 2, 3), 31.0, 3.0,
        "rank 0 may hold only 3 microbatches: start 3 forwards, not 4, and let W (not I) "
        "free the activation — run each W as soon as a rank would otherwise idle"),
    "full-backward-capped": Puzzle(
        "Two microbatches, full backwards", 4, 8, (0, 1, 2, 3), 51.0, 2.0,
        "with only B (no split) and at most 2 microbatches alive, a rank must finish a "
        "backward before its third forward; alternate F and B as early as possible"),
    "zbv-by-hand": Puzzle(
        "ZB-V by hand, with less memory", 4, 8, (0, 1, 2, 3, 3, 2, 1, 0), 28.0, 2.5,
        "each microbatch goes down the V (stages 0→3 on ranks 0→3) and back up (4→7 on "
        "ranks 3→0); a chunk is half a rank's layers, so 5 chunks alive = 2.5 stage-"
        "equivalents; start fewer microbatches than ZB-V and fill gaps with W"),
    "dualpipe-two-ways": Puzzle(
        "Two directions at once", 4, 8, (0, 1, 2, 3, 3, 2, 1, 0), 25.0, 4.0,
        "copy 0 flows rank 0→3 (stages 0–3), copy 1 flows rank 3→0 (stages 4–7), 4 "
        "microbatches each (numbered 0–3 in each copy); start both ends at once so the "
        "first rank of one copy fills the other copy's warm-up bubble", copies=2),
}


def _schedule(rows, puzzle: Puzzle) -> Schedule:
    if rows is None or rows is Ellipsis:
        _fail("write your schedule first: one string of actions per rank")
    rows = schedule_rows(rows)
    if len(rows) != puzzle.P:
        _fail(f"expected {puzzle.P} rows (one per rank), got {len(rows)}")
    try:
        sched = Schedule.from_text(rows, stage_to_rank=list(puzzle.placement),
                                   num_microbatches=puzzle.M, copies=puzzle.copies,
                                   name="yours")
        validate(sched)
    except (ScheduleError, ValueError) as e:
        _fail(f"your schedule does not validate: {e}")
    return sched


def score(sched: Schedule) -> tuple[float, float]:
    """(makespan, largest per-rank activation peak in stage-equivalents) at the puzzle costs."""
    peak = max(peak_inflight(sched, stage_equivalents=True))
    return simulate(sched, PUZZLE_COSTS).makespan, peak


@graded
def check_puzzle(rows, name: str) -> bool:
    """The schedule must validate on the puzzle's placement and meet both targets."""
    puzzle = PUZZLES[name]
    makespan, peak = score(_schedule(rows, puzzle))
    if peak > puzzle.max_peak + 1e-9:
        _fail(f"your schedule validates but holds {peak:g} stage-equivalents of activations "
              f"on some rank; the cap is {puzzle.max_peak:g}. Hint: {puzzle.hint}.")
    if makespan > puzzle.max_makespan + 1e-9:
        _fail(f"your schedule validates and fits the cap, but its makespan is {makespan:g}; "
              f"the target is ≤ {puzzle.max_makespan:g}. Hint: {puzzle.hint}.")
    print(f"puzzle {name!r}: makespan {makespan:g} ≤ {puzzle.max_makespan:g}, peak {peak:g} ≤ "
          f"{puzzle.max_peak:g} ✓")
    return True


def builtin_scores(name: str, max_V: int = 4) -> list[tuple[str, int | None, float, float]]:
    """Every registry schedule (every V it accepts up to ``max_V``) at the puzzle's P and M
    that places its stages as the puzzle does (only those could be handed in as an answer):
    (name, V, makespan, peak) — what a student would get by copying the library."""
    puzzle = PUZZLES[name]
    out = []
    for spec in SPECS:
        for V in (range(1, max_V + 1) if spec.stages_per_rank == "any" else [None]):
            try:
                sched = make_schedule(spec.name, puzzle.P, puzzle.M, V)
            except ValueError:
                continue
            if tuple(sched.stage_to_rank) == tuple(puzzle.placement) \
                    and sched.copies == puzzle.copies:
                out.append((spec.name, V, *score(sched)))
    return out
