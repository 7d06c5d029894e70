"""A scene (:mod:`pplab.scene`) as a matplotlib figure: the one way a picture becomes a PNG.

A canvas's ``render_*`` returns a scene, which the browser draws; :func:`scene_figure` draws
the same scene with matplotlib for an export or a static figure, one axes per panel, so the
two show the same boxes, bars and lines by construction. Each panel kind has its drawer
(``draw_timeline_panel``, ``draw_bars_panel``, ``draw_lines_panel``), which the named
drawings in :mod:`pplab.draw.timeline` and :mod:`pplab.draw.memory` call too.
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path

from ..scene import IDLE_EDGE, IDLE_FACE, IDLE_HATCH
from .figure import DisplayFigure

LABEL_FONTSIZE = 7
MAX_LABEL_EVENTS = 320   # denser timelines get no labels: unreadable anyway, and text is slow
#: inches: a figure's width, the left margin (rank names) and the right one (legends)
WIDTH, LEFT, RIGHT = 10.0, 0.75, 2.3


def boxes_patch(spans, face, edge, lw, zorder, hatch=None) -> PathPatch:
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


def _tidy(ax) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _strip_spans(panel: dict) -> dict[str, list]:
    """A strip panel's runs of one kind as boxes ``(x0, x1, rank)`` per kind."""
    kinds = panel["strip_chars"]
    width = panel["span"] / max(len(panel["strips"][0]), 1) if panel["strips"] else 0.0
    out: dict[str, list] = {}
    for rank, row in enumerate(panel["strips"]):
        i = 0
        while i < len(row):
            j = i
            while j < len(row) and row[j] == row[i]:
                j += 1
            if row[i] in kinds:
                out.setdefault(kinds[row[i]], []).append((i * width, j * width, rank))
            i = j
    return out


def _draw_labels(ax, boxes, xmax: float, y0: float, h: float) -> None:
    """Microbatch numbers inside the boxes wide enough to hold them."""
    fig = ax.figure
    fig_w = fig.get_figwidth() * ax.get_position().width
    pts_per_unit = max(fig_w, 1.0) * 72.0 * 0.85 / (xmax or 1.0)
    for rank, start, end, text, _ in boxes:
        if (end - start) * pts_per_unit < 0.62 * LABEL_FONTSIZE * len(text) + 3:
            continue
        ax.text((start + end) / 2, rank + y0 + h / 2, text, ha="center", va="center",
                fontsize=LABEL_FONTSIZE, color="white", zorder=4, clip_on=True)


def draw_timeline_panel(ax, panel: dict, labels: bool = True, thin: bool = False,
                        extra_legend=()) -> None:
    """One row per rank (rank 0 on top), boxes coloured by kind over a hatched idle row,
    messages on thin lanes. ``thin`` leaves the bottom of each row free (an overlay)."""
    P, span = panel["ranks"], panel["span"]
    lanes = panel.get("lanes", ())
    thin = thin or bool(lanes)
    h, y0 = (0.62, -0.42) if thin else (0.8, -0.4)
    if span > 0:
        idle = [(0.0, span, r - 0.45, r + 0.45) for r in range(P)]
        ax.add_artist(boxes_patch(idle, IDLE_FACE, IDLE_EDGE, 0.0, 0, hatch=IDLE_HATCH))
    if panel.get("strips"):
        for kind, runs in _strip_spans(panel).items():
            spans = [(a, b, r + y0, r + y0 + h) for a, b, r in runs]
            ax.add_artist(boxes_patch(spans, panel["colors"][kind], "none", 0.0, 2))
    else:
        by_kind: dict[str, list] = {}
        for rank, start, end, _, kind in panel["boxes"]:
            by_kind.setdefault(kind, []).append((start, end, rank + y0, rank + y0 + h))
        for kind, spans in by_kind.items():
            ax.add_artist(boxes_patch(spans, panel["colors"][kind], "white", 0.6, 2))
    by_lane: dict[str, list] = {}
    for rank, start, end, kind in lanes:
        by_lane.setdefault(kind, []).append((start, end, rank + 0.27, rank + 0.43))
    for kind, spans in by_lane.items():
        ax.add_artist(boxes_patch(spans, panel["lane_colors"][kind], "none", 0.0, 3))
    xmax = panel["xmax"]
    ax.set_xlim(0, xmax * 1.005 if xmax > 0 else 1)
    ax.set_ylim(P - 0.5, -0.5)                   # rank 0 on top
    ax.set_yticks(range(P), [f"rank {r}" for r in range(P)])
    ax.set_xlabel(panel["xlabel"])
    _tidy(ax)
    if labels and span > 0 and 0 < len(panel["boxes"]) <= MAX_LABEL_EVENTS:
        _draw_labels(ax, panel["boxes"], xmax, y0, h)
    handles = [Patch(facecolor=c, label=n) for n, c in panel["legend"]]
    handles += [Patch(facecolor=c, label=n) for n, c in panel.get("lane_legend", ())]
    handles.append(Patch(facecolor=IDLE_FACE, edgecolor=IDLE_EDGE, hatch=IDLE_HATCH,
                         label="idle"))
    ax.legend(handles=handles + list(extra_legend), loc="upper left",
              bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False, borderaxespad=0.2)
    sub = panel["subtitle"]
    ax.set_title(f"{panel['title']}\n{sub}" if sub else panel["title"], fontsize=10,
                 loc="left")


