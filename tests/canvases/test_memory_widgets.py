"""Memory canvases and figures: every render function swept over its controls (no exception
escapes; invalid combinations come back as a clear message), figures rasterised, widgets
react without a kernel; and the planner's shortcuts (pruning, one simulation without p2p
latency, steady activation peaks) agree with brute force."""
import itertools

import pytest

import pplab.memory.extrapolate as ex
import pplab.memory.planner as pl
from pplab.canvases import memory as mw
from pplab.draw import figure_png, scene_figure
from pplab.memory import ParallelConfig, get_preset, memory_report
from pplab.registry import make_schedule
from pplab.sim import Costs, simulate


def _ok(res):
    fig, msg = res
    assert isinstance(msg, str) and msg
    return fig, msg


# ---- memory breakdown ---------------------------------------------------------------------------
DEFAULTS = dict(preset="llama3-70b", tp=8, pp=8, dp=8, zero=1, sp="on", recompute="selective",
                schedule="1f1b", M=32, mbs=1, seq=4096)
RANGES = dict(preset=mw.PRESET_NAMES, tp=mw.TP_VALUES, pp=mw.PP_VALUES, dp=mw.DP_VALUES,
              zero=(0, 1, 2, 3), sp=("off", "on"), recompute=mw.RECOMPUTE,
              schedule=mw.MEM_SCHEDULES, M=range(mw.M_RANGE[0], mw.M_RANGE[1] + 1),
              mbs=range(mw.MBS_RANGE[0], mw.MBS_RANGE[1] + 1), seq=mw.SEQ_VALUES)


@pytest.mark.parametrize("name", list(RANGES))
def test_memory_every_control_value(name):
    for v in RANGES[name]:
        pic, msg = _ok(mw.render_memory(**dict(DEFAULTS, **{name: v})))
        assert (pic is None) == ("peak" not in msg), msg              # None: a refusal
        assert pic is None or pic["panels"][0]["type"] == "bars"


@pytest.mark.slow
def test_memory_cross_product_never_raises():
    n_ok = n_bad = 0
    for preset, tp, pp, sched, M in itertools.product(("tiny", "llama3-8b", "gpt3-175b"),
                                                      mw.TP_VALUES, mw.PP_VALUES,
                                                      mw.MEM_SCHEDULES, (1, 5, 16)):
        _, msg = _ok(mw.render_memory(preset, tp, pp, 2, 1, "on", "none", sched, M, 1, None))
        if msg.startswith(get_preset(preset).name + " ("):
            n_ok += 1
        else:
            n_bad += 1
            assert "Traceback" not in msg and "internal error" not in msg
    assert n_ok > 100 and n_bad > 100


def test_memory_invalid_combinations_explain_themselves():
    _, msg = mw.render_memory(**dict(DEFAULTS, preset="tiny"))
    assert "TP=8 does not divide the 4 attention heads" in msg
    _, msg = mw.render_memory(**DEFAULTS, gpus=64)
    assert "64 GPUs ≠ TP×PP×DP = 8×8×8 = 512" in msg
    _, msg = mw.render_memory(**dict(DEFAULTS, preset="tiny", tp=1, pp=16))
    assert "PP=16 > 8 layers" in msg
    _, msg = mw.render_memory(**dict(DEFAULTS, schedule="interleaved", M=5))
    assert "interleaved" in msg.lower() or "multiple" in msg


def test_memory_numbers_match_the_report():
    _, msg = mw.render_memory(**DEFAULTS)
    assert "peak 18.0 GB on rank 0 (fits in 80 GB)" in msg


# ---- FSDP, recompute, layout, planner --------------------------------------------------------
def test_fsdp_every_value_and_frames():
    L = get_preset("llama3-8b").layers
    for dp, phase, layer, pre in itertools.product(mw.DP_VALUES, ("forward", "backward"),
                                                   range(L), ("off", "on")):
        _ok(mw.render_fsdp("llama3-8b", dp, phase, layer, pre))
    assert "layer must be 0..31" in mw.render_fsdp(layer=32)[1]
    from pplab.draw.memory import fsdp_frames
    fr = fsdp_frames(4, 8.0, 4, prefetch=False)
    assert [f["layer"] for f in fr] == [0, 1, 2, 3, 3, 2, 1, 0]
    assert all(f["resident"] == pytest.approx(4 * 2 + 6) for f in fr)     # shards + one layer
    fr = fsdp_frames(4, 8.0, 4, prefetch=True)
    assert fr[0]["full"] == [0, 1] and fr[-1]["full"] == [0]


