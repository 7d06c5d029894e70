"""Every canvas over its whole control range, through the factored render functions.

No browser and no kernel: ``render``/``render_compare`` are what the widget callbacks call.
Bad combinations must come back as a message, never as an exception.
"""
import itertools

import matplotlib
import pytest

matplotlib.use("Agg")

from pplab.canvases import base as W  # noqa: E402
from pplab.canvases import timeline as T  # noqa: E402
from pplab.registry import default_V  # noqa: E402
from pplab.draw import figure_png, scene_figure  # noqa: E402
from pplab.registry import make_schedule  # noqa: E402

Ps = range(W.P_RANGE[0], W.P_RANGE[1] + 1)
Ms = range(W.M_RANGE[0], W.M_RANGE[1] + 1)
Vs = range(W.V_RANGE[0], W.V_RANGE[1] + 1)
# Every value up to P=8, M=32 (where the lessons sit), then a spread out to the far end of the
# sliders (P=64, M=256): a full grid there would be 65 536 settings per schedule.
NEAR_Ps, NEAR_Ms = range(1, 9), range(1, 33)
FAR_Ps = (9, 16, 31, 32, 33, 63, 64)
FAR = sorted({(P, M) for P in FAR_Ps for M in (1, P - 1, P, 2 * P, 128, 255, 256)}
             | {(P, 256) for P in NEAR_Ps})
SPREAD_Ps = tuple(NEAR_Ps) + FAR_Ps


def _kept(P, M):
    """The spread's settings that stay cheap (a timeline of up to about 8k ops), and the far
    corner itself."""
    return P * M <= 2048 or (P, M) == (W.P_RANGE[1], W.M_RANGE[1])


def _valid(name, P, M, V):
    try:
        make_schedule(name, P, M, V)
        return True
    except ValueError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("name", W.SCHEDULES)
def test_render_every_P_M_V_never_raises(name):
    ok = bad = 0
    grid = itertools.product(NEAR_Ps, NEAR_Ms, Vs)
    spread = [(P, M, V) for P, M in FAR for V in Vs if _kept(P, M)]
    spread.append((W.P_RANGE[1] - 1, W.M_RANGE[1] - 1, default_V(name)))
    for P, M, V in itertools.chain(grid, spread):
        pic, msg = T.render(name, P, M, V)
        assert isinstance(msg, str) and msg and (pic is None) != _valid(name, P, M, V)
        if _valid(name, P, M, V):
            assert msg.startswith("makespan "), (name, P, M, V, msg)
            assert "of total" in msg and "of ideal" in msg and "peak in-flight" in msg
            ok += 1
        else:
            assert msg.startswith(f"{name} with P={P}, M={M}, V={V}: "), msg
            assert "Traceback" not in msg
            bad += 1
    assert ok > 0
    if name in ("naive", "gpipe", "1f1b", "zb-h1", "dualpipe", "interleaved", "zbv"):
        assert bad > 0          # the V slider reaches values these schedules refuse


@pytest.mark.slow
@pytest.mark.parametrize("name", W.SCHEDULES)
def test_render_draws_across_the_range(name):
    """Figures for every P and V at a spread of M (drawing is the slow part; the full grid
    of inputs is covered above), rasterised to catch errors that only show at draw time."""
    drawn = 0
    for P, V in itertools.product(NEAR_Ps, Vs):
        for M in sorted({1, P, 2 * P + 1, NEAR_Ms[-1]} & set(Ms)):
            pic, msg = T.render(name, P, M, V)
            if pic is None:
                assert not _valid(name, P, M, V), msg
                continue
            if drawn % 11 == 0:
                assert figure_png(scene_figure(pic), dpi=30)[:4] == b"\x89PNG"
            drawn += 1
    assert drawn > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", W.SCHEDULES)
def test_the_far_end_of_the_sliders_draws_every_op(name):
    """P=64, M=256: the scene the canvas shows has a strip per rank, every rank busy in it
    (and the in-flight panel one line per rank); one matplotlib export there too."""
    P, M = W.P_RANGE[1], W.M_RANGE[1]
    V = default_V(name)
    sc, msg = T.render(name, P, M, V, inflight=True)
    if not _valid(name, P, M, V):
        assert sc is None and msg.startswith(f"{name} with P={P}"), msg
        return
    timeline, inflight = sc["panels"]
    assert timeline["ranks"] == P and len(inflight["series"]) == P
    assert timeline["boxes"] == [] and len(timeline["strips"]) == P
    assert all(set(row) - {"."} for row in timeline["strips"]), msg
    if name == "1f1b":
        assert figure_png(scene_figure(sc), dpi=30)[:4] == b"\x89PNG"


@pytest.mark.slow
def test_timeline_sliders_reach_64_ranks_and_256_microbatches():
    c = T.timeline_canvas("interleaved", P=8, M=32, V=2)
    assert (c.controls["P"].max, c.controls["M"].max) == (64, 256)
    c.controls["P"].value = 64
    c.controls["M"].value = 256
    assert c.last_message.startswith("makespan ") and c.errors == []


@pytest.mark.slow
def test_render_with_inflight_panel():
    pic, msg = T.render("1f1b", 4, 8, 1, inflight=True)
    fig = scene_figure(pic)
    assert len(fig.axes) == 2 and "[4, 3, 2, 1]" in msg
    assert [t.get_text() for t in fig.axes[1].get_legend().get_texts()] == [
        f"rank {r} (peak {p})" for r, p in enumerate([4, 3, 2, 1])]
    assert figure_png(fig, dpi=30)[:4] == b"\x89PNG"


