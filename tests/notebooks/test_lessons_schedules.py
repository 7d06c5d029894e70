"""Lessons 05 and 06: their canvases' render functions over every slider value, the lessons run
headless with every canvas control moved inside the kernel, and the seed corrections are in
the checked outputs."""
import itertools
from pathlib import Path

import nbformat
import pytest

from pplab.canvases import interleaved as IL
from pplab.canvases import zero_bubble as ZB
from pplab.lower import p2p_messages
from pplab.registry import make_schedule

ROOT = Path(__file__).resolve().parents[2]
LESSONS = [ROOT / "notebooks" / "05_interleaved.ipynb",
           ROOT / "notebooks" / "06_zero_bubble_and_dualpipe.ipynb"]


def _floats(lo, hi, step):
    return [lo + i * step for i in range(int(round((hi - lo) / step)) + 1)]


@pytest.mark.slow
def test_interleaved_render_every_combination():
    """P × M × V × schedule (no curve): valid → summary, invalid → the reason."""
    for name, P, M, V in itertools.product(IL.INTERLEAVED_SCHEDULES, range(1, 9), range(1, 33),
                                           range(1, 5)):
        pic, msg = IL.render_interleaved(name, P, M, V, comm=0.25, curve=False)
        assert msg and (pic is None) == ("makespan" not in msg), msg
        try:
            make_schedule(name, P, M, V)
        except ValueError as e:                 # refused: the canvas shows the generator's words
            assert str(e) in msg
            continue
        assert "makespan" in msg and "point-to-point" in msg, msg


@pytest.mark.slow
@pytest.mark.parametrize("base", [("interleaved", 4, 8, 2, 0.25), ("bfs", 3, 5, 3, 0.5)])
def test_interleaved_each_slider_full_range_with_figure(base):
    keys = ("schedule", "P", "M", "V", "comm")
    ranges = {"schedule": IL.INTERLEAVED_SCHEDULES, "P": range(1, 9), "M": range(1, 33),
              "V": range(1, 5), "comm": _floats(*IL.COMM_RANGE)}
    lo, hi, step = IL.m_positions(base[1])              # the M slider's positions at this P
    ranges["M"] = range(lo, hi + 1, step)
    for k in keys:
        for v in ranges[k]:
            kw = dict(zip(keys, base))
            kw[k] = v
            pic, msg = IL.render_interleaved(**kw)
            assert msg      # a picture exactly when the combination is valid
            assert (pic is None) == ("makespan" not in msg), msg


def test_interleaved_curve_turns_with_comm():
    free = dict(IL.makespan_vs_V(4, 8, 0.0))
    dear = dict(IL.makespan_vs_V(4, 8, 0.5))
    assert free[6] < free[4] < free[2] < free[1]          # no comm: more chunks always help
    assert min(dear, key=dear.get) == 2 and dear[6] > dear[1]


def test_p2p_messages_counts():
    from pplab import make_schedule
    for P, M, V in [(4, 8, 1), (4, 8, 2), (4, 8, 4), (2, 2, 3)]:
        assert p2p_messages(make_schedule("interleaved", P, M, V)) == 2 * M * (P * V - 1)
    assert p2p_messages(make_schedule("interleaved", 1, 3, 2)) == 0


@pytest.mark.slow
def test_zero_bubble_render_every_value():
    """Schedule × P × M; each cost slider over its range; tw > tb → message."""
    for name, P, M in itertools.product(ZB.ZB_SCHEDULES, range(1, 9), range(1, 33)):
        pic, msg = ZB.render_zero_bubble(name, P, M)
        assert msg and (pic is None) == ("closed form" not in msg), msg
    for name in ZB.ZB_SCHEDULES:
        for k, rng in ZB.ZB_COSTS.items():
            for v in _floats(*rng):
                kw = {"tf": 1.0, "tb": 2.0, "tw": 1.0, "tfb": 3.0, k: v}
                fig, msg = ZB.render_zero_bubble(name, 4, 8, **kw)
                if kw["tw"] > kw["tb"]:
                    assert fig is None and "cannot exceed" in msg
                elif name.startswith("dualpipe") and not (max(kw["tf"], kw["tb"]) <= kw["tfb"]
                                                          <= kw["tf"] + kw["tb"]):
                    assert fig is None and "choose tfb between" in msg
                else:
                    assert "closed form" in msg, msg


