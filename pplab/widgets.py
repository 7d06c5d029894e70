"""Live canvases for the notebooks: sliders and dropdowns that re-simulate and redraw.

Each canvas is ipywidgets + an ``Output`` widget showing a matplotlib Figure (the inline
backend; no ipympl). The work is done by plain functions — :func:`render` and
:func:`render_compare` — that return ``(figure_or_None, message)`` and never raise for bad
input: an impossible combination (say ``interleaved`` with M not a multiple of P) comes back
as ``(None, "the generator's explanation")``. Tests sweep those functions over every slider
value without a browser; the widgets only wire them up.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

from .schedules import FIXED_V, GENERATORS, make_schedule
from .simulate import Costs, simulate

#: slider ranges shared by the canvases and the tests that sweep them
P_RANGE = (1, 8)
M_RANGE = (1, 32)
V_RANGE = (1, 4)
SCHEDULES = tuple(GENERATORS)
ONE_STAGE = ("naive", "gpipe", "1f1b", "zb-h1", "dualpipe")


def default_V(schedule: str) -> int:
    """The V a schedule is normally run with (what the V slider jumps to on a switch)."""
    if schedule in FIXED_V:
        return FIXED_V[schedule]
    return 2 if schedule in ("interleaved", "bfs") else 1


def summary(tl) -> str:
    """One line: makespan, bubble both ways, per-rank peak in-flight."""
    from .draw import metrics_line
    return f"{metrics_line(tl)}; peak in-flight per rank {tl.peak_inflight}"


def _costs(tf, tb, tw, comm, fixed) -> Costs:
    return Costs(tf=float(tf), tb=float(tb), tw=float(tw), comm=float(comm), fixed=float(fixed))


def simulate_or_message(schedule: str, P: int, M: int, V: int | None = None, tf=1.0, tb=2.0,
                        tw=0.0, comm=0.0, fixed=0.0):
    """(Timeline, None) or (None, message) — bad input becomes the library's own words."""
    try:
        sched = make_schedule(schedule, int(P), int(M), None if V is None else int(V))
        return simulate(sched, _costs(tf, tb, tw, comm, fixed)), None
    except ValueError as e:           # ScheduleError, DeadlockError and bad costs are ValueErrors
        return None, f"{schedule} with P={P}, M={M}" + (f", V={V}" if V is not None else "") \
            + f": {e}"


def _timeline_over_panel(tl, P: int, bottom_pad: float = 0.45, hspace: float = 0.6):
    """A figure with the timeline on top and an empty panel below it for a second plot."""
    from matplotlib.figure import Figure

    from .draw import draw_timeline
    rows = [1.0 + 0.4 * P, 2.6]
    fig = Figure(figsize=(10, sum(rows)))
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": rows})
    fig.subplots_adjust(left=0.075, right=0.77, top=1 - 0.55 / sum(rows),
                        bottom=bottom_pad / sum(rows), hspace=hspace)
    draw_timeline(tl, ax=top)
    return fig, top, bottom


def render(schedule: str = "1f1b", P: int = 4, M: int = 8, V: int | None = 1, tf=1.0, tb=2.0,
           tw=0.0, comm=0.0, fixed=0.0, draw: bool = True, inflight: bool = False):
    """Simulate and draw one schedule. Returns ``(Figure or None, message)``.

    ``message`` is the summary line on success and the reason on failure; nothing raises
    for a bad combination. ``draw=False`` skips the figure (for fast sweeps).
    """
    tl, err = simulate_or_message(schedule, P, M, V, tf, tb, tw, comm, fixed)
    if err:
        return None, err
    msg = summary(tl)
    if not draw:
        return None, msg
    from .draw import draw_inflight, draw_timeline
    if not inflight:
        return draw_timeline(tl), msg
    fig, _, bottom = _timeline_over_panel(tl, P)
    draw_inflight(tl, ax=bottom)
    return fig, msg


