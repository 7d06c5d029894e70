"""What the canvases keep between slider moves at P=64, M=256: the last few schedules (with
the simulator's plan on them, and each schedule's peak in-flight kept with the plan), which
must equal what the timeline's own events report."""
from __future__ import annotations

import pytest

from pplab.canvases import base
from pplab.canvases.timeline import render
from pplab.registry import NAMES, make_schedule
from pplab.sim import simulate


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("tw, comm", [(0.0, 0.0), (0.5, 0.25)])
def test_kept_peaks_are_the_timelines_own(name, tw, comm):
    """Zero-length W's (tw = 0) tie with their neighbours in time: the rank's order must
    still be the run order the peak was read from."""
    try:
        sched = make_schedule(name, 4, 12)
    except ValueError:
        pytest.skip("no such shape")
    for tf in (1.0, 2.5):                     # the second reads the kept peaks
        kept = simulate(sched, tf=tf, tb=2.0, tw=tw, comm=comm).peak_inflight
        ref = simulate(sched, tf=tf, tb=2.0, tw=tw, comm=comm, executor="reference")
        assert kept == ref.peak_inflight


def test_a_slider_moving_back_reuses_the_schedule():
    base.kept_schedule.cache_clear()
    first = render("zbv", 8, 32, 2, draw="scene")
    render("zbv", 8, 33, 2, draw="scene")
    again = render("zbv", 8, 32, 2, draw="scene")
    assert base.kept_schedule.cache_info().hits == 1 and again == first
    moved = render("zbv", 8, 32, 2, tf=2.0, draw="scene")
    assert base.kept_schedule.cache_info().hits == 2 and moved != first
