"""ZeRO-2 over M microbatches, both ways (``ParallelConfig.zero2_reduce``): a gradient shard
held costs a reduce-scatter every microbatch; one reduce-scatter a step costs the whole
gradient held. Memory and traffic must agree, by hand, in the planner and on the CLI
(fast_memory against memory_report: test_planner_zero3_uneven_megatron.py)."""
import subprocess
import sys

import pytest

from pplab.memory import ModelSpec, ParallelConfig, get_preset, memory_report
from pplab.memory.accounting import model_states_bytes
from pplab.memory.comm import comm_volumes, dp_volume
from pplab.memory.planner import Hardware, estimate, explain, plan

SMALL = ModelSpec("small", layers=4, hidden=64, heads=4, ffn=256, vocab=256, seq=32)
LAYER = 4 * 64 * 64 + 2 * 64 * 256 + 9 * 64 + 256          # GPT layer: 4h² + 2hf + 9h + f
RANK0 = 2 * LAYER + 256 * 64 + 32 * 64                       # 2 layers + token/position tables


def _cfg(mode, M=8, **kw):
    return ParallelConfig(pp=2, dp=4, zero=2, microbatches=M, zero2_reduce=mode, **kw)


def test_per_microbatch_holds_a_shard_and_one_layer_and_sends_the_gradients_M_times():
    cfg = _cfg("per_microbatch")
    r0 = memory_report(SMALL, cfg).per_rank[0]
    assert r0.params == 2 * RANK0
    assert r0.grads == pytest.approx(2 * RANK0 / 4 + 2 * LAYER * 3 / 4)
    assert r0.optimizer == pytest.approx(12 * RANK0 / 4)
    # 8 reduce-scatters of the gradients + one all-gather of the parameters, ring share 3/4
    assert dp_volume(RANK0, cfg) == pytest.approx(3 / 4 * (8 * 2 + 2) * RANK0)


def test_per_step_holds_the_whole_gradient_and_is_zero1():
    cfg = _cfg("per_step")
    r0 = memory_report(SMALL, cfg).per_rank[0]
    assert r0.grads == 2 * RANK0
    z1 = memory_report(SMALL, cfg.with_(zero=1)).per_rank[0]
    assert (z1.params, z1.grads, z1.optimizer) == (r0.params, r0.grads, r0.optimizer)
    assert dp_volume(RANK0, cfg) == pytest.approx(3 / 4 * (2 + 2) * RANK0)
    assert dp_volume(RANK0, cfg) == pytest.approx(dp_volume(RANK0, cfg.with_(zero=1)))


def test_one_microbatch_makes_the_two_ways_one():
    a, b = (memory_report(SMALL, _cfg(m, M=1)).per_rank[0] for m in ("per_microbatch", "per_step"))
    assert a.grads == b.grads < 2 * RANK0
    assert dp_volume(RANK0, _cfg("per_microbatch", M=1)) == dp_volume(RANK0, _cfg("per_step", M=1))


def test_gradient_width_counts_in_both_ways():
    """fp32 gradients, bf16 parameters (Llama 3's FSDP): each collective at its own width."""
    for mode, scatters in (("per_step", 1), ("per_microbatch", 8)):
        cfg = _cfg(mode, bytes_grad=4)
        assert dp_volume(RANK0, cfg) == pytest.approx(3 / 4 * RANK0 * (scatters * 4 + 2))
    assert model_states_bytes(RANK0, 4, 2, bytes_grad=4, reduce="per_step", microbatches=8)[1] \
        == 4 * RANK0


def test_dualpipe_sends_each_copys_gradients_once_per_microbatch():
    cfg = ParallelConfig(pp=2, dp=4, zero=2, microbatches=8, schedule="dualpipe")
    sched = cfg.make_schedule()
    psi = max(r.params_count for r in memory_report(SMALL, cfg).per_rank)
    assert comm_volumes(SMALL, cfg, sched)["dp"] == pytest.approx(3 / 4 * psi * (4 * 2 + 2))


def test_the_estimate_prices_the_reduce_scatters():
    """Across nodes (DP 32 × TP 1 > 8 GPUs) every microbatch's reduce-scatter is longer than
    its backward: per-microbatch ZeRO-2 stretches each B and is slower than ZeRO-1, which it
    never beats; reducing once a step it is ZeRO-1's estimate exactly."""
    m = get_preset("llama3-8b").with_(seq=1024)
    z1 = ParallelConfig(1, 2, 32, zero=1, microbatches=16, recompute="selective")
    e1 = estimate(m, z1)
    e2 = estimate(m, z1.with_(zero=2))
    e2s = estimate(m, z1.with_(zero=2, zero2_reduce="per_step"))
    assert e2["tb"] < e2["dp_time"] / 16                     # a reduce-scatter outlasts a B
    assert e2["step_time"] > 1.5 * e1["step_time"]
    assert e2s["step_time"] == pytest.approx(e1["step_time"])
    assert e2["dp_exposed"] > e1["dp_exposed"]
    rows = dict(explain(m, z1.with_(zero=2)))
    assert "after every microbatch" in rows["ZeRO-2 traffic"]


def test_the_planner_lists_zero2_with_its_traffic_only_where_zero1_does_not_fit():
    """ZeRO-1 and per-microbatch ZeRO-2 on one layout: with room for ZeRO-1 the planner ends
    the search there (ZeRO-2 sends more and cannot win); on a GPU where only ZeRO-2's shard
    fits, it lists ZeRO-2 at its own, slower, estimate."""
    m = get_preset("llama3-8b").with_(seq=1024)
    z1 = ParallelConfig(1, 2, 32, zero=1, microbatches=16, recompute="selective")
    p1, p2 = (memory_report(m, z1.with_(zero=z)).peak_bytes for z in (1, 2))
    assert p2 < p1

    def listed(memory):
        hw = Hardware(memory=memory)
        return [c for c in plan(m, 64, hw, global_batch=512, zero_stages=(1, 2),
                                recompute=("selective",), schedules=("1f1b",))
                if c.feasible and (c.config.tp, c.config.pp) == (1, 2)], hw
    roomy, _ = listed(80e9)
    assert [c.config.zero for c in roomy] == [1]
    tight, hw = listed((p1 + p2) / 2)
    assert [(c.config.zero, c.config.zero2_reduce) for c in tight] == [(2, "per_microbatch")]
    assert tight[0].step_time == pytest.approx(estimate(m, z1.with_(zero=2), hw)["step_time"])
    assert tight[0].step_time > estimate(m, z1, hw)["step_time"]


def test_bad_mode_is_one_clear_line():
    with pytest.raises(ValueError, match="zero2_reduce must be one of") as e:
        _cfg("sometimes").validate(SMALL)
    assert "\n" not in str(e.value)
    r = subprocess.run([sys.executable, "-m", "pplab.cli", "memory", "--preset", "llama3-70b",
                        "--tp", "8", "--pp", "8", "-M", "16", "--zero", "2",
                        "--zero2-reduce", "sometimes"], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
