"""Mixture-of-experts layers with expert parallelism and latent attention, enough to state
DeepSeek-V3's pre-training layout (DeepSeek-V3 Technical Report, arXiv 2412.19437, §3.2):
its parameters as the report counts them, experts and their optimizer states per EP rank,
the all-to-alls per MoE layer, activations by its recipe, and its throughput."""
import pytest

from pplab.cli import main
from pplab.memory import ParallelConfig, get_preset, memory_report
from pplab.memory.comm import comm_volumes, ep_layer_bytes
from pplab.memory.planner import Hardware, estimate
from pplab.memory.published_runs import (DEEPSEEK_TOKENS_PER_GPU_S, H800, deepseek_layout,
                                         deepseek_ratio)

V3 = get_preset("deepseek-v3")
H, F = 7168, 2048                       # hidden, routed expert width


def test_deepseek_v3_counts_671b_parameters_37b_active():
    assert V3.num_params() == 671_026_404_352                  # §2: "671B total"
    active = V3.num_active_layer_params() + V3.vocab * H       # layers + output layer
    assert 36.5e9 < active < 37.6e9                            # "37B are activated"
    moe = V3.layer_params()
    assert moe.expert == 256 * 3 * H * F                       # 256 routed SwiGLU experts
    assert moe.sharded - V3.attention_params().sharded == 3 * H * F          # 1 shared
    assert V3.layer_params(0).expert == 0 and V3.is_dense(2) and not V3.is_dense(3)
    assert V3.active_layer_params() == moe.sharded + moe.replicated + 8 * 3 * H * F


def test_experts_and_their_optimizer_states_are_per_ep_rank():
    model, cfg = deepseek_layout()
    rep = memory_report(model, cfg)
    r = rep.per_rank[3]                                       # 4 MoE layers, no ends
    assert r.layers == 4 and r.experts_count == 4 * 4 * 3 * H * F   # 256 / EP 64 = 4 each
    dense = r.params_count - r.experts_count
    # ZeRO-1: fp32 master + bf16 moments (8 bytes) over DP 128, the experts' over 128/64 = 2
    assert r.optimizer == pytest.approx(8 * (dense / 128 + r.experts_count / 2))
    assert r.params == pytest.approx(2 * r.params_count)
    assert r.grads == pytest.approx(4 * r.params_count)       # fp32 gradients, whole (ZeRO-1)


def test_a_moe_layer_keeps_what_the_recipe_says():
    from pplab.memory.accounting import layer_bytes
    model, cfg = deepseek_layout()
    # layer input 2h, query latent 2·1536, KV latent + rotary key 2·576, attention output in
    # E5M6 1.5·128·128, log-sum-exp 4·128; norm input 2h, router scores 4·256, 8 dispatched
    # copies in FP8 (h) with their SwiGLU inputs in FP8 (2·2048), the shared expert's the same
    attn = 2 * H + 2 * 1536 + 2 * 576 + 1.5 * 128 * 128 + 4 * 128
    moe = 2 * H + 4 * 256 + 9 * (H + 2 * F)
    assert layer_bytes(model, cfg) == 4096 * (attn + moe) == 4096 * 160_384
    assert layer_bytes(model, cfg, dense=True) == 4096 * (attn + 3 * H + 2 * 18432)


def test_the_layout_fits_the_h800_by_its_recipe_not_bf16_everything():
    model, cfg = deepseek_layout()
    peak = memory_report(model, cfg).peak_bytes
    assert 50e9 < peak < H800.memory
    bf16 = memory_report(model, cfg.with_(activations="kept")).peak_bytes
    assert bf16 > 1.9 * H800.memory        # every tensor kept in bf16, nothing recomputed


