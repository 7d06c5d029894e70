"""The literature's closed forms for each schedule's bubble, in one place.

Each function takes the rank count P, microbatch count M (and V or costs where they matter)
and returns what the paper states; the registry attaches them to their schedules and the
tests check that the simulator reproduces them exactly under the stated conditions.
``excess`` is the bubble as absolute time per rank: makespan minus the busy time M·(tf+tb).
"""
from __future__ import annotations


def bubble_fraction(P: int, M: float, V: int = 1) -> float:
    """Idle ÷ total rank-time for GPipe/1F1B (V=1) and interleaved 1F1B: (P−1)/(V·M+P−1)."""
    idle = (P - 1) / V
    return idle / (M + idle)


def bubble_ratio(P: int, M: float, V: int = 1) -> float:
    """Idle ÷ ideal busy time (Megatron-LM's convention): (P−1)/(V·M)."""
    return (P - 1) / (V * M)


def bubble_both(P: int, M: float, V: int = 1) -> tuple[float, float]:
    """(bubble ÷ total, bubble ÷ ideal) for GPipe/1F1B (V=1) and interleaved 1F1B (V>1)."""
    return bubble_fraction(P, M, V), bubble_ratio(P, M, V)


def interleaved_messages(P: int, M: int, V: int = 1) -> int:
    """Point-to-point messages of one interleaved 1F1B step (1F1B at V = 1): each microbatch
    crosses the P·V − 1 chunk boundaries with its activation and back with its gradient,
    2·M·(P·V − 1). Against 1F1B's 2·M·(P − 1) the count grows by (P·V − 1)/(P − 1): a
    middle rank sends exactly V times as many, the whole pipeline a little more than V."""
    return 2 * M * (P * V - 1)


def _split(tf, tb, tw, tfb):
    tf, tb, tw = float(tf), float(tb), float(tw)
    return tf, tb, tw, tb - tw, (tf + tb if tfb is None else float(tfb))


def excess_naive(P, M, V=1, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    return (P - 1) * M * (float(tf) + float(tb))


def excess_1f1b(P, M, V=1, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    return (P - 1) * (float(tf) + float(tb)) / V


def excess_zb_h1(P, M, V=1, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    tf, tb, tw, _, _ = _split(tf, tb, tw, tfb)
    return (P - 1) * (tf + tb - 2 * tw)


def excess_zb_h2(P, M, V=1, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    tf, tb, tw, ti, _ = _split(tf, tb, tw, tfb)
    return max((P - 1) * tf, (P - 1) * (tf + ti - 2 * tw))


def excess_interleaved_zb(P, M, V=2, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    """ZB-H1's excess spread over V chunks: (P−1)(tf + tb − 2tw)/V."""
    tf, tb, tw, _, _ = _split(tf, tb, tw, tfb)
    return (P - 1) * (tf + tb - 2 * tw) / V


def excess_zbv(P, M, V=2, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    return (P - 1) * float(tf) / 2


def excess_v_min(P, M, V=2, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    """V-Min's building block repeated, squeezed and reordered (pplab.schedules.controllable):
    a chunk's pass is one slot of tf/2 and the step lasts 4P − 5 slots more than the work
    (two fewer when 3 divides P, where the block waits at its top). Exact at tf = tI = tw
    for M ≥ 2P."""
    return 0.0 if P == 1 else (4 * P - 5 - 2 * (P % 3 == 0)) * float(tf) / 2


def excess_v_half(P, M, V=2, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    """V-Half's block repeated, squeezed and reordered: 6⌈P/2⌉ − 7 slots of tf/2 (one at
    P = 2). Exact at tf = tI = tw for M ≥ 2P."""
    return 0.0 if P == 1 else max(1, 6 * -(-P // 2) - 7) * float(tf) / 2


def excess_v_zb(P, M, V=2, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    """V-ZB's block repeated, squeezed and reordered: only the V's start-up trip, (P−1)·tf/2,
    as ZB-V; no rank idles between its first and its last pass. Exact at tf = tI = tw for
    M ≥ 2P."""
    return (P - 1) * float(tf) / 2


def excess_dualpipe(P, M, V=1, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    tf, tb, tw, _, tfb = _split(tf, tb, tw, tfb)
    return (P // 2 - 1) * (tfb + tb - 3 * tw)


def excess_dualpipev(P, M, V=2, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    tf, tb, tw, _, tfb = _split(tf, tb, tw, tfb)
    return (P - 1) * (tfb + tb - 3 * tw) / 2


__all__ = ["excess_naive", "bubble_fraction", "bubble_ratio", "bubble_both", "excess_1f1b",
           "excess_zb_h1", "excess_interleaved_zb",
           "excess_zb_h2", "excess_zbv", "excess_v_min", "excess_v_half", "excess_v_zb",
           "excess_dualpipe",
           "excess_dualpipev"]
