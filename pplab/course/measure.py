"""Small measurements the questions and lessons share, all read off pplab's own simulator
and schedules (pure Python, so answers can be computed in the browser too)."""
from __future__ import annotations

from ..registry import make_schedule
from ..simulate import Costs, simulate


def timeline(name: str, P: int, M: int, V: int | None = None, **costs):
    return simulate(make_schedule(name, P, M, V), Costs(**costs) if costs else None)


def bubble_pct(name: str, P: int, M: int, V: int | None = None, ideal: bool = False,
               **costs) -> float:
    """The simulated bubble in percent, ÷ total rank-time or (``ideal``) ÷ ideal busy time."""
    tl = timeline(name, P, M, V, **costs)
    return 100 * (tl.bubble_ratio if ideal else tl.bubble_fraction)


def idle_per_rank(name: str, P: int, M: int, tf=1.0, tb=2.0, tw=0.0, tfb=None) -> float:
    """Absolute idle time per rank, DeepSeek-V3's way: makespan − the idlest rank's busy time
    (M·(tf + tb) unless overlapped pairs cost less than tf + tb)."""
    from ..overlap import worst_idle
    kw = dict(tf=tf, tb=tb, tw=tw)
    if tfb is not None:
        kw["tfb"] = tfb
    return worst_idle(timeline(name, P, M, **kw))


def warmup_forwards(schedule) -> list[int]:
    """Per rank: how many forwards it runs before its first backward (B or I)."""
    out = []
    for ops in schedule.ranks:
        kinds = [a.kind for op in ops for a in op.parts]
        first_b = next((i for i, k in enumerate(kinds) if k in "BI"), len(kinds))
        out.append(sum(k == "F" for k in kinds[:first_b]))
    return out


def steady_pairs(schedule) -> list[int]:
    """Per rank: forwards followed at once by a backward — 1F1B's steady-state pairs, as
    Megatron counts them (M minus the warm-up forwards)."""
    out = []
    for ops in schedule.ranks:
        kinds = [a.kind for op in ops for a in op.parts]
        out.append(sum(1 for a, b in zip(kinds, kinds[1:]) if a == "F" and b in "BI"))
    return out


def smallest_M(P: int, target: float, ideal: bool = False, name: str = "gpipe") -> int:
    """The smallest M whose simulated bubble is below ``target`` (a fraction)."""
    M = 1
    while bubble_pct(name, P, M, ideal=ideal) / 100 >= target:
        M += 1
    return M


def idle_split(tl) -> list[tuple[float, float, float]]:
    """Per rank: idle before its first op, between its first and last op, and after its last
    op (the three add up to makespan − the rank's busy time)."""
    out = []
    for r in range(tl.num_ranks):
        evs = tl.rank_events(r)
        first, last = min(e.start for e in evs), max(e.end for e in evs)
        head, tail = first - tl.start, tl.start + tl.makespan - last
        out.append((head, (last - first) - tl.busy[r], tail))
    return out
