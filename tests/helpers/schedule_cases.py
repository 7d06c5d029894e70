"""Every schedule the generators accept on a grid of (P, M, V): shared by the test modules."""
import functools
import itertools

from pplab.registry import NAMES, make_schedule


@functools.cache
def _accepted(name, P, M, V):
    """The schedule, or None where its generator refuses (P, M, V); built once per process,
    since the grids of several modules overlap and a Schedule is frozen."""
    try:
        return make_schedule(name, P, M, V)
    except ValueError:
        return None


def valid_schedules(Ps, Ms, Vs):
    """The grid's combinations that some generator accepts (the others raise ValueError),
    each schedule once (V=None is the schedule's own V, which the grid may name too)."""
    out, seen = [], set()
    for name, P, M, V in itertools.product(NAMES, Ps, Ms, Vs):
        s = _accepted(name, P, M, V)
        if s is None:
            continue
        if (name, P, M, s.V) not in seen:
            seen.add((name, P, M, s.V))
            out.append(s)
    return out
