"""Panels: pictures as plain data, computed in pure Python.

A *scene* is a dict of JSON values: ``{"panels": [panel, ...]}``. Three kinds of panel cover
every canvas: ``timeline`` (boxes ``[rank, start, end, label, kind]``), ``bars`` (stacked or
grouped, with an optional limit line) and ``lines`` (series of points). The browser widget
(:mod:`pplab.scene.view`) and the matplotlib drawings (:mod:`pplab.draw`) both draw from
these, so the live picture and the exported figure show the same schedule by construction,
and the widget needs no matplotlib (it runs in JupyterLite too).
"""
from __future__ import annotations

from bisect import bisect_right
from itertools import repeat
from operator import add, itemgetter, lt, mul

from ..ir import KIND_NAMES, OpRow
from ..text import metrics_line
from ..inflight import inflight_walk
from ..timeline import op_kinds

#: colour per op kind (Okabe–Ito): F blue, B vermillion, I orange, W bluish green, FB purple
KIND_COLORS = {"F": "#0072B2", "B": "#D55E00", "I": "#E69F00", "W": "#009E73", "FB": "#CC79A7"}
#: memory parts (parameters blue, gradients orange, optimizer green, activations vermillion)
PART_COLORS = {"params": "#0072B2", "grads": "#E69F00", "optimizer": "#009E73",
               "activations": "#D55E00"}
PART_LABELS = {"params": "parameters", "grads": "gradients", "optimizer": "optimizer states",
               "activations": "activations"}
IDLE_FACE, IDLE_HATCH, IDLE_EDGE = "#f2f2f2", "////", "#c8c8c8"
AXIS_COLORS = {"tp": "#CC79A7", "pp": "#56B4E9", "dp": "#F0E442"}
RECOMPUTE_COLORS = {"none": "#0072B2", "selective": "#009E73", "full": "#E69F00"}
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#999999")
GB = 1e9
#: communication lanes (pplab.streams): activations, gradients, expert all-to-all
LANE_COLORS = {"act": "#56B4E9", "grad": "#E69F00", "a2a": "#555555"}
LANE_NAMES = {"act": "activation message", "grad": "gradient message",
              "a2a": "expert all-to-all"}


def _r(x: float) -> float:
    """Times rounded to 1e-9: exact enough to draw, and stable in JSON."""
    return round(float(x), 9)


def op_label(op) -> str:
    """The microbatch number drawn inside a box (``a|b`` for an overlapped F&B pair)."""
    if op.kind == "FB":
        return f"{op.forward.microbatch}|{op.backward.microbatch}"
    return str(op.microbatch)


def title_line(tl) -> str:
    """'interleaved P=8 M=32 V=2' from the timeline's meta or its schedule."""
    meta, sched = tl.meta or {}, tl.schedule
    name = meta.get("schedule") or (sched.name if sched is not None else tl.source)
    shape = f"P={meta.get('P', tl.num_ranks)}"
    M = meta.get("M", sched.M if sched is not None else None)
    V = meta.get("V", sched.V if sched is not None else None)
    if M is not None:
        shape += f" M={M}"
    if V not in (None, 1):
        shape += f" V={V}"
    return f"{name} {shape}"


def timeline_boxes(tl) -> list[list]:
    """``[rank, start, end, label, kind]`` per event, times from the timeline's start,
    sorted by rank then start."""
    t0 = tl.start
    out = []
    numbers: dict[int, str] = {}                 # str() once per microbatch, not once per box
    for rank, op, start, end in tl.events:
        kind = op.kind
        if kind == "FB":
            label = op_label(op)
        else:
            label = numbers.get(op.microbatch)
            if label is None:
                label = numbers[op.microbatch] = str(op.microbatch)
        out.append([rank, start - t0, end - t0, label, kind])
    out.sort(key=itemgetter(0, 1, 2))
    return out


#: the widest a timeline's plot area is drawn (scene.js: canvas ≤ 1100 px less 260 of margins)
PLOT_PX = 840
#: a rank with more ops than this is drawn as a strip: its boxes would average under
#: 3 px, too narrow for a label, and a box each would make a far-corner scene megabytes
STRIP_AFTER = PLOT_PX // 3
#: a strip's character per kind; "." is idle
STRIP_CHARS = {"F": "F", "B": "B", "I": "I", "W": "W", "FB": "X"}


