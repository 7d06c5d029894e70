"""Lesson 06: split backward, zero bubble, DualPipe."""
from __future__ import annotations

from ..sim.overlap import check_tfb, worst_idle
from ..registry import excess_closed_form
from ..scene import timeline_scene
from ..sim import Costs, simulate
from ..timeline import peak_inflight
from .base import M_RANGE, P_RANGE, Canvas, build_canvas, summary
from .cache import KEPT
from .menus import menu


ZB_SCHEDULES = menu("zero-bubble")    # the split-backward ones, 1F1B as baseline
ZB_COSTS = {"tf": (0.5, 3.0, 0.5), "tb": (0.5, 4.0, 0.5), "tw": (0.0, 2.0, 0.5),
            "tfb": (0.5, 7.0, 0.5)}



def render_zero_bubble(schedule: str = "zb-h1", P: int = 4, M: int = 8, tf=1.0, tb=2.0, tw=1.0,
                       tfb=3.0):
    """Timeline with split-backward costs (and the F&B pair cost for DualPipe); the message
    compares the measured excess with the schedule's closed form and gives per-rank memory
    and parameter copies. Returns ``(scene or None, message)``."""
    try:
        sched = KEPT.schedule(schedule, P, M)
        tl = simulate(sched, Costs(tf=float(tf), tb=float(tb), tw=float(tw), tfb=float(tfb)))
        if schedule.startswith("dualpipe"):                # the pair model's range (overlap.py)
            check_tfb(tf, tb, tfb)
    except ValueError as e:
        return None, f"{schedule} with P={P}, M={M}: {e}"
    excess = worst_idle(tl)                 # makespan − the idlest rank's busy time, ≥ 0
    form, note = excess_closed_form(schedule, P, M, tf, tb, tw, tfb)
    eq = peak_inflight(sched, stage_equivalents=True)
    shown = "none" if form is None else f"{form:.4g}"     # not every schedule has one
    msg = (f"{summary(tl)}\nidlest rank's idle (makespan − its busy time) = {excess:.4g}; "
           f"closed form {shown} — "
           f"{note}\nactivations held (stage-equivalents) {[round(x, 2) for x in eq]}; "
           f"parameter copies per rank {sched.copies}")
    pairs = any(op.kind == "FB" for ops in sched.ranks for op in ops)    # read off the order
    if not pairs and float(tfb) != float(tf) + float(tb):
        msg += "\n(tfb only matters for DualPipe's overlapped F&B pairs)"
    return timeline_scene(tl), msg


def zero_bubble_canvas(schedule: str = "zb-h1", P: int = 4, M: int = 8, tf=1.0, tb=2.0,
                       tw=1.0, tfb=3.0, schedules=ZB_SCHEDULES) -> Canvas:
    """Schedule dropdown over the split-backward schedules, P, M and tf/tb/tw/tfb sliders."""
    import ipywidgets as w
    slider = lambda d, v, r: w.IntSlider(value=v, min=r[0], max=r[1], description=d,
                                          continuous_update=False, layout=w.Layout(width="260px"))
    style = {"description_width": "initial"}
    fl = lambda d, v: w.FloatSlider(value=v, min=ZB_COSTS[d][0], max=ZB_COSTS[d][1],
                                    step=ZB_COSTS[d][2], description=d, style=style,
                                    continuous_update=False, layout=w.Layout(width="210px"))
    controls = {"schedule": w.Dropdown(options=list(schedules), value=schedule,
                                       description="schedule", layout=w.Layout(width="230px")),
                "P": slider("P", P, P_RANGE), "M": slider("M", M, M_RANGE),
                "tf": fl("tf", tf), "tb": fl("tb", tb), "tw": fl("tw", tw), "tfb": fl("tfb", tfb)}
    rows = [w.HBox([controls["schedule"], controls["P"], controls["M"]]),
            w.HBox([controls["tf"], controls["tb"], controls["tw"], controls["tfb"]])]
    return build_canvas(render_zero_bubble, controls, rows, {})
