"""What the canvases keep between slider moves at P=64, M=256: the last few schedules (with
the simulator's plan on them, and each schedule's peak in-flight kept with the plan), which
must equal what the timeline's own events report."""
from __future__ import annotations

import pytest

from pplab.canvases.cache import KEPT, Shelf
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


def test_a_slider_moving_back_reuses_the_schedule(monkeypatch):
    """The canvases' one cache builds a schedule once while it stays among the last few: a
    slider moved away and back, or a cost slider, simulates the kept one."""
    import pplab.registry as registry
    builds = []
    monkeypatch.setattr(registry, "make_schedule",
                        lambda *a: builds.append(a) or make_schedule(*a))
    KEPT.clear()
    first = render("zbv", 8, 32, 2)
    render("zbv", 8, 33, 2)
    again = render("zbv", 8, 32, 2)
    assert builds == [("zbv", 8, 32, 2), ("zbv", 8, 33, 2)] and again == first
    moved = render("zbv", 8, 32, 2, tf=2.0)
    assert len(builds) == 2 and moved != first
    for M in range(34, 34 + KEPT.schedules.size):        # enough others to push it out
        render("zbv", 8, M, 2)
    render("zbv", 8, 32, 2)
    assert builds[-1] == ("zbv", 8, 32, 2) and len(builds) == 3 + KEPT.schedules.size


def test_the_makespan_curve_is_kept_and_refusals_are_not(monkeypatch):
    """Lesson 05's curve (five simulations) is kept in the one cache, under its arguments;
    a schedule the generator refuses is never kept (it is asked again, and refused again)."""
    from pplab.canvases import interleaved as IL
    KEPT.clear()
    curve = IL.makespan_vs_V(4, 8, 0.25)
    assert [v for v, _ in curve] == list(IL.CURVE_V) and all(t for _, t in curve)
    monkeypatch.setattr(IL, "_makespan_vs_V", lambda *a: pytest.fail("simulated again"))
    assert IL.makespan_vs_V(4, 8, 0.25) == curve
    assert render("interleaved", 4, 6, 2)[0] is None                  # M not a multiple of P
    assert not any(k[2:4] == (4, 6) for k in KEPT.schedules.entries)


def test_a_shelf_drops_the_least_recently_used():
    shelf = Shelf(2)
    made = []
    make = lambda k: (lambda: made.append(k) or k * 10)              # noqa: E731
    assert [shelf.get(k, make(k)) for k in (1, 2, 1, 3, 2, 1)] == [10, 20, 10, 30, 20, 10]
    assert made == [1, 2, 3, 2, 1]            # 1 was used after 2, so 3 pushed 2 out
    off = Shelf(0)
    off.put("a", 1)
    assert "a" not in off
