"""``pplab calibrate``: the fit recovers known costs from simulated timelines, bad inputs give
one-line errors (exit 2), and one real P = 2 calibration measures, fits and tables every
schedule through the CLI."""
import json

import pytest

from pplab import make_schedule, simulate
from pplab.sim.calibrate import (costs_to_dict, fit_costs, fit_op_times, least_squares,
                             load_costs, observe)
from pplab.cli import main
from pplab.sim import Costs
from pplab.timeline import Timeline

KNOWN = Costs(tf=2e-3, tb=4e-3, tw=1.5e-3, comm=3e-4, fixed=5e-4)


def _timelines(costs, names=("1f1b", "interleaved", "zbv"), P=2, M=8):
    return [simulate(make_schedule(n, P, M), costs) for n in names]


@pytest.mark.parametrize("P", [2, 4])
def test_fit_recovers_known_costs_from_simulated_timelines(P):
    got = fit_costs(_timelines(KNOWN, P=P))
    for name in ("tf", "tb", "tw", "comm", "fixed"):
        assert getattr(got, name) == pytest.approx(getattr(KNOWN, name), rel=1e-6, abs=1e-9)


def test_fit_recovers_costs_and_every_schedule_then_simulates_the_same_makespan():
    got = fit_costs(_timelines(KNOWN))
    for name in ("gpipe", "zb-h1", "v-min", "dualpipev", "bfs"):
        s = make_schedule(name, 2, 8)
        assert simulate(s, got).makespan == pytest.approx(simulate(s, KNOWN).makespan)


@pytest.mark.slow
@pytest.mark.parametrize("P, cores", [(2, 1), (4, 2), (4, 1.5), (4, 1)])
def test_fit_recovers_known_costs_from_timelines_of_ranks_sharing_cores(P, cores):
    """Timelines made by the shared-core executor: ops stretched by k/cores while k ran."""
    timelines = [simulate(make_schedule(n, P, 8), KNOWN, cores=cores)
                 for n in ("1f1b", "interleaved", "zbv")]
    got = fit_costs(timelines, cores=cores)
    for name in ("tf", "tb", "tw", "comm", "fixed"):
        assert getattr(got, name) == pytest.approx(getattr(KNOWN, name), rel=1e-6, abs=1e-9)
    flat = fit_costs(timelines)                   # the same data read as a core per rank
    assert flat.tf > 1.1 * KNOWN.tf or flat.fixed > 1.1 * KNOWN.fixed


def test_shared_cores_work_integrates_the_rate_over_an_op():
    """Two ops overlap on [1, 2) on one core: each gets half of it there."""
    from pplab.sim.calibrate import SharedCores
    from pplab.timeline import Event, Timeline
    s = make_schedule("1f1b", 2, 1)
    a, b = (op for ops in s.ranks for op in ops[:1])
    tl = Timeline.of_events(2, [Event(0, a, 0.0, 2.0), Event(1, b, 1.0, 3.0)], "measured", s)
    shared = SharedCores(tl, 1)
    assert shared.work(0.0, 2.0) == pytest.approx(1.5)
    assert shared.work(1.0, 3.0) == pytest.approx(1.5)
    assert shared.work(3.0, 4.0, extra=1) == pytest.approx(1.0)     # after the last event
    assert SharedCores(tl, 2).work(0.0, 3.0) == pytest.approx(3.0)  # enough cores: wall time


def test_one_chunk_size_leaves_fixed_at_zero_and_folds_it_into_the_op_times():
    """Only whole stages (1F1B): fixed cannot be told apart from tf and tb."""
    got = fit_op_times(observe(simulate(make_schedule("1f1b", 2, 8), KNOWN)))
    assert got["fixed"] == 0
    assert got["tf"] == pytest.approx(KNOWN.tf + KNOWN.fixed)
    assert got["tb"] == pytest.approx(KNOWN.tb + KNOWN.fixed)


