"""Lesson 14 states numbers in its prose; each one is pinned here against the package, so a
change in a model that moves them fails a test instead of leaving the text wrong."""
from pathlib import Path

import nbformat
import pytest

from pplab.closed_forms import bubble_both
from pplab.course import published_run as pr

ROOT = Path(__file__).resolve().parents[2]
NB = ROOT / "notebooks" / "14_a_published_run.ipynb"


def _text() -> str:
    return "\n".join(c.source for c in nbformat.read(NB, as_version=4).cells)


def _total(row, **kw) -> float:
    return max(float(r.split()[-1]) for r in pr.memory_table(row, **kw)[1:])


def test_settled_bubble_figures_in_the_text():
    text = _text()
    lo, hi = pr.bubble(16, 32), pr.bubble(16, 16)
    assert f"{bubble_both(16, 32, 8)[1]:.1%} of the busy time ({bubble_both(16, 32, 8)[0]:.1%} " \
           f"of the total) at 8,192 GPUs, {bubble_both(16, 16, 8)[1]:.1%} " \
           f"({bubble_both(16, 16, 8)[0]:.1%})" in text
    assert (f"to {lo['ratio']:.1%} ({lo['fraction']:.1%}) and {hi['ratio']:.1%} "
            f"({hi['fraction']:.1%})") in text


def test_memory_figures_in_the_text():
    text = _text()
    row = pr.TABLE4[0]
    assert f"rank 1 at {_total(row):.1f} GB" in text
    assert f"about {_total(row, recompute='full'):.0f} GB" in text
    _, cfg = pr.layout(row)
    assert f"P + (P−1)/V ≈ {16 + 15 / 8:.1f}" in text
    line = pr.memory_table(row)[2].split()          # rank 1
    assert f"{float(line[2]):.1f} GB each on a middle rank" in text
    assert f"optimizer states only {float(line[4]):.1f} GB" in text


def test_mfu_and_efficiency_figures_in_the_text():
    text = _text()
    effs = [pr.fit_efficiency(r, attention=a)[0] for r in pr.TABLE4[:2] for a in (True, False)]
    assert f"{min(effs) * 100:.0f}–{max(effs):.0%} of the" in text
    full = [pr.fit_efficiency(pr.TABLE4[0], attention=a, recompute="full")[0] for a in (True, False)]
    assert f"{min(full) * 100:.0f}–{max(full):.0%} of peak" in text
    dp = [pr.axis_bytes(pr.TABLE4[0], zero=z, recompute="full")["bytes"]["dp"] for z in (1, 3)]
    assert f"1.5·M = {dp[1] / dp[0]:.0f} times" in text


@pytest.mark.parametrize("claim", ["16,384 sequences", "128", "15/143", "15/79", "38%"])
def test_every_seed_claim_is_named_and_answered(claim):
    assert claim in _text()
