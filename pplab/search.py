"""Automatic schedule search: the shortest step found under a cap on in-flight activations.

Given P, M, V, costs (per stage too, via ``Costs.stage_scale``) and a cap K (activations per
rank, counted as the simulator counts them: one per stage-microbatch whose forward ran and
whose W has not), ``search`` returns a valid schedule whose every rank stays ≤ K.

How: Zero Bubble's list scheduler (``schedules.greedy``) seeds it on each placement that has
V stages per rank, every built-in schedule that fits the cap is a seed too, and a local
search then tries ``evaluations`` random moves of single ops within a rank, keeping any move
that does not lengthen the step. The budget is a count, not seconds, and the moves come from
``random.Random(seed)``: the same arguments give the same schedule on any machine, however
loaded. So the result never loses to a built-in that fits (DualPipe
included: if it wins, the result trains two parameter copies, and ``copies`` says so). ``exact``
enumerates every order on tiny instances to show how far from optimal that lands.
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from .ir import Action, Schedule
from .registry import NAMES, make_schedule
from .schedules._common import build, looped_placement, v_placement
from .schedules.greedy import Problem, list_schedule
from .sim import Costs, DeadlockError, simulate
from .timeline import Timeline, peak_inflight


@dataclass
class SearchResult:
    """The best schedule found, its timeline, and what it was compared against."""
    schedule: Schedule
    timeline: Timeline
    seed: str                                   # which starting point the winner grew from
    baselines: list[dict] = field(default_factory=list)
    evaluations: int = 0

    @property
    def makespan(self) -> float:
        return self.timeline.makespan

    @property
    def peak_inflight(self) -> list[int]:
        return peak_inflight(self.schedule)

    def to_dict(self) -> dict:
        return {"makespan": self.makespan, "peak_inflight": self.peak_inflight,
                "ranks": [" ".join(row) for row in self.schedule.rank_texts()],
                "stage_to_rank": list(self.schedule.stage_to_rank), "V": self.schedule.V,
                "copies": self.schedule.copies,
                "seed": self.seed, "evaluations": self.evaluations,
                "bubble_ratio": self.timeline.bubble_ratio, "baselines": self.baselines}


def _check(P: int, M: int, V: int, cap: int) -> None:
    for label, value in (("P", P), ("M", M), ("V", V), ("the cap (--max-inflight)", cap)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"search: {label} must be a whole number ≥ 1, got {value!r}")


def placements(P: int, V: int) -> dict[str, tuple[int, ...]]:
    """Where stages may live for V stages per rank: looped always, the V shape at V = 2."""
    out = {"looped": looped_placement(P, V)}
    if V == 2:
        out["v-shape"] = v_placement(P)
    return out


def _durations(P: int, S: int, costs: Costs):
    scale = costs.stage_scale
    base = {"F": costs.tf, "I": costs.tb - costs.tw, "W": costs.tw}
    return lambda kind, s: base[kind] * P / S * (1.0 if scale is None else scale[s]) + costs.fixed


def _fits(schedule: Schedule, cap: int) -> bool:
    return max(peak_inflight(schedule), default=0) <= cap


def _seeds(P, M, V, costs, cap):
    """(label, schedule) starting points, and the baselines' report rows."""
    seeds, rows = [], []
    for where, placement in placements(P, V).items():
        dur = _durations(P, len(placement), costs)
        for prefer in ("IFW", "FIW"):
            try:
                ops = list_schedule(Problem(P, M, placement, dur, costs.comm, cap), prefer)
            except ValueError:
                continue
            seeds.append((f"greedy {where} {prefer}",
                          build("search", P, M, placement, ops, V=V)))
    for name in NAMES:
        try:
            s = make_schedule(name, P, M, V)
            tl = simulate(s, costs)
        except ValueError:
            continue
        fits = _fits(s, cap)
        rows.append({"name": name, "makespan": tl.makespan,
                     "peak": max(peak_inflight(s), default=0), "fits": fits})
        if fits:
            seeds.append((name, s))
    return seeds, rows


def _evaluate(schedule: Schedule, costs: Costs, cap: int) -> float | None:
    """Makespan, or None when the order deadlocks or breaks the cap."""
    if not _fits(schedule, cap):
        return None
    try:
        return simulate(schedule, costs).makespan
    except DeadlockError:
        return None


