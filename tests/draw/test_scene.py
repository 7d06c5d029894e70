"""The browser canvases and the matplotlib drawings show the same picture: both are drawn from
one pure scene (pplab.scene). Here: the scene holds exactly the timeline's events, the
matplotlib boxes are the scene's boxes, the memory bars are the scene's values, and every
canvas hands its SceneView the scene its render function computes. (That the browser drew
the scene it was sent is checked in tests/browser/test_browser_lessons.py.)"""
import subprocess
import sys

import pytest

from pplab import make_schedule, simulate
from pplab.canvases import balance as BA, interleaved as IL, memory as MW, runs as RU
from pplab.canvases import timeline as T
from pplab.canvases import zero_bubble as ZB
from pplab.canvases.base import CANVASES
from pplab.probe.env import browser_note, in_browser, local_only
from pplab.memory import memory_report
from pplab.scene import KIND_COLORS, memory_panel, timeline_boxes, timeline_panel


@pytest.fixture
def tl():
    return simulate(make_schedule("interleaved", 8, 32, 2))


def test_scene_boxes_are_the_timeline_events(tl):
    boxes = timeline_boxes(tl)
    assert len(boxes) == len(tl.events) == 8 * 32 * 2 * 2
    want = sorted((e.rank, e.start - tl.start, e.end - tl.start, e.op.kind) for e in tl.events)
    assert sorted((r, s, e, k) for r, s, e, _, k in boxes) == want
    panel = timeline_panel(tl)
    assert panel["ranks"] == 8 and panel["span"] == pytest.approx(tl.makespan)
    assert "interleaved P=8 M=32 V=2" in panel["title"]


def _patch_boxes(ax):
    """(kind, x0, x1, rank) of every busy box matplotlib drew (zorder-2 compound paths)."""
    colour_kind = {v.lower(): k for k, v in KIND_COLORS.items()}
    out = []
    for artist in ax.artists + ax.patches:
        if artist.get_zorder() != 2:
            continue
        from matplotlib.colors import to_hex
        kind = colour_kind[to_hex(artist.get_facecolor())]
        v = artist.get_path().vertices
        for i in range(0, len(v), 5):
            out.append((kind, round(v[i, 0], 9), round(v[i + 2, 0], 9),
                        int(round(v[i, 1] + 0.4))))
    return sorted(out)


@pytest.mark.parametrize("name,P,M,V", [("interleaved", 8, 32, 2), ("zb-h1", 4, 8, None),
                                         ("dualpipev", 4, 8, None)])
def test_matplotlib_draws_the_scene_boxes(name, P, M, V):
    from pplab.draw import draw_timeline
    tl = simulate(make_schedule(name, P, M, V))
    fig = draw_timeline(tl)
    drawn = _patch_boxes(fig.axes[0])
    scene = sorted((k, round(s, 9), round(e, 9), r) for r, s, e, _, k in timeline_boxes(tl))
    assert drawn == scene


def test_memory_bars_match_the_scene():
    from pplab.draw.memory import draw_memory_bars
    model, cfg = MW.memory_config("llama3-70b", 8, 8, 8, 1, "on", "selective", "1f1b", 32, 1)
    rep = memory_report(model, cfg)
    panel = memory_panel(rep, 80e9)
    fig = draw_memory_bars(rep, 80e9)
    heights = [p.get_height() for p in fig.axes[0].patches]
    want = [v for s in panel["series"] for v in s["values"]]
    assert heights == pytest.approx(want)
    assert panel["limit"] == 80 and len(panel["labels"]) == 8


def test_recompute_and_volume_figures_draw_the_canvas_bars():
    """The exported recomputation and bytes-per-axis figures are the recompute and 3D
    canvases' panels: the bar heights matplotlib drew are the scene's values."""
    from pplab.draw.memory import draw_comm_volumes, draw_recompute
    pic, _ = MW.render_recompute("gpt3-175b", 8, "on", 2048, 1)
    model, rows = MW.recompute_rows("gpt3-175b", 8, "on", 2048, 1)
    fig = draw_recompute(*zip(*rows), title=pic["panels"][0]["title"])
    for ax, panel in zip(fig.axes, pic["panels"]):
        want = [v for s in panel["series"] for v in s["values"]]
        assert [p.get_height() for p in ax.patches] == pytest.approx(want)
    assert fig.axes[0].get_title(loc="left") == pic["panels"][0]["title"]
    layout, _ = MW.render_layout()
    volumes = layout["panels"][1]
    drawn = draw_comm_volumes({k.lower(): 1e9 * max(s["values"])
                               for k, s in zip(volumes["labels"], volumes["series"])})
    want = [v for s in volumes["series"] for v in s["values"]]
    assert [p.get_height() for p in drawn.axes[0].patches] == pytest.approx(want)


