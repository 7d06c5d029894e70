"""Pictures of pipeline schedules: timelines, in-flight activations, bubble curves.

Each builds its scene panel (:mod:`pplab.scene`) and draws it with the panel's drawer
(:mod:`pplab.draw.scene_figure`), so a figure shows what the browser canvas shows. Figures
are :class:`~pplab.draw.figure.DisplayFigure` objects built without pyplot state: safe from
widget callbacks and threads, fine under the Agg backend, no figures left open; in a notebook
a returned figure displays itself as a PNG whatever matplotlib backend is active.

Colours follow the Okabe–Ito palette, which stays distinguishable for the common kinds of
colour blindness; idle time is hatched light grey so it reads as "nothing happening".
"""
from __future__ import annotations

from typing import Iterable, Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..scene import (KIND_COLORS, bubble_curve_panel, inflight_panel, inflight_steps_panel,
                     peak_bars_panel, timeline_panel)
from ..timeline import Timeline
from .scene_figure import (draw_bars_panel, draw_lines_panel,
                           draw_timeline_panel, new_figure, panel_height)


def _axes(ax, panel: dict, width: float | None = None) -> tuple[Figure, object]:
    """``ax`` and its figure, or a new figure sized for ``panel``."""
    if ax is not None:
        return ax.figure, ax
    fig, (ax,) = new_figure([panel_height(panel)])
    if width:
        fig.set_figwidth(width)
    return fig, ax


def draw_timeline(timeline: Timeline, overlay: Timeline | None = None, title: str | None = None,
                  ax=None, labels: bool = True, overlay_scale: float | str | None = None,
                  figsize: tuple[float, float] | None = None, metrics: bool = True) -> Figure:
    """Draw one row per rank (rank 0 on top), ops coloured by kind, idle time hatched.

    ``overlay`` draws a second timeline of the same ranks (typically the measured run over the
    simulated one) as thin bars along the bottom of each row; ``overlay_scale`` multiplies its
    times (``"makespan"`` rescales it to the main timeline's makespan, handy when one is in
    seconds and the other in cost units). The title gives the makespan and the bubble with
    both denominators (``metrics=False`` leaves them out: a picture shown before a question
    asks for them). A timeline from the stream model (``simulate_streams``)
    gets its messages and all-to-alls as thin lanes along the bottom of each row. Returns the
    Figure (the one ``ax`` belongs to, if given).
    """
    xmax, scale = timeline.makespan, 1.0
    if overlay is not None:
        if overlay_scale == "makespan":
            scale = xmax / overlay.makespan if overlay.makespan > 0 else 1.0
        elif overlay_scale is not None:
            scale = float(overlay_scale)
        xmax = max(xmax, overlay.makespan * scale)
    panel = timeline_panel(timeline, title, xmax, subtitle=None if metrics else "",
                           overlay=overlay, overlay_scale=scale)
    fig, ax = _axes(ax, panel)
    if figsize is not None and fig.axes == [ax]:
        fig.set_size_inches(*figsize)
    extra = [] if overlay is None else [Patch(facecolor="#bbbbbb", edgecolor="none",
                                              label=f"tall boxes: {timeline.source}")]
    draw_timeline_panel(ax, panel, labels=labels, thin=overlay is not None, extra_legend=extra)
    return fig


# ---- in-flight activations ------------------------------------------------------------------
def draw_inflight(timeline_or_schedule, ax=None, title: str | None = None) -> Figure:
    """Activations held per rank: over time for a Timeline, over steps for a Schedule.

    The legend gives each rank's peak, which is what sets that rank's activation memory
    (the in-flight rule's peak, as ``Timeline.peak_inflight`` and ``peak_inflight_of``).
    """
    obj = timeline_or_schedule
    panel = inflight_panel(obj) if isinstance(obj, Timeline) else inflight_steps_panel(obj)
    if title:
        panel = dict(panel, title=title)
    fig, ax = _axes(ax, panel, width=8.0)
    draw_lines_panel(ax, panel)
    ax.yaxis.get_major_locator().set_params(integer=True)
    return fig


def draw_peak_bars(timelines: Sequence[Timeline], ax=None, title: str | None = None) -> Figure:
    """Grouped bars: peak in-flight activations per rank, one colour per timeline."""
    panel = peak_bars_panel(list(timelines))
    if title:
        panel = dict(panel, title=title)
    fig, ax = _axes(ax, panel, width=8.0)
    draw_bars_panel(ax, panel)
    return fig


# ---- bubble vs M, and any other lines panel ---------------------------------------------------
def draw_bubble_curve(P: int, Ms: Iterable[int], schedule: str = "1f1b", V: int = 1,
                      costs=None, ax=None, title: str | None = None) -> Figure:
    """Bubble vs number of microbatches: closed-form lines, simulated points on top.

    Both denominators are drawn: ÷ total rank-time (GPipe paper) and ÷ ideal busy time
    (Megatron-LM). The points are full simulations of ``schedule`` (combinations the
    generator refuses are skipped), so a point off its line is a real discrepancy. The
    panel is the one the lesson's canvas shows (:func:`pplab.scene.bubble_curve_panel`).
    """
    panel = bubble_curve_panel(P, Ms, schedule, V, costs, title)
    fig, ax = _axes(ax, panel, width=8.0)
    draw_lines_panel(ax, panel)
    return fig


def figure_png(fig: Figure, dpi: int = 80) -> bytes:
    """Render a Figure to PNG bytes with the Agg canvas (no pyplot, no display needed)."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


__all__ = ["KIND_COLORS", "draw_timeline", "draw_inflight", "draw_peak_bars",
           "draw_bubble_curve", "figure_png"]
