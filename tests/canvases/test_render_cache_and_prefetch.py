"""The simulator's integer-indexed executor against a plain reference, and the pictures the
canvases keep and render ahead (both exist so that a slider redraws quickly; neither may
change a result)."""
from __future__ import annotations

import pytest
from browser_util import run_in_own_loop

from pplab.canvases.cache import KEPT, CanvasCache
from pplab.canvases.timeline import render
from pplab.ir import Action, Schedule
from pplab.registry import make_schedule, names
from pplab.sim import Costs, dependencies, simulate
from pplab.timeline import Event


def reference_events(schedule: Schedule, costs: Costs) -> list[Event]:
    """Sweep the ranks until nothing moves: each rank's head op runs once every dependency
    has finished (+comm across ranks). Quadratic and obviously right."""
    pointer, free_at, done, events = [0] * schedule.P, [0.0] * schedule.P, {}, []
    moved = True
    while moved:
        moved = False
        for rank, ops in enumerate(schedule.ranks):
            while pointer[rank] < len(ops):
                op = ops[pointer[rank]]
                deps = [d for a in op.parts for d in dependencies(schedule, a)
                        if d not in op.parts]
                if any(d not in done for d in deps):
                    break
                start = max([free_at[rank]] + [done[d][0] + (costs.comm if done[d][1] != rank
                                                             else 0.0) for d in deps])
                end = start + costs.duration(schedule, op)
                events.append(Event(rank, op, start, end))
                free_at[rank], pointer[rank], moved = end, pointer[rank] + 1, True
                for a in op.parts:
                    done[a] = (end, rank)
    return events


def _cases():
    for name in names():
        for P, M, V in ((2, 4, None), (4, 8, None), (4, 8, 2), (3, 6, None)):
            try:
                yield name, make_schedule(name, P, M, V)
            except ValueError:
                continue


COSTS = (Costs(1, 2, 0), Costs(1, 2, 1, comm=0.3, fixed=0.1), Costs(1.5, 2, 0.5, comm=0.25))


@pytest.mark.slow
@pytest.mark.parametrize("name,sched", list(_cases()), ids=lambda x: str(x)[:20])
def test_executor_matches_reference(name, sched):
    for costs in COSTS:
        fast = sorted((e.rank, e.start, e.end, str(e.op)) for e in simulate(sched, costs).events)
        ref = sorted((e.rank, e.start, e.end, str(e.op)) for e in reference_events(sched, costs))
        assert fast == ref, (name, costs)


def test_stage_scale_changes_durations_per_stage():
    sched, costs = make_schedule("1f1b", 2, 2), Costs(1, 2, 0, stage_scale=(1.0, 3.0))
    tl = simulate(sched, costs)
    assert {e.duration for e in tl.events if e.rank == 1 and e.op.kind == "F"} == {3.0}
    key = lambda e: (e.rank, e.start, e.end, str(e.op))              # noqa: E731
    assert sorted(map(key, tl.events)) == sorted(map(key, reference_events(sched, costs)))


def test_missing_producer_is_named():
    f1 = Action(1, "F", 0)
    sched = Schedule("broken", 2, 1, (0, 1), ((), (f1, Action(1, "B", 0))))
    with pytest.raises(ValueError, match=r"rank 1 step 0: 1F0 needs 0F0, which no rank runs"):
        simulate(sched, Costs())


def test_kept_pictures_are_the_fresh_ones_and_the_oldest_goes():
    calls = []

    def fn(**kw):
        calls.append(kw)
        return render(**kw)
    cache = CanvasCache(pictures=2)
    a = cache.picture(fn, dict(schedule="interleaved", P=4, M=8, V=2))
    assert cache.picture(fn, dict(schedule="interleaved", P=4, M=8, V=2)) is a
    assert len(calls) == 1 and a == render("interleaved", 4, 8, 2)       # same as uncached
    cache.picture(fn, dict(schedule="1f1b", P=4, M=8, V=1))
    cache.picture(fn, dict(schedule="gpipe", P=4, M=8, V=1))            # the oldest goes
    cache.picture(fn, dict(schedule="interleaved", P=4, M=8, V=2))
    assert len(calls) == 4 and len(cache.pictures.entries) == 2
    assert cache.served == {"fresh": 4, "cached": 1, "prefetched": 0}


def test_no_pictures_kept_and_unhashable_arguments():
    calls = []
    cache = CanvasCache(pictures=0)
    fn = lambda **kw: calls.append(kw) or (None, "x")                   # noqa: E731
    cache.picture(fn, dict(a=1))
    cache.picture(fn, dict(a=1))
    cache.picture(fn, dict(a=[1]))                                      # unhashable: just calls
    assert len(calls) == 3 and not cache.pictures.entries


def _ahead_values(name):
    return sorted(dict(key[1])[name] for key in KEPT.ahead.entries)


@pytest.fixture
def nothing_kept(monkeypatch):
    """Every move a first visit: no picture kept once shown, none rendered ahead yet."""
    monkeypatch.setattr(KEPT.pictures, "size", 0)
    KEPT.pictures.clear()
    KEPT.ahead.clear()


def test_a_slider_step_finds_its_neighbours_rendered_while_the_kernel_idles(nothing_kept):
    import asyncio

    from pplab.canvases.timeline import timeline_canvas

    async def student():
        c = timeline_canvas("interleaved", 8, 32, 2)
        c.prefetcher.SLOW_S = float("inf")                # a busy test machine is not "slow"
        before = dict(KEPT.served)
        c.controls["V"].value = 3                         # a step right: V=3 simulated
        assert KEPT.served["fresh"] == before["fresh"] + 1
        for _ in range(4):
            await asyncio.sleep(0)                        # the kernel waits for a message
        assert _ahead_values("V") == [2, 4]               # onward and back, both ready
        c.controls["V"].value = 4
        assert KEPT.served["prefetched"] == before["prefetched"] + 1
        assert c.view.scene == render("interleaved", 8, 32, 4)[0]
        for _ in range(4):
            await asyncio.sleep(0)
        assert 3 in _ahead_values("V") and 5 not in _ahead_values("V")   # V=5: past the end
        c.controls["V"].value = 3
        assert KEPT.served["prefetched"] == before["prefetched"] + 2
        assert c.errors == []
    run_in_own_loop(student, 120)


def test_a_newer_move_cancels_the_rest_and_slow_renders_prefetch_nothing(nothing_kept):
    import asyncio

    from pplab.canvases.timeline import timeline_canvas

    async def student():
        c = timeline_canvas("interleaved", 8, 32, 2)
        c.prefetcher.SLOW_S = float("inf")
        c.controls["V"].value = 3
        c.controls["M"].value = 24                        # before the loop turns: V's are off
        for _ in range(4):
            await asyncio.sleep(0)
        assert _ahead_values("M") == [23, 25] and _ahead_values("V") == [3, 3]
        c.prefetcher.SLOW_S = 0.0                         # every render now counts as slow
        c.controls["M"].value = 16
        for _ in range(4):
            await asyncio.sleep(0)
        assert _ahead_values("M") == [23, 25]             # nothing new
    run_in_own_loop(student, 120)


def test_no_event_loop_no_prefetch(nothing_kept):
    from pplab.canvases.timeline import timeline_canvas
    c = timeline_canvas("interleaved", 8, 32, 2)
    c.controls["V"].value = 3
    assert KEPT.ahead.entries == {}
