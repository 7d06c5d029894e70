"""Lesson 13: move the activation cap, watch the searched schedule (and its bubble) change."""
from __future__ import annotations

from ..scene import timeline_scene
from ..search import search
from ..sim import Costs
from .base import Canvas, build_canvas, int_slider, summary

SEARCH_EVALUATIONS = 200       # the same schedule for every student, however loaded the server


def render_search(P: int = 4, M: int = 8, V: int = 1, cap: int = 4, tf=1.0, tb=2.0, tw=1.0,
                  evaluations: int = SEARCH_EVALUATIONS):
    """Search under ``cap`` and draw the result; the message names the best built-in that
    fits the same cap. Returns ``(scene or None, message)``; bad input is a message."""
    try:
        r = search(int(P), int(M), int(V), Costs(tf=float(tf), tb=float(tb), tw=float(tw)),
                   int(cap), evaluations=int(evaluations))
    except ValueError as e:
        return None, f"search with P={P}, M={M}, V={V}, cap={cap}: {e}"
    fit = [b for b in r.baselines if b["fits"]]
    best = min(fit, key=lambda b: b["makespan"]) if fit else None
    bar = (f"best built-in under the cap: {best['name']} at {best['makespan']:.4g}"
           if best else "no built-in schedule fits this cap")
    msg = f"found {r.makespan:.4g} (grown from {r.seed}); {bar}\n{summary(r.timeline)}"
    return timeline_scene(r.timeline), msg


def search_canvas(P: int = 4, M: int = 8, V: int = 1, cap: int = 4) -> Canvas:
    """Sliders for P, M, V and the cap on in-flight activations per rank."""
    controls = {"P": int_slider("P", P, (2, 6)), "M": int_slider("M", M, (2, 16)),
                "V": int_slider("V", V, (1, 2)), "cap": int_slider("cap", cap, (1, 16))}
    import ipywidgets as w
    rows = [w.HBox([controls["P"], controls["M"]]), w.HBox([controls["V"], controls["cap"]])]
    return build_canvas(render_search, controls, rows, {})
