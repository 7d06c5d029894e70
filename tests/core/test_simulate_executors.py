"""The fast executor (pplab/sim/fast.py) against the reference, event for event.

Property tests over random valid schedules from every generator and random costs (comm,
fixed overhead, per-stage scales, a separate F&B cost), plus shuffled rank lists that
deadlock, lose an input or run an action twice: either both executors give the same events
in the same order, or both raise the same error.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pplab.ir import Action, Schedule
from pplab.keys import PAIR_BASE
from pplab.registry import NAMES, make_schedule
from pplab.sim import Costs, entry, execute, execute_reference, simulate
from pplab.sim import fast as fast_executor
from pplab.sim import compiled as compile_plan

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
times = st.floats(min_value=0.0, max_value=4.0, allow_nan=False).map(lambda x: round(x, 3))


@st.composite
def schedules(draw):
    name = draw(st.sampled_from(NAMES))
    P, M = draw(st.integers(1, 6)), draw(st.integers(1, 14))
    V = draw(st.sampled_from([None, 1, 2, 3]))
    try:
        return make_schedule(name, P, M, V)
    except ValueError:
        assume(False)


@st.composite
def costs_for(draw, sched: Schedule):
    tf, tb = draw(times), draw(times)
    tw = draw(st.floats(0.0, 1.0)) * tb
    tfb = draw(st.one_of(st.none(), times))
    scale = draw(st.one_of(st.none(), st.lists(st.floats(0.25, 3.0), min_size=sched.num_stages,
                                                max_size=sched.num_stages)))
    return Costs(tf, tb, tw, tfb, comm=draw(times), fixed=draw(times) / 4, stage_scale=scale)


def figures(tl):
    return (tl.makespan, tl.bubble_fraction, tl.bubble_ratio, tl.bubble_rate_span, tl.busy,
            tl.peak_inflight, tl.spans)


def outcome(fn):
    """The events, or the error's type and words."""
    try:
        return fn()
    except ValueError as e:
        return type(e).__name__, str(e)


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_every_generator_any_costs_same_events_and_figures(data):
    sched = data.draw(schedules())
    costs = data.draw(costs_for(sched))
    compiled = compile_plan.compile_schedule(sched)
    assert compiled is not None                         # generated schedules take the fast path
    assert fast_executor.run(sched, costs.duration_fn(sched), costs.comm, True,
                             compiled) is not None
    fast = simulate(sched, costs, executor="fast")
    ref = simulate(sched, costs, executor="reference")
    assert "events" not in vars(fast)           # columns: every figure before any event
    assert figures(fast) == figures(ref)
    assert fast.events_by_rank() == ref.events_by_rank()
    assert fast.rank_strip_columns() == ref.rank_strip_columns()
    assert "events" not in vars(fast)
    assert [(e.rank, str(e.op), e.start, e.end) for e in fast.events] == \
        [(e.rank, str(e.op), e.start, e.end) for e in ref.events]
    assert fast.events == ref.events
    assert figures(fast) == figures(ref)
    assert fast.to_dict() == ref.to_dict()
    again = data.draw(costs_for(sched))           # the run order is kept: a straight pass
    assert simulate(sched, again, executor="fast").events == \
        simulate(sched, again, executor="reference").events


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_shuffled_rank_lists_give_the_same_events_or_the_same_error(data):
    """Moved ops may deadlock, drop an input or repeat an action: the fast path hands those
    to the reference, so the answer (events or words) is always the reference's."""
    sched = data.draw(schedules())
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    ranks = [list(ops) for ops in sched.ranks]
    for _ in range(data.draw(st.integers(1, 3))):
        row = rng.choice([r for r in ranks if r] or [[]])
        if len(row) > 1:
            i, j = rng.randrange(len(row)), rng.randrange(len(row))
            what = rng.random()
            if what < 0.6:
                row[i], row[j] = row[j], row[i]
            elif what < 0.8:
                del row[i]
            else:
                row.insert(j, row[i])
    broken = Schedule(sched.name, sched.P, sched.M, sched.stage_to_rank,
                      tuple(map(tuple, ranks)), sched.V, sched.copies)
    costs = data.draw(costs_for(broken))
    fast = outcome(lambda: simulate(broken, costs, executor="fast").events)
    ref = outcome(lambda: simulate(broken, costs, executor="reference").events)
    assert fast == ref


@pytest.mark.slow
@SETTINGS
@given(name=st.sampled_from(["interleaved", "bfs-1f1b", "zbv", "dualpipe", "dualpipev"]),
       P=st.integers(1, 12), M=st.integers(1, 48), V=st.sampled_from([1, 2, 3]))
