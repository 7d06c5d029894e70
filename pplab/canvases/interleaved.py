"""Lesson 05: interleaving, its communication, and when V stops paying."""
from __future__ import annotations

from ..lower import p2p_messages
from ..scene import line, lines_panel, scene, timeline_panel
from ..timeline import peak_inflight_of
from .base import V_RANGE, Canvas, build_canvas, simulate_or_message, summary
from .cache import KEPT
from .menus import menu

# ---- lesson 05: interleaving, communication, and when V stops paying -------------------------
INTERLEAVED_SCHEDULES = menu("interleaved")     # every schedule with a free V
COMM_RANGE = (0.0, 1.0, 0.125)           # per-hop latency slider: min, max, step
#: smaller than the timeline canvases' P and M: every move also simulates the V curve (five
#: schedules, up to V=6), six times a timeline canvas's work
IL_P_RANGE, IL_M_RANGE = (1, 8), (1, 32)


def m_positions(P: int) -> tuple[int, int, int]:
    """The M slider's (min, max, step) at P: multiples of P up to ``IL_M_RANGE``'s top, the
    M's every schedule on this canvas takes (interleaved sends microbatches round in groups
    of P)."""
    return P, P * max(1, IL_M_RANGE[1] // P), P
CURVE_V = (1, 2, 3, 4, 6)                # V values on the makespan-vs-V curve


def makespan_vs_V(P: int, M: int, comm: float, Vs=CURVE_V, schedule: str = "interleaved",
                  tf=1.0, tb=2.0) -> list[tuple[int, float | None]]:
    """(V, makespan) for each V; None where the generator refuses the combination. Kept in
    :data:`KEPT` (every move of the canvas draws the curve again)."""
    args = (int(P), int(M), float(comm), tuple(Vs), schedule, float(tf), float(tb))
    return list(KEPT.value(("makespan_vs_V", *args), lambda: _makespan_vs_V(*args)))


def _makespan_vs_V(P, M, comm, Vs, schedule, tf, tb) -> tuple:
    out = []
    for v in Vs:
        tl, err = simulate_or_message(schedule, P, M, v, tf=tf, tb=tb, comm=comm)
        out.append((v, None if err else tl.makespan))
    return tuple(out)


def render_interleaved(schedule: str = "interleaved", P: int = 4, M: int = 8, V: int = 2,
                       comm=0.25, curve: bool = True):
    """Timeline of interleaved (or breadth-first) 1F1B with a per-hop ``comm`` cost, plus the
    makespan-vs-V curve at that comm: ``(scene or None, message)``. ``curve=False`` leaves
    the curve out (fast sweeps; the message then omits the best V)."""
    tl, err = simulate_or_message(schedule, P, M, V, tf=1.0, tb=2.0, comm=comm)
    if err:
        return None, err
    sched = KEPT.schedule(schedule, P, M, V)          # the one just simulated
    eq = peak_inflight_of(sched, stage_equivalents=True)
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
    return scene(timeline_panel(tl), _curve_panel(schedule, P, M, V, comm, ok, tl.makespan,
                                                  curve)), msg


def _curve_panel(schedule, P, M, V, comm, ok, makespan, curve) -> dict:
    """Makespan vs V at this comm (and at comm=0), the current V circled."""
    series = [line(f"comm={float(comm):g}", "#0072B2", ok, marker="s")]
    if curve and float(comm) != 0.0:
        ok0 = [(v, t) for v, t in makespan_vs_V(P, M, 0.0, schedule=schedule) if t is not None]
        series.append(line("comm=0", "#999999", ok0, marker="s", dash=True))
    series.append(line(f"V={V}", "#D55E00", [(V, makespan)], line=False, marker="O"))
    return lines_panel(series, f"{schedule} P={P} M={M}: makespan vs V", "chunks per rank V",
                       "makespan", xticks=CURVE_V)


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
                "P": slider("P", P, IL_P_RANGE), "M": slider("M", M, IL_M_RANGE),
                "V": slider("V", V, V_RANGE),
                "comm": w.FloatSlider(value=comm, min=lo, max=hi, step=st, description="comm",
                                      continuous_update=False, layout=w.Layout(width="260px"))}
    rows = [w.HBox([controls["schedule"], controls["P"], controls["M"]]),
            w.HBox([controls["V"], controls["comm"]])]
    m = controls["M"]

    def fit_m(P: int) -> None:          # M steps by P: no position the schedule refuses
        lo, hi, step = m_positions(P)
        with m.hold_trait_notifications():
            m.min, m.max, m.step = 0, max(hi, m.max), step
            m.value = min(hi, max(lo, round(m.value / P) * P))
            m.min, m.max = lo, hi
    fit_m(controls["P"].value)
    controls["P"].observe(lambda change: fit_m(change["new"]), names="value")
    return build_canvas(render_interleaved, controls, rows, {})


