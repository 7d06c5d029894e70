"""A published run is ranked among layouts of its own making: the same bytes per parameter
(DeepSeek-V3's FP32 gradients and BF16 moments, Llama 3's FP32 gradients), ends split the
way the planner splits every layout (an end may hold the embedding or the head alone), and
DualPipe's all-to-alls hidden as DualPipeV's are."""
import pytest

from pplab.cli import main
from pplab.memory import get_preset, memory_report
from pplab.memory.planner import (_busiest_rank, estimate, plan, rank_among, sized,
                                  small_key, split_ends)
from pplab.memory.published_run import LLAMA3_V, end_layers
from pplab.memory.published_runs import H800, deepseek_layout, dualpipe_as_run

V3 = get_preset("deepseek-v3")


def test_an_end_takes_the_embedding_or_the_head_alone_where_chunks_outnumber_layers():
    # Llama 3 405B: 126 layers on 16 × 8 chunks, one a chunk, the ends none (§3.3.2)
    llama = get_preset("llama3-405b")
    assert split_ends(llama, 16, "interleaved", LLAMA3_V, None, None, 32) == \
        (end_layers(16, LLAMA3_V),) * 2 == (0, 0)
    # DeepSeek-V3: 61 layers on DualPipeV's 32 chunks. As evenly as they go, chunks 29-31
    # get one layer each and rank 0 holds chunk 0 (2 layers) and chunk 31 (1 layer + head);
    # 1 + 30·2 + 0 leaves rank 0 a layer and the head, the others 4 layers
    assert split_ends(V3, 16, "dualpipev", None, None, None, 120) == (1, 0)
    key = small_key(deepseek_layout()[1])
    f = [2 * V3.active_layer_params(i) + V3.attention_flops(V3.seq) for i in range(61)]
    head = 2 * V3.vocab * V3.hidden                 # forward FLOPs per token
    mean = (sum(f) + head) / 32
    assert _busiest_rank(V3, key, (None, None), None) == \
        pytest.approx((f[0] + f[1] + f[60] + head) / mean, rel=1e-6)
    assert _busiest_rank(V3, key, (1, 0), None) == pytest.approx(4 * f[5] / mean, rel=1e-6)
    # the user's ends stand; a depth that divides the layers keeps an even split
    assert split_ends(V3, 16, "dualpipev", None, 2, 3, 120) == (2, 3)
    assert split_ends(llama, 2, "1f1b", None, None, None, 8) == (None, None)


@pytest.mark.slow
def test_the_planner_tries_llama3s_chunks_with_empty_ends():
    """With V = 8 among the chunks tried, the planner's TP 8 PP 16 layout is Llama 3's."""
    llama = get_preset("llama3-405b")
    cands = plan(llama, 8192, global_batch=2048, schedules=("interleaved",), virtual=(8,),
                 zero_stages=(2,), recompute=("selective",), activations="kept", max_pp=16)
    pp16 = [c for c in cands if (c.config.tp, c.config.pp) == (8, 16)]
    assert pp16 and all((c.config.first_layers, c.config.last_layers) == (0, 0)
                        for c in pp16)
    assert any(c.feasible for c in pp16)


def test_dualpipe_hides_its_all_to_alls_as_its_v_shape_does():
    """§3.2.1 describes the overlap for DualPipe itself: its ops last their compute while
    the all-to-alls are shorter, not compute + all-to-all as under 1F1B."""
    model, cfg = dualpipe_as_run()
    hw = H800
    assert estimate(model, cfg, hw)["tf"] == pytest.approx(estimate(model, cfg.with_(ep=1),
                                                                    hw)["tf"])
    f1b = cfg.with_(schedule="1f1b")
    assert estimate(model, f1b, hw)["tf"] > 1.3 * estimate(model, f1b.with_(ep=1), hw)["tf"]