def rank_strips(columns, t0: float, span: float, bins: int = PLOT_PX) -> list[str]:
    """Per rank, one character per pixel column of ``span``: the kind running at the
    column's centre (``STRIP_CHARS``) or "." when idle. ``columns``: per rank its ops'
    ``(starts, ends, kinds)`` in run order (``Timeline.rank_strip_columns``). The browser
    draws each run of one character as one rectangle, so the scene is a few kilobytes at
    any P and M."""
    width = span / bins if span > 0 else 1.0
    centres = [t0 + (b + 0.5) * width for b in range(bins)]
    out = []
    for starts, ends, kinds in columns:     # the last op starting at or before each centre
        at = list(map(bisect_right, repeat(starts, bins), centres))   # 0: none yet
        ends = [float("-inf"), *ends]                                 # op j is at j + 1 now
        busy = map(mul, map(lt, centres, map(ends.__getitem__, at)), at)   # 0 when idle
        out.append("".join(map([".", *map(STRIP_CHARS.__getitem__, kinds)].__getitem__, busy)))
    return out


def timeline_panel(tl, title: str | None = None, xmax: float | None = None,
                   subtitle: str | None = None, overlay=None,
                   overlay_scale: float = 1.0) -> dict:
    """One row per rank (rank 0 on top); ``xmax`` shares a time axis between panels;
    ``subtitle`` defaults to the metrics line (pass it when already computed; ``""`` for none,
    a picture shown before a question asks for the bubble). A box per
    op, or, once some rank runs more than ``STRIP_AFTER`` ops, a strip per rank
    (:func:`rank_strips`; ``boxes`` is then empty). ``overlay``: a second run of the same
    ranks (a measured one over its simulation) as thin bars along each row
    (:func:`overlay_lanes`), in place of the timeline's own transfers."""
    if max(tl.ops_per_rank(), default=0) > STRIP_AFTER:
        columns = tl.rank_strip_columns()
        t0 = min(starts[0] for starts, _, _ in columns if starts)   # tl.start, without a pass
        end = max(max(ends) for _, ends, _ in columns if ends)
        span, boxes = end - t0, []
        strips = rank_strips(columns, t0, span)
        kinds = {k for k, ch in STRIP_CHARS.items() if any(ch in row for row in strips)}
    else:
        boxes = timeline_boxes(tl)
        span = max((b[2] for b in boxes), default=0.0)
        kinds, strips = {b[4] for b in boxes}, None
    legend = [[KIND_NAMES[k], KIND_COLORS[k]] for k in KIND_COLORS if k in kinds]
    panel = {"type": "timeline", "ranks": tl.num_ranks, "span": _r(span),
             "xmax": _r(xmax if xmax else span), "boxes": boxes, "legend": legend,
             "colors": {k: KIND_COLORS[k] for k in KIND_COLORS if k in kinds},
             "title": title or title_line(tl),
             "subtitle": metrics_line(tl) if subtitle is None else subtitle,
             "xlabel": "time" + (" (cost units)" if tl.source == "simulated" else "")}
    if strips is not None:
        panel["strips"] = strips
        panel["strip_chars"] = {ch: k for k, ch in STRIP_CHARS.items()}
    if overlay is None:
        panel.update(transfer_lanes(tl))
    else:
        panel["ranks"] = max(tl.num_ranks, overlay.num_ranks)
        panel.update(overlay_lanes(overlay, overlay_scale))
    return panel


def overlay_lanes(overlay, scale: float = 1.0) -> dict:
    """``overlay``'s ops as the panel's thin lanes, coloured by kind, times from its start
    multiplied by ``scale``; nothing for a run without ops."""
    c, o0 = overlay.columns, overlay.start
    lanes = [[rank, _r((s - o0) * scale), _r((e - o0) * scale), kind]
             for rank, s, e, kind in zip(c.rank, c.start, c.end, op_kinds(c.keys))]
    if not lanes:
        return {}
    kinds = {x[3] for x in lanes}
    label = f"thin bars: {overlay.source}" + ("" if scale == 1 else " (rescaled)")
    return {"lanes": lanes,
            "lane_colors": {k: KIND_COLORS[k] for k in KIND_COLORS if k in kinds},
            "lane_legend": [[label, "#777777"]]}