def render_compare(schedules=("gpipe", "1f1b"), P: int = 4, M: int = 8, V: int | None = None,
                   tf=1.0, tb=2.0, tw=0.0, comm=0.0, fixed=0.0, draw: bool = True):
    """Two (or more) schedules on the same P and M, stacked, plus per-rank peak in-flight bars.

    Returns ``(Figure or None, message)``; the message has one summary line per schedule,
    or the reason a schedule cannot be built (the others are still drawn).
    """
    tls, lines = [], []
    for name in schedules:
        v = V if (V is not None and name not in ONE_STAGE) else None
        tl, err = simulate_or_message(name, P, M, v, tf, tb, tw, comm, fixed)
        if err:
            lines.append(err)
        else:
            tls.append(tl)
            lines.append(f"{name}: {summary(tl)}")
    msg = "\n".join(lines)
    if not draw or not tls:
        return None, msg
    from matplotlib.figure import Figure

    from .draw import draw_peak_bars, draw_timeline
    rows = [1.0 + 0.4 * P for _ in tls] + [2.4]
    fig = Figure(figsize=(10, sum(rows)))
    axes = fig.subplots(len(rows), 1, gridspec_kw={"height_ratios": rows})
    fig.subplots_adjust(left=0.075, right=0.77, top=1 - 0.55 / sum(rows),
                        bottom=0.45 / sum(rows), hspace=0.9)
    xmax = max(tl.makespan for tl in tls)
    for ax, tl in zip(axes, tls):
        draw_timeline(tl, ax=ax)
        ax.set_xlim(0, xmax * 1.005 if xmax > 0 else 1)        # same time axis for all
    draw_peak_bars(tls, ax=axes[-1])
    return fig, msg


# ---- widgets ----------------------------------------------------------------------------------
@dataclass
class Canvas:
    """A built canvas: ``widget`` to display, ``controls`` by name, ``update()`` to redraw.

    ``errors`` collects unexpected exceptions from redraws (a bug, not bad input); tests
    assert it stays empty while they move every control.
    """
    widget: Any
    controls: dict
    update: Callable[[], None]
    message: Any = None
    errors: list = field(default_factory=list)
    last_message: str = ""

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)


#: every canvas built in this kernel, newest last (the headless tests walk it)
CANVASES: list[Canvas] = []


def _show(out, fig):
    from IPython.display import display
    with out:
        out.clear_output(wait=True)
        if fig is not None:
            display(fig)


def _message_html(msg: str, ok: bool) -> str:
    import html
    colour = "#1b5e20" if ok else "#b71c1c"
    lines = "<br>".join(html.escape(x) for x in msg.splitlines())
    return f"<div style='color:{colour};font-family:monospace;font-size:12px'>{lines}</div>"


def _cost_sliders(w, tf, tb, tw, comm, fixed):
    style = {"description_width": "initial"}
    mk = lambda d, v, lo, hi, st: w.FloatSlider(value=v, min=lo, max=hi, step=st, description=d,
                                                 continuous_update=False, style=style,
                                                 layout=w.Layout(width="200px"))
    return {"tf": mk("tf", tf, 0.5, 4.0, 0.5), "tb": mk("tb", tb, 0.5, 4.0, 0.5),
            "tw": mk("tw", tw, 0.0, 2.0, 0.5), "comm": mk("comm", comm, 0.0, 1.0, 0.25),
            "fixed": mk("fixed", fixed, 0.0, 1.0, 0.25)}


def _build(render_fn, controls: dict, layout_rows, fixed_kw: dict) -> Canvas:
    import ipywidgets as w
    out = w.Output()
    message = w.HTML()
    canvas = Canvas(None, controls, lambda: None, message)

    def update(*_):
        kw = {k: c.value for k, c in controls.items()}
        kw.update(fixed_kw)
        try:
            fig, msg = render_fn(**kw)
        except Exception as e:          # a bug: say so inline, record it for the tests
            canvas.errors.append((dict(kw), repr(e)))
            fig, msg = None, f"internal error (please report): {e!r}"
        canvas.last_message = msg
        message.value = _message_html(msg, fig is not None)
        _show(out, fig)

    for c in controls.values():
        c.observe(update, names="value")
    canvas.update = update
    canvas.widget = w.VBox([*layout_rows, message, out])
    update()
    CANVASES.append(canvas)
    return canvas


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
        cs = _cost_sliders(w, tf, tb, tw, comm, fixed)
        controls.update(cs)
        rows.append(w.HBox(list(cs.values())))
    else:
        fixed_kw.update(tf=tf, tb=tb, tw=tw, comm=comm, fixed=fixed)

    def on_schedule(change):        # switching schedule moves V to that schedule's usual value
        controls["V"].value = default_V(change["new"])
    controls["schedule"].observe(on_schedule, names="value")
    return _build(render, controls, rows, fixed_kw)


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

    def fn(a, b, P, M):
        return render_compare((a, b), P, M)
    return _build(fn, controls, rows, {})


