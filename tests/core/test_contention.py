"""The shared-core executor (``simulate(..., cores=C)``, pplab/sim/contention.py): the default is
untouched, enough cores give the reference's events to the bit, and fewer cores slow ops
exactly by processor sharing."""
import pytest

from pplab import make_schedule, simulate
from pplab.ir import Schedule
from pplab.sim import Costs, execute_reference
from tests.helpers.schedule_cases import valid_schedules

COSTS = Costs(tf=1.0, tb=2.0, tw=0.7, comm=0.1, fixed=0.05)
GRID = valid_schedules(Ps=(2, 3, 4), Ms=(4, 8), Vs=(None,))


def _by_rank(events):
    return sorted(events, key=lambda e: (e.rank, e.start, e.end))


@pytest.mark.parametrize("s", GRID, ids=lambda s: f"{s.name}-P{s.P}-M{s.M}")
def test_default_is_todays_executor_and_enough_cores_change_nothing(s):
    today = simulate(s, COSTS)
    assert simulate(s, COSTS, cores=None).events == today.events         # same list, order
    assert "cores" not in today.meta
    reference = execute_reference(s, COSTS.duration_fn(s), COSTS.comm)
    assert _by_rank(today.events) == _by_rank(reference)
    for cores in (s.P, s.P + 3):                      # never more ops than cores: no slowdown
        shared = simulate(s, COSTS, cores=cores)
        assert _by_rank(shared.events) == _by_rank(reference)            # bit for bit
        assert shared.meta["cores"] == cores


def test_two_ops_on_one_core_each_run_at_half_speed():
    """GPipe P=2 M=2, tf=1 tb=2 on one core: rank 0's second forward and rank 1's first
    start together at t=1 and share the core, so both end at 3, not 2."""
    tl = simulate(make_schedule("gpipe", 2, 2), tf=1.0, tb=2.0, cores=1)
    got = {(e.rank, str(e.op)): (e.start, e.end) for e in tl.events}
    assert got[(0, "0F0")] == (0.0, 1.0)
    assert got[(0, "0F1")] == pytest.approx((1.0, 3.0))
    assert got[(1, "1F0")] == pytest.approx((1.0, 3.0))
    assert got[(1, "1F1")] == pytest.approx((3.0, 4.0))       # alone again: full speed
    assert tl.makespan == pytest.approx(sum(e.duration for e in simulate(
        make_schedule("gpipe", 2, 2), tf=1.0, tb=2.0).events))  # one core never idles here


@pytest.mark.slow
@pytest.mark.parametrize("name", ["1f1b", "interleaved", "zbv", "dualpipev", "v-min"])
@pytest.mark.parametrize("cores", [1, 1.5, 2, 3])
def test_processor_sharing_conserves_work(name, cores):
    """Each op does exactly its work: ∫ min(1, C/k) dt over the op = its lone duration,
    with k the ops running at each moment, read off the timeline."""
    s = make_schedule(name, 4, 8)
    tl = simulate(s, COSTS, cores=cores)
    duration = COSTS.duration_fn(s)
    times = sorted({x for e in tl.events for x in (e.start, e.end)})
    for e in tl.events:
        work = 0.0
        for lo, hi in zip(times, times[1:]):
            if e.start <= lo and hi <= e.end:
                k = sum(1 for o in tl.events if o.start <= lo and hi <= o.end)
                work += (hi - lo) * min(1.0, cores / k)
        assert work == pytest.approx(duration(e.op), rel=1e-9)
        assert e.duration >= duration(e.op) - 1e-12


def test_fewer_cores_never_finish_sooner_and_naive_does_not_care():
    for name in ("1f1b", "zbv", "dualpipe"):
        s = make_schedule(name, 4, 8)
        spans = [simulate(s, COSTS, cores=c).makespan for c in (4, 3, 2, 1)]
        assert spans == sorted(spans) and spans[-1] > spans[0]
    naive = make_schedule("naive", 4, 8)      # one rank busy at a time: nothing to share
    assert simulate(naive, COSTS, cores=1).makespan == \
        pytest.approx(simulate(naive, COSTS).makespan)


def test_a_deadlock_is_the_references_error():
    dead = Schedule.from_text(["0F0 0B0", "1B0 1F0"])
    with pytest.raises(ValueError, match="deadlock"):
        simulate(dead, cores=1)


@pytest.mark.parametrize("cores", [0, -1, "two", True, float("nan")])
def test_bad_cores_is_a_one_line_error(cores):
    with pytest.raises(ValueError, match="cores must be a positive number") as e:
        simulate(make_schedule("1f1b", 2, 4), cores=cores)
    assert "\n" not in str(e.value)


def test_network_is_not_simulates_and_the_error_says_where_it_is():
    """The stream model sits above the lowering, which the plain simulator sits below, so
    ``simulate`` has no ``network=``; a one-line error names the stream model's entry."""
    from pplab.streams import Link
    for kw in ({}, {"cores": 2}):
        with pytest.raises(TypeError, match="simulate_streams") as e:
            simulate(make_schedule("1f1b", 4, 8), network=Link(latency=0.1), **kw)
        assert "\n" not in str(e.value)
