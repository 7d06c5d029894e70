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
    """The notebook's words and section 4's reading of the CS336 page, which its quiz reveals."""
    from pplab.course.reveals import measurement_text
    cells = nbformat.read(NB, as_version=4).cells
    return "\n".join(c.source for c in cells) + "\n" + measurement_text("14.q-coincidence")


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


@pytest.fixture(scope="module")
def memory_reveal() -> str:
    """What the gradient prediction's measurement shows (the memory section's account)."""
    from pplab.course.reveals import measurement_text
    return measurement_text("14.grad-gb")


def test_memory_account_is_under_the_question_not_on_the_page(text, memory_reveal):
    grads = float(pr.memory_table(LO)[2].split()[3])               # rank 1, a middle rank
    assert f"= {grads:.1f} GB, whole from the first microbatch" in memory_reveal
    assert f"{grads:.1f} GB" not in text and "12.6 GB" not in text   # the answer, ±3 %
    full = max(float(r.split()[-1]) for r in pr.memory_table(LO, recompute="full")[1:])
    assert f"would bring it to {full:.0f} GB" in memory_reveal and full < 60


def test_the_gradient_choice_is_stated_with_its_arithmetic(memory_reveal):
    """Whole fp32 gradients (one reduce-scatter a step) or a shard (one per microbatch), with
    Korthikanti's GPT layer or the tensors a Llama layer's backward keeps: only a shard with
    Llama's own count fits, at both rows, and the account says so."""
    (lo_once, lo_every), (hi_once, hi_every) = pr.gradient_ways(LO), pr.gradient_ways(HI)
    assert not (lo_once["fits"] or hi_once["fits"] or lo_every["fits"] or hi_every["fits"])
    (k_once, k_every), (_, k_hi_every) = (pr.gradient_ways(r, activations="kept")
                                          for r in (LO, HI))
    assert not k_once["fits"] and k_every["fits"] and k_hi_every["fits"]
    assert f"pplab then puts rank {lo_once['rank']} at {lo_once['total'] / 1e9:.1f} GB" \
        in memory_reveal
    assert f"{k_every['total'] / 1e9:.1f} GB (8,192 GPUs) and " \
           f"{k_hi_every['total'] / 1e9:.1f} GB (16,384) with gradients reduce-scattered " \
           "every microbatch, which fit" in memory_reveal.replace("\n", " ")
    assert f"sends {lo_every['dp_bytes'] / 1e9:.0f} GB a step instead of " \
           f"{lo_once['dp_bytes'] / 1e9:.1f}" in memory_reveal


@pytest.mark.slow
def test_torch_pipelining_reduces_fsdp_gradients_once_a_step(memory_reveal):
    """The account's claim about torch, read back from torch's own code: every microbatch's
    backward runs with FSDP's gradient sync off; the reduce comes once, after the last."""
    import inspect
    pytest.importorskip("torch.distributed.pipelining")
    from torch.distributed.pipelining import stage
    every = inspect.getsource(stage._PipelineStageBase.backward_maybe_with_nosync)
    once = inspect.getsource(stage._PipelineStageBase.perform_reduce_grad)
    assert "set_requires_gradient_sync(False)" in every
    assert "set_requires_gradient_sync(True)" in once
    assert "turns FSDP's gradient sync off in every microbatch's backward" in memory_reveal


def test_bytes_per_axis_figures(text):
    kept, again = (pr.axis_bytes(LO, zero=z) for z in (2, 3))
    assert f"would send {again['bytes']['dp'] / kept['bytes']['dp']:.0f} times as much, " \
           f"{again['seconds']['dp']:.0f} s a step" in text


def test_mfu_and_efficiency_figures(text):
    effs = [pr.fit_efficiency(r)[0] for r in (LO, HI)]
    assert f"at about {sum(effs) / 2:.0%} of the" in text
    assert abs(effs[0] - effs[1]) < 0.01 and "within a point of each" in text
    assert "PaLM defined it (Chowdhery\net al. 2022" in text


@pytest.mark.parametrize("claim", ["16,384 sequences", "128", "15/143", "15/79", "38%"])
def test_every_claim_of_the_lecture_notes_is_named_and_answered(claim, text):
    assert claim in text


def test_the_canvas_notice(text):
    """Section 5's Notice, against the canvas's own model: M caps the warm-up, and with the
    gradients reduce-scattered every microbatch V = 1 fits at every M the slider offers."""
    from pplab.canvases.published import M_OPTIONS, V_OPTIONS, row_for
    from pplab.memory import memory_report

    def worst(M, V, how):
        model, cfg = pr.layout(row_for(M), V=V, zero2_reduce=how)
        return max(memory_report(model, cfg).per_rank, key=lambda r: r.total)
    assert [worst(16, V, "per_step").inflight for V in V_OPTIONS] == [15, 16, 16, 16]
    fits = {(M, V) for M in M_OPTIONS for V in V_OPTIONS
            if worst(M, V, "per_microbatch").total <= 80e9}
    assert fits == {(M, 1) for M in M_OPTIONS}
    assert not any(worst(M, V, "per_step").total <= 80e9 for M in M_OPTIONS for V in V_OPTIONS)
    assert 0.45 < pr.bubble(16, 16, 1)["fraction"] < 0.55
    assert 0.3 < pr.bubble(16, 32, 1)["fraction"] < 0.36
    assert "only V = 1 fits, at every M, with a bubble of about half the step at M = 16 and a " \
           "third at twice that M" in " ".join(text.split())