def bubble_curve_canvas(P: int = 4, schedule: str = "1f1b", V: int = 1) -> Canvas:
    """P slider (and schedule) for the bubble-vs-M curve with simulated points."""
    import ipywidgets as w
    controls = {"schedule": w.Dropdown(options=["gpipe", "1f1b", "interleaved"], value=schedule,
                                       description="schedule"),
                "P": w.IntSlider(value=P, min=P_RANGE[0], max=P_RANGE[1], description="P",
                                 continuous_update=False)}

    def fn(schedule, P):
        from .draw import bubble_closed_form, draw_bubble_curve
        v = 2 if schedule == "interleaved" else 1
        fig = draw_bubble_curve(P, [1, 2, 4, 8, 16, 32, 64], schedule=schedule, V=v)
        f32, r32 = bubble_closed_form(P, 32, v)
        return fig, (f"{schedule} P={P}: at M=32 the bubble is {f32:.1%} of the total "
                     f"and {r32:.1%} of the ideal")
    return _build(fn, controls, [w.HBox(list(controls.values()))], {})


__all__ = ["render", "render_compare", "simulate_or_message", "summary", "timeline_canvas",
           "compare_canvas", "bubble_curve_canvas", "Canvas", "CANVASES", "P_RANGE", "M_RANGE",
           "V_RANGE", "SCHEDULES", "default_V"]


# ---- lesson 05: interleaving, communication, and when V stops paying -------------------------
INTERLEAVED_SCHEDULES = ("interleaved", "bfs")
COMM_RANGE = (0.0, 1.0, 0.125)           # per-hop latency slider: min, max, step
CURVE_V = (1, 2, 3, 4, 6)                # V values on the makespan-vs-V curve


def p2p_messages(schedule) -> int:
    """Point-to-point messages one step of ``schedule`` sends: an F whose next stage (same
    copy) lives on another rank sends activations, a B or I whose previous stage lives on
    another rank sends gradients. W sends nothing."""
    n = 0
    to_rank = schedule.stage_to_rank
    for rank, _, op in schedule.actions():
        for a in op.parts:
            if a.kind == "F" and not schedule.is_last(a.stage):
                nxt = _neighbour(schedule, a.stage, +1)
                n += to_rank[nxt] != rank
            elif a.kind in ("B", "I") and not schedule.is_first(a.stage):
                prv = _neighbour(schedule, a.stage, -1)
                n += to_rank[prv] != rank
    return n


def _neighbour(schedule, stage: int, step: int) -> int:
    """The stage ``step`` positions along the model from ``stage``, in the same copy."""
    copy, pos = schedule.copy_of(stage), schedule.position(stage) + step
    for s in range(schedule.num_stages):
        if schedule.copy_of(s) == copy and schedule.position(s) == pos:
            return s
    raise ValueError(f"no stage at position {pos} of copy {copy}")


def makespan_vs_V(P: int, M: int, comm: float, Vs=CURVE_V, schedule: str = "interleaved",
                  tf=1.0, tb=2.0) -> list[tuple[int, float | None]]:
    """(V, makespan) for each V; None where the generator refuses the combination."""
    return list(_makespan_vs_V(int(P), int(M), float(comm), tuple(Vs), schedule, float(tf),
                               float(tb)))


@functools.lru_cache(maxsize=512)
def _makespan_vs_V(P, M, comm, Vs, schedule, tf, tb):
    out = []
    for v in Vs:
        tl, err = simulate_or_message(schedule, P, M, v, tf, tb, 0.0, comm, 0.0)
        out.append((v, None if err else tl.makespan))
    return tuple(out)


