"""Lessons 02–04: one schedule's timeline, two side by side, and the bubble-vs-M curve."""
from __future__ import annotations

from ..closed_forms import bubble_both
from ..registry import default_V, spec
from ..text import metrics_line
from ..scene import (BUBBLE_MS, bubble_curve_panel, inflight_panel, peak_bars_panel, scene,
                     timeline_panel)
from .base import (M_RANGE, P_RANGE, SCHEDULES, V_RANGE, Canvas, build_canvas, cost_sliders,
                   simulate_or_message, summary)
from .menus import menu


def render(schedule: str = "1f1b", P: int = 4, M: int = 8, V: int | None = 1, tf=1.0, tb=2.0,
           tw=0.0, comm=0.0, fixed=0.0, inflight: bool = False):
    """Simulate one schedule: ``(scene or None, message)``, the timeline (and with
    ``inflight`` the activations held per rank below it).

    ``message`` is the summary line on success and the reason on failure; nothing raises
    for a bad combination.
    """
    tl, err = simulate_or_message(schedule, P, M, V, tf=tf, tb=tb, tw=tw, comm=comm,
                                  fixed=fixed)
    if err:
        return None, err
    msg = summary(tl)
    panel = timeline_panel(tl, subtitle=msg)
    return scene(panel, *([inflight_panel(tl)] if inflight else [])), msg


def render_compare(schedules=("gpipe", "1f1b"), P: int = 4, M: int = 8, V: int | None = None,
                   tf=1.0, tb=2.0, tw=0.0, comm=0.0, fixed=0.0):
    """Two (or more) schedules on the same P and M, stacked on one time axis, plus per-rank
    peak in-flight bars: ``(scene or None, message)``; the message has one summary line per
    schedule, or the reason a schedule cannot be built (the others are still drawn).
    """
    tls, lines, subtitles, peaks = [], [], [], []
    for name in schedules:
        v = V if (V is not None and spec(name).stages_per_rank == "any") else None
        tl, err = simulate_or_message(name, P, M, v, tf=tf, tb=tb, tw=tw, comm=comm,
                                      fixed=fixed)
        if err:
            lines.append(err)
        else:
            tls.append(tl)
            subtitles.append(metrics_line(tl))
            peaks.append(tl.peak_inflight)
            lines.append(f"{name}: "
                         f"{summary(tl, one_line=True, line=subtitles[-1], peaks=peaks[-1])}")
    msg = "\n".join(lines)
    if not tls:
        return None, msg
    xmax = max(tl.makespan for tl in tls)
    panels = [timeline_panel(tl, xmax=xmax, subtitle=sub) for tl, sub in zip(tls, subtitles)]
    return scene(*panels, peak_bars_panel(tls, peaks)), msg


def timeline_canvas(schedule: str = "1f1b", P: int = 4, M: int = 8, V: int | None = None,
                    costs: bool = False, tf=1.0, tb=2.0, tw=0.0, comm=0.0, fixed=0.0,
                    schedules=SCHEDULES, inflight: bool = False) -> Canvas:
    """Schedule dropdown + P, M, V sliders (+ tf, tb, tw, comm, fixed with ``costs=True``).

    Shows the timeline, bubble with both denominators and per-rank peak in-flight; an
    impossible combination shows the reason instead of a figure.
    """
    import ipywidgets as w
    V = default_V(schedule) if V is None else V
    slider = lambda d, v, r: w.IntSlider(value=v, min=r[0], max=r[1], description=d,
                                          continuous_update=False,
                                          layout=w.Layout(width="260px"))
    controls = {"schedule": w.Dropdown(options=list(schedules), value=schedule,
                                       description="schedule", layout=w.Layout(width="230px")),
                "P": slider("P", P, P_RANGE), "M": slider("M", M, M_RANGE),
                "V": slider("V", V, V_RANGE)}
    rows = [w.HBox([controls["schedule"], controls["P"], controls["M"], controls["V"]])]
    fixed_kw = {"inflight": inflight}
    if costs:
        cs = cost_sliders(w, tf, tb, tw, comm, fixed)
        controls.update(cs)
        rows.append(w.HBox(list(cs.values())))
    else:
        fixed_kw.update(tf=tf, tb=tb, tw=tw, comm=comm, fixed=fixed)

    def on_schedule(change):        # switching schedule moves V to that schedule's usual value
        controls["V"].value = default_V(change["new"])
    controls["schedule"].observe(on_schedule, names="value")
    return build_canvas(render, controls, rows, fixed_kw)


def compare_canvas(a: str = "gpipe", b: str = "1f1b", P: int = 4, M: int = 8,
                   schedules=SCHEDULES) -> Canvas:
    """Two schedules side by side on the same P and M, with per-rank peak in-flight bars."""
    import ipywidgets as w
    slider = lambda d, v, r: w.IntSlider(value=v, min=r[0], max=r[1], description=d,
                                          continuous_update=False, layout=w.Layout(width="260px"))
    controls = {"a": w.Dropdown(options=list(schedules), value=a, description="left",
                                layout=w.Layout(width="200px")),
                "b": w.Dropdown(options=list(schedules), value=b, description="right",
                                layout=w.Layout(width="200px")),
                "P": slider("P", P, P_RANGE), "M": slider("M", M, M_RANGE)}
    rows = [w.HBox(list(controls.values()))]

    return build_canvas(render_pair, controls, rows, {})


def render_pair(a: str = "gpipe", b: str = "1f1b", P: int = 4, M: int = 8):
    """:func:`render_compare` of two schedules, as the compare canvas's two menus give them."""
    return render_compare((a, b), P, M)


def bubble_curve_canvas(P: int = 4, schedule: str = "1f1b", V: int = 1) -> Canvas:
    """P slider (and schedule) for the bubble-vs-M curve with simulated points."""
    import ipywidgets as w
    controls = {"schedule": w.Dropdown(options=menu("bubble-curve"), value=schedule,
                                       description="schedule"),
                "P": w.IntSlider(value=P, min=P_RANGE[0], max=P_RANGE[1], description="P",
                                 continuous_update=False)}

    return build_canvas(render_bubble_curve, controls, [w.HBox(list(controls.values()))], {})


def render_bubble_curve(schedule: str = "1f1b", P: int = 4):
    """The bubble-vs-M curve for ``schedule`` at ``P``, at the schedule's usual V:
    ``(scene, message)``."""
    v = default_V(schedule)
    f32, r32 = bubble_both(P, 32, v)
    msg = (f"{schedule} P={P}: at M=32 the bubble is {f32:.1%} of the total "
           f"and {r32:.1%} of the ideal")
    return scene(bubble_curve_panel(P, BUBBLE_MS, schedule, v)), msg


__all__ = ["render", "render_compare", "render_pair", "render_bubble_curve", "bubble_curve_panel",
           "timeline_canvas", "compare_canvas", "bubble_curve_canvas"]
