"""Figures: one row per rank, overlay drawn, bubble in the title, no pyplot state."""
import dataclasses

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from pplab.closed_forms import bubble_both  # noqa: E402
from pplab.draw import (KIND_COLORS, draw_bubble_curve,  # noqa: E402
                        draw_inflight, draw_peak_bars, draw_timeline, figure_png)
from pplab.registry import make_schedule  # noqa: E402
from pplab.sim import simulate  # noqa: E402


def _tl(name="1f1b", P=4, M=8, V=None, **kw):
    return simulate(make_schedule(name, P, M, V), **kw)


def test_timeline_has_one_row_per_rank_rank0_on_top():
    tl = _tl(P=5)
    fig = draw_timeline(tl)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in range(5)]
    lo, hi = ax.get_ylim()
    assert lo > hi                                   # inverted: rank 0 at the top


def test_title_shows_makespan_and_both_bubbles():
    tl = _tl("interleaved", 4, 8, 2)
    title = draw_timeline(tl).axes[0].get_title(loc="left")
    assert "makespan 28.5" in title
    assert "bubble 15.8% of total, 18.8% of ideal" in title


def test_kinds_get_distinct_colours_and_legend():
    assert len(set(KIND_COLORS.values())) == len(KIND_COLORS) == 5
    fig = draw_timeline(_tl("zb-h1", 4, 8, tw=1))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert {"forward", "backward (inputs)", "backward (weights)", "idle"} <= set(labels)
    fig = draw_timeline(_tl("dualpipe", 4, 8))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "overlapped forward+backward" in labels


def test_microbatch_labels_only_when_they_fit():
    small = draw_timeline(_tl(P=2, M=2)).axes[0].texts
    assert sorted(t.get_text() for t in small) == ["0", "0", "0", "0", "1", "1", "1", "1"]
    assert len(draw_timeline(_tl(P=8, M=32)).axes[0].texts) == 0


def test_overlay_draws_and_legend_names_both():
    sim = _tl()
    measured = dataclasses.replace(sim.shifted(5.0), source="measured")
    fig = draw_timeline(sim, overlay=measured)
    ax = fig.axes[0]
    n_plain = len(draw_timeline(sim).axes[0].patches)
    assert len(ax.patches) > n_plain                 # overlay bars added
    labels = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "simulated" in labels and "measured" in labels
    # rescaled overlay: seconds vs cost units
    slow = dataclasses.replace(simulate(make_schedule("1f1b", 4, 8), tf=0.01, tb=0.02),
                               source="measured")
    fig = draw_timeline(sim, overlay=slow, overlay_scale="makespan")
    assert "rescaled" in " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    assert len(figure_png(fig)) > 1000


def test_draw_on_given_axes_and_png():
    fig = Figure()
    ax = fig.add_subplot()
    assert draw_timeline(_tl(), ax=ax) is fig
    assert figure_png(fig)[:4] == b"\x89PNG"


def test_inflight_from_timeline_and_schedule():
    tl = _tl()
    fig = draw_inflight(tl)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == [f"rank {r} (peak {p})" for r, p in enumerate([4, 3, 2, 1])]
    fig = draw_inflight(make_schedule("gpipe", 3, 5))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == [f"rank {r} (peak 5)" for r in range(3)]
    assert draw_peak_bars([tl, _tl("gpipe")]).axes


def test_inflight_legend_gives_the_rules_peak_for_overlapped_pairs():
    """DualPipeV's F&B pairs hold their forward's activation while the backward runs: each
    rank's peak is 2P + 1 chunk activations (the DualPipe README's PP + 1 per device, PP =
    2P stages), 9 at P = 4, as peak_inflight_of and Timeline.peak_inflight say; reading the
    level only after each whole op said 8 on ranks 0-2."""
    from pplab.timeline import peak_inflight_of
    sched = make_schedule("dualpipev", 4, 8)
    peaks = peak_inflight_of(sched)
    assert peaks == simulate(sched).peak_inflight == [9, 9, 9, 9]
    for drawn in (draw_inflight(sched), draw_inflight(simulate(sched))):
        labels = [t.get_text() for t in drawn.axes[0].get_legend().get_texts()]
        assert labels == [f"rank {r} (peak {p})" for r, p in enumerate(peaks)]


def test_bubble_curve_points_sit_on_closed_form():
    assert bubble_both(4, 8) == (3 / 11, 3 / 8)
    assert bubble_both(4, 8, 2) == (1.5 / 9.5, 3 / 16)
    fig = draw_bubble_curve(4, [1, 2, 4, 8, 16], schedule="gpipe")
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    pts = lines["simulated gpipe, ÷ total"]        # (the scene rounds to 1e-9 for JSON)
    for m, y in zip(pts.get_xdata(), pts.get_ydata()):
        assert abs(y - 3 / (m + 3)) < 1e-9
    pts = lines["simulated gpipe, ÷ ideal"]
    for m, y in zip(pts.get_xdata(), pts.get_ydata()):
        assert abs(y - 3 / m) < 1e-9
    # interleaved skips M that are not multiples of P instead of failing
    fig = draw_bubble_curve(4, [1, 2, 4, 8], schedule="interleaved", V=2)
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    assert list(lines["simulated interleaved, ÷ ideal"].get_xdata()) == [4, 8]


def test_draw_does_not_touch_pyplot():
    import matplotlib.pyplot as plt
    before = plt.get_fignums()
    draw_timeline(_tl())
    draw_inflight(_tl())
    draw_bubble_curve(2, [1, 2])
    assert plt.get_fignums() == before


def test_stream_model_messages_and_all_to_alls_get_thin_lanes():
    from pplab.scene import timeline_panel
    from pplab.streams import Link, simulate_streams
    sched = make_schedule("dualpipe", 4, 8)
    tl = simulate_streams(sched, tf=1, tb=2, link=Link(latency=0.3, ep_a2a=(0.5, 0.5)))
    panel = timeline_panel(tl)
    kinds = {lane[3] for lane in panel["lanes"]}
    assert kinds == {"act", "grad", "a2a"}
    assert all(0 <= lane[1] < lane[2] <= panel["span"] for lane in panel["lanes"])
    fig = draw_timeline(tl)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert {"activation message", "gradient message", "expert all-to-all"} <= set(labels)
    assert len(fig.axes[0].patches) == len(draw_timeline(simulate(sched)).axes[0].patches) + 3
    assert "lanes" not in timeline_panel(simulate(sched))      # today's timelines unchanged
