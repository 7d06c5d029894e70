"""The planner: feasible layouts ranked by estimated step time, infeasible ones with a reason."""
import time

import pytest

import pplab.memory.extrapolate as ex
import pplab.memory.planner as pl
from pplab.memory import ParallelConfig, get_preset, memory_report
from pplab.memory.planner import Hardware, plan
from pplab.registry import make_schedule
from pplab.sim import Costs, simulate


def test_plan_70b_on_64_gpus():
    m = get_preset("llama3-70b").with_(seq=4096)
    t0 = time.perf_counter()
    cands = plan(m, 64)
    dt = time.perf_counter() - t0
    assert dt < 15      # target < 2 s on an idle core; measured 2–5 s on the shared 2-core box
    ok = [c for c in cands if c.feasible]
    assert ok and all(c.peak_bytes <= 80e9 for c in ok)
    assert [c.step_time for c in ok] == sorted(c.step_time for c in ok)
    assert all(c.config.tp * c.config.pp * c.config.dp == 64 for c in cands)
    bad = [c for c in cands if not c.feasible]
    assert any("GB on rank" in c.reason and "over the 80 GB GPU" in c.reason for c in bad)
    # Without any sharding 70B cannot fit on one GPU's worth of a 1×1×64 layout.
    assert not any(c.feasible and c.config.tp == 1 and c.config.pp == 1 and c.config.zero == 0
                   for c in cands)


def test_small_model_fits_everywhere():
    cands = plan(get_preset("tiny"), 4, Hardware(memory=1e9), global_batch=16)
    assert all(c.feasible or "global batch" in c.reason or "layers" in c.reason
               or "microbatch" in c.reason.lower() or "must" in c.reason for c in cands)


@pytest.mark.parametrize("name,V", [("gpipe", None), ("1f1b", None), ("interleaved", 2),
                                    ("zb-h1", None), ("zbv", None), ("dualpipev", None)])
def test_extrapolation_in_M_is_exact(monkeypatch, name, V):
    """Large M is simulated at two smaller M and extrapolated on a line: check it."""
    monkeypatch.setattr(ex, "SIM_MAX_M", 8)
    m = get_preset("tiny")
    cfg = ParallelConfig(pp=4, microbatches=24, schedule=name, virtual=V, bytes_act=4)
    exact = [r.activations for r in memory_report(m, cfg).per_rank]
    fast = [r.activations for r in pl.fast_memory(m, cfg).per_rank]
    assert fast == pytest.approx(exact)
    tw = 1.0 if name in pl.SPLIT_BACKWARD else 0.0
    # (GPipe shares 1F1B's makespan only without p2p latency: the planner used to assume so)
    direct = simulate(make_schedule(name, 4, 24, V),
                      Costs(tf=1, tb=2, tw=tw, comm=0.05)).makespan
    assert ex.makespan_unit(name, 4, 24, V, 2.0, tw, 0.05) == pytest.approx(direct)