def test_median_rows_ignore_a_descheduled_op():
    """One op stretched 20× (another job took the core) barely moves the fit."""
    ran = simulate(make_schedule("1f1b", 2, 8), Costs(tf=1.0, tb=2.0))
    events = list(ran.events)
    e = events[3]
    events[3] = e._replace(end=e.start + 20 * e.duration)
    tl = Timeline.of_events(ran.num_ranks, events, ran.source, ran.schedule)
    got = fit_op_times(observe(tl))
    assert got["tf"] == pytest.approx(1.0) and got["tb"] == pytest.approx(2.0)


def test_least_squares_solves_an_overdetermined_line():
    rows = [((1.0, 0, 0, 1.0, 0), 3.0, 1), ((0.5, 0, 0, 1.0, 0), 2.0, 1),
            ((0.25, 0, 0, 1.0, 0), 1.5, 1)]
    tf, _, _, fixed, msg = least_squares(rows, (0, 3, 4))      # no row mentions msg: 0
    assert msg == 0
    assert (tf, fixed) == (pytest.approx(2.0), pytest.approx(1.0))


def test_costs_file_round_trips_and_feeds_pplab_simulate(tmp_path, capsys):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"costs": costs_to_dict(KNOWN), "P": 2}))
    assert load_costs(str(path)) == KNOWN
    assert main(["simulate", "-s", "1f1b", "-P", "2", "-M", "8", "--costs", str(path),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["makespan"] == pytest.approx(simulate(make_schedule("1f1b", 2, 8),
                                                     KNOWN).makespan)


def test_costs_file_cores_reach_pplab_simulate_and_the_flag_overrides_them(tmp_path, capsys):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"costs": costs_to_dict(KNOWN), "cores": 2, "P": 4}))
    s = make_schedule("1f1b", 4, 8)
    for extra, cores in (([], 2), (["--cores", "1"], 1)):
        assert main(["simulate", "-s", "1f1b", "-P", "4", "-M", "8", "--costs", str(path),
                     "--json"] + extra) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["cores"] == cores
        assert out["makespan"] == pytest.approx(simulate(s, KNOWN, cores=cores).makespan)
    assert simulate(s, KNOWN, cores=1).makespan > simulate(s, KNOWN, cores=2).makespan
    assert main(["simulate", "-s", "1f1b", "-P", "4", "-M", "8", "--cores", "0"]) == 2
    assert "cores must be a positive number" in capsys.readouterr().err