def transfer_lanes(tl) -> dict:
    """``{"lanes": [[rank, start, end, kind], ...], "lane_colors", "lane_legend"}``: each
    message on its receiver's lane (from leaving to landing), each all-to-all on its rank's;
    nothing for a timeline without transfers or with only instant ones."""
    t0 = tl.start
    lanes = [[t.dst, _r(t.start - t0), _r(t.end - t0), t.kind]
             for t in getattr(tl, "transfers", ()) if t.end > t.start]
    if not lanes:
        return {}
    kinds = {x[3] for x in lanes}
    return {"lanes": lanes, "lane_colors": {k: c for k, c in LANE_COLORS.items() if k in kinds},
            "lane_legend": [[LANE_NAMES[k], c] for k, c in LANE_COLORS.items() if k in kinds]}


def bars_panel(labels, series, title: str = "", ylabel: str = "", xlabel: str = "",
               stacked: bool = True, limit: float | None = None, limit_label: str = "",
               totals: bool = True, fmt: str = "{:.1f}") -> dict:
    """Bars per label; ``series`` is ``[(name, colour, values)]`` stacked or side by side.
    ``totals`` writes each bar's (stack's) value above it; values over ``limit`` in red."""
    return {"type": "bars", "labels": [str(x) for x in labels], "stacked": stacked,
            "series": [{"name": n, "color": c, "values": [_r(v) for v in vals]}
                       for n, c, vals in series],
            "title": title, "ylabel": ylabel, "xlabel": xlabel, "totals": totals, "fmt": fmt,
            "limit": None if limit is None else _r(limit), "limit_label": limit_label}


def lines_panel(series, title: str = "", xlabel: str = "", ylabel: str = "",
                xlog: bool = False, percent: bool = False, xticks=None, marks=None) -> dict:
    """Series ``{"name", "color", "points": [[x, y]], "line", "marker", "dash", "step"}``;
    ``marks`` are vertical lines ``[x, colour, dashed]``."""
    return {"type": "lines", "series": list(series), "title": title, "xlabel": xlabel,
            "ylabel": ylabel, "xlog": xlog, "percent": percent,
            "xticks": None if xticks is None else list(xticks), "marks": list(marks or [])}


def line(name: str, color: str, points, line: bool = True, marker: str | None = None,
         dash: bool = False, step: bool = False) -> dict:
    return {"name": name, "color": color, "points": [[_r(x), _r(y)] for x, y in points],
            "line": line, "marker": marker, "dash": dash, "step": step}


def scene(*panels: dict) -> dict:
    return {"panels": list(panels)}


def timeline_scene(tl, title: str | None = None) -> dict:
    return scene(timeline_panel(tl, title))


def levels(ops) -> list[int]:
    """Activations alive after each op (``inflight.INFLIGHT_RULE``: F adds one; B, or W
    after a split backward, frees it)."""
    walk = inflight_walk(ops)
    return [walk.whole[i] + walk.waiting[i] for i in walk.op_last]


def held_points(ops, starts, ends) -> tuple[list, int]:
    """One rank's in-flight step line: ``(points, peak)``, the activations held from each
    op's start (``starts[k]``) to its end (``ends[k]``), counted by the rule after every
    part, so an overlapped pair rises at its start to what the rule counts there (its
    forward before its backward frees) and the peak is ``Timeline.peak_inflight``'s."""
    walk = inflight_walk(ops)
    alive = list(map(add, walk.whole, walk.waiting))
    pts, first = [(0, 0)], 0
    for start, end, last in zip(starts, ends, walk.op_last):
        high = max(alive[first:last + 1])
        if high > alive[last]:
            pts.append((start, high))
        pts.append((end, alive[last]))
        first = last + 1
    return pts, max(alive, default=0)


