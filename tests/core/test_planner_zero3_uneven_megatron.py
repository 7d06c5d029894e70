"""Issue 12's honest planner: ZeRO-3's two regather modes (memory and traffic agree), uneven
first/last stages, and Megatron-LM's Table 1 layouts reproduced."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pplab.memory import ModelSpec, ParallelConfig, get_preset, memory_report
from pplab.memory.comm import comm_volumes, dp_volume, zero3_bytes
from pplab.memory.planner import estimate, fast_memory, plan
from pplab.partition import uneven_split

SMALL = ModelSpec("small", layers=4, hidden=64, heads=4, ffn=256, vocab=256, seq=32)
LAYER = 4 * 64 * 64 + 2 * 64 * 256 + 9 * 64 + 256          # GPT layer: 4h² + 2hf + 9h + f
RANK0 = 2 * LAYER + 256 * 64 + 32 * 64                       # 2 layers + token/position tables


def _small(mode, M=8):
    return ParallelConfig(pp=2, dp=4, zero=3, microbatches=M, zero3_regather=mode)


# ---- ZeRO-3: memory and traffic of each mode, by hand ----------------------------------------
def test_zero3_per_microbatch_memory_and_traffic_by_hand():
    cfg = _small("per_microbatch")
    r0 = memory_report(SMALL, cfg).per_rank[0]
    assert r0.params_count == RANK0
    # shards (÷4) plus one whole layer being used (its other 3/4 gathered), bf16
    assert r0.params == pytest.approx(2 * RANK0 / 4 + 2 * LAYER * 3 / 4)
    assert r0.grads == pytest.approx(2 * RANK0 / 4 + 2 * LAYER * 3 / 4)
    assert r0.optimizer == pytest.approx(12 * RANK0 / 4)
    # 8 microbatches × (gather for F + gather for B + reduce-scatter), ring share 3/4
    assert dp_volume(RANK0, cfg) == pytest.approx(3 / 4 * 8 * (2 + 2 + 2) * RANK0)


def test_zero3_per_step_memory_and_traffic_by_hand():
    cfg = _small("per_step")
    r0 = memory_report(SMALL, cfg).per_rank[0]
    assert (r0.params, r0.grads) == (2 * RANK0, 2 * RANK0)        # kept whole for the step
    assert r0.optimizer == pytest.approx(12 * RANK0 / 4)
    assert dp_volume(RANK0, cfg) == pytest.approx(3 / 4 * (2 + 2) * RANK0)
    # ... which is exactly ZeRO-1's bytes held and moved
    z1 = memory_report(SMALL, cfg.with_(zero=1)).per_rank[0]
    assert (z1.params, z1.grads, z1.optimizer) == (r0.params, r0.grads, r0.optimizer)
    assert dp_volume(RANK0, cfg.with_(zero=1)) == pytest.approx(dp_volume(RANK0, cfg))


@pytest.mark.parametrize("M", [1, 4, 16])
def test_per_microbatch_gathers_are_M_times_per_step(M):
    psi = 1e9
    g_mb, rs_mb = zero3_bytes(psi, _small("per_microbatch", M), M)
    g_st, rs_st = zero3_bytes(psi, _small("per_step", M), M)
    # a forward and a backward gather per microbatch (fsdp_pp_gathers: 2·M), one per step
    assert g_mb == 2 * M * g_st and rs_mb == M * rs_st
    cfg = _small("per_microbatch", M)
    vol = comm_volumes(SMALL, cfg, cfg.make_schedule())
    assert vol["dp"] == pytest.approx(3 / 4 * M * 6 * RANK0)


def test_fast_memory_agrees_with_memory_report_for_both_modes():
    """ZeRO-3's two regather modes and ZeRO-2's two reduce modes alike."""
    for mode in ("per_microbatch", "per_step"):
        for cfg in (_small(mode), _small(mode).with_(zero=2, zero2_reduce=mode)):
            a, b = fast_memory(SMALL, cfg), memory_report(SMALL, cfg)
            assert [r.total for r in a.per_rank] == pytest.approx([r.total for r in b.per_rank])


def test_zero3_under_pp_is_not_priced_at_zero0_speed():
    """Gathers slower than the compute they hide behind stretch every op; the DP time is
    M passes of 3Ψ, and the step is slower than ZeRO-0's."""
    m = get_preset("llama3-8b").with_(seq=1024)
    z0 = ParallelConfig(1, 2, 32, zero=0, microbatches=16, recompute="selective")
    e0 = estimate(m, z0)
    e3 = estimate(m, z0.with_(zero=3))
    e3s = estimate(m, z0.with_(zero=3, zero3_regather="per_step"))
    assert e3["step_time"] > 1.5 * e0["step_time"]
    assert e3["dp_time"] == pytest.approx(16 * e3s["dp_time"] * 6 / 4, rel=1e-6)
    assert e3s["step_time"] == pytest.approx(e0["step_time"], rel=0.05)


@pytest.mark.slow
def test_the_regather_mode_changes_which_layout_ranks_first():
    """Llama 3 70B, 64 × 80 GB: re-gathering per microbatch keeps memory sharded, so a PP = 1
    layout fits and its gathers hide behind each op's compute: it ranks first. Keeping the
    parameters gathered costs ZeRO-1's bytes, that layout no longer fits, and a PP = 2 layout
    with ZeRO-2 ranks first instead."""
    m = get_preset("llama3-70b")
    per_mb = [c for c in plan(m, 64, zero3_regather=("per_microbatch",)) if c.feasible][0]
    per_step = [c for c in plan(m, 64, zero3_regather=("per_step",)) if c.feasible][0]
    both = [c for c in plan(m, 64) if c.feasible][0]
    assert (per_mb.config.zero, per_mb.config.pp, per_mb.config.zero3_regather) == \
        (3, 1, "per_microbatch")
    assert per_step.config.pp == 2 and per_step.config.zero < 3
    assert per_mb.step_time < per_step.step_time and both.config == per_mb.config