@pytest.mark.slow
def test_recompute_every_value():
    for preset, tp, sp, seq, mbs in itertools.product(mw.PRESET_NAMES, mw.TP_VALUES,
                                                      ("off", "on"), mw.SEQ_VALUES, range(1, 9)):
        _ok(mw.render_recompute(preset, tp, sp, seq, mbs))
    _, msg = mw.render_recompute("gpt3-175b", 8, "on", 2048, 1)
    assert "selective: 0.107 GB/layer (70% less), +0.9% FLOPs" in msg
    assert "+33.3% FLOPs" in msg
    assert "does not divide" in mw.render_recompute("tiny", 8)[1]


def test_layout_over_tp_pp_dp():
    seen_bad = False
    for tp, pp, dp in itertools.product(mw.TP_VALUES, mw.PP_VALUES, mw.DP_VALUES):
        _, msg = _ok(mw.render_layout("llama3-70b", 64, tp, pp, dp))
        if tp * pp * dp != 64:
            assert "≠ TP×PP×DP" in msg
            seen_bad = True
        else:
            assert "step ≈" in msg and "per GPU per step TP" in msg
    assert seen_bad
    for name in mw.MEM_SCHEDULES:
        for rc in mw.RECOMPUTE:
            _ok(mw.render_layout("llama3-70b", 64, 8, 4, 2, 1, rc, name, 32))
    for preset in mw.PRESET_NAMES:
        _ok(mw.render_layout(preset, 16, 4, 2, 2))


def test_layout_at_the_lessons_sequence_length_matches_its_estimate():
    """Lesson 09 computes at s = 4096 and opens the configurator there: its TP bytes are half
    the preset's 8,192 tokens' and its step time is the planner's estimate at 4,096."""
    from pplab.memory import ParallelConfig, get_preset
    from pplab.memory.planner import estimate
    _, long = _ok(mw.render_layout("llama3-70b", 64, 8, 4, 2))
    _, short = _ok(mw.render_layout("llama3-70b", 64, 8, 4, 2, seq=4096))
    tp_gb = [float(m.split("per GPU per step TP ")[1].split(" GB")[0]) for m in (long, short)]
    assert tp_gb[1] == pytest.approx(tp_gb[0] / 2, abs=0.1)
    cfg = ParallelConfig(tp=8, pp=4, dp=2, zero=1, sp=True, recompute="selective",
                         microbatches=32, schedule="1f1b", gpus=64)
    step = estimate(get_preset("llama3-70b").with_(seq=4096), cfg)["step_time"]
    assert f"step ≈ {step:.2f} s" in short


@pytest.mark.slow
def test_plan_render_and_table():
    pic, msg = mw.render_plan("llama3-70b", 64, 80, 4096)
    assert figure_png(scene_figure(pic))[:4] == b"\x89PNG"
    assert "fastest first" in msg and "1. TP=" in msg and "✗" in msg
    _, msg = mw.render_plan("gpt3-175b", 32, 80, 4096)
    assert "0 of" in msg and "over the 80 GB GPU" in msg


@pytest.mark.parametrize("fn,kw", [
    (mw.render_memory, DEFAULTS), (mw.render_memory, dict(DEFAULTS, pp=16, schedule="gpipe")),
    (mw.render_fsdp, dict(dp=64, phase="backward", layer=3, prefetch="on")),
    (mw.render_recompute, dict(preset="llama3-405b", tp=1, sp="off", seq=8192)),
    (mw.render_layout, {}), (mw.render_layout, dict(tp=2, pp=16, dp=2, schedule="dualpipev"))])