def render_interleaved(schedule: str = "interleaved", P: int = 4, M: int = 8, V: int = 2,
                       comm=0.25, draw: bool = True, curve: bool = True):
    """Timeline of interleaved (or breadth-first) 1F1B with a per-hop ``comm`` cost, plus the
    makespan-vs-V curve at that comm. Returns ``(Figure or None, message)``.
    ``curve=False`` skips the curve (fast sweeps; the message then omits the best V)."""
    tl, err = simulate_or_message(schedule, P, M, V, 1.0, 2.0, 0.0, comm, 0.0)
    if err:
        return None, err
    sched = tl.schedule if tl.schedule is not None else make_schedule(schedule, P, M, V)
    from .timeline import peak_inflight as _peak
    eq = _peak(sched, stage_equivalents=True)
    points = makespan_vs_V(P, M, comm, schedule=schedule) if curve else [(V, tl.makespan)]
    ok = [(v, t) for v, t in points if t is not None]
    best_v, best_t = min(ok, key=lambda x: (x[1], x[0])) if ok else (V, tl.makespan)
    msgs = p2p_messages(sched)
    msg = (f"{summary(tl)}\nrank 0 holds {eq[0]:g} stage-equivalents of activations (1F1B: "
           f"{min(P, M)}); {msgs} point-to-point messages per step (1F1B: "
           f"{2 * M * (P - 1)})")
    if curve:
        msg += (f"\nat comm={float(comm):g} per hop the fastest V on the curve is V={best_v} "
                f"(makespan {best_t:.4g})")
    if not draw:
        return None, msg
    fig, top, bottom = _timeline_over_panel(tl, P, bottom_pad=0.5, hspace=0.7)
    xs = [v for v, _ in ok]
    bottom.plot(xs, [t for _, t in ok], "o-", color="#0072B2", label=f"comm={float(comm):g}")
    if curve and float(comm) != 0.0:
        ok0 = [(v, t) for v, t in makespan_vs_V(P, M, 0.0, schedule=schedule) if t is not None]
        bottom.plot([v for v, _ in ok0], [t for _, t in ok0], "s--", color="#999999", ms=4,
                    label="comm=0")
    bottom.plot([V], [tl.makespan], "o", ms=11, mfc="none", color="#D55E00", label=f"V={V}")
    bottom.set_xticks(list(CURVE_V))
    bottom.set_xlabel("chunks per rank V")
    bottom.set_ylabel("makespan")
    bottom.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    bottom.set_title(f"{schedule} P={P} M={M}: makespan vs V", fontsize=10, loc="left")
    for side in ("top", "right"):
        bottom.spines[side].set_visible(False)
    return fig, msg


def interleaved_canvas(schedule: str = "interleaved", P: int = 4, M: int = 8, V: int = 2,
                       comm=0.25) -> Canvas:
    """Schedule (interleaved / bfs), P, M, V and a per-hop comm slider; the timeline and the
    makespan-vs-V curve at that comm."""
    import ipywidgets as w
    slider = lambda d, v, r: w.IntSlider(value=v, min=r[0], max=r[1], description=d,
                                          continuous_update=False, layout=w.Layout(width="260px"))
    lo, hi, st = COMM_RANGE
    controls = {"schedule": w.Dropdown(options=list(INTERLEAVED_SCHEDULES), value=schedule,
                                       description="schedule", layout=w.Layout(width="230px")),
                "P": slider("P", P, P_RANGE), "M": slider("M", M, M_RANGE),
                "V": slider("V", V, V_RANGE),
                "comm": w.FloatSlider(value=comm, min=lo, max=hi, step=st, description="comm",
                                      continuous_update=False, layout=w.Layout(width="260px"))}
    rows = [w.HBox([controls["schedule"], controls["P"], controls["M"]]),
            w.HBox([controls["V"], controls["comm"]])]
    return _build(render_interleaved, controls, rows, {})