# ---- uneven first and last stages ------------------------------------------------------------
def test_uneven_split_and_its_errors():
    assert [len(r) for r in uneven_split(80, 8, 9, 8)] == [9, 11, 11, 11, 10, 10, 10, 8]
    assert [len(r) for r in uneven_split(10, 4, last=1)] == [3, 3, 3, 1]
    assert [len(r) for r in uneven_split(10, 4)] == [3, 3, 2, 2]
    # Llama 3 405B: 126 layers on 128 one-layer chunks, the two ends empty (embedding, head)
    assert [len(r) for r in uneven_split(126, 128, 0, 0)] == [0] + [1] * 126 + [0]
    for args, msg in (((80, 8, -1, None), "≥ 0"), ((80, 2, 40, 41), "add up"),
                      ((8, 4, 4, 4), "leaving 0 for 2"), ((8, 1, 3, None), "≥ 2 pipeline"),
                      ((3, 4, None, None), "at least 4 layers")):
        with pytest.raises(ValueError, match=msg) as e:
            uneven_split(*args)
        assert "\n" not in str(e.value)


def test_uneven_ends_move_memory_and_time():
    """The last stage holds the head and the logits; giving it fewer layers evens the ranks,
    and the LM head's FLOPs on the last stage pace the pipeline until it does."""
    m = get_preset("llama3-70b").with_(seq=4096)
    cfg = ParallelConfig(8, 8, 1, sp=True, recompute="selective", microbatches=32)
    even, short = memory_report(m, cfg), memory_report(m, cfg.with_(last_layers=8))
    assert [r.layers for r in short.per_rank] == [11, 11, 10, 10, 10, 10, 10, 8]
    assert short.per_rank[-1].params_count < even.per_rank[-1].params_count
    e_even, e_short = estimate(m, cfg), estimate(m, cfg.with_(first_layers=9, last_layers=9))
    assert e_even["stage_scale"][-1] > 1.05 > max(e_even["stage_scale"][:-1])
    assert e_short["step_time"] < e_even["step_time"]
    # the planner finds a faster layout once the last stage gives up a layer for the head:
    # PP = 2, V = 2 has four stages of 20 layers; 19 + the head (≈ 1.1 layers) evens them
    best = [c for c in plan(m, 64) if c.feasible][0]
    best_short = [c for c in plan(m, 64, last_layers=19) if c.feasible][0]
    assert best.config.pp == 1
    assert (best_short.config.pp, best_short.config.virtual) == (2, 2)
    assert best_short.step_time < best.step_time


@pytest.mark.parametrize("flags", [["--first-layers", "40", "--last-layers", "41"],
                                   ["--last-layers", "-2"], ["--pp", "1", "--first-layers", "3"],
                                   ["--zero3-regather", "sometimes"]])
def test_cli_bad_layouts_exit_2(flags):
    r = subprocess.run([sys.executable, "-m", "pplab.cli", "memory", "--preset", "llama3-70b",
                        "--tp", "8", "--pp", "8", "-M", "16", *flags],
                       capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


# ---- Megatron-LM Table 1 ---------------------------------------------------------------------
@pytest.mark.slow
def test_megatron_table1_rows_are_feasible_and_docs_ranks_are_computed():
    """Every paper layout fits; the ranks and first choices in docs/memory.md are what the
    planner computes now (recomputed here, row by row)."""
    from pplab.memory.megatron_table1 import TABLE1, reproduce
    doc = (Path(__file__).parents[2] / "docs" / "memory.md").read_text()
    for row in TABLE1:
        d = reproduce(row)
        assert d["feasible"], d
        line = re.search(rf"^\| {re.escape(row.name)} \|.*$", doc, re.M)
        assert line, f"{row.name} missing from docs/memory.md"
        cells = [c.strip() for c in line.group(0).strip("|").split("|")]
        assert cells[3] == f"{d['rank']} of {d['of']}", (row.name, cells, d)
        assert cells[4] == d["top"], (row.name, cells, d)
        assert cells[7] == f"{d['tflops_ratio']:.2f}", (row.name, cells, d)


@pytest.mark.parametrize("name,V", [("1f1b", None), ("interleaved", 2), ("interleaved", 4),
                                    ("zb-h1", None), ("zbv", None), ("dualpipev", None)])
def test_uneven_stage_extrapolation_is_exact(monkeypatch, name, V):
    """With a heavier last stage the planner's makespan for large M equals direct simulation."""
    from pplab.registry import make_schedule
    from pplab.sim import Costs, simulate
    import pplab.memory.extrapolate as ex
    import pplab.memory.planner as pl
    monkeypatch.setattr(ex, "SIM_MAX_M", 8)
    tw = 1.0 if name in pl.SPLIT_BACKWARD else 0.0
    for P, M in ((4, 56), (8, 112)):
        n = make_schedule(name, P, M, V).num_stages
        scale = (1.0,) * (n - 1) + (1.2,)
        for comm in (0.0, 0.05):
            costs = Costs(tf=1, tb=2.1, tw=tw, comm=comm, stage_scale=scale)
            direct = simulate(make_schedule(name, P, M, V), costs).makespan
            got = ex.makespan_unit(name, P, M, V, 2.1, tw, comm, scale)
            assert got == pytest.approx(direct, rel=1e-9)
