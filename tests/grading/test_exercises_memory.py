"""Exercise 03 (memory): the solution passes its graders, the unsolved exercise fails every
grader cell, the graders reject typical wrong answers, and the build is reproducible."""
from pathlib import Path

import pytest

from pplab.exercises import (check_layer_activations, check_layout, check_peak_1f1b,
                             check_zero_bytes)
from pplab.memory import ParallelConfig

ROOT = Path(__file__).resolve().parents[2]













# ---- typical wrong answers ---------------------------------------------------------------------
def _raises(fn, *args, match):
    with pytest.raises(AssertionError, match=match):
        fn(*args)


def test_zero_grader_rejects_sharding_gradients_in_stage_1():
    def wrong(psi, nd, stage):
        return {0: 16 * psi, 1: 2 * psi + 14 * psi / nd, 2: 2 * psi + 14 * psi / nd,
                3: 16 * psi / nd}[stage]
    _raises(check_zero_bytes, wrong, match="ZeRO-1 shards only")


def test_activation_grader_rejects_the_seed_formula_and_missing_sp():
    _raises(check_layer_activations, lambda s, b, h, a, t=1, sp=False, recompute="none":
            b * s * (10 * h + a * s) * 2, match="expected")

    def no_sp(s, b, h, a, t=1, sp=False, recompute="none"):
        if recompute == "full":
            return 2 * s * b * h
        attn = 5 * a * s / (h * t) if recompute == "none" else 0
        return s * b * h * (10 + 24 / t + attn)
    _raises(check_layer_activations, no_sp, match="SP also divides")


def test_peak_grader_rejects_p_on_every_rank_and_even_split():
    _raises(check_peak_1f1b, lambda P, M, r, L, w: P * (L // P) * w, match="min\\(P − r, M\\)")
    _raises(check_peak_1f1b, lambda P, M, r, L, w: min(P - r, M) * (L // P) * w,
            match="extra layer")


def test_layout_grader_rejects_bad_layouts():
    good = ParallelConfig(tp=2, pp=8, dp=4, zero=2, sp=True, recompute="selective",
                          microbatches=128, schedule="zbv")
    assert check_layout(good)
    _raises(check_layout, good.with_(dp=2), match="budget is 64")
    _raises(check_layout, good.with_(microbatches=32), match="global batch")
    _raises(check_layout, good.with_(zero=0, recompute="none"), match="GB >")
    _raises(check_layout, good.with_(tp=8, pp=8, dp=1, microbatches=512, schedule="1f1b",
                                     recompute="full", zero=0), match="step is")
    _raises(check_layout, "TP=2 PP=8", match="ParallelConfig")


# ---- a layout that games the byte sizes ---------------------------------------------------------
@pytest.mark.parametrize("size", [0, float("nan")])
@pytest.mark.parametrize("path", ["public check", "after the wire"])
def test_a_layout_with_zero_or_nan_byte_sizes_earns_nothing(size, path):
    """Byte sizes are the task's, not the answer's: a layout that sets them to 0 or NaN is
    graded with the real ones (and a NaN step time or peak never passes a comparison)."""
    from pplab.exercises import check_layout_for_budget
    from pplab.grading.untrusted import wire
    cfg = ParallelConfig(tp=1, pp=1, dp=64, zero=0, recompute="none", microbatches=8,
                         bytes_param=size, bytes_grad=size, bytes_optim=size, bytes_act=size)
    if path == "after the wire":
        cfg = wire.decode(wire.encode(cfg))
        assert type(cfg) is ParallelConfig and cfg.bytes_act != 2
    _raises(check_layout_for_budget, lambda budget: cfg, match="GB >")
    _raises(check_layout, cfg, match="GB >")


def test_layout_fields_must_be_what_they_count():
    good = ParallelConfig(tp=2, pp=8, dp=4, zero=2, sp=True, recompute="selective",
                          microbatches=128, schedule="zbv")
    for bad, match in ((dict(tp=float("nan")), "whole number"), (dict(microbatch=0.5),
                       "whole number"), (dict(microbatch=0), "whole number"),
                       (dict(sp=1), "True or False"), (dict(schedule=None), "must be text")):
        _raises(check_layout, good.with_(**bad), match=match)
