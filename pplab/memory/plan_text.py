"""The planner's ranking as text: a table of fitting layouts (``pplab plan``) and a few
layouts that do not fit, chosen to show why (the canvas of lesson 09 and the command)."""
from __future__ import annotations

from .planner import Candidate
from .units import fmt_bytes, fmt_seconds

HEADER = (f"{'#':>3} {'TP':>2} {'PP':>2} {'DP':>4} {'ZeRO':<6} {'schedule':<11} {'V':>1} "
          f"{'M':>4} {'b':>2} {'recompute':<9} {'SP':<3} {'step':>9} {'bubble':>6} "
          f"{'exposed comm':>12} {'peak (rank)':>15}  fits")


def plan_rows(cands: list[Candidate]) -> list[str]:
    """One row per fitting layout, fastest first, under a header."""
    rows = [HEADER]
    for i, c in enumerate(cands, 1):
        g = c.config
        zero = f"{g.zero} kept" if g.zero == 3 and g.zero3_regather == "per_step" else \
            str(g.zero)
        V = c.to_dict()["virtual"]
        peak = f"{fmt_bytes(c.peak_bytes)} ({c.peak_rank})"
        rows.append(f"{i:>3} {g.tp:>2} {g.pp:>2} {g.dp:>4} {zero:<6} {g.schedule:<11} {V:>1} "
                    f"{g.microbatches:>4} {g.microbatch:>2} {g.recompute:<9} "
                    f"{'yes' if g.sp else 'no':<3} {fmt_seconds(c.step_time, 4):>9} "
                    f"{c.bubble_fraction:>6.1%} {fmt_seconds(c.exposed_comm):>12} "
                    f"{peak:>15}  yes, {fmt_bytes(c.memory - c.peak_bytes)} to spare")
    return rows


def misses(cands: list[Candidate], limit: int) -> list[Candidate]:
    """Up to ``limit`` layouts that were left out: the nearest and the worst memory miss,
    then one of each other reason (a batch that does not divide, a schedule rule)."""
    bad = [c for c in cands if not c.feasible]
    mem = sorted((c for c in bad if c.over_memory), key=lambda c: c.peak_bytes)
    out = [mem[0], mem[-1]] if len(mem) > 1 else mem
    seen = set()
    for c in bad:
        kind = c.reason[:30]
        if c.over_memory or kind in seen:
            continue
        seen.add(kind)
        out.append(c)
    return out[:limit]