@pytest.mark.parametrize("content, says", [
    (None, "cannot read costs file"),
    ("{not json", "is not JSON"),
    ("[1, 2]", "must hold a JSON object"),
    ('{"tf": 1, "speed": 2}', "unknown field(s) speed"),
    ('{"tf": -1}', "cost tf must be ≥ 0"),
])
def test_bad_costs_file_is_one_line_and_exit_2(tmp_path, capsys, content, says):
    path = tmp_path / "costs.json"
    if content is not None:
        path.write_text(content)
    assert main(["simulate", "-s", "1f1b", "-P", "2", "-M", "4", "--costs", str(path)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv, says", [
    (["-P", "1"], "-P must be ≥ 2"),
    (["--repeats", "0"], "--repeats and --steps must be ≥ 1"),
    (["--on", "nope"], "unknown schedule 'nope'"),
    (["--on", ","], "--on needs at least one schedule"),
    (["--on", "dualpipe", "-P", "3"], "dualpipe needs an even number of ranks"),
    (["--tf", "0.1"], "only make sense with --emulate"),
    (["--out", "/no/such/folder/c.json"], "does not exist"),
    (["--timeout", "0"], "--timeout must be > 0"),
    (["--cores", "-1"], "--cores must be ≥ 0"),
    (["--hidden", "63"], "must be divisible by heads"),
])
def test_bad_calibrate_arguments_are_one_line_and_exit_2(capsys, argv, says):
    assert main(["calibrate"] + argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_cost_flags_and_costs_file_together_are_refused(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text('{"tf": 1}')
    assert main(["simulate", "-s", "1f1b", "-P", "2", "-M", "4", "--costs", str(path),
                 "--comm", "0.5"]) == 2
    assert "not both (--comm)" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.torchrun
def test_real_calibration_at_P2_fits_and_tables_every_schedule(tmp_path, capsys):
    """One real torchrun launch through the CLI: every schedule measured, costs fitted and
    written. Emulated ops sleep, so the sleeps are floors that load cannot lower: each fitted
    cost is at least its sleep and each measured makespan at least the simulated one at the
    sleeps alone. How close the calibrated prediction comes is load's to move, so it is
    judged in ``benchmarks/bench_calibration.py --emulate``, not here."""
    path = tmp_path / "costs.json"
    floors = {"tf": 0.02, "tb": 0.04, "tw": 0.015}
    code = main(["calibrate", "-P", "2", "-M", "4", "--steps", "2", "--on",
                 "1f1b,interleaved,zbv", "--repeats", "1", "--emulate",
                 *(f"--{k}={v}" for k, v in floors.items()),
                 "--table", "--out", str(path), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    fitted = out["costs"]
    assert out["cores"] is None          # emulated ops sleep: the ranks share no core
    assert fitted["tf"] >= 0.02 and fitted["tb"] >= 0.04 and fitted["tw"] >= 0.015 * 0.9
    assert {"1f1b", "interleaved", "zbv", "gpipe", "naive"} <= {r["schedule"] for r in out["table"]}
    for row in out["table"]:
        floor = simulate(make_schedule(row["schedule"], 2, 4), Costs(**floors)).makespan
        assert row["measured_s"] >= 0.99 * floor, row
    assert load_costs(str(path)).tf == fitted["tf"]


@pytest.mark.slow
@pytest.mark.torchrun
def test_measure_keeps_each_runs_least_disturbed_timed_step():
    from pplab.runtime.calibration import measure
    tls = measure(["1f1b"], P=2, M=4, repeats=2, steps=4,
                  emulate={"tf": 0.005, "tb": 0.01, "tw": 0.0})["1f1b"]
    assert len(tls) == 2
    for tl in tls:
        assert 1 <= tl.meta["step"] <= 3 and tl.start == 0 and tl.source == "measured"
        assert len(tl.events) == 2 * 2 * 4             # P ranks' F and B of M microbatches


@pytest.mark.slow
def test_comparison_simulates_with_the_cores_the_measurements_recorded():
    """P = 4 'measured' on 2 shared cores (meta["cores"] = 2, as measure() records it): the
    default fit and table use them and are exact; read as a core per rank, naive (one rank
    busy at a time) is predicted far too slow."""
    pytest.importorskip("torch")
    from pplab.runtime.calibration import calibrate_on, comparison, recorded_cores
    measured = {n: [simulate(make_schedule(n, 4, 8), KNOWN, cores=2)]
                for n in ("1f1b", "interleaved", "zbv", "naive", "gpipe", "v-min")}
    assert recorded_cores(measured) == 2
    names = ("1f1b", "interleaved", "zbv")
    rows = comparison(measured, calibrate_on(measured, names))
    assert all(abs(r["calibrated_error"]) < 1e-6 and r["cores"] == 2 for r in rows)
    flat = comparison(measured, calibrate_on(measured, names, cores=None), cores=None)
    assert next(r for r in flat if r["schedule"] == "naive")["calibrated_error"] > 0.3


def test_comparison_rows_from_simulated_measurements_have_zero_calibrated_error():
    pytest.importorskip("torch")
    from pplab.runtime.calibration import calibrate_on, comparison, table_text
    measured = {n: [simulate(make_schedule(n, 2, 8), KNOWN)] * 2
                for n in ("1f1b", "interleaved", "zbv", "gpipe", "dualpipev")}
    rows = comparison(measured, calibrate_on(measured, ("1f1b", "interleaved", "zbv")))
    assert all(abs(r["calibrated_error"]) < 1e-9 for r in rows)
    assert all(r["runs"] == 2 and r["spread"] == 0 for r in rows)
    assert all(r["default_error"] != 0 for r in rows)     # tb = 2·tf, no comm: off
    text = table_text(rows)
    assert text.count("\n") == len(rows) + 1 and "| dualpipev | 2 |" in text


def test_a_run_keeps_its_least_disturbed_timed_step():
    """Record (rank 0's summary of a run): step 0 warms up and only stands in while it is the
    only step; of the timed steps the one whose events span least is kept, whatever its
    place (a stall of a few ms in one step must not reach the calibration)."""
    pytest.importorskip("torch")
    from types import SimpleNamespace
    from pplab.runtime.summary import Record

    def step(span, tag):     # two ranks' events, (rank, action, start, end)
        rank = {"loss": 0.0, "peak_saved": 0, "cuda_peak": None}
        return [dict(rank, events=[(0, f"0F{tag}", 10.0, 10.0 + span / 2)]),
                dict(rank, events=[(1, f"1F{tag}", 10.0 + span / 2, 10.0 + span)])]

    runner = SimpleNamespace(ref=None)
    only = Record()
    only.add(runner, 0, {"step_time": 1.0}, step(1.0, 0))
    assert only.fastest_step == 0                      # steps=1: nothing else to time
    rec = Record()
    for k, span in enumerate([0.5, 4.0, 3.0, 3.5]):    # the warm-up is fastest, yet not kept
        rec.add(runner, k, {"step_time": span}, step(span, k))
    summary = rec.summary(make_schedule("1f1b", 2, 2))
    assert summary["fastest_step"] == 2
    assert [e[1] for e in summary["fastest_events"]] == ["0F2", "1F2"]
    assert [e[1] for e in summary["events"]] == ["0F3", "1F3"]     # the last, as before


@pytest.mark.slow
def test_fit_finds_the_cores_the_ranks_effectively_shared():
    """Timelines made on 1.5 shared cores, with a per-message cost; the fit is told there are
    2 and finds 1.5 (naive, one rank busy at a time, tells sharing from slow ops), and the
    costs with it. Told a core per rank it would be far off."""
    from pplab.sim.calibrate import fit_costs_and_cores
    known = Costs(tf=2e-3, tb=4e-3, tw=1.5e-3, comm=3e-4, fixed=5e-4, msg=2e-4)
    timelines = [simulate(make_schedule(n, 4, 8), known, cores=1.5)
                 for n in ("1f1b", "interleaved", "zbv", "naive")]
    got, cores = fit_costs_and_cores(timelines, 2)
    assert cores == pytest.approx(1.5, rel=0.02)
    for name in ("tf", "tb", "tw", "comm"):
        assert getattr(got, name) == pytest.approx(getattr(known, name), rel=0.05)
    assert got.fixed + 1.5 * got.msg == pytest.approx(known.fixed + 1.5 * known.msg, rel=0.1)
    for tl in timelines:
        assert simulate(tl.schedule, got, cores=cores).makespan == pytest.approx(
            tl.makespan, rel=0.01)
    # without naive every run keeps several ranks busy: sharing cannot be told from slow
    # ops, so the cores stay as given rather than landing anywhere on a flat loss
    assert fit_costs_and_cores(timelines[:3], 2)[1] == 2


def test_a_per_message_cost_is_charged_per_neighbour_on_another_rank():
    """1F1B at P = 2: every F and B has one neighbour across; interleaved: the middle
    stages two; ZBV's turn stays on rank 1, and a W sends nothing."""
    from pplab.sim.costs import messages_per_op
    assert messages_per_op(make_schedule("1f1b", 2, 4)) == [1, 1]
    assert messages_per_op(make_schedule("interleaved", 2, 4)) == [1, 2, 2, 1]
    assert messages_per_op(make_schedule("zbv", 2, 4)) == [1, 1, 1, 1]
    s = make_schedule("interleaved", 2, 4)
    plain, charged = Costs(), Costs(msg=0.25)
    d0, d1 = plain.duration_fn(s), charged.duration_fn(s)
    for op in s.ranks[0] + s.ranks[1]:
        assert d1(op) - d0(op) == pytest.approx(0.25 * messages_per_op(s)[op.stage])
    z = make_schedule("zbv", 2, 4)
    w = next(op for op in z.ranks[0] if op.kind == "W")
    assert charged.duration(z, w) == plain.duration(z, w)
    with pytest.raises(ValueError, match="msg"):
        Costs(msg=-1)