def _moved(schedule: Schedule, rank: int, i: int, j: int) -> Schedule:
    ops = list(schedule.ranks[rank])
    ops.insert(j, ops.pop(i))
    ranks = list(schedule.ranks)
    ranks[rank] = tuple(ops)
    return Schedule("search", schedule.P, schedule.M, schedule.stage_to_rank, tuple(ranks),
                    schedule.V, schedule.copies)


def local_search(schedule: Schedule, costs: Costs, cap: int, evaluations: int,
                 rng: random.Random) -> tuple[Schedule, float, int]:
    """``evaluations`` tries of moving one op within its rank; keep moves that do not lengthen
    the step. Returns the best schedule, its makespan and the simulations run."""
    best, span = schedule, _evaluate(schedule, costs, cap)
    simulated = 0
    for _ in range(evaluations):
        rank = rng.randrange(schedule.P)
        n = len(best.ranks[rank])
        i = rng.randrange(n) if n else 0
        j = min(n - 1, max(0, i + rng.choice((-3, -2, -1, 1, 2, 3))))
        if n < 2 or i == j:
            continue
        cand = _moved(best, rank, i, j)
        got = _evaluate(cand, costs, cap)
        simulated += 1
        if got is not None and got <= span + 1e-12:
            best, span = cand, got
    return best, span, simulated


#: local-search tries when none are given: about a second at P = 4, M = 8 on one core
DEFAULT_EVALUATIONS = 1000


def search(P: int, M: int, V: int = 1, costs: Costs | None = None, cap: int | None = None,
           evaluations: int = DEFAULT_EVALUATIONS, seed: int = 0) -> SearchResult:
    """The shortest valid schedule found in ``evaluations`` local-search tries under ``cap``
    (default P·V); the same arguments always give the same schedule."""
    costs = Costs(tf=1, tb=2, tw=1) if costs is None else costs
    cap = P * V if cap is None else cap
    _check(P, M, V, cap)
    if not isinstance(evaluations, int) or evaluations < 0:
        raise ValueError(f"search: evaluations must be a whole number ≥ 0, got {evaluations!r}")
    seeds, rows = _seeds(P, M, V, costs, cap)
    if not seeds:
        raise ValueError(f"search: nothing fits a cap of {cap} activations per rank with "
                         f"V={V}; use --max-inflight {V} or more")
    scored = sorted(((simulate(s, costs).makespan, label, s) for label, s in seeds),
                    key=lambda x: x[0])
    rng = random.Random(seed)
    _, label, start = scored[0]
    best, span, evals = local_search(start, costs, cap, evaluations, rng)
    best = Schedule("search", P, M, best.stage_to_rank, best.ranks, V, best.copies)
    return SearchResult(best, simulate(best, costs), label, rows, evals)


# ---- exact, for tiny instances --------------------------------------------------------------
def _rank_orders(stage: int, M: int, cap: int):
    """Every order of one stage's F, I, W with each kind in microbatch order, F_m < I_m < W_m,
    holding at most ``cap`` activations (F adds one, W frees it): pruned while built."""
    def rec(f, i, w, acc):
        if w == M:
            yield tuple(acc)
            return
        if f < M and f - w < cap:
            yield from rec(f + 1, i, w, acc + [Action(stage, "F", f)])
        if i < f:
            yield from rec(f, i + 1, w, acc + [Action(stage, "I", i)])
        if w < i:
            yield from rec(f, i, w + 1, acc + [Action(stage, "W", w)])
    yield from rec(0, 0, 0, [])


def exact(P: int, M: int, costs: Costs, cap: int, limit: int = 200_000) -> tuple[float, Schedule]:
    """The optimal makespan over every per-rank order (one stage per rank, split backward,
    each kind in microbatch order). Refuses instances with more than ``limit`` candidates,
    as soon as it has counted that many (not after listing them all)."""
    _check(P, M, 1, cap)
    per_rank, count = [], 1
    for r in range(P):
        orders = []
        for o in _rank_orders(r, M, cap):
            orders.append(o)
            if count * len(orders) > limit:
                raise ValueError(f"exact: more than {limit} candidate schedules is too many; "
                                 "try P·M ≤ 6")
        per_rank.append(orders)
        count *= len(orders)
    best = (float("inf"), None)
    for combo in itertools.product(*per_rank):
        s = build("exact", P, M, range(P), [list(c) for c in combo])
        try:
            span = simulate(s, costs).makespan
        except DeadlockError:
            continue
        if span < best[0] - 1e-12:
            best = (span, s)
    return best
