"""Every schedule the generators accept on a grid of (P, M, V): shared by the test modules."""
import itertools

from pplab.registry import NAMES, make_schedule


def valid_schedules(Ps, Ms, Vs):
    """The grid's combinations that some generator accepts (the others raise ValueError)."""
    out = []
    for name, P, M, V in itertools.product(NAMES, Ps, Ms, Vs):
        try:
            out.append(make_schedule(name, P, M, V))
        except ValueError:
            continue
    return out
