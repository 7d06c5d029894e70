"""The memory-controllable V-shape family: V-Min, V-Half and V-ZB.

Source: Qi, Wan, Amar, Lin 2024, "Pipeline Parallelism with Controllable Memory" (NeurIPS).
Every rank holds two chunks in a V (stages r and 2P−1−r, as ZB-V) and each backward is
split into I and W. The paper shows the peak activation memory of such a schedule is set by
how far apart a microbatch's forward and its weight pass sit, and picks three points:
V-ZB about P·M_B (1F1B's peak, zero bubble), V-Half about (P+2)/2·M_B (half of it) and
V-Min about (P+4)/3·M_B (a third), paying with a bubble of roughly 0, P/(2M) and 2P/(3M)
of the ideal at t_F = t_I = t_W.

pplab reaches those peaks with Zero Bubble's list scheduler at unit costs under the
paper's cap, counted in half-stage chunks (M_B is two chunks), rather than by repeating the
paper's building block; tests check the peaks and bubbles it lands on.
"""
from __future__ import annotations

import math

from ..ir import Schedule
from ._common import build, check_basics, v_placement
from .greedy import Problem, list_schedule

#: chunk caps per rank (a chunk is half a stage, so M_B = 2 chunks)
CAPS = {
    "v-zb": lambda P: 2 * P,
    "v-half": lambda P: P + 2,
    "v-min": lambda P: max(2, math.ceil(2 * (P + 4) / 3)),
}


def _v_family(name: str, P: int, M: int, V: int) -> Schedule:
    if V is None:
        V = 2
    check_basics(name, P, M, V)
    if V != 2:
        raise ValueError(f"{name} always has 2 stages per rank (a V shape), got V={V}; use V=2")
    pb = Problem(P, M, v_placement(P), lambda kind, stage: 0.5, cap=CAPS[name](P))
    return build(name, P, M, v_placement(P), list_schedule(pb), V=2)


def v_zb(P: int, M: int, V: int = 2) -> Schedule:
    """V-ZB: the V shape at 1F1B's activation peak (2P chunks = P·M_B), zero bubble once
    M is large enough at t_F = t_I = t_W. Constraints: V = 2."""
    return _v_family("v-zb", P, M, V)


def v_half(P: int, M: int, V: int = 2) -> Schedule:
    """V-Half: half of 1F1B's activations (P+2 chunks = (P+2)/2·M_B), bubble about
    P/(2M) of the ideal. Constraints: V = 2."""
    return _v_family("v-half", P, M, V)


def v_min(P: int, M: int, V: int = 2) -> Schedule:
    """V-Min: a third of 1F1B's activations (⌈2(P+4)/3⌉ chunks ≈ (P+4)/3·M_B), bubble about
    2P/(3M) of the ideal. Constraints: V = 2."""
    return _v_family("v-min", P, M, V)
