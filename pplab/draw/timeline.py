"""Pictures of pipeline schedules: timelines, in-flight activations, bubble curves.

Everything here builds a :class:`~pplab.draw.figure.DisplayFigure` directly (no pyplot
state), so it is safe to call from widget callbacks and threads, works under the Agg
backend, and never leaks open figures. In a notebook, a returned figure displays itself as a
PNG whatever matplotlib backend is active.

Colours follow the Okabe–Ito palette, which stays distinguishable for the common kinds of
colour blindness; idle time is hatched light grey so it reads as "nothing happening".
"""
from __future__ import annotations

from typing import Iterable, Sequence

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path

from ..ir import KIND_NAMES, Schedule
from ..scene import (IDLE_EDGE, IDLE_FACE, IDLE_HATCH, KIND_COLORS, bubble_curve_panel, levels,
                     timeline_boxes, title_line)
from ..scene.panels import transfer_lanes
from ..text import metrics_line
from ..timeline import Timeline
from .figure import DisplayFigure

LABEL_FONTSIZE = 7
MAX_LABEL_EVENTS = 320   # denser timelines get no labels: unreadable anyway, and text is slow
_title_line = title_line


def _boxes_patch(spans, face, edge, lw, zorder, hatch=None) -> PathPatch:
    """One compound path for many rectangles ``(x0, x1, y0, y1)``: far faster to build and
    draw than one artist (or even one path) per box."""
    n = len(spans)
    verts = np.empty((5 * n, 2))
    codes = np.empty(5 * n, dtype=Path.code_type)
    if n:
        a = np.asarray(spans, dtype=float)
        x0, x1, y0, y1 = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
        verts[0::5, 0], verts[0::5, 1] = x0, y0
        verts[1::5, 0], verts[1::5, 1] = x0, y1
        verts[2::5, 0], verts[2::5, 1] = x1, y1
        verts[3::5, 0], verts[3::5, 1] = x1, y0
        verts[4::5] = verts[0::5]
        codes[:] = Path.LINETO
        codes[0::5] = Path.MOVETO
        codes[4::5] = Path.CLOSEPOLY
    return PathPatch(Path(verts, codes), facecolor=face, edgecolor=edge, linewidth=lw,
                     zorder=zorder, hatch=hatch)


def _timeline_axes(ax, P: int, overlay: bool, figsize):
    """A figure sized for P rows with fixed margins in inches (constrained layout would
    double the drawing time), or ``ax``'s own."""
    if ax is not None:
        return ax.figure, ax
    w, h = figsize or (10.0, 1.0 + 0.4 * max(P, 1) + (0.3 if overlay else 0))
    fig = DisplayFigure(figsize=(w, h))
    fig.subplots_adjust(left=0.75 / w, right=1 - 2.3 / w, top=1 - 0.62 / h, bottom=0.5 / h)
    return fig, fig.add_subplot()


def _draw_overlay(ax, overlay: Timeline, span: float, overlay_scale) -> float:
    """The second timeline as thin bars along the bottom of each row; returns its span."""
    scale = 1.0
    if overlay_scale == "makespan":
        scale = span / overlay.makespan if overlay.makespan > 0 else 1.0
    elif overlay_scale is not None:
        scale = float(overlay_scale)
    o0 = overlay.start
    okinds: dict[str, list] = {}
    for e in overlay.events:
        okinds.setdefault(e.op.kind, []).append(e)
    for kind, evs in okinds.items():
        spans = [((e.start - o0) * scale, (e.end - o0) * scale, e.rank + 0.24, e.rank + 0.44)
                 for e in evs]
        ax.add_artist(_boxes_patch(spans, KIND_COLORS.get(kind, "#999999"), "black", 0.5, 3))
    return overlay.makespan * scale


def _draw_labels(fig, ax, boxes, xmax: float, y0: float, h: float) -> None:
    """Microbatch numbers inside the boxes wide enough to hold them."""
    fig_w = fig.get_figwidth() * ax.get_position().width
    pts_per_unit = max(fig_w, 1.0) * 72.0 * 0.85 / (xmax or 1.0)
    for rank, start, end, text, _ in boxes:
        if (end - start) * pts_per_unit < 0.62 * LABEL_FONTSIZE * len(text) + 3:
            continue
        ax.text((start + end) / 2, rank + y0 + h / 2, text, ha="center", va="center",
                fontsize=LABEL_FONTSIZE, color="white", zorder=4, clip_on=True)


