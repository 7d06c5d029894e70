"""Context parallelism as a layout axis: each of CP ranks holds s/CP tokens of every sequence
(activations and compute split, attention scores against all s keys), keeps the parameters
whole like a DP replica (ZeRO shards over DP·CP), and passes keys and values around a ring."""
import pytest

from pplab.memory import ModelSpec, ParallelConfig, get_preset, memory_report
from pplab.memory.comm import axis_bandwidths, comm_volumes, Network
from pplab.memory.export import megatron_args, torchtitan_toml
from pplab.memory.planner import Hardware, compute_costs, estimate, fast_memory, plan, sized

M = ModelSpec("m", 8, 1024, 8, 4096, 1000, 4096, kv_heads=2, arch="llama")


def test_activations_split_by_cp_scores_against_every_key():
    base = ParallelConfig(1, 2, 2, microbatches=4, recompute="selective")
    cp2 = base.with_(dp=1, cp=2)
    short = memory_report(M.with_(seq=2048), base)
    for r, s in zip(memory_report(M, cp2).per_rank, short.per_rank):
        assert r.activations == pytest.approx(s.activations)     # s/CP tokens each
    none2 = memory_report(M, cp2.with_(recompute="none")).per_rank[0].activations
    none_short = memory_report(M.with_(seq=2048), base.with_(recompute="none")
                               ).per_rank[0].activations
    assert none2 > none_short          # the scores: s/CP queries × all s keys, not (s/CP)²
    assert fast_memory(M, cp2).peak_bytes == pytest.approx(memory_report(M, cp2).peak_bytes)


def test_zero_shards_over_dp_times_cp():
    a = memory_report(M, ParallelConfig(1, 1, 4, zero=1, cp=2, microbatches=2)).per_rank[0]
    b = memory_report(M, ParallelConfig(1, 1, 8, zero=1, microbatches=2)).per_rank[0]
    assert a.optimizer == pytest.approx(b.optimizer) and a.params == pytest.approx(b.params)


def test_compute_and_ring_traffic_by_hand():
    one, two = ParallelConfig(1, 1, 2, microbatches=2), ParallelConfig(1, 1, 1, cp=2,
                                                                        microbatches=2)
    assert compute_costs(M, two, Hardware())[0] == pytest.approx(
        compute_costs(M, one, Hardware())[0] / 2)
    vol = comm_volumes(M, two, two.make_schedule())
    kv = 2 * 2048 * 1 * 2 * 128 * 2          # K and V of s/CP tokens, 2 KV heads of 128, bf16
    assert vol["cp"] == pytest.approx(8 * 2 * 3 * (2 - 1) * kv)   # layers × M × 3(CP−1)
    assert "cp" not in comm_volumes(M, one, one.make_schedule())
    bw = axis_bandwidths(ParallelConfig(8, 1, 1, cp=2), Network())
    assert bw["tp"] == 450e9 and bw["cp"] == bw["dp"] == 50e9   # TP·CP = 16 spans two nodes
    assert estimate(M, two)["step_time"] > 0


def test_cp_rules_layout_and_exports():
    with pytest.raises(ValueError, match="2·CP equal"):
        ParallelConfig(1, 1, 1, cp=3).validate(M)
    with pytest.raises(ValueError, match="TP×CP×PP×DP"):
        ParallelConfig(1, 1, 2, cp=2, gpus=8).validate(M)
    c, _ = sized(M, ParallelConfig(2, 2, 1, zero=0, cp=2, microbatches=4, sp=True))
    assert c.layout().startswith("TP=2 CP=2 PP=2 DP=1") and c.to_dict()["cp"] == 2
    cfg = ParallelConfig(2, 2, 2, zero=3, cp=4, microbatches=4, sp=True)
    assert "context_parallel_degree = 4" in torchtitan_toml(M, cfg, 4096)
    args = megatron_args(M, cfg.with_(zero=1), 4096)
    assert args[args.index("--context-parallel-size") + 1] == "4"


def test_planner_tries_the_cp_degrees_it_is_given():
    cands = plan(M, 16, global_batch=16, cps=(1, 2), schedules=("1f1b",),
                 zero_stages=(1,), recompute=("selective",))
    cp2 = [c for c in cands if c.config.cp == 2]
    assert cp2 and all(c.config.num_gpus == 16 for c in cands)
    assert {c.config.cp for c in cands} == {1, 2}


def test_llama3_405b_128k_row_is_expressible():
    """Table 4's CP row (TP8 CP16 PP16 DP8, seq 131,072, 16M tokens) as a layout pplab sizes."""
    m = get_preset("llama3-405b").with_(seq=131072)
    cfg = ParallelConfig(8, 16, 8, zero=1, sp=True, recompute="selective", microbatches=16,
                         schedule="interleaved", virtual=8, first_layers=0, last_layers=0,
                         cp=16)
    c, per_rank = sized(m, cfg)
    assert cfg.num_gpus == 16384 and len(per_rank) == 16 and c.step_time > 0
    assert 16 * 8 * 131072 == 2 ** 24
