"""Schedule search: valid, under the cap, never worse than a built-in that fits, near exact."""
import json
import subprocess
import sys

import pytest

from pplab import Costs, Schedule, validate
from pplab.search import exact, search
from pplab.timeline import peak_inflight

COSTS = [Costs(tf=1, tb=2, tw=1), Costs(tf=1, tb=3, tw=1, comm=0.25),
         Costs(tf=2, tb=3, tw=0.5)]


@pytest.mark.slow
@pytest.mark.parametrize("costs", COSTS, ids=["unit", "comm", "uneven"])
@pytest.mark.parametrize("V,cap", [(1, 2), (1, 4), (1, 7), (2, 4), (2, 8)])
def test_valid_under_cap_and_beats_fitting_builtins(costs, V, cap):
    r = search(4, 8, V, costs, cap, evaluations=50)
    validate(r.schedule)
    assert max(r.peak_inflight) <= cap
    for b in r.baselines:
        if b["fits"]:
            assert r.makespan <= b["makespan"] + 1e-9, b


def test_one_case_fast():
    test_valid_under_cap_and_beats_fitting_builtins(COSTS[0], 1, 4)


def test_uneven_stage_costs_are_used():
    heavy_last = Costs(tf=1, tb=2, tw=1, stage_scale=(1, 1, 1, 2))
    r = search(4, 8, 1, heavy_last, 4, evaluations=50)
    assert r.makespan >= 8 * 3 * 2          # the heavy stage alone needs that long


@pytest.mark.parametrize("P,M", [(2, 2), (2, 3), (3, 2)])
def test_matches_exact_on_tiny_instances(P, M):
    costs = Costs(tf=1, tb=2, tw=1)
    best, _ = exact(P, M, costs, cap=P)
    assert search(P, M, 1, costs, P, evaluations=50).makespan == best


@pytest.mark.slow
def test_exact_refuses_big_instances():
    with pytest.raises(ValueError, match="too many"):
        exact(4, 6, Costs(), cap=4)


def test_cap_below_one_microbatch_is_refused():
    with pytest.raises(ValueError, match="--max-inflight 2"):
        search(4, 8, 2, Costs(tf=1, tb=2, tw=1), cap=1, evaluations=10)


def test_cli_json_contract():
    out = subprocess.run([sys.executable, "-m", "pplab.cli", "search", "-P", "4", "-M", "8",
                          "-V", "2", "--tf", "1", "--tb", "2", "--tw", "1", "--comm", "0",
                          "--max-inflight", "6", "--evaluations", "50", "--json"],
                         capture_output=True, text=True, check=True)
    d = json.loads(out.stdout)
    assert {"makespan", "peak_inflight", "ranks", "baselines"} <= set(d)
    back = Schedule.from_text(d["ranks"], stage_to_rank=d["stage_to_rank"], num_microbatches=8,
                              copies=d["copies"])
    validate(back)
    assert peak_inflight(back) == d["peak_inflight"] and max(d["peak_inflight"]) <= 6
    assert all({"name", "makespan", "peak", "fits"} <= set(b) for b in d["baselines"])


def test_cli_bad_cap_exits_2():
    out = subprocess.run([sys.executable, "-m", "pplab.cli", "search", "-P", "4", "-M", "8",
                          "--max-inflight", "0"], capture_output=True, text=True)
    assert out.returncode == 2 and "must be a whole number" in out.stderr


def test_same_evaluations_and_seed_give_the_same_schedule_however_slow_the_machine(
        monkeypatch):
    """The budget counts moves, not seconds: a simulator slowed 1000× (a loaded server)
    changes nothing; another seed may find another order."""
    import pplab.search as ps
    costs = Costs(tf=1, tb=3, tw=1, comm=0.25)
    first = search(4, 8, 1, costs, 3, evaluations=80, seed=7)
    real = ps.simulate

    def slow(*a, **k):
        import time
        time.sleep(0.0005)
        return real(*a, **k)
    monkeypatch.setattr(ps, "simulate", slow)
    again = search(4, 8, 1, costs, 3, evaluations=80, seed=7)
    assert again.schedule.ranks == first.schedule.ranks
    assert again.evaluations == first.evaluations > 0
    r = subprocess.run([sys.executable, "-m", "pplab.cli", "search", "--evaluations", "-1"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--evaluations must be ≥ 0" in r.stderr