def _draw_lanes(ax, lanes: dict) -> list:
    """Messages and all-to-alls as thin bars along the bottom of each rank's row (the
    stream model's ``Timeline.transfers``); returns their legend handles."""
    by_kind: dict[str, list] = {}
    for rank, start, end, kind in lanes.get("lanes", ()):
        by_kind.setdefault(kind, []).append((start, end, rank + 0.27, rank + 0.43))
    for kind, spans in by_kind.items():
        ax.add_artist(_boxes_patch(spans, lanes["lane_colors"][kind], "none", 0.0, 3))
    return [Patch(facecolor=c, label=n) for n, c in lanes.get("lane_legend", ())]


def _timeline_legend(ax, kinds, timeline: Timeline, overlay, overlay_scale,
                     extra=()) -> None:
    handles = [Patch(facecolor=KIND_COLORS[k], label=KIND_NAMES[k]) for k in KIND_COLORS
               if k in kinds] + list(extra)
    handles.append(Patch(facecolor=IDLE_FACE, edgecolor=IDLE_EDGE, hatch=IDLE_HATCH, label="idle"))
    if overlay is not None:
        handles.append(Patch(facecolor="#bbbbbb", edgecolor="none",
                             label=f"tall boxes: {timeline.source}"))
        handles.append(Patch(facecolor="white", edgecolor="black",
                             label=f"thin bars: {overlay.source}"
                             + ("" if overlay_scale in (None, 1, 1.0) else " (rescaled)")))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False, borderaxespad=0.2)


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
    P = max(timeline.num_ranks, overlay.num_ranks if overlay is not None else 0)
    lanes = transfer_lanes(timeline) if overlay is None else {}
    fig, ax = _timeline_axes(ax, P, overlay is not None or bool(lanes), figsize)
    span = timeline.makespan
    main_h, main_y0 = (0.62, -0.42) if overlay is not None or lanes else (0.8, -0.4)

    # idle background: the whole row, hatched; busy boxes are drawn opaque on top of it
    if span > 0:
        bg = [(0.0, span, r - 0.45, r + 0.45) for r in range(P)]
        ax.add_artist(_boxes_patch(bg, IDLE_FACE, IDLE_EDGE, 0.0, 0, hatch=IDLE_HATCH))
    # the boxes come from the same scene data the browser canvas draws (pplab.scene)
    boxes = timeline_boxes(timeline)
    by_kind: dict[str, list] = {}
    for rank, start, end, _, kind in boxes:
        by_kind.setdefault(kind, []).append((start, end, rank + main_y0, rank + main_y0 + main_h))
    for kind, spans in by_kind.items():
        ax.add_artist(_boxes_patch(spans, KIND_COLORS.get(kind, "#999999"), "white", 0.6, 2))
    xmax = span
    lane_handles = _draw_lanes(ax, lanes)
    if overlay is not None and overlay.events:
        xmax = max(xmax, _draw_overlay(ax, overlay, span, overlay_scale))

    ax.set_xlim(0, xmax * 1.005 if xmax > 0 else 1)
    ax.set_ylim(P - 0.5, -0.5)                   # rank 0 on top
    ax.set_yticks(range(P), [f"rank {r}" for r in range(P)])
    ax.set_xlabel("time" + (" (cost units)" if timeline.source == "simulated" else ""))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if labels and span > 0 and len(timeline.events) <= MAX_LABEL_EVENTS:
        _draw_labels(fig, ax, boxes, xmax, main_y0, main_h)
    _timeline_legend(ax, by_kind, timeline, overlay, overlay_scale, lane_handles)
    head = title if title is not None else _title_line(timeline)
    ax.set_title(f"{head}\n{metrics_line(timeline)}" if metrics else head, fontsize=10,
                 loc="left")
    return fig


