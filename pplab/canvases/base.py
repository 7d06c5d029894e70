"""What every canvas shares: the ``Canvas`` record, the list of canvases built in this kernel,
the build-and-redraw loop, and turning bad input into the library's own message.

A canvas is ipywidgets + a picture drawn in the browser (:class:`~pplab.scene.view.SceneView`
fed a scene from :mod:`pplab.scene`; no matplotlib, so it keeps up with a slider and runs in
JupyterLite). The work is done by plain ``render_*`` functions that return
``(scene or None, message)`` and never raise for bad input: an impossible combination (say
``interleaved`` with M not a multiple of P) comes back as ``(None, "the generator's
explanation")``. The same scene becomes a matplotlib figure for an export with
:func:`pplab.draw.scene_figure`. Tests sweep those functions over every slider value
without a browser; the widgets only wire them up. What a canvas keeps between moves
(schedules, derived values, pictures) is in one place, :data:`pplab.canvases.cache.KEPT`.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .menus import menu
from ..sim import Costs, compile_schedule, simulate
from ..text import metrics_line, per_rank
from .cache import KEPT

#: slider ranges shared by the canvases and the tests that sweep them: up to a 64-rank
#: pipeline with 256 microbatches (the fast executor, pplab/sim/fast.py, makes that
#: usable; docs/DESIGN.md has the redraw times at the far end)
P_RANGE = (1, 64)
M_RANGE = (1, 256)
V_RANGE = (1, 4)
SCHEDULES = menu("timeline")


def summary(tl, one_line: bool = False, *, line: str | None = None,
            peaks: list[int] | None = None) -> str:
    """Makespan, bubble both ways, per-rank peak in-flight: one line, or from
    P = 17 on the peaks below it, 16 ranks a line (``text.per_rank``); ``one_line``: there,
    the largest and the smallest peak instead (a canvas that draws the peaks as bars).
    ``line`` (``metrics_line(tl)``) and ``peaks`` (``tl.peak_inflight``): pass them where
    the canvas has them already; each is a pass over a 64-rank timeline."""
    peaks = tl.peak_inflight if peaks is None else peaks
    line = metrics_line(tl) if line is None else line
    listed = per_rank(peaks)
    if "\n" not in listed:
        return f"{line}; peak in-flight per rank {listed}"
    if one_line:
        top, low = max(peaks), min(peaks)
        return (f"{line}; peak in-flight per rank from {top} (rank "
                f"{peaks.index(top)}) to {low} (rank {peaks.index(low)})")
    return f"{line}; peak in-flight per rank:\n{listed}"


def _costs(tf, tb, tw, comm, fixed) -> Costs:
    return Costs(tf=float(tf), tb=float(tb), tw=float(tw), comm=float(comm), fixed=float(fixed))


def simulate_or_message(schedule: str, P: int, M: int, V: int | None = None, *, tf=1.0,
                        tb=2.0, tw=0.0, comm=0.0, fixed=0.0):
    """(Timeline, None) or (None, message) — bad input becomes the library's own words. The
    schedule is the one :data:`KEPT` holds for these P, M, V (a cost slider rebuilds nothing)."""
    try:
        sched = KEPT.schedule(schedule, P, M, V)
        compiled = KEPT.for_schedule("compiled", schedule, P, M, V,
                                     lambda: compile_schedule(sched))
        return simulate(sched, _costs(tf, tb, tw, comm, fixed), compiled=compiled), None
    except ValueError as e:           # ScheduleError, DeadlockError and bad costs are ValueErrors
        return None, f"{schedule} with P={P}, M={M}" + (f", V={V}" if V is not None else "") \
            + f": {e}"


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
    view: Any = None            # the SceneView the picture is drawn in
    prefetcher: Any = None      # renders a slider step's neighbours while the kernel idles

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)


#: every canvas built in this kernel, newest last (the headless tests walk it)
CANVASES: list[Canvas] = []


def message_html(msg: str, ok: bool) -> str:
    import html
    colour = "#1b5e20" if ok else "#b71c1c"
    lines = "<br>".join(html.escape(x) for x in msg.splitlines())
    return f"<div style='color:{colour};font-family:monospace;font-size:12px'>{lines}</div>"


def note_html(msg: str) -> str:
    """One muted line: something worth knowing that is neither a result nor an error."""
    import html
    return f"<div style='color:#757575;font-size:12px'>{html.escape(msg)}</div>"


def cost_sliders(w, tf, tb, tw, comm, fixed):
    style = {"description_width": "initial"}
    mk = lambda d, v, lo, hi, st: w.FloatSlider(value=v, min=lo, max=hi, step=st, description=d,
                                                 continuous_update=False, style=style,
                                                 layout=w.Layout(width="200px"))
    return {"tf": mk("tf", tf, 0.5, 4.0, 0.5), "tb": mk("tb", tb, 0.5, 4.0, 0.5),
            "tw": mk("tw", tw, 0.0, 2.0, 0.5), "comm": mk("comm", comm, 0.0, 1.0, 0.25),
            "fixed": mk("fixed", fixed, 0.0, 1.0, 0.25)}


def _idle_loop():
    """The event loop that runs between the kernel's messages, or None (a plain script or
    test: nothing to prefetch in). In Pyodide the browser's loop runs the callbacks."""
    import asyncio
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    if "pyodide" in sys.modules:
        return asyncio.get_event_loop()
    return None