# ---- lesson 06: split backward, zero bubble, DualPipe -----------------------------------------
ZB_SCHEDULES = ("1f1b", "zb-h1", "zb-h2", "zbv", "dualpipe", "dualpipev")
ZB_COSTS = {"tf": (0.5, 3.0, 0.5), "tb": (0.5, 4.0, 0.5), "tw": (0.0, 2.0, 0.5),
            "tfb": (0.5, 7.0, 0.5)}


def excess_closed_form(schedule: str, P: int, M: int, tf=1.0, tb=2.0, tw=0.0, tfb=None):
    """The literature's bubble for ``schedule`` as absolute time per rank (makespan minus the
    busy time M·(tf+tb)), with the condition under which the simulator reproduces it exactly.
    Returns ``(value or None, note)``."""
    tf, tb, tw = float(tf), float(tb), float(tw)
    tfb = tf + tb if tfb is None else float(tfb)
    ti = tb - tw
    if schedule in ("1f1b", "gpipe"):
        return (P - 1) * (tf + tb), "(P−1)(tf+tb), Megatron-LM; B = full backward"
    if schedule == "zb-h1":
        return ((P - 1) * (tf + tb - 2 * tw),
                "(P−1)(tf+tb−2tw), Zero Bubble Table 2; exact for M ≥ P, tw ≤ tf, tw ≤ tI")
    if schedule == "zb-h2":
        return (max((P - 1) * tf, (P - 1) * (tf + ti - 2 * tw)),
                "max((P−1)tf, (P−1)(tf+tI−2tw)) in one flushed step, M ≥ 2P−1; the paper's "
                "(P−1)(tf+tI−2tw) needs overlapping iterations")
    if schedule == "zbv":
        return ((P - 1) * tf / 2, "(P−1)·tf/2: the first microbatch's trip down the V, a lower "
                "bound; reached at tf = tI = tw")
    if schedule == "dualpipe":
        return ((P // 2 - 1) * (tfb + tb - 3 * tw),
                "(P/2−1)(tF&B+tB−3tW), DeepSeek-V3 Table 2; exact at F=1, B=2, W=1, F&B=3")
    if schedule == "dualpipev":
        return ((P - 1) * (tfb + tb - 3 * tw) / 2,
                "DualPipe's formula on 2P half-size stages: (P−1)(tF&B+tB−3tW)/2")
    return None, "no closed form"


def render_zero_bubble(schedule: str = "zb-h1", P: int = 4, M: int = 8, tf=1.0, tb=2.0, tw=1.0,
                       tfb=3.0, draw: bool = True):
    """Timeline with split-backward costs (and the F&B pair cost for DualPipe); the message
    compares the measured excess with the schedule's closed form and gives per-rank memory
    and parameter copies. Returns ``(Figure or None, message)``."""
    try:
        sched = make_schedule(schedule, int(P), int(M))
        tl = simulate(sched, Costs(tf=float(tf), tb=float(tb), tw=float(tw), tfb=float(tfb)))
    except ValueError as e:
        return None, f"{schedule} with P={P}, M={M}: {e}"
    from .timeline import peak_inflight as _peak
    busy = M * (float(tf) + float(tb))
    excess = tl.makespan - busy
    form, note = excess_closed_form(schedule, P, M, tf, tb, tw, tfb)
    eq = _peak(sched, stage_equivalents=True)
    msg = (f"{summary(tl)}\nmakespan − M·(tf+tb) = {excess:.4g}; closed form {form:.4g} — "
           f"{note}\nactivations held (stage-equivalents) {[round(x, 2) for x in eq]}; "
           f"parameter copies per rank {sched.copies}")
    if schedule in ("1f1b", "zb-h1", "zb-h2") and float(tfb) != float(tf) + float(tb):
        msg += "\n(tfb only matters for DualPipe's overlapped F&B pairs)"
    if not draw:
        return None, msg
    from .draw import draw_timeline
    return draw_timeline(tl), msg


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
    return _build(render_zero_bubble, controls, rows, {})


__all__ += ["p2p_messages", "makespan_vs_V", "render_interleaved", "interleaved_canvas",
            "excess_closed_form", "render_zero_bubble", "zero_bubble_canvas",
            "INTERLEAVED_SCHEDULES", "ZB_SCHEDULES", "ZB_COSTS", "COMM_RANGE", "CURVE_V"]
