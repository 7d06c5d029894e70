"""Lesson 14 states numbers in its prose; each one is pinned here against the package, so a
change in a model that moves them fails a test instead of leaving the text wrong."""
from pathlib import Path

import nbformat
import pytest

from pplab.closed_forms import bubble_both
from pplab.memory import published_run as pr

ROOT = Path(__file__).resolve().parents[2]
NB = ROOT / "notebooks" / "14_a_published_run.ipynb"
LO, HI = pr.TABLE4[0], pr.TABLE4[1]


@pytest.fixture(scope="module")
def text() -> str:
    return "\n".join(c.source for c in nbformat.read(NB, as_version=4).cells)


def test_settled_bubble_figures(text):
    (f_lo, r_lo), (f_hi, r_hi) = bubble_both(16, 32, 8), bubble_both(16, 16, 8)
    assert (f"{r_lo:.1%} of the busy time ({f_lo:.1%} of the total) at 8,192 GPUs, "
            f"{r_hi:.1%} ({f_hi:.1%})") in text
    lo, hi = pr.bubble(16, 32), pr.bubble(16, 16)
    assert (f"to {lo['ratio']:.1%} ({lo['fraction']:.1%}) and {hi['ratio']:.1%} "
            f"({hi['fraction']:.1%})") in text


def test_table_and_its_cp_row(text):
    cp = pr.TABLE4[2]
    assert cp.tp * cp.cp * cp.pp * pr.CP_ROW_DP_EARLIER == 8192
    assert pr.CP_ROW_DP_EARLIER * cp.batch_per_dp * cp.seq == 2 ** 23        # 8M tokens
    assert "prints DP = 4; with 4 that row would be\n  8,192 GPUs and 8M tokens" in text


def test_memory_figures(text):
    row = pr.memory_table(LO)[2].split()                      # rank 1, a middle rank
    assert f"**Weights** are {float(row[2]):.1f} GB on a middle rank" in text
    assert f"shards are small ({float(row[3]):.1f} and {float(row[4]):.1f} GB)" in text
    assert f"P + (P−1)/V ≈ {16 + 15 / 8:.1f}" in text
    lo, hi = pr.activation_budget(LO), pr.activation_budget(HI)
    assert f"puts rank {lo['rank']} at {lo['total'] / 1e9:.1f} GB, **over** the 80 GB" in text
    assert 79e9 < hi["total"] < 80e9 and "it just fits" in text
    assert (f"keeps {lo['fits_inflight']:.0f} rank-shares\n  in flight instead of "
            f"{lo['inflight']:.1f}") in text
    assert f"keeps about {lo['fits_per_layer_sbh_t']:.0f}·sbh/t instead" in text
    full = max(float(r.split()[-1]) for r in pr.memory_table(LO, recompute="full")[1:])
    assert f"bring it to about {full:.0f} GB" in text


def test_bytes_per_axis_figures(text):
    kept, again = (pr.axis_bytes(LO, zero=z) for z in (2, 3))
    assert f"would send {again['bytes']['dp'] / kept['bytes']['dp']:.0f} times as much, " \
           f"{again['seconds']['dp']:.0f} s a step" in text


def test_mfu_and_efficiency_figures(text):
    effs = [pr.fit_efficiency(r, attention=a)[0] for r in (LO, HI) for a in (True, False)]
    assert f"{min(effs) * 100:.0f}–{max(effs):.0%} of the" in text
    assert abs(effs[0] - effs[2]) < 0.015 and "within a point of each other" in text


@pytest.mark.parametrize("claim", ["16,384 sequences", "128", "15/143", "15/79", "38%"])
def test_every_seed_claim_is_named_and_answered(claim, text):
    assert claim in text