def test_a_generators_runs_list_each_stream_as_its_keys_do(name, P, M, V):
    """The keyed generators say where each stream's ops sit (``Streams.runs``), so the
    compile lists a stream's parts without reading keys; those lists are the ones the keys
    give, overlapped pairs' halves and postponed W's included, and every pair is marked."""
    try:
        sched = make_schedule(name, P, M, V)
    except ValueError:
        assume(False)
    keys = [k for row in sched.rank_keys() for k in row]
    pl = compile_plan.compile_schedule(sched).inputs
    pairs = compile_plan._pair_positions(keys)
    by_runs = compile_plan._streams_from_runs(sched, keys, pl.bounds)
    assert (by_runs is None) == (name == "zbv" and M < 2 * P - 1)  # some dropped: no runs
    if by_runs is not None:
        assert by_runs[0] == compile_plan._streams_from_keys(sched, keys, pairs)
        assert sorted(i for at in by_runs[2] for i in at) == pairs
    assert sum(d == compile_plan.PAIR for d in pl.source) == sum(k >= PAIR_BASE for k in keys)


@pytest.mark.parametrize("name", NAMES)
def test_unit_costs_and_any_duration_function(name):
    """The validator's and the lowering's call: ``execute`` with a plain function of the op."""
    sched = make_schedule(name, 4, 8)
    weird = lambda op: 1.0 + 0.1 * (hash(str(op)) % 7)              # noqa: E731
    for fn in (lambda op: 1.0, weird):
        assert execute(sched, fn, 0.5) == execute_reference(sched, fn, 0.5)


def test_auto_takes_the_fast_path(monkeypatch):
    sched = make_schedule("zbv", 4, 8)
    expected = simulate(sched, tf=1, tb=2, tw=1).events

    def refuse(*a, **k):
        raise AssertionError("the reference ran")
    monkeypatch.setattr(entry, "execute_reference", refuse)
    assert simulate(sched, tf=1, tb=2, tw=1).events == expected


def test_errors_are_the_reference_words():
    f1 = Action(1, "F", 0)
    missing = Schedule("broken", 2, 1, (0, 1), ((), (f1, Action(1, "B", 0))))
    with pytest.raises(ValueError, match="which no rank runs"):
        simulate(missing, executor="fast")
    dead = Schedule.from_text(["0F0 0B0", "1B0 1F0"])
    with pytest.raises(ValueError, match="deadlock"):
        simulate(dead, executor="fast")
    with pytest.raises(ValueError, match="executor must be one of"):
        simulate(dead, executor="quick")


def test_a_compiled_schedule_is_a_value_the_caller_keeps():
    """Compiling is explicit and immutable: the same inputs and run order each time, nothing
    written into the schedule, and every simulation one timing pass along that order."""
    sched = make_schedule("interleaved", 4, 8, 2)
    before = dict(vars(sched))
    kept = compile_plan.compile_schedule(sched)
    assert kept == compile_plan.compile_schedule(sched) and vars(sched) == before
    assert all(type(x) is tuple for x in (kept.order, *kept.inputs[1:]))
    a = simulate(sched, tf=1, tb=2, compiled=kept).events
    b = simulate(sched, tf=2, tb=3, comm=0.5, compiled=kept).events
    assert a != b and b == simulate(sched, tf=2, tb=3, comm=0.5, executor="reference").events
    assert a == simulate(sched, tf=1, tb=2).events and vars(sched) == before
    with pytest.raises(ValueError, match="compile_schedule"):
        simulate(make_schedule("1f1b", 4, 8), compiled=kept)


def test_a_deadlock_compiles_to_nothing_and_the_reference_words_it():
    dead = Schedule.from_text(["0F0 0B0", "1B0 1F0"])
    assert compile_plan.compile_schedule(dead) is None
    with pytest.raises(ValueError, match="deadlock"):
        simulate(dead)


@pytest.mark.parametrize("rank1", [
    "2F0 1F0 1F1 2F1 2I0 2W0 1I0 1W0 2I1 2W1 1I1 1W1",     # the V's turn before its input
    "1F0 2F0 1F1 2F1 2W0 2I0 1I0 1W0 2I1 2W1 1I1 1W1",     # a W before its own I
    "1F0 2F0 1F1 2F1 2I0 2W0 1I0 1W0 2I1 2W1 1W1"])        # a W whose I never runs
def test_same_rank_inputs_out_of_order_are_the_reference_errors(rank1):
    """Inputs made on the same rank never move a start time, so the fast path skips them,
    but only after checking they come earlier: else the reference's error, word for word."""
    rank0 = "0F0 0F1 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 0I1 0W1"
    sched = Schedule.from_text([rank0, rank1], stage_to_rank=[0, 1, 1, 0], virtual=2)
    assert compile_plan.compile_schedule(sched) is None              # it steps aside
    ref = outcome(lambda: simulate(sched, tf=1, tb=2, tw=1, executor="reference").events)
    assert ref[0] == "DeadlockError" or "no rank runs" in ref[1]
    assert outcome(lambda: simulate(sched, tf=1, tb=2, tw=1).events) == ref
