"""The stream model (pplab/streams/model.py): today's executor where they mean the same thing, and
the effects it exists for where they do not (bandwidth, in-order queues, blocking receives,
DualPipe's hidden all-to-all)."""
from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pplab import Costs, DeadlockError, make_schedule, simulate
from pplab.lower import LOWERINGS, lower
from pplab.memory import boundary_activation_bytes
from pplab.sim.overlap import ChunkCosts
from pplab.streams import Link, compile_streams, simulate_streams
from pplab.streams.replay import ReplayedTransfers
from pplab.timeline import Timeline

from schedule_cases import valid_schedules

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
times = st.floats(min_value=0.0, max_value=4.0, allow_nan=False).map(lambda x: round(x, 3))
GRID = valid_schedules((1, 2, 3, 4), (1, 4, 8), (None, 1, 2, 3))


def key(e):
    return (e.rank, e.start, e.end, str(e.op))


def same_events(a: Timeline, b: Timeline) -> bool:
    return sorted(a.events, key=key) == sorted(b.events, key=key)


@pytest.mark.parametrize("sched", GRID, ids=lambda s: f"{s.name}-P{s.P}-M{s.M}-V{s.V}")
def test_free_network_is_todays_simulate_on_every_schedule(sched):
    """Infinite bandwidth, zero latency: every lowering, blocking receives or not, gives
    today's events exactly (the paper reproductions stand on those)."""
    costs = Costs(1, 2, 0.5)
    want = simulate(sched, costs)
    for lowering in ("up-front", "in-order", "just-in-time"):
        got = simulate_streams(sched, costs, link=Link(lowering=lowering))
        assert same_events(got, want), lowering
        assert got.makespan == want.makespan
    assert same_events(simulate_streams(sched, costs, Link(lowering="just-in-time",
                                                           blocking=True)), want)


RANDOM_GRID = valid_schedules(range(1, 7), (1, 3, 8, 13), (None, 1, 2, 3))


@st.composite
def costs_for(draw, sched):
    tf, tb = draw(times), draw(times)
    scale = draw(st.one_of(st.none(), st.lists(st.floats(0.25, 3.0), min_size=sched.num_stages,
                                                max_size=sched.num_stages)))
    return Costs(tf, tb, draw(st.floats(0.0, 1.0)) * tb, draw(st.one_of(st.none(), times)),
                 comm=draw(times), fixed=draw(times) / 4, stage_scale=scale)


@st.composite
def case(draw):
    sched = RANDOM_GRID[draw(st.integers(0, len(RANDOM_GRID) - 1))]   # sampled_from hashes
    #                                                   every schedule, action by action
    return sched, draw(costs_for(sched)), draw(st.sampled_from(["up-front", "in-order",
                                                                 "just-in-time"]))


@pytest.mark.slow
@SETTINGS
@given(case())
def test_latency_equal_to_comm_is_todays_per_hop_model(c):
    """On a tag-matched transport a message sent when its op ends lands ``latency`` later,
    whatever the posting order: that is today's ``comm``, event for event."""
    sched, costs, lowering = c
    got = simulate_streams(sched, costs, link=Link(latency=costs.comm, lowering=lowering))
    assert same_events(got, simulate(sched, costs))


def test_a_pair_with_nothing_to_hide_lasts_what_the_duration_rule_says_to_the_bit():
    """Without an all-to-all an F&B pair is ``tf + tb`` scaled, exactly the reference's
    figure: splitting it into halves and adding them back moved one pair by an ulp once
    (DualPipeV P=3 M=8 with a heavy last stage), and every event after it."""
    sched = make_schedule("dualpipev", 3, 8)
    costs = Costs(tf=1.072, tb=3.488, tw=0.0, stage_scale=[1.0] * 5 + [3.0])
    want = simulate(sched, costs)
    for lowering in ("up-front", "in-order", "just-in-time"):
        got = simulate_streams(sched, costs, link=Link(lowering=lowering))
        assert same_events(got, want), lowering
        assert got.makespan == want.makespan