def draw_bars_panel(ax, panel: dict) -> None:
    """Bars per label, stacked or side by side; totals above them, over the limit in red."""
    labels, series = panel["labels"], panel["series"]
    n = len(labels)
    x = np.arange(n)
    bottom = np.zeros(n)
    fmt = panel["fmt"]
    limit = panel["limit"]
    width = 0.7 if panel["stacked"] else 0.8 / max(len(series), 1)
    for i, s in enumerate(series):
        vals = np.asarray(s["values"], dtype=float)
        if panel["stacked"]:
            ax.bar(x, vals, bottom=bottom, color=s["color"], width=width, label=s["name"],
                   edgecolor="white", linewidth=0.5)
            bottom += vals
        else:
            bars = ax.bar(x - 0.4 + width * (i + 0.5), vals, width=width, color=s["color"],
                          label=s["name"])
            if panel["totals"] and n <= 16:
                ax.bar_label(bars, fmt=fmt, fontsize=7)
    top = max(float(bottom.max()) if n and panel["stacked"] else
              max((max(s["values"], default=0) for s in series), default=0), limit or 0)
    if panel["stacked"] and panel["totals"]:
        for xi, tot in zip(x, bottom):
            over = limit is not None and tot > limit
            ax.text(xi, tot + top * 0.01, fmt.format(tot), ha="center", va="bottom",
                    fontsize=7, color="#b71c1c" if over else "black",
                    fontweight="bold" if over else "normal")
    if limit:
        ax.axhline(limit, color="black", linestyle="--", linewidth=1)
        ax.text(n - 0.5, limit, f" {panel['limit_label']}", va="bottom", ha="right", fontsize=7)
    step = max(1, n // 32)
    ax.set_xticks(x[::step], labels[::step], fontsize=7 if n > 8 else 8)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1)
    ax.set_ylabel(panel["ylabel"])
    if panel["xlabel"]:
        ax.set_xlabel(panel["xlabel"])
    if panel["title"]:
        ax.set_title(panel["title"], fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    _tidy(ax)


MARKERS = {"s": "s", "|": "|", "O": "o"}


def draw_lines_panel(ax, panel: dict) -> None:
    """Series of points (lines, step lines or markers alone) and vertical marks."""
    for s in panel["series"]:
        xs, ys = [p[0] for p in s["points"]], [p[1] for p in s["points"]]
        style = dict(color=s["color"], label=s["name"], ls="--" if s["dash"] else "-")
        if not s["line"]:
            big = s["marker"] == "O"                     # a circle around one point
            ax.plot(xs, ys, MARKERS.get(s["marker"], "o"), color=s["color"],
                    ms=11 if big else 5, mfc="none" if big else "white", label=s["name"])
        elif s["step"]:
            ax.step(xs, ys, where="post", lw=1.6, **style)
        else:
            ax.plot(xs, ys, lw=1.5, marker=MARKERS.get(s["marker"], s["marker"]), ms=4,
                    **style)
    for x, colour, dashed in panel["marks"]:
        ax.axvline(x, color=colour, lw=1, ls="--" if dashed else "-")
    if panel["xlog"]:
        ax.set_xscale("log", base=2)
    if panel["xticks"]:
        ax.set_xticks(panel["xticks"])
    ax.xaxis.set_major_formatter(lambda x, _: f"{x:g}")
    if panel["percent"]:
        ax.yaxis.set_major_formatter(lambda y, _: f"{y:.0%}")
    ax.set_xlabel(panel["xlabel"])
    ax.set_ylabel(panel["ylabel"])
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7 if len(panel["series"]) > 8 else 8, frameon=False, loc="upper left",
              bbox_to_anchor=(1.0, 1.0))
    ax.set_title(panel["title"], fontsize=10, loc="left")
    _tidy(ax)


DRAWERS = {"timeline": draw_timeline_panel, "bars": draw_bars_panel,
           "lines": draw_lines_panel}


def panel_height(panel: dict) -> float:
    """Inches for one panel: a timeline grows with its ranks, the others are fixed."""
    if panel["type"] == "timeline":
        return 1.0 + 0.4 * max(panel["ranks"], 1)
    return 2.6


def new_figure(heights) -> tuple[Figure, list]:
    """A figure of one axes per height (inches), with margins fixed in inches (constrained
    layout would double the drawing time)."""
    total = sum(heights) + 0.6 * (len(heights) - 1)
    fig = DisplayFigure(figsize=(WIDTH, total))
    axes = fig.subplots(len(heights), 1, gridspec_kw={"height_ratios": heights}, squeeze=False)
    fig.subplots_adjust(left=LEFT / WIDTH, right=1 - RIGHT / WIDTH, top=1 - 0.62 / total,
                        bottom=0.5 / total, hspace=0.9 * len(heights) / total
                        if len(heights) > 1 else 0.2)
    return fig, list(axes[:, 0])


def scene_figure(scene: dict) -> Figure:
    """The scene's panels, top to bottom, as one matplotlib figure (a PNG in a notebook)."""
    panels = scene["panels"]
    if not panels:
        raise ValueError("an empty scene has nothing to draw")
    fig, axes = new_figure([panel_height(p) for p in panels])
    for ax, panel in zip(axes, panels):
        DRAWERS[panel["type"]](ax, panel)
    return fig


__all__ = ["scene_figure", "draw_timeline_panel", "draw_bars_panel", "draw_lines_panel",
           "boxes_patch", "new_figure", "MAX_LABEL_EVENTS"]
