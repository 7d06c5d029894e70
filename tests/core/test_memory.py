"""Memory accounting: every figure is pinned next to the source it comes from."""
import json
import subprocess
import sys

import pytest

from pplab.memory import (ParallelConfig, get_preset, layer_activation_bytes, memory_report,
                          model_states_bytes, seed_article_layer_bytes)
from pplab.memory.comm import comm_volumes
from pplab.memory.measured import predict_saved_bytes
from pplab.registry import make_schedule
from pplab.timeline import peak_inflight

GB = 1e9


# ---- parameter counts -----------------------------------------------------------------
def test_preset_parameter_counts():
    # Llama 3 paper Table 3 shapes, counted exactly (GQA, SwiGLU, RMSNorm, untied head):
    # the published sizes are 8.03B, 70.6B, 405.9B.
    assert get_preset("llama3-8b").num_params() == 8_030_261_248
    assert get_preset("llama3-70b").num_params() == 70_553_706_496
    assert get_preset("llama3-405b").num_params() == 405_853_388_800
    # Course runtime model (GPT-2 style, untied head without bias): 434,816 parameters.
    assert get_preset("tiny").num_params() == 434_816


def test_gpt3_matches_playbook_and_megatron_formulas():
    m = get_preset("gpt3-175b")
    # Playbook Ψ ≈ h·v + L(12h² + 13h) + 2h leaves out the s·h position table only.
    assert m.num_params() - m.playbook_params() == m.seq * m.hidden
    # Megatron-LM 12Lh²(1 + 13/(12h) + (V+s)/(12Lh)) includes it: equal to within 1e-6.
    assert m.num_params() == pytest.approx(m.megatron_params(), rel=1e-6)
    assert m.num_params() == pytest.approx(175e9, rel=0.003)      # GPT-3 paper: "175B"


# ---- model states (ZeRO paper §5; seed lecture) -----------------------------------------
def test_zero_paper_7_5b_on_64_gpus():
    # ZeRO paper Figure 1 / Table 1: Ψ = 7.5B, K = 12, N_d = 64, GB = 1e9 bytes.
    tot = lambda z: sum(model_states_bytes(7.5e9, 64, z)) / GB
    assert tot(0) == pytest.approx(120.0)
    assert tot(1) == pytest.approx(31.4, abs=0.01)     # 4Ψ + 12Ψ/N_d = 31.41
    assert tot(2) == pytest.approx(16.6, abs=0.05)     # 2Ψ + 14Ψ/N_d = 16.64
    assert tot(3) == pytest.approx(1.88, abs=0.01)     # 16Ψ/N_d = 1.875


def test_seed_lecture_fsdp_70b_on_64_gpus():
    # CS336 lecture 8 seed, ch. 5: (2+2+12)·70e9/64 = 17.5 GB per GPU under FSDP.
    assert sum(model_states_bytes(70e9, 64, 3)) / GB == pytest.approx(17.5)


def test_seed_lecture_3d_70b_zero1():
    # Seed ch. 9: TP=8, PP=8, DP=8, ZeRO-1, Ψ = 70e9. Primary formulas (ZeRO §5) give
    # weights 2.1875 + grads 2.1875 + optimizer 12Ψ/(64·8) = 1.640625 → 6.016 GB; the seed
    # rounds its own three terms (2.19 + 2.19 + 1.64) to "≈ 7 GB".
    p, g, o = model_states_bytes(70e9 / 64, 8, 1)
    assert (p / GB, g / GB, o / GB) == pytest.approx((2.1875, 2.1875, 1.640625))
    assert (p + g + o) / GB == pytest.approx(6.015625)


def test_seed_lecture_zero1_table_is_wrong():
    # The CS336 lecture's table says ZeRO-1 "~230 GB" for 70B, D=64; ZeRO §5 gives 4Ψ + 12Ψ/N_d = 293.1.
    assert sum(model_states_bytes(70e9, 64, 1)) / GB == pytest.approx(293.125)
    assert sum(model_states_bytes(70e9, 64, 2)) / GB == pytest.approx(155.3125)