@st.composite
def links(draw):
    """Any link the replay may meet: latency, bandwidth, bytes, all-to-alls on some stages,
    every lowering, blocking receives or not, in-order queues now and then."""
    return Link(latency=draw(times), bandwidth=draw(st.sampled_from([math.inf, 0.5, 2.0])),
                act_bytes=draw(times), grad_bytes=draw(st.one_of(st.none(), times)),
                ep_a2a=(draw(times), draw(times)),
                moe_stages=draw(st.one_of(st.none(), st.frozensets(st.integers(0, 8)))),
                lowering=draw(st.sampled_from(LOWERINGS)), blocking=draw(st.booleans()),
                in_order=draw(st.sampled_from([None, None, None, "pair", "rank"])))


def outcome(fn):
    """The events and transfers in their order, or the error's type and words."""
    try:
        tl = fn()
        return [(e.rank, str(e.op), e.start, e.end) for e in tl.events], tl.transfers
    except ValueError as e:
        return type(e).__name__, str(e)


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_a_replay_is_the_full_run_for_any_costs_and_link(data):
    """``compile_streams`` records a schedule's run on a tag-matched link; a run with the
    same lowering and receives and that kept value replays it with the new numbers: the same events and transfers,
    in the same order, as the full run gives (``lowered=`` always runs in full)."""
    sched, costs, _ = data.draw(case())
    first = data.draw(links())
    link = dataclasses.replace(data.draw(links()), lowering=first.lowering,
                               blocking=first.blocking, in_order=first.in_order)
    again = data.draw(costs_for(sched))
    full = outcome(lambda: simulate_streams(sched, again, link,
                                            lowered=lower(sched, link.lowering)))
    try:
        kept = compile_streams(sched, link.lowering, link.blocking)
    except ValueError:
        return                                    # an error: nothing recorded
    assert (kept.recording is not None) == (kept.compiled is not None)
    try:
        replayed = simulate_streams(sched, again, link, compiled=kept)
    except ValueError as e:                       # an in-order link's deadlock, as in full
        assert full == (type(e).__name__, str(e))
        return
    replays = isinstance(replayed.transfers, ReplayedTransfers)
    assert replays == (link.in_order is None)                                # it replayed
    assert outcome(lambda: replayed) == full


def test_just_in_time_blocking_receives_are_free_and_front_loaded_ones_are_not():
    """Interleaved 1F1B, B = 2F: receives posted where a unit-time run makes their data
    (torch's front-loaded order) stop the rank before ops that do not need them."""
    sched = make_schedule("interleaved", 4, 8, 2)
    costs = Costs(1, 2)
    base = simulate(sched, costs).makespan
    jit = simulate_streams(sched, costs, link=Link(lowering="just-in-time", blocking=True))
    front = simulate_streams(sched, costs, link=Link(lowering="front-loaded", blocking=True))
    assert jit.makespan == base == 28.5
    assert front.makespan == 32.0
    # at unit costs the unit-time placement is exact, so the two orders agree
    unit = [simulate_streams(sched, Costs(1, 1), link=Link(lowering=lo, blocking=True)).makespan
            for lo in ("front-loaded", "just-in-time")]
    assert unit == [19.0, 19.0]


def test_bandwidth_serialises_a_ranks_sends():
    """Two messages posted together leave one after the other on the sender's stream."""
    sched = make_schedule("gpipe", 2, 2)
    link = Link(bandwidth=1.0, act_bytes=3.0, grad_bytes=0.0)
    tl = simulate_streams(sched, Costs(1, 2), link=link)
    acts = sorted((t.start, t.end) for t in tl.transfers if t.kind == "act")
    assert acts == [(1.0, 4.0), (4.0, 7.0)]       # 0F1 ends at 2, but the stream is busy
    starts = {str(e.op): e.start for e in tl.events}
    assert starts["1F0"] == 4.0 and starts["1F1"] == 7.0


def test_in_order_queues_make_messages_wait_behind_each_other():
    """With latency, a message heading an in-order queue holds the ones behind it: one queue
    per pair of ranks (NCCL's p2p) costs more than tag matching, one per rank more still."""
    sched = make_schedule("1f1b", 4, 8)
    costs = Costs(1, 2, comm=0.5)
    spans = [simulate_streams(sched, costs, link=Link(latency=0.5, lowering="in-order",
                                                 in_order=q)).makespan
             for q in (None, "pair", "rank")]
    assert spans == [simulate(sched, costs).makespan, 44.5, 45.5] == [41.0, 44.5, 45.5]
    # without latency nothing waits: the in-order plan follows the data
    free = [simulate_streams(sched, Costs(1, 2), link=Link(lowering="in-order", in_order=q))
            for q in ("pair", "rank")]
    assert all(same_events(t, simulate(sched, Costs(1, 2))) for t in free)


