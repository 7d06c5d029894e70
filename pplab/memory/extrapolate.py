"""The pipeline makespan at large M, from simulations at two small M.

Makespan and activation peak are affine in M once a pipeline is in steady state, so the
planner simulates two smaller M with the same residue and draws the line. What may be
extrapolated, and from where, is each schedule's own fact (``ScheduleSpec.planner``,
checked against direct simulation in tests/core/test_registry.py); a schedule without those
facts is simulated at its full M, never extrapolated on a guess.
"""
from __future__ import annotations

from functools import lru_cache

from ..registry import Extrapolation, make_schedule, spec
from ..sim import Costs, simulate

SIM_MAX_M = 48          # simulated directly up to here


def planner_traits(name: str) -> Extrapolation | None:
    """The schedule's extrapolation facts (None: always simulate it at its full M)."""
    return spec(name).planner


def reduced(M: int, P: int, name: str = "") -> tuple[int, int] | None:
    """Two smaller M with the same residue mod P (2P for odd P) and ≥ 2P: the divisibility
    and minimum-size rules of every schedule then hold for them exactly when they hold for M."""
    traits = planner_traits(name) if name else Extrapolation()
    if M <= SIM_MAX_M or traits is None:
        return None
    step = P if P % 2 == 0 else 2 * P
    if traits.period_2 and P % 2 == 0:
        step = 2
    lo = max((2 if traits.settles_at_2P else 1) * P, 8)
    if M < lo:          # below the steady state the rules may differ: M itself decides
        return None
    Ma = M - ((M - lo) // step) * step
    return Ma, Ma + step


def affine(f, M: int, P: int, name: str) -> float:
    """f(M), or f extrapolated on the line through f(Ma), f(Mb) for large M."""
    red = reduced(M, P, name)
    if red is None:
        return f(M)
    Ma, Mb = red
    fa, fb = f(Ma), f(Mb)
    return fa + (M - Ma) * (fb - fa) / (Mb - Ma)


def affine_uneven(f, M: int, P: int) -> float:
    """``affine`` for uneven stages: their pipelines settle later, so the line goes through
    M ≥ 4P and M + P (2P for odd P, whose V-shapes need M even): exact to 1e-14 against
    direct simulation at M = 240 for every planner schedule, P = 2..16, four imbalance
    patterns, p2p latency 0 and 0.05; from 2P or 3P it was off by up to 5%."""
    lo, step = 4 * P, (P if P % 2 == 0 else 2 * P)
    if M <= max(SIM_MAX_M, lo + step):
        return f(M)
    Ma = lo + (M - lo) % step
    fa, fb = f(Ma), f(Ma + step)
    return fa + (M - Ma) * (fb - fa) / step


@lru_cache(maxsize=4096)
def cached_schedule(name: str, P: int, M: int, V: int | None):
    return make_schedule(name, P, M, V)


def makespan_unit(name, P, M, V, tb, tw, comm, scale=None) -> float:
    """Makespan with tf = 1 (the simulation is scale-free: times scale together)."""
    traits = planner_traits(name)
    if traits is None:       # nothing known about its steady state: simulate it whole
        return sim_makespan(name, P, M, V, tb, tw, comm, scale)
    if traits.makespan_as and comm == 0:   # GPipe's bubble is 1F1B's (Megatron-LM §2.2.1)
        name, traits = traits.makespan_as, planner_traits(traits.makespan_as)
    red = reduced(M, P, name)
    if scale is not None:    # uneven stages: the steady state is paced by the slowest one
        lo = 4 * P
        exact = traits.slope_exact or (traits.slope_exact_without_p2p and comm == 0)
        if exact and M > max(SIM_MAX_M, lo + 2 * P):
            Ma = lo + (M - lo) % (2 * P)
            sch = cached_schedule(name, P, Ma, V)
            per = max(sum(sch.chunk_fraction(st) * scale[st] for st in sch.stages_of_rank(r))
                      for r in range(P))
            return sim_makespan(name, P, Ma, V, tb, tw, comm, scale) + (M - Ma) * (1 + tb) * per
        return affine_uneven(lambda m: sim_makespan(name, P, m, V, tb, tw, comm, scale), M, P)
    if red is not None and comm == 0 and traits.steady_without_idle:
        # Without p2p latency the steady state has no idle time: every extra microbatch adds
        # exactly one forward + one full backward (tf = 1, tb includes W) to the makespan.
        # One simulation then suffices (tested against direct simulation for every schedule).
        return sim_makespan(name, P, red[0], V, tb, tw, comm) + (M - red[0]) * (1 + tb)
    return affine(lambda m: sim_makespan(name, P, m, V, tb, tw, comm), M, P, name)


@lru_cache(maxsize=8192)
def sim_makespan(name, P, M, V, tb, tw, comm, scale=None) -> float:
    costs = Costs(tf=1.0, tb=tb, tw=tw, comm=comm, stage_scale=scale)
    return simulate(cached_schedule(name, P, M, V), costs).makespan
