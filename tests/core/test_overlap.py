"""DualPipe's F&B pair model (pplab/sim/overlap.py): the pair lasts its longest chain, so it is
never shorter than either half run alone and never longer than both run back to back; the
stream model derives the same pair cost from an all-to-all of its own."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pplab import Costs, make_schedule, simulate
from pplab.sim.overlap import ChunkCosts, check_tfb, pair_time, tfb_range
from pplab.streams import Link, simulate_streams

times = st.floats(min_value=0.0, max_value=8.0, allow_nan=False).map(lambda x: round(x, 3))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(times, times, times, times)
def test_a_pair_lies_between_its_longer_half_and_both_halves(fc, bc, fa, ba):
    c = ChunkCosts(fc=fc, bc=bc, fa=fa, ba=ba)
    assert c.tfb >= max(c.tf, c.tb) - 1e-12            # never shorter than either half
    assert c.tfb <= c.tf + c.tb + 1e-12                 # never longer than both
    assert c.hidden >= -1e-12
    lo, hi = tfb_range(c.tf, c.tb)
    check_tfb(c.tf, c.tb, c.tfb)                        # the canvas accepts what the model gives
    assert lo <= c.tfb + 1e-12 and c.tfb <= hi + 1e-12


@pytest.mark.parametrize("fc, bc, fa, ba, want, binding", [
    (1, 2, 0.5, 0.5, 3.0, "compute"),
    (1, 2, 2.0, 2.0, 4.0, "communication"),
    (1, 2, 3.0, 0.5, 4.0, "the forward chunk's chain"),
    (1, 2, 0.2, 2.5, 4.5, "the backward chunk's chain"),
])
def test_each_of_the_four_chains_can_set_the_pair(fc, bc, fa, ba, want, binding):
    assert pair_time(fc, bc, fa, ba) == want, binding


def test_a_large_all_to_all_no_longer_makes_a_pair_shorter_than_a_lone_pass():
    """Compute + communication streams alone would price this pair at max(3, 3.5) = 3.5,
    below the forward alone (1 + 3 = 4): the forward chunk's chain sets it."""
    c = ChunkCosts(fc=1, bc=2, fa=3, ba=0.5)
    assert max(c.fc + c.bc, c.fa + c.ba) < c.tf
    assert c.tfb == c.tf == 4


@pytest.mark.parametrize("fa, ba", [(0.6, 0.9), (3.0, 0.5), (0.2, 2.5)])
def test_the_stream_model_gives_the_pair_model_event_for_event(fa, ba):
    cc = ChunkCosts(fc=1.0, bc=2.0, fa=fa, ba=ba, w=1.0)
    for name in ("dualpipe", "dualpipev"):
        sched = make_schedule(name, 4, 8)
        streams = simulate_streams(sched, Costs(cc.fc, cc.bc, cc.w), Link(ep_a2a=(fa, ba)))
        frac = sched.chunk_fraction(0)
        pairs = [e.duration for e in streams.events if e.op.kind == "FB"]
        assert pairs and pairs == pytest.approx([cc.tfb * frac] * len(pairs))
        typed = simulate(sched, **cc.costs())
        assert typed.makespan == pytest.approx(streams.makespan)


def test_bad_tfb_is_refused_with_its_range():
    with pytest.raises(ValueError, match="shorter than the pair's longer half"):
        check_tfb(1, 2, 1.5)
    with pytest.raises(ValueError, match="longer than tf \\+ tb"):
        check_tfb(1, 2, 3.5)