def test_ep_all_to_all_bytes_and_where_they_hide():
    model, cfg = deepseek_layout()
    tokens = 4096
    # dispatch in FP8, combine in BF16, forward and backward, 63/64 of it off the GPU
    assert ep_layer_bytes(model, cfg) == pytest.approx(2 * tokens * 8 * H * 63 / 64 * (1 + 2))
    vol = comm_volumes(model, cfg, cfg.make_schedule())
    assert vol["ep"] == pytest.approx(4 * cfg.microbatches * ep_layer_bytes(model, cfg))
    hw = Hardware(memory=80e9, efficiency=0.5, network=H800.network)
    alone = cfg.with_(ep=1)                 # same compute, no all-to-all
    # DualPipe runs each microbatch's all-to-alls under another's compute (§3.2.1): here
    # they are shorter, so they cost nothing; 1F1B puts them on every op
    assert estimate(model, cfg, hw)["tf"] == pytest.approx(estimate(model, alone, hw)["tf"])
    f1b = cfg.with_(schedule="1f1b")
    assert estimate(model, f1b, hw)["tf"] > 1.5 * estimate(model, f1b.with_(ep=1), hw)["tf"]


@pytest.mark.slow
def test_published_throughput_is_reproduced_within_15_percent():
    assert DEEPSEEK_TOKENS_PER_GPU_S == pytest.approx(1543.2, abs=0.1)   # 1T / 180K GPU-h
    from pplab.memory.published_runs import fitted_efficiency
    assert 0.85 < deepseek_ratio(fitted_efficiency()) < 1.15


def test_bad_expert_layouts_are_one_line():
    model, cfg = deepseek_layout()
    for bad, match in ((cfg.with_(ep=48), "must divide DP"),
                       (cfg.with_(activations="korthikanti"), "GPT layer"),
                       (ParallelConfig(8, 1, 2, ep=2), "needs a MoE model")):
        m = model if bad.tp == 1 else get_preset("llama3-8b")
        with pytest.raises(ValueError, match=match) as e:
            bad.validate(m)
        assert "\n" not in str(e.value)


def test_pplab_memory_states_the_layout(capsys):
    assert main(["memory", "--model", "deepseek-v3", "--pp", "16", "--dp", "128", "--ep", "64",
                 "--zero", "1", "-s", "dualpipev", "-M", "120", "--activations", "fp8",
                 "--recompute", "selective", "--gpu", "h800-80gb"]) == 0
    out = capsys.readouterr().out
    assert "fits" in out and "EP " in out and "of the 80 GB GPU" in out
    assert main(["memory", "--model", "deepseek-v3", "--pp", "16", "--dp", "100",
                 "--ep", "64", "--activations", "fp8"]) == 2
    assert "must divide DP·CP = 100" in capsys.readouterr().err


@pytest.mark.slow
def test_pplab_plan_ranks_the_published_layout_near_the_top(capsys):
    """Against every layout the planner finds with EP 1, 8 or 64 and the report's bytes per
    parameter (FP32 gradients, BF16 moments), pipelines of every depth included, the
    report's layout ranks 2nd of 204, with its 61 layers split as the planner splits them
    (1 + 30·2 + 0 on DualPipeV's 32 chunks): PP 8 (3 + 14·4 + 2) is 0.7 % faster, and PP 4,
    faster still at BF16 gradients, needs 89.5 GB."""
    assert main(["plan", "--model", "deepseek-v3", "--gpus", "2048", "--global-batch", "15360",
                 "--gpu", "h800-80gb", "--activations", "fp8", "--eps", "1,8,64",
                 "--grad-bytes", "4", "--optim-bytes", "8",
                 "--pp", "16", "--ep", "64", "--dp", "128", "--zero", "1", "-s", "dualpipev",
                 "--recompute", "selective", "--json"]) == 0
    import json
    d = json.loads(capsys.readouterr().out)
    assert (d["ep"], d["pp"], d["dp"], d["fits"]) == (64, 16, 128, True)
    assert (d["first_layers"], d["last_layers"]) == (1, 0)
    first = d["first_choice"]
    assert (first["pp"], first["dp"], first["ep"], first["fits"]) == (8, 256, 64, True)
    assert d["rank"] <= 5 and d["of"] >= 200
