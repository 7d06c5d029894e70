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


def test_the_lecture_notes_figures_are_interleaved_bubbles_at_other_vm():
    assert bubble_both(16, 64)[0] == pytest.approx(15 / 79)      # V·M = 64
    assert pr.bubble(16, 16, 8, uneven=False)["fraction"] == pytest.approx(15 / 143)
    claims = pr.lecture_claims()
    assert not any(c["ok"] for c in claims)
    assert not any(w in str(claims) for w in ("seed", "line 2"))


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
    """With the whole fp32 gradient held (Llama 3 §3.3.2's accumulation, one reduce-scatter a
    step) neither row fits 80 GB in pplab's count; the budget says how far the activations
    would have to shrink."""
    lo, hi = pr.activation_budget(pr.TABLE4[0]), pr.activation_budget(pr.TABLE4[1])
    assert lo["per_layer_sbh_t"] == pytest.approx(34)              # Korthikanti, SP, no scores
    for b in (lo, hi):
        assert b["total"] > 80e9 and b["fits_inflight"] < b["inflight"]
        assert b["fits_per_layer_sbh_t"] < 34
    assert 99e9 < lo["total"] < 101e9 and 91e9 < hi["total"] < 93e9
    roomy = pr.activation_budget(pr.TABLE4[0], hbm=200e9)
    assert roomy["fits_inflight"] > roomy["inflight"]


def test_gradient_ways_trade_memory_for_dp_traffic():
    """Once a step: every GPU holds its stage's whole fp32 gradient (4 bytes × its parameters)
    and DP sends Ψ·(4 + 2). Every microbatch: a 1/DP shard and one layer in flight, and DP
    sends the gradients M times."""
    from pplab.memory import memory_report
    for row in pr.TABLE4[:2]:
        model, cfg = pr.layout(row)
        psi = max(r.params_count for r in memory_report(model, cfg).per_rank)
        d, M = row.dp, row.batch_per_dp
        once, every = pr.gradient_ways(row)
        assert (once["mode"], every["mode"]) == ("per_step", "per_microbatch")
        assert once["grads"] == pytest.approx(4 * psi)
        layer = model.layer_params().per_rank(row.tp)
        assert every["grads"] == pytest.approx(4 * psi / d + 4 * layer * (1 - 1 / d))
        assert once["total"] - every["total"] == pytest.approx(once["grads"] - every["grads"])
        assert once["dp_bytes"] == pytest.approx((d - 1) / d * psi * (4 + 2))
        assert every["dp_bytes"] == pytest.approx((d - 1) / d * psi * (M * 4 + 2))
        assert not once["fits"] and not every["fits"]
    lo_once, lo_every = pr.gradient_ways(pr.TABLE4[0])
    assert 12.7e9 < lo_once["grads"] < 12.8e9 and 400e9 < lo_every["dp_bytes"] < 410e9
    assert 18.7e9 < lo_once["dp_bytes"] < 18.9e9


def test_mfu_budget_and_the_fitted_efficiency():
    b = pr.mfu_budget(pr.TABLE4[0])
    assert b["mfu"] == pytest.approx(430 / 989)
    assert b["busy"] * (1 - b["bubble_fraction"]) == pytest.approx(b["mfu"])
    assert b["bubble_points"] + b["rest_points"] + b["mfu"] == pytest.approx(1)
    eff, est = pr.fit_efficiency(pr.TABLE4[0])
    assert est["step_time"] == pytest.approx(pr.implied_step_time(pr.TABLE4[0]), rel=1e-6)
    assert 0.5 < eff < 0.6
    assert pr.flops_per_token(8192) > pr.flops_per_token(8192, attention=False)
    # PaLM's 6N + 12·L·H·Q·T, N every parameter a token multiplies through (not the lookup)
    from pplab.memory import get_preset
    m = get_preset("llama3-405b")
    n = m.num_layer_params() + m.vocab * m.hidden
    assert pr.flops_per_token(8192) == 6 * n + 12 * m.layers * m.hidden * 8192


def test_vocabulary_and_untied_head_come_from_the_released_configuration():
    """The paper's Table 3 says "128K"; 128,256 and the untied output layer are the released
    models' config.json (vocab_size, tie_word_embeddings)."""
    from pplab.memory import get_preset
    from pplab.memory.presets import LLAMA3_RELEASED_CONFIG
    assert LLAMA3_RELEASED_CONFIG == {"vocab_size": 128256, "tie_word_embeddings": False}
    for name in ("llama3-8b", "llama3-70b", "llama3-405b"):
        m = get_preset(name)
        assert (m.vocab, m.tied_embeddings) == (128256, False)
        assert round(m.vocab / 1000) == 128                      # the paper's "128K"
    m = get_preset("llama3-405b")
    assert m.head_params().total == m.vocab * m.hidden       # its own matrix, not the embedding's