@pytest.mark.slow
def test_cost_sliders_whole_range_including_invalid():
    vals = lambda lo, hi, st: [lo + i * st for i in range(int(round((hi - lo) / st)) + 1)]
    for tf in vals(0.5, 4.0, 0.5):
        for tb in vals(0.5, 4.0, 0.5):
            for tw in vals(0.0, 2.0, 0.5):
                fig, msg = T.render("zb-h1", 3, 5, 1, tf=tf, tb=tb, tw=tw)
                if tw > tb:
                    assert "cannot exceed" in msg
                else:
                    assert msg.startswith("makespan"), msg
    for comm in vals(0.0, 1.0, 0.25):
        for fixed in vals(0.0, 1.0, 0.25):
            for name in W.SCHEDULES:
                pic, msg = T.render(name, 4, 8, default_V(name), comm=comm, fixed=fixed)
                assert msg.startswith("makespan") and pic["panels"], msg


@pytest.mark.slow
def test_compare_every_pair_and_range():
    for a, b in itertools.product(W.SCHEDULES, W.SCHEDULES):
        pic, msg = T.render_compare((a, b), 4, 8)
        assert len(msg.splitlines()) == 2
        drawn = [n for n in (a, b) if _valid(n, 4, 8, None)]
        assert len(pic["panels"]) == len(drawn) + 1 if drawn else pic is None
    for a in W.SCHEDULES:           # inputs are the same as render()'s, swept in full above
        for P in SPREAD_Ps:
          for M in sorted({1, max(P - 1, 1), P, W.M_RANGE[1]}):
            if not _kept(P, M):
                continue
            fig, msg = T.render_compare((a, "1f1b"), P, M)
            assert len(msg.splitlines()) == 2 and msg.splitlines()[1].startswith("1f1b: makespan")
    pic, msg = T.render_compare(("gpipe", "1f1b"), 4, 8)
    assert len(scene_figure(pic).axes) == 3
    assert "gpipe: makespan 33" in msg and "[8, 8, 8, 8]" in msg and "[4, 3, 2, 1]" in msg
    pic, msg = T.render_compare(("dualpipe", "interleaved"), 3, 4)      # both refuse
    assert pic is None and "even number of ranks" in msg and "multiple of P" in msg


@pytest.mark.slow
def test_widgets_build_and_react_without_a_kernel():
    c = T.timeline_canvas("1f1b", P=4, M=8, costs=True)
    assert "makespan 33" in c.last_message
    c.controls["schedule"].value = "interleaved"          # V jumps to 2
    assert c.controls["V"].value == 2 and "makespan 28.5" in c.last_message
    c.controls["M"].value = 7                              # not a multiple of P
    assert "multiple of P" in c.last_message and "#b71c1c" in c.message.value
    c.controls["M"].value = 8
    c.controls["tw"].value = 2.0
    c.controls["tb"].value = 0.5                           # tw > tb
    assert "cannot exceed" in c.last_message
    assert c.errors == []
    cmp_ = T.compare_canvas()
    cmp_.controls["P"].value = 8
    assert cmp_.errors == [] and "gpipe: makespan" in cmp_.last_message
    bc = T.bubble_curve_canvas()
    for s in bc.controls["schedule"].options:
        bc.controls["schedule"].value = s
        for P in SPREAD_Ps:
            bc.controls["P"].value = P
    assert bc.errors == []
    assert W.CANVASES[-3:] == [c, cmp_, bc]


@pytest.mark.slow
def test_the_interleaved_canvas_offers_only_ms_its_schedules_take():
    """Lesson 05's M slider steps by P (interleaved sends microbatches round in groups of P):
    at every P, every position it offers is one every schedule and V on the canvas takes, and
    moving P moves M to the nearest position, with no error on the way."""
    from pplab.canvases import interleaved as IL
    c = IL.interleaved_canvas()
    m = c.controls["M"]
    for P in [*range(IL.IL_P_RANGE[0], IL.IL_P_RANGE[1] + 1), 3, 1, 8]:
        c.controls["P"].value = P
        assert (m.min, m.step) == (P, P) and m.max <= IL.IL_M_RANGE[1] < m.max + P
        assert m.value % P == 0 and "makespan" in c.last_message, (P, c.last_message)
        for M, name, V in itertools.product(range(m.min, m.max + 1, m.step),
                                            IL.INTERLEAVED_SCHEDULES, Vs):
            make_schedule(name, P, M, V)           # refused: ValueError (renders: slow tier)
    assert c.errors == []


def test_per_rank_peaks_at_64_ranks_are_four_aligned_lines_not_one_wrapped_one():
    from pplab.sim import simulate
    from pplab.text import per_rank
    assert per_rank([4, 3, 2, 1]) == "[4, 3, 2, 1]"
    lines = per_rank(range(64, 0, -1)).splitlines()
    assert lines[0] == "ranks  0–15: " + " ".join(str(v) for v in range(64, 48, -1))
    assert lines[-1].startswith("ranks 48–63: 16 15 14 13 12 11 10  9  8") and len(lines) == 4
    assert len({len(line) for line in lines}) == 1                     # aligned columns
    assert per_rank(range(17)).splitlines()[-1] == "ranks 16–16: 16"
    tl = simulate(make_schedule("1f1b", 64, 256))
    msg = W.summary(tl)
    assert msg.splitlines()[0].endswith("peak in-flight per rank:") and len(msg.splitlines()) == 5
    assert W.summary(tl, one_line=True).endswith("from 64 (rank 0) to 1 (rank 63)")


def test_the_run_panel_shows_no_picture_before_its_first_run():
    """An empty image widget is a broken-image icon in the browser: it stays hidden until a
    run draws in it (the slow tier's click test checks it shows then, and hides on failure)."""
    from pplab.canvases.runs import run_panel
    panel = run_panel("1f1b", P=2, M=2)
    assert panel.image.layout.display == "none" and not panel.image.value
