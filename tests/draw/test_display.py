"""Every pplab picture shows as a picture in a notebook (issue 30): pplab draws without pyplot,
so no backend's display hook knows its figures; they carry their own PNG form.

Fast checks go through IPython's own display formatter; the slow one runs a real kernel
under each matplotlib backend a student may have (the inline default, Agg from the
environment, inline after pyplot registered its own printer) and reads what it sent.
"""
import matplotlib

matplotlib.use("Agg")

import nbformat  # noqa: E402
import pytest  # noqa: E402
from IPython.core.formatters import DisplayFormatter  # noqa: E402

from pplab.draw import (draw_bubble_curve, draw_comm_volumes, draw_fsdp_step,  # noqa: E402
                        draw_inflight, draw_memory_bars, draw_peak_bars, draw_plan,
                        draw_recompute, draw_stacked, draw_timeline, draw_zero_stages,
                        fsdp_frames)
from pplab.draw.figure import DisplayFigure, figure_texts  # noqa: E402
from pplab.memory import ParallelConfig, get_preset, memory_report  # noqa: E402
from pplab.registry import make_schedule  # noqa: E402
from pplab.sim import simulate  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def _every_drawing():
    tl = simulate(make_schedule("1f1b", 4, 8))
    rep = memory_report(get_preset("llama3-8b"), ParallelConfig(tp=1, pp=2, dp=1))
    frames = fsdp_frames(4, 1e9, 8)
    return {
        "draw_timeline": draw_timeline(tl),
        "draw_inflight": draw_inflight(tl),
        "draw_peak_bars": draw_peak_bars([tl]),
        "draw_bubble_curve": draw_bubble_curve(4, [1, 2, 4, 8]),
        "draw_stacked": draw_stacked(["a"], [{"params": 1e9}]),
        "draw_memory_bars": draw_memory_bars(rep),
        "draw_zero_stages": draw_zero_stages(7.5e9, 64),
        "draw_fsdp_step": draw_fsdp_step(frames, 0, 1e9, 8),
        "draw_recompute": draw_recompute(["none", "full"], [2e9, 1e8], [0.0, 0.33]),
        "draw_comm_volumes": draw_comm_volumes({"tp": 1e9, "pp": 1e8, "dp": 5e8}),
    }


@pytest.mark.slow
def test_every_drawing_is_a_picture_for_ipython():
    for name, fig in _every_drawing().items():
        assert isinstance(fig, DisplayFigure), name
        data, _ = DisplayFormatter().format(fig)
        assert data["image/png"].startswith(PNG), name
        assert "Figure size" not in data["text/plain"], name


@pytest.mark.slow
def test_plan_figure_is_a_picture():
    from pplab.memory.planner import plan
    fig = draw_plan(plan(get_preset("llama3-8b").with_(seq=4096), 16), top=2)
    assert isinstance(fig, DisplayFigure)
    assert DisplayFormatter().format(fig)[0]["image/png"].startswith(PNG)


def test_text_form_names_what_the_figure_shows():
    fig = draw_timeline(simulate(make_schedule("gpipe", 4, 6)), title="GPipe P=4")
    texts = figure_texts(fig)
    assert texts[0].startswith("GPipe P=4\nmakespan 27") and {"forward", "idle"} <= set(texts)
    assert not any(t.isdigit() for t in texts)          # box labels are not words
    assert repr(fig).startswith("<Figure: GPipe P=4 — makespan 27, bubble 33.3% of total")


SHOW = ("from pplab import make_schedule, simulate\nfrom pplab.draw import draw_timeline\n"
        "draw_timeline(simulate(make_schedule('1f1b', 4, 8)))")


@pytest.mark.slow
@pytest.mark.parametrize("backend, first", [
    (None, ""),                                          # ipykernel's default: inline
    ("Agg", ""),                                         # MPLBACKEND=Agg from the environment
    (None, "import matplotlib.pyplot as plt\n%matplotlib inline"),   # inline's own printer
])
def test_kernel_shows_one_picture_under_each_backend(backend, first, monkeypatch):
    from nbclient import NotebookClient
    if backend:
        monkeypatch.setenv("MPLBACKEND", backend)
    else:
        monkeypatch.delenv("MPLBACKEND", raising=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(first), nbformat.v4.new_code_cell(SHOW)]
    NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    outputs = nb.cells[1].outputs
    assert [o.output_type for o in outputs] == ["execute_result"], outputs
    assert "image/png" in outputs[0].data
    assert "Figure size" not in outputs[0].data["text/plain"]


def test_a_timeline_can_leave_its_bubble_out_of_the_title():
    from pplab.scene import timeline_panel
    tl = simulate(make_schedule("naive", 4, 1))
    assert figure_texts(draw_timeline(tl, metrics=False))[0] == "naive P=4 M=1"
    assert timeline_panel(tl, subtitle="")["subtitle"] == ""
    assert "bubble" in timeline_panel(tl)["subtitle"]
