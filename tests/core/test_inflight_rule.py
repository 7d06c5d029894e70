"""The in-flight rule is written once (``inflight.INFLIGHT_RULE``); the timeline, the
schedule's peaks, the scene's lines, the memory accounting and the generators' caps all count
by it."""
import pytest

from pplab import NAMES, inflight, make_schedule, simulate
from pplab.ir import parse_op
from pplab.memory.accounting import peak_split
from pplab.scene.panels import inflight_panel, inflight_steps_panel, levels
from pplab.schedules import squeeze, zero_bubble
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
        from_events = Timeline.of_events(tl.num_ranks, list(tl.events), schedule=s)
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


def test_every_reader_follows_the_one_rule(monkeypatch):
    """Were the rule written twice, changing it would leave the copy behind. Under a changed
    rule (an I frees its activation at once, its W then frees nothing) the timeline, the
    schedule's peaks, the scene's lines, the memory accounting and the generators' chunk
    counts must all count the new way."""
    s = make_schedule("zb-h1", 4, 8)
    tl = simulate(s, tf=1, tb=2, tw=1)
    before = tl.peak_inflight
    monkeypatch.setitem(inflight.INFLIGHT_RULE, "I", (-1, 0))
    monkeypatch.setitem(inflight.INFLIGHT_RULE, "W", (0, 0))

    def by_hand(texts):                     # the changed rule: forwards minus I's done
        alive = [0]
        for t in texts:
            alive.append(alive[-1] + {"F": 1, "B": -1, "I": -1, "W": 0}[parse_op(t).kind])
        return max(alive)
    want = [by_hand(row) for row in s.rank_texts()]
    assert want != before                   # the change shows on this schedule
    assert tl.peak_inflight == peak_inflight_of(s) == want
    assert [max(y for _, y in sr["points"]) for sr in inflight_panel(tl)["series"]] == want
    assert [max(y for _, y in sr["points"])
            for sr in inflight_steps_panel(s)["series"]] == want
    assert [max(levels(ops)) for ops in s.ranks] == want
    assert [round(peak) for peak, _, _ in peak_split(s, {st: 1.0 for st in range(4)},
                                                    {st: 1.0 for st in range(4)})] == want
    assert squeeze._alive_steps() == (1, -1, 0)          # F, I, W passes
    # ZB-H2's greedy order caps what is alive: with nothing ever alive the cap never binds
    monkeypatch.setitem(inflight.INFLIGHT_RULE, "F", (0, 0))
    monkeypatch.setitem(inflight.INFLIGHT_RULE, "I", (0, 0))
    assert zero_bubble._greedy_order(4, 8, 1) == zero_bubble._greedy_order(4, 8, 8)
    monkeypatch.undo()
    assert zero_bubble._greedy_order(4, 8, 1) != zero_bubble._greedy_order(4, 8, 8)
