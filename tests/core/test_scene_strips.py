"""A big timeline's scene is a strip per rank (pplab.scene.panels.rank_strips), small at any
P and M, and each strip shows what the timeline runs at each pixel column's centre."""
from __future__ import annotations

import json

import pytest

from pplab import make_schedule, simulate
from pplab.scene import PLOT_PX, STRIP_AFTER, timeline_panel

KIND_OF = {"F": "F", "B": "B", "I": "I", "W": "W", "X": "FB"}


def running_at(rank_events, t: float) -> str:
    """The kind running at time ``t`` among one rank's events by brute force, '.' when idle."""
    kinds = [e.op.kind for e in rank_events if e.start <= t < e.end]
    return kinds[-1] if kinds else "."


@pytest.mark.parametrize("name, P, M, V", [("zbv", 16, 64, 2), ("dualpipev", 12, 160, 2),
                                           ("interleaved", 8, 96, 3)])
def test_a_strip_shows_the_kind_at_each_column(name, P, M, V):
    tl = simulate(make_schedule(name, P, M, V), tf=1, tb=2, tw=0.7, comm=0.3)
    panel = timeline_panel(tl)
    assert max(len(evs) for evs in tl.events_by_rank()) > STRIP_AFTER
    assert panel["boxes"] == [] and len(panel["strips"]) == P
    width = (tl.makespan) / PLOT_PX
    events = [[e for e in tl.events if e.rank == rank] for rank in range(P)]
    start = tl.start            # once: with the events read, each ``start`` scans them all
    for rank, row in enumerate(panel["strips"]):
        assert len(row) == PLOT_PX and set(row) <= set("FBIWX.")
        for col in range(0, PLOT_PX, 7):
            ch = row[col]
            want = running_at(events[rank], start + (col + 0.5) * width)
            assert (KIND_OF.get(ch, ".")) == want, (rank, col)
    drawn = {KIND_OF[c] for row in panel["strips"] for c in set(row) if c != "."}
    assert drawn == set(panel["colors"]) and {k for k, _ in panel["legend"]}


def test_small_timelines_keep_a_box_per_op():
    tl = simulate(make_schedule("interleaved", 8, 32, 2))
    panel = timeline_panel(tl)
    assert "strips" not in panel and len(panel["boxes"]) == len(tl.events)


def test_the_far_corner_scene_is_kilobytes_not_megabytes():
    tl = simulate(make_schedule("interleaved", 64, 256, 2))
    text = json.dumps(timeline_panel(tl), separators=(",", ":"))
    assert len(text) < 100_000            # a box per op was ~3 MB