def inflight_panel(tl) -> dict:
    """Activations held per rank over time (step lines); the legend gives each rank's peak."""
    c, t0, series = tl.columns, tl.start, []
    for r, (lo, hi) in enumerate(zip(c.bounds, c.bounds[1:])):
        pts, peak = held_points(OpRow(c.keys[lo:hi]), [s - t0 for s in c.start[lo:hi]],
                                [e - t0 for e in c.end[lo:hi]])
        series.append(line(f"rank {r} (peak {peak})", PALETTE[r % len(PALETTE)], pts,
                           step=True))
    return lines_panel(series, title=f"in-flight activations per rank — {title_line(tl)}",
                       xlabel="time", ylabel="activations held")


def inflight_steps_panel(schedule) -> dict:
    """Activations held per rank over the steps of its run order (step k: its k-th op), as
    :func:`inflight_panel` over time; the legend's peak is ``peak_inflight_of``'s."""
    series = []
    for r, ops in enumerate(schedule.ranks):
        pts, peak = held_points(ops, range(len(ops)), range(1, len(ops) + 1))
        series.append(line(f"rank {r} (peak {peak})", PALETTE[r % len(PALETTE)], pts,
                           step=True))
    return lines_panel(series, title=f"in-flight activations per rank — {schedule.name} "
                       f"P={schedule.P} M={schedule.M}",
                       xlabel="step (position in the rank's run order)",
                       ylabel="activations held")


def peak_bars_panel(timelines, peaks=None) -> dict:
    """Peak in-flight activations per rank, one colour per timeline, side by side
    (``peaks``: each timeline's ``peak_inflight``, where the caller has them)."""
    P = max((tl.num_ranks for tl in timelines), default=1)
    peaks = [tl.peak_inflight for tl in timelines] if peaks is None else peaks
    series = [(title_line(tl), PALETTE[i % len(PALETTE)],
               list(peak) + [0] * (P - tl.num_ranks))
              for i, (tl, peak) in enumerate(zip(timelines, peaks))]
    return bars_panel([str(r) for r in range(P)], series, "peak in-flight microbatches per rank",
                      "peak activations held", "rank", stacked=False, fmt="{:.0f}")


def memory_title(report) -> str:
    c = report.config
    return (f"{report.model.name}: TP={c.tp} PP={c.pp} DP={c.dp} ZeRO-{c.zero} "
            f"{report.schedule.name} M={c.microbatches} b={c.microbatch} "
            f"recompute={c.recompute}{' SP' if c.sp else ''} — peak "
            f"{report.peak_bytes / GB:.1f} GB on rank {report.peak_rank}")


def memory_panel(report, gpu_memory: float | None = 80e9, title: str | None = None) -> dict:
    """One stacked bar per pipeline rank (GB): parameters, gradients, optimizer, activations."""
    rows = report.per_rank
    labels = [f"rank {r.rank}" if len(rows) <= 8 else str(r.rank) for r in rows]
    series = [(PART_LABELS[p], PART_COLORS[p], [getattr(r, p) / GB for r in rows])
              for p in PART_COLORS if any(getattr(r, p) for r in rows)]
    limit = None if not gpu_memory else gpu_memory / GB
    return bars_panel(labels, series, memory_title(report) if title is None else title,
                      "GB per GPU", "pipeline rank", limit=limit,
                      limit_label=f"GPU {gpu_memory / GB:g} GB" if gpu_memory else "")


__all__ = ["GB", "IDLE_FACE", "IDLE_HATCH", "IDLE_EDGE", "KIND_COLORS", "PART_COLORS",
           "PART_LABELS", "AXIS_COLORS", "RECOMPUTE_COLORS", "PALETTE", "op_label", "title_line",
           "timeline_boxes", "timeline_panel", "overlay_lanes", "rank_strips", "PLOT_PX",
           "STRIP_AFTER",
           "bars_panel", "lines_panel", "line", "scene",
           "timeline_scene", "levels", "held_points", "inflight_panel", "inflight_steps_panel",
           "peak_bars_panel",
           "memory_title",
           "memory_panel"]