def test_llama3_70b_3d_layout_per_rank():
    m = get_preset("llama3-70b").with_(seq=4096)
    cfg = ParallelConfig(8, 8, 8, zero=1, sp=True, recompute="selective", microbatches=32)
    rep = memory_report(m, cfg)
    lay = m.layer_params().per_rank(8) * 10
    mid = rep.per_rank[3]
    assert mid.params_count == pytest.approx(lay)                 # 10 layers, nothing else
    assert mid.params == pytest.approx(2 * lay)
    assert mid.optimizer == pytest.approx(12 * lay / 8)          # ZeRO-1 over DP=8
    # First rank adds the vocab-parallel embedding, last the final norm + head.
    assert rep.per_rank[0].params_count == pytest.approx(lay + m.vocab * m.hidden / 8)
    assert rep.per_rank[7].params_count == pytest.approx(lay + m.hidden + m.vocab * m.hidden / 8)
    assert rep.peak_rank == 0


# ---- Korthikanti et al. 2022, Table 2 -----------------------------------------------------
S, H, A = 2048, 12288, 96          # GPT-3 175B shapes (Korthikanti Table 3)
SBH = S * H


def test_korthikanti_gpt3_per_layer():
    assert 5 * A * S / H == 80                                      # the attention term 5as/h
    assert layer_activation_bytes(S, 1, H, A) == SBH * 114 == 2_868_903_936
    assert layer_activation_bytes(S, 1, H, A, t=8) == SBH * (10 + 3 + 10)
    assert layer_activation_bytes(S, 1, H, A, t=8, sp=True) == SBH * (34 / 8 + 10)
    assert layer_activation_bytes(S, 1, H, A, t=8, recompute="selective") == SBH * 13
    assert layer_activation_bytes(S, 1, H, A, t=8, sp=True, recompute="selective") == SBH * 34 / 8
    assert layer_activation_bytes(S, 1, H, A, recompute="full") == 2 * SBH


def test_selective_recompute_saves_70_percent_on_gpt3():
    # FORMULAS.md / Korthikanti §5: "~70% less activation memory" — the formula gives
    # 80/114 = 70.2% without TP and with TP+SP (same ratio); with TP alone (t=8) only 43%.
    for t, sp in ((1, False), (8, True)):
        full = layer_activation_bytes(S, 1, H, A, t, sp)
        sel = layer_activation_bytes(S, 1, H, A, t, sp, "selective")
        assert 1 - sel / full == pytest.approx(80 / 114) == pytest.approx(0.7018, abs=1e-4)
    full = layer_activation_bytes(S, 1, H, A, 8)
    assert 1 - layer_activation_bytes(S, 1, H, A, 8, False, "selective") / full == \
        pytest.approx(10 / 23)


def test_seed_article_activation_formula_underestimates():
    # Seed "From GPipe to DualPipe": b·s·(10h + a·s)·2 = 2.82 GB for b=1, s=4096, h=8192,
    # a=64; Korthikanti gives s·b·h·(34 + 5as/h) = 194·sbh = 6.51 GB (2.3× more).
    seed = seed_article_layer_bytes(4096, 1, 8192, 64)
    prim = layer_activation_bytes(4096, 1, 8192, 64)
    assert seed / GB == pytest.approx(2.818, abs=1e-3)
    assert prim / GB == pytest.approx(6.510, abs=1e-3)


# ---- activations × schedule ---------------------------------------------------------------
def _layers_only(name, P, M, V=None, L=96):
    m = get_preset("gpt3-175b").with_(layers=L)
    sched = make_schedule(name, P, M, V)
    return predict_saved_bytes(sched, m, 1, bytes_per_value=2, per_layer_bytes=1.0,
                               first_extra_bytes=0, last_extra_bytes=0)


def test_1f1b_first_stage_holds_L_layers_worth():
    # Korthikanti §4.2.3: p microbatches of L/p layers on the first stage = L layers.
    assert _layers_only("1f1b", 8, 32)[0] == 96
    assert _layers_only("1f1b", 8, 32) == [96 / 8 * min(8 - r, 32) for r in range(8)]
    assert _layers_only("gpipe", 8, 32) == [32 * 12] * 8                 # GPipe: all M


@pytest.mark.parametrize("P,V,M", [(4, 2, 8), (4, 4, 16), (8, 2, 32), (8, 4, 32)])
def test_interleaved_factor_matches_schedule(P, V, M):
    # Korthikanti §4.2.3: interleaving multiplies by (1 + (p−1)/(p·v)). The schedule's own
    # count (peak_inflight, stage equivalents) gives exactly that on rank 0 here.
    eq = peak_inflight(make_schedule("interleaved", P, M, V), stage_equivalents=True)[0]
    assert eq == pytest.approx(P * (1 + (P - 1) / (P * V)))
    assert _layers_only("interleaved", P, M, V, L=P * V * 3)[0] == pytest.approx(eq * 3 * V)