class Prefetcher:
    """After a slider step, while the kernel waits for the next message, render the settings
    one step further and one step back on that slider into :data:`KEPT`, so the next
    keyboard step finds its picture ready (its simulation is most of a redraw). One render
    per loop turn, so a message that arrives meanwhile waits for at most one; a newer move
    cancels the rest.
    Skipped when a render is slow (a planner search): an idle kernel should stay idle."""

    SLOW_S = 0.1

    def __init__(self, render_fn, controls: dict, fixed_kw: dict):
        self.render_fn, self.controls, self.fixed_kw = render_fn, controls, fixed_kw
        self.enabled, self.generation = True, 0

    def after_move(self, change, render_s: float) -> None:
        self.generation += 1
        if not self.enabled or render_s > self.SLOW_S or not isinstance(change, dict):
            return
        owner = change.get("owner")
        name = next((k for k, c in self.controls.items() if c is owner), None)
        if name is None or not hasattr(owner, "step") or not hasattr(owner, "max"):
            return
        loop = _idle_loop()
        if loop is None:
            return
        direction = 1 if change["new"] >= change["old"] else -1
        base = {k: c.value for k, c in self.controls.items()}
        base.update(self.fixed_kw)
        todo = []
        for sign in (direction, -direction):       # onward first, then back
            value = change["new"] + sign * owner.step
            if owner.min <= value <= owner.max:
                todo.append({**base, name: type(change["new"])(value)})
        loop.call_soon(self._next, self.generation, todo, loop)

    def _next(self, generation, todo, loop) -> None:
        if generation != self.generation or not todo:
            return
        KEPT.prefetch(self.render_fn, todo.pop(0))
        if todo:
            loop.call_soon(self._next, generation, todo, loop)


def build_canvas(render_fn, controls: dict, layout_rows, fixed_kw: dict) -> Canvas:
    """Wire controls to ``render_fn(**values, **fixed_kw)`` → ``(scene, message)``; the
    pictures are kept in :data:`KEPT`, and the neighbours of a slider step are rendered
    ahead while idle (``canvas.prefetcher``)."""
    import ipywidgets as w

    from ..scene.view import SceneView
    view = SceneView()
    message = w.HTML()
    canvas = Canvas(None, controls, lambda: None, message, view=view,
                    prefetcher=Prefetcher(render_fn, controls, fixed_kw))

    def update(change=None):
        kw = {k: c.value for k, c in controls.items()}
        kw.update(fixed_kw)
        t0 = time.perf_counter()
        try:
            picture, msg = KEPT.picture(render_fn, kw)
        except Exception as e:          # a bug: say so inline, record it for the tests
            canvas.errors.append((dict(kw), repr(e)))
            picture, msg = None, f"internal error (please report): {e!r}"
        took = time.perf_counter() - t0
        canvas.last_message = msg
        view.show(picture)                      # the picture first: it is what the eye waits on
        message.value = message_html(msg, picture is not None)
        canvas.prefetcher.after_move(change, took)

    for c in controls.values():
        c.observe(update, names="value")
    canvas.update = update
    canvas.widget = w.VBox([*layout_rows, message, view])
    update()
    CANVASES.append(canvas)
    return canvas


def int_slider(description: str, value: int, bounds, width: str = "260px"):
    """An integer slider that redraws on release (``continuous_update=False``)."""
    import ipywidgets as w
    return w.IntSlider(value=value, min=bounds[0], max=bounds[1], description=description,
                       continuous_update=False, layout=w.Layout(width=width))


__all__ = ["Canvas", "CANVASES", "P_RANGE", "M_RANGE", "V_RANGE", "SCHEDULES", "summary",
           "simulate_or_message", "message_html", "note_html", "cost_sliders", "Prefetcher",
           "build_canvas", "int_slider"]