# ---- in-flight activations ------------------------------------------------------------------
def draw_inflight(timeline_or_schedule, ax=None, title: str | None = None) -> Figure:
    """Activations held per rank: over time for a Timeline, over steps for a Schedule.

    The legend gives each rank's peak, which is what sets that rank's activation memory.
    """
    if ax is None:
        fig = DisplayFigure(figsize=(8, 3.2), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    obj = timeline_or_schedule
    if isinstance(obj, Schedule):
        P, name = obj.P, f"{obj.name} P={obj.P} M={obj.M}"
        series = []
        for r in range(P):
            lv = levels(obj.ranks[r])
            series.append((list(range(len(lv) + 1)), [0] + lv))
        ax.set_xlabel("step (position in the rank's run order)")
    else:
        P = obj.num_ranks
        name = _title_line(obj)
        t0 = obj.start
        series = []
        for evs in obj.events_by_rank():
            lv = levels(e.op for e in evs)
            xs = [0.0] + [e.end - t0 for e in evs]
            series.append((xs, [0] + lv))
        ax.set_xlabel("time")
    cmap = matplotlib.colormaps["viridis"]
    for r, (xs, ys) in enumerate(series):
        colour = cmap(r / max(P - 1, 1) * 0.9)
        ax.step(xs, ys, where="post", color=colour, lw=1.6,
                label=f"rank {r} (peak {max(ys)})")
    ax.set_ylabel("activations held")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_title(title or f"in-flight activations per rank — {name}", fontsize=10, loc="left")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig


def draw_peak_bars(timelines: Sequence[Timeline], ax=None, title: str | None = None) -> Figure:
    """Grouped bars: peak in-flight activations per rank, one colour per timeline."""
    if ax is None:
        fig = DisplayFigure(figsize=(6, 2.8), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    n = max(len(timelines), 1)
    width = 0.8 / n
    palette = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00"]
    for i, tl in enumerate(timelines):
        peaks = tl.peak_inflight
        xs = [r - 0.4 + width * (i + 0.5) for r in range(len(peaks))]
        bars = ax.bar(xs, peaks, width=width, color=palette[i % len(palette)],
                      label=_title_line(tl))
        if len(peaks) <= 16:
            ax.bar_label(bars, fontsize=7)
    P = max((tl.num_ranks for tl in timelines), default=1)
    ax.set_xticks(range(P), [str(r) for r in range(P)])
    ax.set_xlabel("rank")
    ax.set_ylabel("peak activations held")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title or "peak in-flight microbatches per rank", fontsize=10, loc="left")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig


# ---- bubble vs M, and any other lines panel ---------------------------------------------------
def draw_lines_panel(panel: dict, ax=None) -> Figure:
    """A scene ``lines`` panel (:func:`pplab.scene.lines_panel`) as a matplotlib figure: the
    exported figure is drawn from the very data the browser canvas draws."""
    if ax is None:
        fig = DisplayFigure(figsize=(7, 3.4), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    for s in panel["series"]:
        xs, ys = [p[0] for p in s["points"]], [p[1] for p in s["points"]]
        style = dict(color=s["color"], label=s["name"], ls="--" if s["dash"] else "-")
        if not s["line"]:
            ax.plot(xs, ys, {"s": "s"}.get(s["marker"], "o"), color=s["color"], ms=5,
                    mfc="white", label=s["name"])
        elif s["step"]:
            ax.step(xs, ys, where="post", lw=1.6, **style)
        else:
            ax.plot(xs, ys, lw=1.5, marker=s["marker"], **style)
    for x, colour, dashed in panel["marks"]:
        ax.axvline(x, color=colour, lw=1, ls="--" if dashed else "-")
    if panel["xlog"]:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(lambda x, _: f"{x:g}")
    if panel["percent"]:
        ax.yaxis.set_major_formatter(lambda y, _: f"{y:.0%}")
    ax.set_xlabel(panel["xlabel"])
    ax.set_ylabel(panel["ylabel"])
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(panel["title"], fontsize=10, loc="left")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig


def draw_bubble_curve(P: int, Ms: Iterable[int], schedule: str = "1f1b", V: int = 1,
                      costs=None, ax=None, title: str | None = None) -> Figure:
    """Bubble vs number of microbatches: closed-form lines, simulated points on top.

    Both denominators are drawn: ÷ total rank-time (GPipe paper) and ÷ ideal busy time
    (Megatron-LM). The points are full simulations of ``schedule`` (combinations the
    generator refuses are skipped), so a point off its line is a real discrepancy. The
    panel is the one the lesson's canvas shows (:func:`pplab.scene.bubble_curve_panel`).
    """
    return draw_lines_panel(bubble_curve_panel(P, Ms, schedule, V, costs, title), ax)


def figure_png(fig: Figure, dpi: int = 80) -> bytes:
    """Render a Figure to PNG bytes with the Agg canvas (no pyplot, no display needed)."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


__all__ = ["KIND_COLORS", "draw_timeline", "draw_inflight", "draw_peak_bars",
           "draw_bubble_curve", "draw_lines_panel", "figure_png"]
