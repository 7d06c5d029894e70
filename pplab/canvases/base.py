"""What every canvas shares: the ``Canvas`` record, the registry of built canvases, the
build-and-redraw loop, and turning bad input into the library's own message.

A canvas is ipywidgets + a picture drawn in the browser (:class:`~pplab.scene.view.SceneView`
fed a scene from :mod:`pplab.scene`; no matplotlib, so it keeps up with a slider and runs in
JupyterLite). The work is done by plain ``render_*`` functions that return
``(picture_or_None, message)`` and never raise for bad input: an impossible combination (say
``interleaved`` with M not a multiple of P) comes back as ``(None, "the generator's
explanation")``. ``draw="scene"`` gives the scene the canvas shows, ``draw=True`` the same
picture as a matplotlib Figure (exports), ``draw=False`` only the message. Tests sweep those
functions over every slider value without a browser; the widgets only wire them up.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from ..registry import make_schedule, names
from ..sim import Costs, simulate
from ..text import metrics_line, per_rank

#: slider ranges shared by the canvases and the tests that sweep them: up to a 64-rank
#: pipeline with 256 microbatches (the fast executor, pplab/sim/fast.py, makes that
#: usable; docs/DESIGN.md has the redraw times at the far end)
P_RANGE = (1, 64)
M_RANGE = (1, 256)
V_RANGE = (1, 4)
SCHEDULES = names(canvas="timeline")


def summary(tl, one_line: bool = False) -> str:
    """Makespan, bubble both ways, per-rank peak in-flight (a simulated timeline's peaks are
    kept with the schedule's plan: a cost slider does not redo them): one line, or from
    P = 17 on the peaks below it, 16 ranks a line (``text.per_rank``); ``one_line``: there,
    the largest and the smallest peak instead (a canvas that draws the peaks as bars)."""
    peaks = tl.peak_inflight
    listed = per_rank(peaks)
    if "\n" not in listed:
        return f"{metrics_line(tl)}; peak in-flight per rank {listed}"
    if one_line:
        top, low = max(peaks), min(peaks)
        return (f"{metrics_line(tl)}; peak in-flight per rank from {top} (rank "
                f"{peaks.index(top)}) to {low} (rank {peaks.index(low)})")
    return f"{metrics_line(tl)}; peak in-flight per rank:\n{listed}"


@lru_cache(maxsize=4)
def kept_schedule(name: str, P: int, M: int, V: int | None):
    """The last few schedules the canvases built: a slider moving back and forth, a cost
    slider, or the prefetched neighbours reuse one (and the simulator's compiled plan on
    it) instead of building ~100 000 actions again at P=64, M=256."""
    return make_schedule(name, P, M, V)


def _costs(tf, tb, tw, comm, fixed) -> Costs:
    return Costs(tf=float(tf), tb=float(tb), tw=float(tw), comm=float(comm), fixed=float(fixed))


def simulate_or_message(schedule: str, P: int, M: int, V: int | None = None, tf=1.0, tb=2.0,
                        tw=0.0, comm=0.0, fixed=0.0):
    """(Timeline, None) or (None, message) — bad input becomes the library's own words."""
    try:
        sched = kept_schedule(schedule, int(P), int(M), None if V is None else int(V))
        return simulate(sched, _costs(tf, tb, tw, comm, fixed)), None
    except ValueError as e:           # ScheduleError, DeadlockError and bad costs are ValueErrors
        return None, f"{schedule} with P={P}, M={M}" + (f", V={V}" if V is not None else "") \
            + f": {e}"


def timeline_over_panel(tl, P: int, bottom_pad: float = 0.45, hspace: float = 0.6):
    """A figure with the timeline on top and an empty panel below it for a second plot."""
    from ..draw.figure import DisplayFigure

    from ..draw import draw_timeline
    rows = [1.0 + 0.4 * P, 2.6]
    fig = DisplayFigure(figsize=(10, sum(rows)))
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": rows})
    fig.subplots_adjust(left=0.075, right=0.77, top=1 - 0.55 / sum(rows),
                        bottom=bottom_pad / sum(rows), hspace=hspace)
    draw_timeline(tl, ax=top)
    return fig, top, bottom


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
    view: Any = None            # the SceneView the picture is drawn in (None: Output only)
    cache: Any = None           # the RenderCache of recent pictures
    prefetcher: Any = None      # renders a slider step's neighbours while the kernel idles

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)


#: every canvas built in this kernel, newest last (the headless tests walk it)
CANVASES: list[Canvas] = []


def show_figure(out, fig):
    from IPython.display import display
    with out:
        out.clear_output(wait=True)
        if fig is not None:
            display(fig)


def show_picture(view, out, picture):
    """A scene (dict) goes to the browser-drawn view; a Figure (older canvases) to ``out``."""
    if isinstance(picture, dict) or picture is None:
        view.show(picture)
    if isinstance(picture, dict):
        return
    if picture is not None or out.outputs:
        show_figure(out, picture)


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