def test_figures_rasterise(fn, kw):
    pic, _ = fn(**kw)
    assert figure_png(scene_figure(pic))[:4] == b"\x89PNG"


@pytest.mark.slow
def test_canvases_react_without_a_kernel():
    from pplab.canvases.base import CANVASES
    before = len(CANVASES)
    cs = [mw.memory_canvas(controls=("preset", "tp", "dp")), mw.memory_canvas(),
          mw.fsdp_canvas(), mw.recompute_canvas(), mw.layout_canvas()]
    assert len(CANVASES) == before + len(cs)
    c = cs[1]
    c.controls["preset"].value = "tiny"
    assert "does not divide" in c.last_message
    c.controls["tp"].value = 2
    c.controls["pp"].value = 2
    assert c.last_message.startswith("tiny (")
    cs[4].controls["dp"].value = 4
    assert "≠ TP×PP×DP" in cs[4].last_message
    assert set(cs[0].controls) == {"preset", "tp", "dp"}
    assert all(not x.errors for x in cs)


# ---- planner shortcuts -------------------------------------------------------------------------
@pytest.mark.parametrize("name,V", [("1f1b", None), ("interleaved", 2), ("interleaved", 4),
                                    ("zb-h1", None), ("zbv", None), ("dualpipev", None)])
def test_one_simulation_without_p2p_is_exact(monkeypatch, name, V):
    monkeypatch.setattr(ex, "SIM_MAX_M", 8)
    tw = 1.0 if name in pl.SPLIT_BACKWARD else 0.0
    for P, M in ((4, 40), (8, 64)):
        direct = simulate(make_schedule(name, P, M, V), Costs(tf=1, tb=2.1, tw=tw)).makespan
        assert ex.makespan_unit(name, P, M, V, 2.1, tw, 0.0) == pytest.approx(direct)


@pytest.mark.parametrize("name,V", [("1f1b", None), ("interleaved", 2), ("zb-h1", None),
                                    ("zbv", None), ("dualpipev", None), ("gpipe", None)])
def test_steady_activation_peak(monkeypatch, name, V):
    monkeypatch.setattr(ex, "SIM_MAX_M", 8)
    m = get_preset("llama3-8b").with_(seq=1024)
    cfg = ParallelConfig(tp=2, pp=4, dp=2, sp=True, microbatches=40, schedule=name, virtual=V)
    exact = [r.activations for r in memory_report(m, cfg).per_rank]
    assert [r.activations for r in pl.fast_memory(m, cfg).per_rank] == pytest.approx(exact)


@pytest.mark.slow
def test_pruning_keeps_the_best_layout():
    """Brute force over every recompute × ZeRO (no dominance pruning) finds the same best."""
    m = get_preset("llama3-8b").with_(seq=2048)
    hw = pl.Hardware(memory=40e9)
    best = pl.plan(m, 16, hw)[0]
    brute = []
    for rc in ("none", "selective", "full"):
        brute += [c for c in pl.plan(m, 16, hw, recompute=(rc,)) if c.feasible]
    assert best.feasible
    assert best.step_time == pytest.approx(min(c.step_time for c in brute))


@pytest.mark.slow
def test_planner_70b_on_64_gpus_fills_the_budget():
    """(Its speed is reported by benchmarks/bench_simulator.py, not asserted here.)"""
    m = get_preset("llama3-70b").with_(seq=4096)
    cands = pl.plan(m, 64)
    assert cands[0].feasible and cands[0].config.tp * cands[0].config.pp * cands[0].config.dp == 64


@pytest.mark.parametrize("name", sorted(pl.PERIOD_2))
def test_period_two_extrapolation_with_p2p(monkeypatch, name):
    monkeypatch.setattr(ex, "SIM_MAX_M", 8)
    for P, M in ((4, 41), (8, 64), (8, 75)):
        direct = simulate(make_schedule(name, P, M), Costs(tf=1, tb=2.1, tw=1.0,
                                                          comm=0.05)).makespan
        assert ex.makespan_unit(name, P, M, None, 2.1, 1.0, 0.05) == pytest.approx(direct)