def test_up_front_on_an_in_order_transport_deadlocks_with_a_clear_message():
    sched = make_schedule("1f1b", 2, 4)
    with pytest.raises(DeadlockError, match="rank 0 .* waits for"):
        simulate_streams(sched, Costs(1, 2), link=Link(lowering="up-front", in_order="pair"))


def test_dualpipe_pair_cost_comes_out_of_the_all_to_all():
    """Compute costs plus an all-to-all per half give what pplab.sim.overlap's pair model gives
    when F, B and F&B are typed in; a plain F or B pays its all-to-all exposed."""
    cc = ChunkCosts(fc=1.0, bc=2.0, fa=0.6, ba=0.9, w=1.0)
    for name in ("dualpipe", "dualpipev"):
        sched = make_schedule(name, 4, 16)
        streams = simulate_streams(sched, Costs(cc.fc, cc.bc, cc.w),
                                   link=Link(ep_a2a=(cc.fa, cc.ba)))
        assert same_events(streams, simulate(sched, **cc.costs()))
        frac = sched.chunk_fraction(0)          # DualPipeV's chunks are half a rank's layers
        pair = next(e for e in streams.events if e.op.kind == "FB")
        assert pair.duration == pytest.approx(cc.tfb * frac) and cc.tfb == 3.0 < cc.tf + cc.tb
        plain_f = next(e for e in streams.events if e.op.kind == "F")
        assert plain_f.duration == pytest.approx(cc.tf * frac) and cc.tf == 1.6
        a2a = [t for t in streams.transfers if t.kind == "a2a" and t.src == pair.rank
               and pair.start <= t.start < pair.end]
        assert sum(t.end - t.start for t in a2a) == pytest.approx((cc.fa + cc.ba) * frac)
    # typed-in F&B still wins
    sched = make_schedule("dualpipe", 4, 16)
    typed = simulate_streams(sched, Costs(1, 2, 1, tfb=2.5), link=Link(ep_a2a=(0.6, 0.9)))
    assert {e.duration for e in typed.events if e.op.kind == "FB"} == {2.5}


def test_transfers_survive_the_round_trip_and_shift():
    sched = make_schedule("1f1b", 2, 2)
    tl = simulate_streams(sched, Costs(1, 2), link=Link(latency=0.5))
    assert len([t for t in tl.transfers if t.kind in ("act", "grad")]) == 4
    back = Timeline.from_dict(tl.to_dict())
    assert back.transfers == tl.transfers
    moved = tl.shifted(1.0)
    assert [t.start - 1.0 for t in moved.transfers] == [t.start for t in tl.transfers]
    assert "transfers" not in simulate(sched, Costs(1, 2)).to_dict()


def test_message_bytes_from_the_model_shape():
    b = boundary_activation_bytes(s=4096, b=1, h=4096, t=2)
    assert b == 4096 * 4096 * 2 / 2
    link = Link(latency=0.01, bandwidth=1e9, act_bytes=b)
    assert link.transfer_time(b) == pytest.approx(b / 1e9)
    assert Link().transfer_time(b) == 0.0 and Link().bandwidth == math.inf
    shaped = Link.for_shape(seq=4096, microbatch=1, hidden=4096, tp=2, bandwidth=1e9)
    assert shaped.act_bytes == b and shaped.bytes_of("grad") == b


@pytest.mark.parametrize("kw, words", [
    (dict(latency=-1), "latency must be ≥ 0"), (dict(bandwidth=0), "bandwidth must be > 0"),
    (dict(ep_a2a=(1,)), "ep_a2a"), (dict(lowering="sideways"), "lowering must be one of"),
    (dict(in_order="stream"), "in_order must be"),
])
def test_bad_links_are_refused_in_one_line(kw, words):
    with pytest.raises(ValueError, match=words):
        Link(**kw)


def test_a_list_that_computes_before_posting_its_receive_is_refused():
    sched = make_schedule("1f1b", 2, 2)
    rows = lower(sched, "just-in-time")
    rows[1] = [x for x in rows[1] if "RECV" not in str(x)]
    with pytest.raises(ValueError, match="before posting the receive"):
        simulate_streams(sched, Costs(1, 2), lowered=rows)