class RenderCache:
    """The last few ``render_fn`` results by their arguments: sliding back to a setting
    seen a moment ago redraws without simulating again. The render functions are pure
    (same arguments, same picture), so a cached picture is the one a fresh call makes.

    ``prefetch(**kw)`` renders a setting ahead of time into ``ahead`` (a few entries); the
    next call with those arguments takes it from there. ``size=0`` keeps nothing once shown
    (every move a first visit), though a prefetched picture is still used once.
    """

    AHEAD = 4

    def __init__(self, render_fn, size: int = 32):
        self.render_fn, self.size, self.entries, self.ahead = render_fn, size, {}, {}
        self.served = {"fresh": 0, "cached": 0, "prefetched": 0}

    @staticmethod
    def _key(kw):
        key = tuple(sorted(kw.items()))
        try:
            hash(key)
        except TypeError:                       # an unhashable argument: no caching
            return None
        return key

    def __call__(self, **kw):
        key = self._key(kw)
        if key is None:
            return self.render_fn(**kw)
        if key in self.ahead:
            result, how = self.ahead.pop(key), "prefetched"
        elif key in self.entries:
            result, how = self.entries.pop(key), "cached"
        else:
            result, how = self.render_fn(**kw), "fresh"
        self.served[how] += 1
        if self.size > 0:
            self.entries[key] = result                        # most recent last
            if len(self.entries) > self.size:
                self.entries.pop(next(iter(self.entries)))
        return result

    def prefetch(self, **kw) -> None:
        """Render ``kw`` now unless it is already at hand; a failure is left for the real
        call to report."""
        key = self._key(kw)
        if key is None or key in self.entries or key in self.ahead:
            return
        try:
            self.ahead[key] = self.render_fn(**kw)
        except Exception:
            return
        if len(self.ahead) > self.AHEAD:
            self.ahead.pop(next(iter(self.ahead)))


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
    one step further and one step back on that slider, so the next keyboard step finds its
    picture ready (its simulation is most of a redraw). One render per loop turn, so a
    message that arrives meanwhile waits for at most one; a newer move cancels the rest.
    Skipped when a render is slow (a planner search): an idle kernel should stay idle."""

    SLOW_S = 0.1

    def __init__(self, cache: RenderCache, controls: dict, fixed_kw: dict):
        self.cache, self.controls, self.fixed_kw = cache, controls, fixed_kw
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
        self.cache.prefetch(**todo.pop(0))
        if todo:
            loop.call_soon(self._next, generation, todo, loop)


def build_canvas(render_fn, controls: dict, layout_rows, fixed_kw: dict,
                 cache_size: int = 32) -> Canvas:
    """Wire controls to ``render_fn(**values, **fixed_kw)`` → ``(picture, message)``;
    the last ``cache_size`` results are kept (``canvas.cache``; 0 turns it off) and the
    neighbours of a slider step are rendered ahead while idle (``canvas.prefetcher``)."""
    import ipywidgets as w

    from ..scene.view import SceneView
    out = w.Output()
    view = SceneView()
    message = w.HTML()
    canvas = Canvas(None, controls, lambda: None, message)
    canvas.view = view
    canvas.cache = RenderCache(render_fn, cache_size)
    canvas.prefetcher = Prefetcher(canvas.cache, controls, fixed_kw)

    def update(change=None):
        kw = {k: c.value for k, c in controls.items()}
        kw.update(fixed_kw)
        t0 = time.perf_counter()
        try:
            fig, msg = canvas.cache(**kw)
        except Exception as e:          # a bug: say so inline, record it for the tests
            canvas.errors.append((dict(kw), repr(e)))
            fig, msg = None, f"internal error (please report): {e!r}"
        took = time.perf_counter() - t0
        canvas.last_message = msg
        show_picture(view, out, fig)            # the picture first: it is what the eye waits on
        message.value = message_html(msg, fig is not None)
        canvas.prefetcher.after_move(change, took)

    for c in controls.values():
        c.observe(update, names="value")
    canvas.update = update
    canvas.widget = w.VBox([*layout_rows, message, view, out])
    update()
    CANVASES.append(canvas)
    return canvas


def int_slider(description: str, value: int, bounds, width: str = "260px"):
    """An integer slider that redraws on release (``continuous_update=False``)."""
    import ipywidgets as w
    return w.IntSlider(value=value, min=bounds[0], max=bounds[1], description=description,
                       continuous_update=False, layout=w.Layout(width=width))


__all__ = ["Canvas", "CANVASES", "P_RANGE", "M_RANGE", "V_RANGE", "SCHEDULES", "summary",
           "simulate_or_message", "timeline_over_panel", "show_figure", "show_picture",
           "message_html", "cost_sliders", "RenderCache", "Prefetcher", "build_canvas",
           "int_slider"]
