"""Checks that a schedule — generated or written by a student — is complete and can run."""
from __future__ import annotations

from collections import Counter

from .ir import Schedule
from .sim import DeadlockError, execute


class ScheduleError(ValueError):
    """A schedule breaks a rule; the message names the first rule broken."""


def problems(schedule: Schedule) -> list[str]:
    """Every structural violation found (empty list when the schedule is complete)."""
    out: list[str] = []
    P, S = schedule.P, schedule.num_stages
    if len(schedule.ranks) != P:
        out.append(f"the schedule has {len(schedule.ranks)} rank lists for P={P} ranks")
    if S % schedule.copies or S < P:
        out.append(f"{S} stages cannot be placed on {P} ranks in {schedule.copies} copies")
    for s, r in enumerate(schedule.stage_to_rank):
        if not 0 <= r < P:
            out.append(f"stage {s} is placed on rank {r}, but ranks are 0..{P - 1}")
    if out:
        return out
    nmb = schedule.microbatches_per_copy
    seen = Counter()
    for rank, step, op in schedule.actions():
        for a in op.parts:
            where = f"rank {rank} step {step}: {a}"
            if not 0 <= a.stage < S:
                out.append(f"{where} names stage {a.stage}, but stages are 0..{S - 1}")
                continue
            if schedule.stage_to_rank[a.stage] != rank:
                out.append(f"{where} runs stage {a.stage}, which lives on rank "
                           f"{schedule.stage_to_rank[a.stage]}")
            if not 0 <= a.microbatch < nmb:
                out.append(f"{where} names microbatch {a.microbatch}, but microbatches are "
                           f"0..{nmb - 1}")
            seen[(a.stage, a.kind, a.microbatch)] += 1
    for (s, kind, mb), n in sorted(seen.items()):
        if n > 1:
            out.append(f"{s}{kind}{mb} runs {n} times; each must run exactly once")
    for s in range(S):
        for mb in range(nmb):
            f, b, i, w = (seen[(s, k, mb)] for k in "FBIW")
            if not f:
                out.append(f"{s}F{mb} never runs: every stage must run every microbatch forward")
            if b and (i or w):
                out.append(f"stage {s} microbatch {mb} has both B and I/W; use one or the other")
            elif not b and not (i and w):
                missing = f"{s}B{mb}" if not (i or w) else (f"{s}W{mb}" if i else f"{s}I{mb}")
                out.append(f"{missing} never runs: each forward needs its backward "
                           "(B, or I then W), or the gradients are wrong")
    return out


def validate(schedule: Schedule) -> Schedule:
    """Raise ScheduleError with the first violation in plain words; return the schedule if OK.

    Checks: every (stage, microbatch) runs F once and its backward once (B, or I and W); each
    action runs on its stage's rank; every input can be produced; ranks running their lists
    in order cannot deadlock.
    """
    found = problems(schedule)
    if found:
        raise ScheduleError(found[0])
    try:
        execute(schedule, lambda op: 1.0)
    except DeadlockError as e:
        raise ScheduleError(str(e)) from None
    except ValueError as e:
        raise ScheduleError(str(e)) from None
    return schedule


def check(schedule: Schedule) -> str:
    """'ok' or the first violation: handy for graders and canvases that must not raise."""
    try:
        validate(schedule)
        return "ok"
    except ScheduleError as e:
        return str(e)