def test_the_reports_precision_leaves_pp4_without_room():
    """PP 4 DualPipeV (7 + 6·8 + 6 layers) fits at BF16 gradients and FP32 Adam (2 + 2 + 12
    bytes), not at the report's 2 + 4 + 8 (§3.3.3): ZeRO-1 keeps the FP32 gradients whole,
    2 more bytes on each of the rank's parameters, and saves 4 bytes of optimizer state on
    each parameter's shard (DP 512; the experts' over 512 / EP 64 = 8)."""
    model, ds = deepseek_layout()
    pp4 = ds.with_(pp=4, dp=512, microbatches=30, first_layers=7, last_layers=6)
    bf16 = pp4.with_(bytes_grad=2, bytes_optim=12)
    worst = max(memory_report(model, bf16).per_rank, key=lambda r: r.total)
    assert worst.rank == 1
    psi, ex = worst.params_count, worst.experts_count
    more = 2 * psi - 4 * ((psi - ex) / 512 + ex / 8)
    assert more == pytest.approx(11.7e9, rel=0.01)
    theirs = memory_report(model, pp4).per_rank[1].total
    assert theirs - worst.total == pytest.approx(more)
    assert worst.total < H800.memory < theirs
    cands = plan(model, 2048, H800, global_batch=15360, activations="fp8", eps=(64,),
                 schedules=("dualpipev",), max_pp=4, zero_stages=(0, 1),
                 recompute=("selective",), bytes_grad=4, bytes_optim=8)
    mine = [c for c in cands if (c.config.tp, c.config.pp) == (1, 4)]
    assert mine and not any(c.feasible for c in mine)
    assert all(c.config.bytes_grad == 4 and c.config.bytes_optim == 8 for c in cands)
    # FP32 gradients: ZeRO-0's all-reduce moves 8 bytes a parameter, ZeRO-1 4 + 2, so the
    # fitting layouts are ZeRO-1 (ZeRO-0 would be listed on a tie)
    assert {c.config.zero for c in cands if c.feasible} == {1}


def test_the_two_copies_of_dualpipe_are_dualpipev_at_half_the_depth():
    """DualPipe at PP 16 keeps stages r and 15 − r of the model on rank r: the layers a rank
    holds at DualPipeV's PP 8, with as many replicas of each (DP 128 × 2 copies = 256)."""
    model, two = dualpipe_as_run()
    v8 = deepseek_layout()[1].with_(pp=8, dp=256, microbatches=60, first_layers=3,
                                    last_layers=2)
    a, b = memory_report(model, two).per_rank, memory_report(model, v8).per_rank
    assert [r.params_count for r in a[:8]] == [r.params_count for r in b]
    assert sized(model, two, H800)[0].feasible


def test_cli_takes_the_recipe_and_refuses_bad_bytes(capsys):
    args = ["plan", "--model", "deepseek-v3", "--gpus", "2048", "--gpu", "h800-80gb",
            "--activations", "fp8"]
    for flag, bad in (("--grad-bytes", "0"), ("--optim-bytes", "-8"), ("--grad-bytes", "1e9")):
        assert main(args + [flag, bad]) == 2
        err = capsys.readouterr().err.strip()
        assert flag in err and "\n" not in err


@pytest.mark.slow
def test_the_figures_docs_memory_md_gives_for_deepseek_v3():
    """docs/memory.md, "Published runs" and "DeepSeek-V3": why the planner's first choice
    is faster, in the figures the page quotes."""
    model, ds = deepseek_layout()
    mine = sized(model, ds, H800)[0]
    recipe = dict(global_batch=15360, activations="fp8", eps=(1, 8, 64))
    cands = [c for c in plan(model, 2048, H800, bytes_grad=4, bytes_optim=8, **recipe)
             if c.feasible]
    first = cands[0]
    assert (first.config.pp, first.config.dp, first.config.ep, first.config.schedule,
            first.config.first_layers, first.config.last_layers) == (8, 256, 64, "dualpipev",
                                                                    3, 2)
    assert rank_among(mine, cands) == 2 and len(cands) == 204
    assert (round(first.step_time, 2), round(mine.step_time, 2)) == (25.49, 25.67)
    assert (round(first.peak_bytes / 1e9, 1), round(mine.peak_bytes / 1e9, 1)) == (67.2, 56.1)
    even = sized(model, ds.with_(first_layers=None, last_layers=None), H800)[0]
    assert round(even.step_time, 1) == 27.7 and rank_among(even, cands) == 7
    # pplab's default bytes: PP 4 first, 77.8 GB; the report's: 89.5 GB, it does not fit
    default = next(c for c in plan(model, 2048, H800, **recipe) if c.feasible)
    assert (default.config.pp, round(default.step_time, 2),
            round(default.peak_bytes / 1e9, 1)) == (4, 25.14, 77.8)
    at_theirs = sized(model, default.config.with_(bytes_grad=4, bytes_optim=8), H800)[0]
    assert not at_theirs.feasible and round(at_theirs.peak_bytes / 1e9, 1) == 89.5
    two = sized(model, dualpipe_as_run()[1], H800)[0]
    assert (round(two.step_time, 2), round(two.peak_bytes / 1e9, 1)) == (25.59, 70.1)


