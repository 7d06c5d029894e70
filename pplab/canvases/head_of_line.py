"""Lesson 05: the head-of-line bubble of a front-loaded receive (torch#188833), simulated
and measured.

Interleaved 1F1B with *blocking* receives, posted in two orders (pplab/lower.py):
``front-loaded`` puts each receive where a unit-time run makes its data, which is ahead of
ops and sends that do not need it once real costs differ; ``just-in-time`` puts it right
before the op that needs it. :func:`render_head_of_line` simulates both with the stream
model (pure Python); :func:`measure_head_of_line` runs both on real processes (gloo,
emulated op times) and :func:`measured_text` puts measured next to simulated.
"""
from __future__ import annotations

import threading
from typing import Any

from ..probe.env import browser_note, in_browser
from ..scene import scene, timeline_panel
from ..sim import Costs, simulate
from ..streams import Link, compile_streams, simulate_streams, warmup_end
from .base import Canvas, build_canvas, int_slider, message_html
from .cache import KEPT

ORDERS = ("front-loaded", "just-in-time")
HOL_P, HOL_M, HOL_V = (2, 4), (2, 16), (2, 4)
#: backward cost (forward = 1) and per-message latency sliders: (min, max, step)
HOL_COSTS = {"tb": (1.0, 3.0, 0.5), "latency": (0.0, 0.5, 0.1)}


def simulate_orders(P: int = 2, M: int = 8, V: int = 2, tf=1.0, tb=2.0, latency=0.0) -> dict:
    """``{order: Timeline}`` for interleaved 1F1B with blocking receives in each order."""
    sched = KEPT.schedule("interleaved", P, M, V)      # kept: a cost slider replays it
    costs = Costs(float(tf), float(tb))
    return {o: simulate_streams(sched, costs, Link(latency=float(latency), lowering=o,
                                                   blocking=True),
                                compiled=KEPT.for_schedule(
                                    f"streams {o}", "interleaved", P, M, V,
                                    lambda o=o: compile_streams(sched, o, blocking=True)))
            for o in ORDERS}


def render_head_of_line(P: int = 2, M: int = 8, V: int = 2, tb=2.0, latency=0.0):
    """The two orders' timelines one above the other on one time axis, messages on thin
    lanes; the message gives makespans and when the warm-up ends in each.
    Returns ``(scene or None, message)``."""
    try:
        tls = simulate_orders(P, M, V, 1.0, tb, latency)
    except ValueError as e:
        return None, f"interleaved with P={P}, M={M}, V={V}: {e}"
    front, jit = (tls[o] for o in ORDERS)
    msg = (f"blocking receives, tf = 1, tb = {float(tb):g}, latency {float(latency):g} per "
           f"message\nfront-loaded: makespan {front.makespan:.4g}, warm-up ends at "
           f"{warmup_end(front):.4g}\njust-in-time: makespan {jit.makespan:.4g}, warm-up ends "
           f"at {warmup_end(jit):.4g}\nthe front-loaded order costs "
           f"{front.makespan - jit.makespan:.4g} more per step")
    xmax = max(front.makespan, jit.makespan)
    return scene(*[timeline_panel(tls[o], title=f"{o} receives", xmax=xmax)
                   for o in ORDERS]), msg


def measure_head_of_line(P: int = 2, M: int = 8, V: int = 2, tf=0.1, tb=0.2,
                         progress=None, **run_kw) -> dict:
    """Run both orders on real processes (gloo, blocking receives, ops padded to ``tf`` /
    ``tb`` seconds per rank-share); ``{order: RunResult}``. Imports torch."""
    from ..runtime.launcher import run_schedule
    return {o: run_schedule("interleaved", P=int(P), M=int(M), V=int(V), steps=2,
                            emulate={"tf": float(tf), "tb": float(tb)}, comm=o,
                            progress=progress, **run_kw) for o in ORDERS}


def measured_text(results: dict) -> str:
    """Measured against simulated, per order: makespan and warm-up end, in seconds."""
    lines = ["order          makespan measured / simulated   warm-up ends measured / simulated"]
    for o in ORDERS:
        r = results[o]
        lines.append(f"{o:13s}  {r.timeline.makespan:8.3f} s / {r.simulated.makespan:6.3f} s"
                     f"   {warmup_end(r.timeline):8.3f} s / {warmup_end(r.simulated):6.3f} s")
    f, j = (results[o] for o in ORDERS)
    measured = warmup_end(f.timeline) - warmup_end(j.timeline)
    simulated = warmup_end(f.simulated) - warmup_end(j.simulated)
    lines.append(f"front-loaded − just-in-time: warm-up {measured:+.3f} s measured, "
                 f"{simulated:+.3f} s simulated")
    return "\n".join(lines)


def head_of_line_canvas(P: int = 2, M: int = 8, V: int = 2, tb=2.0, latency=0.0,
                        tf_seconds=0.1, **run_kw) -> Canvas:
    """P, M, V, tb and latency sliders over the two simulated orders, and a **Run both for
    real** button that measures them (``tf_seconds`` per forward) and shows the table."""
    import ipywidgets as w
    style = {"description_width": "initial"}
    fl = lambda d, v: w.FloatSlider(value=v, min=HOL_COSTS[d][0], max=HOL_COSTS[d][1],
                                    step=HOL_COSTS[d][2], description=d, style=style,
                                    continuous_update=False, layout=w.Layout(width="230px"))
    controls = {"P": int_slider("P", P, HOL_P), "M": int_slider("M", M, HOL_M),
                "V": int_slider("V", V, HOL_V), "tb": fl("tb", tb),
                "latency": fl("latency", latency)}
    button = w.Button(description="Run both for real", button_style="primary", icon="play",
                      layout=w.Layout(width="180px"))
    measured = w.HTML()
    rows = [w.HBox([controls["P"], controls["M"], controls["V"]]),
            w.HBox([controls["tb"], controls["latency"]]), w.HBox([button]), measured]
    canvas = build_canvas(render_head_of_line, controls, rows, {})
    state: dict[str, Any] = {"thread": None}

    def show(line: str) -> None:
        measured.value = message_html(f"running… {line}", True)

    def work(kw):
        try:
            res = measure_head_of_line(kw["P"], kw["M"], kw["V"], tf_seconds,
                                       tf_seconds * kw["tb"], progress=lambda line: setattr(
                                           measured, "value", message_html(f"running… {line}",
                                                                           True)), **run_kw)
            measured.value = f"<pre>{measured_text(res)}</pre>"
        except Exception as e:           # a failed run (RunError) or a bug: say which
            measured.value = message_html(f"the run failed: {e}", False)
        finally:
            button.disabled = False

    def start(_=None):
        if in_browser():                 # no processes to start in a browser tab
            measured.value = message_html(browser_note(
                "pplab run --schedule interleaved -P 2 -M 8 -V 2 --emulate "
                "--comm front-loaded (then --comm just-in-time)"), True)
            return
        if state["thread"] is not None and state["thread"].is_alive():
            return
        kw = {k: c.value for k, c in controls.items()}
        button.disabled = True
        measured.value = message_html("starting torchrun (two jobs, about 20 s each)…", True)
        state["thread"] = threading.Thread(target=work, args=(kw,), daemon=True)
        state["thread"].start()

    button.on_click(start)
    canvas.button, canvas.measured, canvas.state = button, measured, state
    return canvas