CANVAS_CASES = [
    (lambda: T.timeline_canvas("interleaved", 8, 32, 2),
     lambda: T.render("interleaved", 8, 32, 2)),
    (lambda: ZB.zero_bubble_canvas(), lambda: ZB.render_zero_bubble()),
    (lambda: IL.interleaved_canvas(), lambda: IL.render_interleaved()),
    (lambda: MW.memory_canvas(), lambda: MW.render_memory(
        "llama3-70b", 8, 1, 8, 0, "on", "selective", "1f1b", 8, 1, 4096)),
    (lambda: MW.layout_canvas(), lambda: MW.render_layout()),
    (lambda: MW.fsdp_canvas(), lambda: MW.render_fsdp()),
    (lambda: MW.recompute_canvas(), lambda: MW.render_recompute(seq=2048)),
    (lambda: MW.plan_canvas(), lambda: MW.render_plan(seq=4096)),
    (lambda: BA.balance_canvas(), lambda: BA.render_balance()),
    (lambda: T.compare_canvas(), lambda: T.render_compare(("gpipe", "1f1b"), 4, 8)),
    (lambda: T.bubble_curve_canvas(), lambda: T.render_bubble_curve()),
]


@pytest.mark.parametrize("build,render", CANVAS_CASES)
def test_each_canvas_shows_its_render_scene(build, render):
    canvas = build()
    scene, msg = render()
    assert canvas.view.scene == scene and canvas.last_message == msg and not canvas.errors
    assert canvas is CANVASES[-1]


def test_a_bad_combination_hides_the_picture_and_says_why():
    c = T.timeline_canvas("dualpipe", 4, 8)
    c.controls["P"].value = 5
    assert "even" in c.last_message and c.view.layout.display == "none"
    c.controls["P"].value = 4
    assert c.view.layout.display is None and c.view.scene["panels"][0]["ranks"] == 4


def test_moving_V_redraws_the_scene():
    c = T.timeline_canvas("interleaved", 8, 32, 2)
    before = len(c.view.scene["panels"][0]["boxes"])
    c.controls["V"].value = 4
    assert len(c.view.scene["panels"][0]["boxes"]) == 2 * before


def test_browser_detection_and_the_one_line_note(monkeypatch, capsys):
    assert not in_browser() and local_only("pplab run -P 4")
    monkeypatch.setattr(sys, "platform", "emscripten")
    assert in_browser() and not local_only("pplab run -P 4")
    out = capsys.readouterr().out
    assert out == browser_note("pplab run -P 4") + "\n" and out.count("\n") == 1
    panel = RU.run_panel()
    assert panel.last_message.startswith("⏭ skipped in the browser") and not panel.controls
    assert RU.launch()[1].startswith("⏭ skipped in the browser")


def test_scene_and_env_stay_pure():
    code = ("import sys, pplab.scene, pplab.probe.env; bad = [m for m in ('numpy', 'matplotlib', "
            "'torch', 'ipywidgets', 'IPython') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_browser_turns_torch_cells_into_one_line(monkeypatch):
    from pplab.probe.env import skip_torch_cells
    cell = ["# NBVAL_CHECK_OUTPUT\n", "# local: pplab run -P 2 -M 4\n",
            "from pplab.runtime import run_schedule\n", "run_schedule('1f1b', P=2, M=4)\n"]
    (out,) = skip_torch_cells(cell)
    assert out == f"print({browser_note('pplab run -P 2 -M 4')!r})\n"
    assert skip_torch_cells(["x = 1\n"]) == ["x = 1\n"]
    job = ["# local: pplab run -P 4\n", "with real_job('pplab run -P 4'):\n", "    go()\n"]
    assert skip_torch_cells(job) == [f"print({browser_note('pplab run -P 4')!r})\n"]


def test_exported_bubble_curve_is_the_canvas_panel():
    """One bubble curve: the figure draws exactly the points the canvas shows."""
    from pplab.draw import draw_bubble_curve
    from pplab.scene import BUBBLE_MS, bubble_curve_panel
    shown = T.render_bubble_curve("interleaved", 4)[0]["panels"][0]
    assert shown == bubble_curve_panel(4, BUBBLE_MS, "interleaved", 2)
    ax = draw_bubble_curve(4, BUBBLE_MS, "interleaved", V=2).axes[0]
    drawn = {ln.get_label(): [list(p) for p in zip(ln.get_xdata(), ln.get_ydata())]
             for ln in ax.get_lines()}
    assert drawn == {s["name"]: s["points"] for s in shown["series"]}