def test_dualpipe_idle_is_parametric_in_tfb_and_never_negative():
    """Issue 20: (P/2−1)(F&B + B − 3W) holds for every F&B the pair model means, as the
    idlest rank's idle; makespan − M·(tf+tb) went negative (P=8, M=20, tfb=2.5 gave −1)."""
    from pplab import make_schedule, simulate
    from pplab.sim.overlap import ChunkCosts, worst_idle
    for P, M in ((4, 8), (8, 20), (8, 32)):
        for tfb in (2.0, 2.25, 2.5, 2.75, 3.0):
            tl = simulate(make_schedule("dualpipe", P, M), tf=1, tb=2, tw=1, tfb=tfb)
            assert worst_idle(tl) == (P // 2 - 1) * (tfb + 2 - 3) >= 0
            assert min(tl.makespan - b for b in tl.busy) >= 0
            _, msg = ZB.render_zero_bubble("dualpipe", P, M, 1, 2, 1, tfb)
            assert "= -" not in msg and "closed form" in msg
    c = ChunkCosts(fc=1, bc=2, fa=0.5, ba=0.5, w=1)      # the all-to-all hides under compute
    assert (c.tf, c.tb, c.tfb, c.hidden) == (1.5, 2.5, 3.0, 1.0)
    _, msg = ZB.render_zero_bubble("dualpipe", 8, 20, 1, 2, 1, 1.0)
    assert "choose tfb between 2 and 3" in msg


def test_zero_bubble_closed_forms_match_where_stated():
    for name, P, M in [("1f1b", 4, 8), ("zb-h1", 4, 8), ("zbv", 4, 12), ("dualpipe", 8, 32),
                       ("dualpipev", 4, 16)]:
        _, msg = ZB.render_zero_bubble(name, P, M, 1, 2, 1, 3)
        line = msg.splitlines()[1]
        measured = float(line.split("= ")[1].split(";")[0])
        form = float(line.split("closed form ")[1].split(" ")[0])
        assert measured == form, (name, msg)


# ---- the lessons, executed ---------------------------------------------------------------------
# Executing these lessons with every canvas control swept is tests/notebooks/test_notebooks.py's job
# (it covers every notebook in notebooks/).


def _checked_text(path):
    nb = nbformat.read(path, as_version=4)
    return "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                     for o in c.outputs)


def test_lesson05_corrections_are_measured():
    text = _checked_text(LESSONS[0])
    from pplab.course.reveals import measurement_text     # after the bubble guess, not before
    article = measurement_text("05.bubble-v2")
    assert " 1    17.9%    21.9%   17.9%" in article        # the article's V=1 row is ÷ total
    assert " 2     9.9%    10.9%   10.9%" in article and "10.9%" not in text
    assert "multiple of P" in text
    assert "stage-equivalents [8.0, 8.0, 8.0, 8.0]" in text   # bfs holds M on every rank
    assert " 2                  11                5.5        5.5" in text


def test_lesson06_dualpipe_does_not_shrink_with_M():
    from pplab import make_schedule, simulate
    for P in (4, 8):
        idle = {simulate(make_schedule("dualpipe", P, M), tf=1, tb=2, tw=1, tfb=3).makespan - 3 * M
                for M in (2 * P, 4 * P, 8 * P)}
        assert idle == {(P // 2 - 1) * (3 + 2 - 3)}
    text = _checked_text(LESSONS[1])
    assert "dualpipe            6            6    5.9%                  9  2x" in text


def test_lesson13_block_picture_draws_the_v():
    """Lesson 13's picture of V-Half's block: the forward runs down the ranks two slots apart
    and back up one slot apart, the input-gradient pass retraces it."""
    from pplab.course.measure import v_block
    tl = v_block("v-half", 4)
    f = sorted((e.start, e.rank) for e in tl.events if e.op.kind == "F")
    i = sorted((e.start, e.rank) for e in tl.events if e.op.kind == "I")
    assert f == [(0, 0), (2, 1), (4, 2), (6, 3), (7, 3), (8, 2), (9, 1), (10, 0)]
    assert [r for _, r in i] == [0, 1, 2, 3, 3, 2, 1, 0]
