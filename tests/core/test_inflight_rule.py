"""The in-flight rule is written once (``timeline.inflight_walk``); the timeline's columns, its
events, the scene's lines and the memory accounting all count by it."""
import pytest

from pplab import NAMES, make_schedule, simulate
from pplab.ir import parse_op
from pplab.memory.accounting import peak_split
from pplab.scene.panels import inflight_panel, levels
from pplab.timeline import Timeline, inflight_walk, peak_inflight, peak_inflight_of


def _ops(text: str):
    return [parse_op(t) for t in text.split()]


def test_the_rule_on_a_split_backward():
    # F0 F1 alive (2 + 2); I0 shrinks mb 0 to its pending W (0.5); W0 frees that; B1 frees mb 1
    walk = inflight_walk(_ops("0F0 0F1 0I0 0W0 0B1"), {0: 2.0}, {0: 0.5})
    assert list(zip(walk.levels, walk.whole, walk.waiting)) == [
        (2.0, 1, 0), (4.0, 2, 0), (2.5, 1, 1), (2.0, 1, 0), (0.0, 0, 0)]
    # without a pending size an I frees nothing: the W still needs the forward's inputs
    assert inflight_walk(_ops("0F0 0I0 0W0")).levels == [1.0, 1.0, 0.0]
    assert levels(_ops("0F0 0F1 0I0 0W0 0B1")) == [1, 2, 2, 1, 0]


def test_an_overlapped_pair_counts_its_forward_before_its_backward_frees():
    pair = parse_op("(0F1;0B0)")
    walk = inflight_walk([parse_op("0F0"), pair])
    assert (walk.levels, walk.op_last) == ([1.0, 2.0, 1.0], [0, 2])
    assert levels([parse_op("0F0"), pair]) == [1, 1]       # the scene's lines: after each op


def _made(name, P, M, V):
    try:
        return make_schedule(name, P, M, V)
    except ValueError:
        return None


@pytest.mark.parametrize("name", sorted(NAMES))
def test_every_reader_counts_the_same_peaks(name):
    checked = 0
    for P, M, V in [(4, 8, None), (4, 8, 2), (3, 6, None)]:
        s = _made(name, P, M, V)
        if s is None:
            continue
        checked += 1
        tl = simulate(s)                                      # the simulator's columns
        from_events = Timeline(tl.num_ranks, list(tl.events), schedule=s)
        assert tl.peak_inflight == from_events.peak_inflight == peak_inflight_of(s)
        counts = [whole + waiting for _, whole, waiting in peak_split(s)]
        assert all(c <= p for c, p in zip(counts, tl.peak_inflight))
        drawn = inflight_panel(tl)["series"]               # the scene's lines and legend
        assert [max(y for _, y in sr["points"]) for sr in drawn] == tl.peak_inflight
        assert [sr["name"] for sr in drawn] == [f"rank {r} (peak {p})"
                                                for r, p in enumerate(tl.peak_inflight)]
        if not any(len(op.parts) > 1 for ops in s.ranks for op in ops):
            assert [max(levels(ops), default=0) for ops in s.ranks] == tl.peak_inflight
    assert checked


def test_the_lessons_name_is_the_same_function():
    assert peak_inflight is peak_inflight_of
    assert peak_inflight_of(make_schedule("1f1b", 4, 8)) == [4, 3, 2, 1]
