"""pplab.course.published_run: Llama 3 405B's layout through pplab's own models."""
import pytest

from pplab.closed_forms import bubble_both
from pplab.memory import published_run as pr
from pplab.partition import stage_layers


def test_table4_rows_agree_with_themselves():
    for row in pr.TABLE4:
        lines = pr.check_row(row)
        assert row.tokens_per_step == 16_777_216 and str(row.gpus // 1000) in lines[0]
    assert [r.batch_per_dp for r in pr.TABLE4] == [32, 16, 16]
    assert pr.TABLE4[0].sequences == 2048


def test_a_wrong_row_is_caught():
    bad = pr.Row(8192, 8, 1, 16, 16, 8192, 32, "16M", 430, 0.43)     # the lecture's DP
    with pytest.raises(AssertionError):
        pr.check_row(bad)


def test_end_layers_make_one_layer_chunks_at_v8():
    assert [pr.end_layers(16, V) for V in (1, 2, 4, 8)] == [7, 3, 1, 0]
    model, cfg = pr.layout(pr.TABLE4[0])
    sched = cfg.validate(model)
    chunks = stage_layers(sched, 126, cfg.first_layers, cfg.last_layers)
    assert [len(c) for c in chunks] == [0] + [1] * 126 + [0]
    assert cfg.microbatches == 32 and pr.layout(pr.TABLE4[1])[1].microbatches == 16
    with pytest.raises(ValueError, match="do not fill 16×3 chunks"):
        pr.end_layers(16, 3)


def test_layout_refuses_what_it_cannot_model():
    with pytest.raises(ValueError, match="no context parallelism") as e:
        pr.layout(pr.TABLE4[2])
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="does not divide"):
        pr.layout(pr.TABLE4[0], microbatch=3)


@pytest.mark.parametrize("V", [1, 2, 4, 8])
@pytest.mark.parametrize("M", [16, 32])
def test_equal_chunks_give_the_closed_forms(V, M):
    b = pr.bubble(16, M, V, uneven=False)
    frac, ratio = bubble_both(16, M, V)
    assert b["fraction"] == pytest.approx(frac, abs=1e-12)
    assert b["ratio"] == pytest.approx(ratio, abs=1e-12)


def test_llama3_ends_move_the_bubble_little_and_both_ways():
    assert pr.chunk_scales(16, 32, 8)[0] == 0.0 and 0.5 < pr.chunk_scales(16, 32, 8)[-1] < 0.7
    at32, at16 = pr.bubble(16, 32), pr.bubble(16, 16)
    assert at32["fraction"] > at32["closed_fraction"]          # the middle ranks carry more
    assert at16["fraction"] < at16["closed_fraction"]          # shorter fill and drain
    for b in (at32, at16):
        assert abs(b["fraction"] - b["closed_fraction"]) < 0.005
        assert b["ratio"] > b["fraction"]                       # idle ÷ busy is the larger


def test_seed_figures_are_interleaved_bubbles_at_other_vm():
    assert bubble_both(16, 64)[0] == pytest.approx(15 / 79)      # V·M = 64
    assert pr.bubble(16, 16, 8, uneven=False)["fraction"] == pytest.approx(15 / 143)
    assert not any(c["ok"] for c in pr.seed_claims())


def test_memory_and_bytes_per_axis():
    rows = pr.memory_table(pr.TABLE4[0])
    totals = [float(r.split()[-1]) for r in rows[1:]]
    assert len(totals) == 16 and max(totals) == totals[1] > 80
    full = [float(r.split()[-1]) for r in pr.memory_table(pr.TABLE4[0], recompute="full")[1:]]
    assert max(full) < 60
    ax = pr.axis_bytes(pr.TABLE4[0])["bytes"]
    assert ax["tp"] > ax["dp"] > ax["pp"] > 0


def test_dp_bytes_count_fp32_gradients_and_bf16_parameters():
    from pplab.memory import memory_report
    model, cfg = pr.layout(pr.TABLE4[0])
    psi = max(r.params_count for r in memory_report(model, cfg).per_rank)
    d = cfg.dp
    assert pr.axis_bytes(pr.TABLE4[0])["bytes"]["dp"] == pytest.approx((d - 1) / d * psi * (4 + 2))
    assert (cfg.zero, cfg.bytes_grad, cfg.bytes_param) == (2, 4, 2)


def test_activation_budget_sizes_the_gap():
    lo, hi = pr.activation_budget(pr.TABLE4[0]), pr.activation_budget(pr.TABLE4[1])
    assert lo["per_layer_sbh_t"] == pytest.approx(34)              # Korthikanti, SP, no scores
    assert lo["total"] > 80e9 and lo["fits_inflight"] < lo["inflight"]
    assert lo["fits_per_layer_sbh_t"] < 34
    assert hi["total"] < 80e9 and hi["fits_inflight"] >= hi["inflight"]
    roomy = pr.activation_budget(pr.TABLE4[0], hbm=200e9)
    assert roomy["fits_inflight"] > roomy["inflight"]


def test_mfu_budget_and_the_fitted_efficiency():
    b = pr.mfu_budget(pr.TABLE4[0])
    assert b["mfu"] == pytest.approx(430 / 989)
    assert b["busy"] * (1 - b["bubble_fraction"]) == pytest.approx(b["mfu"])
    assert b["bubble_points"] + b["rest_points"] + b["mfu"] == pytest.approx(1)
    eff, est = pr.fit_efficiency(pr.TABLE4[0])
    assert est["step_time"] == pytest.approx(pr.implied_step_time(pr.TABLE4[0]), rel=1e-6)
    assert 0.5 < eff < 0.6
    assert pr.flops_per_token(8192) > pr.flops_per_token(8192, attention=False)