def test_dualpipe_holds_two_copies_of_parameters():
    # DeepSeek-V3 Table 2: DualPipe 2× parameters; rank r holds stage r and P−1−r.
    m = get_preset("llama3-8b")
    one = memory_report(m, ParallelConfig(pp=4, microbatches=8, schedule="1f1b"))
    two = memory_report(m, ParallelConfig(pp=4, microbatches=8, schedule="dualpipe"))
    lay = m.layer_params().total * 8
    assert one.per_rank[1].params_count == lay
    assert two.per_rank[1].params_count == 2 * lay
    assert two.per_rank[0].params_count == one.per_rank[0].params_count + \
        one.per_rank[3].params_count


def test_interleaved_doubles_pp_traffic():
    m = get_preset("llama3-70b")
    vol = lambda s, V=None: comm_volumes(m, ParallelConfig(8, 8, 8, microbatches=32,
                                                           schedule=s, virtual=V),
                                         make_schedule(s, 8, 32, V))["pp"]
    assert vol("interleaved", 2) == 2 * vol("1f1b")
    assert vol("interleaved", 4) == 4 * vol("1f1b")
    assert vol("zbv") == 2 * vol("1f1b")           # V-shape: 2 chunks, same-rank turn free


# ---- bad input ---------------------------------------------------------------------------
@pytest.mark.parametrize("kw,msg", [
    (dict(tp=3), "does not divide the 64 attention heads"),
    (dict(tp=16), "does not divide the 8 KV heads"),
    (dict(pp=81), "PP=81 > 80 layers"),
    (dict(tp=8, pp=8, dp=8, gpus=100), "100 GPUs ≠ TP×PP×DP"),
    (dict(zero=4), "ZeRO stage must be 0, 1, 2 or 3"),
    (dict(recompute="some"), "recompute must be"),
    (dict(pp=4, microbatches=3, schedule="interleaved"), "interleaved"),
    (dict(pp=4, microbatches=8, schedule="nope"), "unknown schedule"),
])
def test_invalid_layouts_raise_clear_valueerror(kw, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace("×", ".")):
        memory_report(get_preset("llama3-70b"), ParallelConfig(**kw))


@pytest.mark.parametrize("args", [
    ["--tp", "3"], ["--pp", "81"], ["--tp", "8", "--pp", "8", "--dp", "8", "--gpus", "100"],
    ["--zero", "4"], ["--recompute", "bogus"], ["--tp", "x"],
])
def test_cli_bad_input_exit_2_one_line(args):
    r = subprocess.run([sys.executable, "-m", "pplab.cli", "memory", "--preset", "llama3-70b",
                        *args], capture_output=True, text=True)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("pplab: error:")


def test_cli_json():
    r = subprocess.run([sys.executable, "-m", "pplab.cli", "memory", "--preset", "llama3-70b",
                        "--tp", "8", "--pp", "8", "--dp", "8", "--zero", "1", "--schedule",
                        "1f1b", "-M", "32", "--mbs", "1", "--seq", "4096", "--sp",
                        "--recompute", "selective", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["gpus"] == 512 and len(d["per_stage"]) == 8
    assert set(d["per_stage"][0]) >= {"params", "grads", "optimizer", "activations", "total"}
    assert d["peak_bytes"] == max(s["total"] for s in d["per_stage"])
    assert set(d["comm_bytes_per_step"]) == {"tp", "pp", "dp"}
    # 1F1B bubble ÷ total is (p−1)/(m+p−1) = 7/39 (GPipe paper denominator) for equal stages;
    # the LM head (≈ 1.1 layers of FLOPs) makes the last stage the slowest, and it sets the
    # pace: ≈ 0.25 (ten layers + head against the 10.1-layer average).
    assert 7 / 39 + 0.03 < d["bubble_fraction"] < 0.3


def test_cli_table_and_explicit_shapes():
    r = subprocess.run([sys.executable, "-m", "pplab.cli", "memory", "--layers", "8",
                        "--hidden", "64", "--heads", "4", "--ffn", "256", "--vocab", "256",
                        "--seq", "32", "--pp", "2", "-M", "4"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # a 435k-parameter model in kB and MB, never "0.00 GB"
    assert "custom (435k parameters)" in r.stdout.splitlines()[0]
    assert " kB" in r.stdout and "0.00" not in r.stdout and "0.000 s" not in r.stdout
    assert "peak 4.22 MB on rank 0 of the 80 GB GPU: fits, 80.0 GB to spare" in r.stdout
