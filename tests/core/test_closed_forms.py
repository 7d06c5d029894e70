"""The simulator must reproduce the literature's closed forms exactly (zero communication).

Costs are small integers or halves, so every time is exact in binary floating point and the
comparisons below are equalities, not approximations.
"""
from fractions import Fraction

import pytest

from pplab import make_schedule, peak_inflight, simulate


def frac(x: float) -> Fraction:
    return Fraction(x).limit_denominator(10**6)


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("P", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("M", [1, 2, 3, 4, 7, 8, 16])
def test_gpipe_and_1f1b_bubble(name, P, M):
    tl = simulate(make_schedule(name, P, M), tf=1, tb=2)
    assert tl.makespan == (M + P - 1) * 3
    assert frac(tl.bubble_fraction) == Fraction(P - 1, M + P - 1)   # GPipe paper: ÷ total
    assert frac(tl.bubble_ratio) == Fraction(P - 1, M)               # Megatron: ÷ ideal


@pytest.mark.parametrize("tf,tb", [(1, 2), (1, 1), (2, 3)])
def test_1f1b_excess_over_ideal(tf, tb):
    P, M = 6, 12
    tl = simulate(make_schedule("1f1b", P, M), tf=tf, tb=tb)
    assert tl.makespan - M * (tf + tb) == (P - 1) * (tf + tb)


@pytest.mark.parametrize("P", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("M", [1, 2, 4, 9])
def test_peak_inflight_1f1b_and_gpipe(P, M):
    """Corrects the seeds: 1F1B's rank r holds min(P−r, M), not P, min(k, P−k) or 1."""
    assert simulate(make_schedule("1f1b", P, M)).peak_inflight == [min(P - r, M) for r in range(P)]
    assert simulate(make_schedule("gpipe", P, M)).peak_inflight == [M] * P
    assert peak_inflight(make_schedule("1f1b", P, M)) == [min(P - r, M) for r in range(P)]


@pytest.mark.parametrize("P", [2, 3, 4, 8])
@pytest.mark.parametrize("V", [1, 2, 4])
@pytest.mark.parametrize("groups", [1, 2, 3])
def test_interleaved_bubble_ratio(P, V, groups):
    M = groups * P
    tl = simulate(make_schedule("interleaved", P, M, V), tf=1, tb=2)
    assert frac(tl.bubble_ratio) == Fraction(P - 1, V * M)
    assert tl.makespan - M * 3 == Fraction(3 * (P - 1), V)


def test_interleaved_v1_is_1f1b():
    for P in (2, 4):
        a = make_schedule("interleaved", P, 2 * P, 1).rank_texts()
        assert a == make_schedule("1f1b", P, 2 * P).rank_texts()


def test_interleaved_first_rank_memory():
    """Korthikanti §4.2.3: first rank holds about p + (p−1)/v stage-equivalents."""
    s = make_schedule("interleaved", 4, 8, 2)
    assert peak_inflight(s, stage_equivalents=True)[0] == 4 + 3 / 2


@pytest.mark.parametrize("P", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("extra", [0, 1, 5])
@pytest.mark.parametrize("tf,tb,tw", [(1, 2, 1), (2, 3, 1), (1, 2, 0.5), (2, 4, 2), (1, 3, 1),
                                      (1, 2, 0)])
def test_zb_h1_excess(P, extra, tf, tb, tw):
    """Zero Bubble Table 2: (P−1)(T_F + T_I − T_W) = (P−1)(tf + tb − 2tw), tw ≤ tf, tw ≤ tI."""
    M = P + extra
    tl = simulate(make_schedule("zb-h1", P, M), tf=tf, tb=tb, tw=tw)
    assert tl.makespan - M * (tf + tb) == (P - 1) * (tf + tb - 2 * tw)
    assert tl.peak_inflight == [min(P, M)] * P        # no more memory than 1F1B's rank 0


@pytest.mark.parametrize("P", [2, 4, 6, 8])
@pytest.mark.parametrize("mult", [2, 3, 4, 6])
def test_dualpipe_table2(P, mult):
    """DeepSeek-V3 Table 2 at F=1, B=2 (full backward), W=1, F&B=3: (P/2−1)(F&B + B − 3W).

    M counts both directions. The excess does not shrink as M grows."""
    M = mult * P
    tl = simulate(make_schedule("dualpipe", P, M), tf=1, tb=2, tw=1, tfb=3)
    assert tl.makespan - M * 3 == (P // 2 - 1) * (3 + 2 - 3 * 1)
    assert tl.peak_inflight == [P + 1] * P            # FORMULAS.md: PP + 1


@pytest.mark.parametrize("P", [2, 3, 4, 6])
def test_zbv_reaches_startup_bound(P):
    """With tf = tI = tw the only idle left is the first microbatch's trip down the V:
    the last rank cannot start before (P−1)·tf/2, and ZB-V loses exactly that."""
    M = 3 * P
    tl = simulate(make_schedule("zbv", P, M), tf=1, tb=2, tw=1)
    assert tl.makespan - M * 3 == Fraction(P - 1, 2)


def test_naive_bubble():
    for P in (1, 2, 4):
        tl = simulate(make_schedule("naive", P, 3))
        assert frac(tl.bubble_fraction) == Fraction(P - 1, P)




def test_fixed_overhead_makes_more_microbatches_slower():
    """Megatron hands-on R5–R6: with a fixed per-op cost, halving the microbatch size (2× M)
    keeps shrinking the bubble fraction but lengthens the step."""
    P, batch = 4, 32.0
    prev = None
    for M in (16, 32, 64):
        per_mb = batch / M
        tl = simulate(make_schedule("1f1b", P, M), tf=per_mb, tb=2 * per_mb, fixed=0.5)
        if prev:
            assert tl.bubble_fraction < prev.bubble_fraction
            assert tl.makespan > prev.makespan
        prev = tl


def test_comm_latency_lengthens_the_critical_path():
    """1F1B's warm-up and cool-down cross 2(P−1) links; each costs ``comm`` at least once."""
    P, M, c = 4, 8, 0.25
    base = simulate(make_schedule("1f1b", P, M), tf=1, tb=2).makespan
    slow = simulate(make_schedule("1f1b", P, M), tf=1, tb=2, comm=c).makespan
    assert slow >= base + 2 * (P - 1) * c


@pytest.mark.parametrize("P", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("extra", [0, 1, 4])
@pytest.mark.parametrize("tf,tb,tw", [(1, 2, 1), (2, 3, 1), (1, 3, 1), (2, 4, 2), (1, 2, 0.5),
                                      (1, 4, 1)])
def test_zb_h2_excess_and_memory(P, extra, tf, tb, tw):
    """Zero Bubble Table 2 gives (P−1)(T_F + T_I − 2T_W) assuming overlapped iterations; one
    flushed step cannot beat the start-up wait (P−1)·t_f, and ZB-H2 reaches the larger one."""
    M = 2 * P - 1 + extra
    tl = simulate(make_schedule("zb-h2", P, M), tf=tf, tb=tb, tw=tw)
    ti = tb - tw
    assert tl.makespan - M * (tf + tb) == max((P - 1) * tf, (P - 1) * (tf + ti - 2 * tw))
    assert tl.peak_inflight == [min(2 * P - 1, M)] * P


@pytest.mark.parametrize("P, M, V", [(2, 4, 2), (4, 8, 2), (4, 8, 4), (8, 16, 3), (3, 6, 1)])
def test_interleaving_multiplies_messages_by_pv_minus_1_over_p_minus_1(P, M, V):
    """The lowered lists' SENDs: 2·M·(P·V − 1) in all, (P·V − 1)/(P − 1) times 1F1B's (more
    than V whenever V > 1), and exactly V times 1F1B's on a middle rank."""
    from pplab.closed_forms import interleaved_messages
    from pplab.lower import lower, p2p_messages
    from pplab.ir import Comm
    inter, plain = make_schedule("interleaved", P, M, V), make_schedule("1f1b", P, M)
    assert p2p_messages(inter) == interleaved_messages(P, M, V)
    assert p2p_messages(plain) == interleaved_messages(P, M)
    growth = Fraction(p2p_messages(inter), p2p_messages(plain))
    assert growth == Fraction(P * V - 1, P - 1)
    assert growth > V or V == 1

    def sends(schedule, rank):
        return sum(isinstance(x, Comm) and x.is_send for x in lower(schedule, "up-front")[rank])
    middle = P // 2 if P > 2 else 1
    if 0 < middle < P - 1:
        assert sends(inter, middle) == V * sends(plain, middle)