def test_dp_traffic_hides_only_in_the_link_time_the_all_to_alls_leave():
    """DeepSeek-V3 as run: EP 64 spans 8 nodes, so each backward's all-to-alls (half of a
    MoE layer's 2·4096·8·7168·63/64 values, FP8 out and BF16 back, forward and backward, for
    each of the rank's 58/16 MoE layers, at 50 GB/s) hold the NIC that the ZeRO-1 gradient
    reduce-scatter and parameter all-gather need: the last backward hides that much less."""
    from pplab.memory.dp_times import zero12_times
    model, cfg = deepseek_layout()
    e = estimate(model, cfg, H800)
    nic = 2 * 4096 * 8 * 7168 * 63 / 64 * (1 + 2) * 58 / 16 / 50e9 / 2
    assert nic == pytest.approx(0.0503, abs=1e-4) and e["tb"] == pytest.approx(0.1345, abs=1e-4)
    assert e["exposed_comm"] == pytest.approx(nic + e["dp_time"] - e["tb"])
    free = zero12_times(model, cfg, 50e9, e["tb"])["tail"]       # the link all DP's
    assert e["exposed_comm"] - free == pytest.approx(nic)
    # EP 8 stays in the node (NVLink): DP has the NIC to itself
    inside = estimate(model, cfg.with_(ep=8), H800)
    assert inside["exposed_comm"] == pytest.approx(inside["dp_time"] - inside["tb"])


def test_zero3_gathers_share_each_ops_link_with_its_all_to_alls():
    """ZeRO-3 gathering per microbatch: a forward lasts at least its gather + its own
    all-to-alls on the same NIC, a backward its gather, its reduce-scatter and its
    all-to-alls."""
    from pplab.memory.dp_times import zero3_times
    model, cfg = deepseek_layout()
    z3 = cfg.with_(zero=3, zero3_regather="per_microbatch")
    alone = zero3_times(model, z3, 50e9, 0.0, 0.0)            # no compute: traffic alone
    both = zero3_times(model, z3, 50e9, 0.0, 0.0, 0.01, 0.02)
    assert both["tf_run"] == pytest.approx(alone["tf_run"] + 0.01)
    assert both["tb_run"] == pytest.approx(alone["tb_run"] + 0.02)
    big = zero3_times(model, z3, 50e9, 10.0, 20.0, 0.01, 0.02)  # compute outlasts both
    assert (big["tf_run"], big["tb_run"]) == (10.0, 20.0)


@pytest.mark.slow
def test_a_named_v8_layout_meets_the_planners_own(capsys):
    """``pplab plan`` with Llama 3 405B's layout named (-V 8, no --first/--last-layers): it is
    split as the planner splits it, 0 + 126·1 + 0, and ranked among candidates that try V = 8
    too, so the planner's own TP 8 PP 16 V 8 layout ties with it (the table's 2 of 134)."""
    import json
    assert main(["plan", "--model", "llama3-405b", "--gpus", "8192", "--global-batch", "2048",
                 "--tp", "8", "--pp", "16", "-s", "interleaved", "-V", "8", "--zero", "2",
                 "--activations", "kept", "--grad-bytes", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["first_layers"], d["last_layers"], d["virtual"], d["fits"]) == (0, 0, 8, True)
    assert (d["rank"], d["of"]) == (2, 134)
    assert d["first_choice"]["virtual"] == 8
