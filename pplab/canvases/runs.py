"""The run panel: pick a schedule, press a button, and a real torchrun job runs it.

The logic is in plain functions that tests call without widgets:

* :func:`check_run` — build the schedule and check the tiny model can be cut that way, without
  launching anything; ``(Schedule, None)`` or ``(None, message)``.
* :func:`preview` — the message the panel shows before a run (simulated makespan and bubble
  in the same emulated seconds the real run will sleep).
* :func:`launch` — the real run; ``(RunResult, "")`` or ``(None, message)``. A ``RunError``
  (a rank raised, deadlocked, was killed, or the job timed out) becomes its message, which
  names the rank and the cause — never a traceback.
* :func:`render_result` — ``(scene, text)``: the measured timeline over the simulated one
  (``pplab.draw.scene_figure`` draws the scene) and the numbers that matter (bubble both
  ways, gradient error, backend, note).

:func:`run_panel` wires them to ipywidgets. The run happens in a background thread, so the
kernel stays responsive; the button is disabled while it runs and the progress lines the ranks
write appear under it. Importing this module does not import torch; pressing the button does.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..partition import stage_layers
from ..registry import default_V, make_schedule
from ..sim import Costs, simulate
from ..probe.env import browser_note, in_browser
from ..scene import scene, timeline_panel
from .base import CANVASES, SCHEDULES, Canvas, message_html
from .cluster_mode import ClusterMode

#: slider ranges of the run panel (a real run starts P processes: keep P small on a laptop)
RUN_P_RANGE = (1, 8)
RUN_M_RANGE = (1, 16)
RUN_V_RANGE = (1, 4)
#: emulated seconds per chunk: (min, max, step)
RUN_COST_RANGE = {"tf": (0.01, 0.2, 0.01), "tb": (0.01, 0.4, 0.01), "tw": (0.0, 0.2, 0.01)}
#: gradients match the single-process reference when the max relative error is below this
GRAD_TOLERANCE = 1e-5
#: layers of the tiny model the runtime trains (pplab.runtime.TinyConfig().layers)
TINY_LAYERS = 8


def _emulate(emulate: bool, tf, tb, tw) -> dict | None:
    return dict(tf=float(tf), tb=float(tb), tw=float(tw)) if emulate else None


def _shape(schedule, P, M, V) -> str:
    return f"{schedule} with P={P}, M={M}" + (f", V={V}" if V is not None else "")


def check_run(schedule: str = "1f1b", P: int = 4, M: int = 8, V: int | None = None,
              emulate: bool = True, tf=0.05, tb=0.1, tw=0.0, layers: int = TINY_LAYERS):
    """``(Schedule, None)`` if the combination can run, else ``(None, message)``.

    Checks what the runtime would refuse before it starts any process: the generator's rules
    (e.g. interleaved needs M a multiple of P), the costs (``tw ≤ tb``), and that the model
    has at least one layer per stage.
    """
    try:
        sched = make_schedule(schedule, int(P), int(M), None if V is None else int(V))
    except ValueError as e:
        return None, f"{_shape(schedule, P, M, V)}: {e}"
    if emulate:
        try:
            Costs(tf=float(tf), tb=float(tb), tw=float(tw))
        except ValueError as e:
            return None, f"emulated costs: {e}"
    try:
        stage_layers(sched, layers)
    except ValueError as e:
        return None, f"the tiny model: {e}"
    return sched, None


def _simulated(sched, emulate, tf, tb, tw):
    costs = Costs(**_emulate(True, tf, tb, tw)) if emulate else Costs()
    return simulate(sched, costs)


def preview(schedule: str = "1f1b", P: int = 4, M: int = 8, V: int | None = None,
            emulate: bool = True, tf=0.05, tb=0.1, tw=0.0, trace: bool = False):
    """``(None, message)``: what pressing the button would do, or why it cannot run."""
    sched, err = check_run(schedule, P, M, V, emulate, tf, tb, tw)
    if err:
        return None, err + "\n(nothing launched)"
    sim = _simulated(sched, emulate, tf, tb, tw)
    unit = " s" if emulate else " cost units (tf=1, tb=2)"
    msg = (f"ready: {sched.name} P={sched.P} M={sched.M}" + (f" V={sched.V}" if sched.V > 1 else "")
           + f" — simulated makespan {sim.makespan:.4g}{unit}, bubble {sim.bubble_fraction:.1%}"
           f" of total, {sim.bubble_ratio:.1%} of ideal.\n"
           f"'Run for real' starts {sched.P} torchrun process{'es' if sched.P > 1 else ''} "
           f"(CPU: gloo) and trains the tiny model for 2 steps.")
    if not emulate:
        msg += ("\nwithout emulated time the measured shape is mostly CPU contention and "
                "communication overhead: compare the order of ops, not the bubble")
    return None, msg


def launch(schedule: str = "1f1b", P: int = 4, M: int = 8, V: int | None = None,
           emulate: bool = True, tf=0.05, tb=0.1, tw=0.0, steps: int = 2,
           timeout: float = 120.0, progress: Callable[[str], None] | None = None,
           runner: Callable | None = None, **run_kw):
    """Run for real. ``(RunResult, "")`` on success, ``(None, message)`` when the combination
    is invalid (nothing is launched) or the run fails (the message names rank and cause).
    ``runner`` replaces ``run_schedule`` (the cluster mode's Slurm submission)."""
    sched, err = check_run(schedule, P, M, V, emulate, tf, tb, tw)
    if err:
        return None, err + "\n(nothing launched)"
    if in_browser():
        return None, browser_note(f"pplab run --schedule {schedule} -P {P} -M {M}")
    try:
        from .. import runtime as rt
    except ImportError as e:            # pragma: no cover - torch missing
        return None, f"the runtime needs PyTorch, which is not importable here: {e}"
    try:
        run = runner or rt.run_schedule
        res = run(sched, steps=steps, emulate=_emulate(emulate, tf, tb, tw), timeout=timeout,
                  progress=progress, **run_kw)
    except rt.RunError as e:
        return None, f"the real run failed: {e}"
    except ValueError as e:             # the runtime refused the arguments before launching
        return None, f"{_shape(schedule, P, M, V)}: {e}"
    return res, ""


def result_text(result, trace_path: str | None = None) -> str:
    """The numbers of a real run, one topic per line."""
    tl, sim = result.timeline, result.simulated
    s = result.schedule
    lines = [f"{s.name} P={s.P} M={s.M}" + (f" V={s.V}" if s.V > 1 else "")
             + f" on {result.backend}/{result.device}; wall {result.wall_s:.1f} s "
             f"(torchrun start-up included), step time {result.step_time_s * 1e3:.0f} ms"]
    meas = (f"measured: makespan {tl.makespan:.3f} s, bubble {tl.bubble_fraction:.1%} of total, "
            f"{tl.bubble_ratio:.1%} of ideal")
    if sim is not None:
        meas += (f" | simulated with the same costs: makespan {sim.makespan:.3f} s, bubble "
                 f"{sim.bubble_fraction:.1%} of total, {sim.bubble_ratio:.1%} of ideal")
    else:
        meas += " | no emulated time, so no simulated twin (the shape is mostly CPU contention)"
    lines.append(meas)
    err = result.grad_max_rel_error
    if err is None:
        lines.append("gradients: not checked against the single-process reference")
    else:
        ok = "✓ matches" if err < GRAD_TOLERANCE else "✗ DIFFERS from"
        lines.append(f"gradients: max relative error {err:.2e} {ok} the single-process "
                     f"reference (tolerance {GRAD_TOLERANCE:g}); loss {result.loss:.6f} vs "
                     f"reference {result.reference_loss:.6f}")
    if getattr(result, "nnodes", 1) > 1:
        from ..runtime.cluster import nodes_line
        lines.append(nodes_line(result.placement))
    lines.append(f"peak in-flight microbatches per rank {list(result.peak_inflight)}; "
                 f"peak saved-for-backward bytes per rank {list(result.peak_saved_bytes)}")
    if result.note:
        lines.append(f"note: {result.note}")
    if trace_path:
        lines.append(f"Perfetto trace written to {trace_path} (open it at ui.perfetto.dev)")
    return "\n".join(lines)


def render_result(result, trace_path: str | None = None):
    """``(scene, text)``: the simulated timeline (wide boxes) with the measured one as thin
    bars along each row, both in seconds; without emulation, the measured timeline alone.
    ``pplab.draw.scene_figure(scene)`` makes the figure. Writes a Chrome/Perfetto trace of
    the measured timeline to ``trace_path`` if given."""
    s = result.schedule
    name = f"{s.name} P={s.P} M={s.M}" + (f" V={s.V}" if s.V > 1 else "")
    if trace_path:
        from ..trace import write_chrome_trace
        write_chrome_trace(result.timeline, trace_path)
    if result.simulated is not None:
        sim, measured = result.simulated, result.timeline
        panel = timeline_panel(sim, f"{name}: simulated (boxes) vs measured (thin bars), "
                               "seconds", max(sim.makespan, measured.makespan),
                               overlay=measured)
        panel = dict(panel, xlabel="time (s)")
    else:
        panel = timeline_panel(result.timeline, f"{name}: measured (seconds)")
    return scene(panel), result_text(result, trace_path)


# ---- the widget -------------------------------------------------------------------------------
@dataclass
class RunPanel(Canvas):
    """A built run panel: a :class:`pplab.canvases.base.Canvas` (so the headless tests that walk
    ``CANVASES`` can move its controls — that only re-previews, never launches), plus the
    button, the worker thread and the last result."""
    button: Any = None
    status: Any = None
    image: Any = None
    thread: threading.Thread | None = None
    result: Any = None
    figure: Any = None
    result_message: str = ""
    progress_lines: list = field(default_factory=list)
    run_kw: dict = field(default_factory=dict)
    cluster: Any = None                  # ClusterMode: the local/cluster toggle and its job
    result_html: Any = None
    trace_path: str = "pplab-trace.json"

    def click(self) -> None:
        """What the button does (tests call it, then ``join()``)."""
        self.button.click()

    def join(self, timeout: float | None = None) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def run_args(self) -> dict:
        """The controls' values as ``launch``'s arguments."""
        return {k: c.value for k, c in self.controls.items() if k != "trace"}

    def refresh(self, *_) -> None:
        """Re-preview after a control moved; the button runs only a valid combination."""
        try:
            _, msg = preview(**self.run_args())
            msg = self.cluster.refusal(self.run_args()["P"], self.run_kw["timeout"]) or msg
            ok = msg.startswith("ready")
        except Exception as e:          # a bug: show it, record it for the tests
            self.errors.append((self.run_args(), repr(e)))
            msg, ok = f"internal error (please report): {e!r}", False
        self.last_message = msg
        self.message.value = message_html(msg, ok)
        if not self.thread or not self.thread.is_alive():
            self.button.disabled = not ok

    def _result(self, msg: str, ok: bool) -> None:
        self.result_message = msg
        self.result_html.value = message_html(msg, ok)

    def _progress(self, line: str) -> None:
        self.progress_lines.append(line)
        self.status.value = message_html(f"running… {line}", True)

    def _work(self, args: dict, trace: str | None) -> None:
        """The run itself, in the background thread."""
        from ..draw import figure_png, scene_figure
        t0 = time.monotonic()
        try:
            runner = self.cluster.run if self.cluster.on else None
            res, msg = launch(**args, progress=self._progress, runner=runner, **self.run_kw)
            if res is None:
                self.result, self.figure = None, None
                self.image.layout.display = "none"      # no stale picture under an error
                self._result(msg, False)
            else:
                picture, text = render_result(res, trace)
                fig = scene_figure(picture)
                self.result, self.figure = res, fig
                self.image.value = figure_png(fig)
                self.image.layout.display = None
                self._result(text, True)
        except Exception as e:          # a bug, not a failed run: say so, record it
            self.errors.append((args, repr(e)))
            self._result(f"internal error (please report): {e!r}", False)
        finally:
            self.status.value = message_html(f"finished in {time.monotonic() - t0:.1f} s", True)
            self.button.disabled = False
            self.button.description = "Run for real"

    def _start(self, _=None) -> None:
        """The button: check, then run in a thread (an invalid combination launches nothing)."""
        if self.thread is not None and self.thread.is_alive():
            return
        args = self.run_args()
        err = check_run(**args)[1] or self.cluster.refusal(args["P"], self.run_kw["timeout"])
        if err:
            self._result(err + "\n(nothing launched)", False)
            return
        self.button.disabled = True
        self.button.description = "running…"
        self.progress_lines.clear()
        self.status.value = message_html("submitting to Slurm…" if self.cluster.on
                                         else "starting torchrun…", True)
        self.result_html.value = ""
        trace = self.trace_path if self.controls["trace"].value else None
        self.thread = threading.Thread(target=self._work, args=(args, trace), daemon=True,
                                       name="pplab-run-panel")
        self.thread.start()


def _run_controls(w, schedule, P, M, V, emulate, tf, tb, tw, trace_path, schedules) -> dict:
    islider = lambda d, v, r: w.IntSlider(value=v, min=r[0], max=r[1], description=d,
                                           continuous_update=False,
                                           layout=w.Layout(width="240px"))
    style = {"description_width": "initial"}
    fslider = lambda d, v: w.FloatSlider(value=v, min=RUN_COST_RANGE[d][0],
                                         max=RUN_COST_RANGE[d][1], step=RUN_COST_RANGE[d][2],
                                         description=f"{d} (s)", style=style, readout_format=".2f",
                                         continuous_update=False, layout=w.Layout(width="230px"))
    return {
        "schedule": w.Dropdown(options=list(schedules), value=schedule, description="schedule",
                               layout=w.Layout(width="220px")),
        "P": islider("P", P, RUN_P_RANGE), "M": islider("M", M, RUN_M_RANGE),
        "V": islider("V", V, RUN_V_RANGE),
        "emulate": w.Checkbox(value=bool(emulate), description="emulated time", indent=False,
                              layout=w.Layout(width="130px")),
        "tf": fslider("tf", tf), "tb": fslider("tb", tb), "tw": fslider("tw", tw),
        "trace": w.Checkbox(value=False, description=f"save Perfetto trace ({trace_path})",
                            indent=False, layout=w.Layout(width="330px")),
    }


def run_panel(schedule: str = "1f1b", P: int = 4, M: int = 8, V: int | None = None,
              emulate: bool = True, tf=0.05, tb=0.1, tw=0.0, trace_path: str = "pplab-trace.json",
              schedules=SCHEDULES, timeout: float = 120.0, **run_kw) -> RunPanel:
    """Schedule dropdown, P/M/V sliders, emulated tf/tb/tw (seconds per chunk), a checkbox for
    emulated time, one for saving a Perfetto trace, and a **Run for real** button.
    In a browser tab (JupyterLite) it is one line saying why it is absent and what to run."""
    import ipywidgets as w
    if in_browser():
        note = browser_note(f"make lab, or: pplab run --schedule {schedule} -P {P} -M {M}")
        return RunPanel(w.HTML(message_html(note, True)), {}, lambda: None, last_message=note)
    V = default_V(schedule) if V is None else V
    controls = _run_controls(w, schedule, P, M, V, emulate, tf, tb, tw, trace_path, schedules)
    button = w.Button(description="Run for real", button_style="primary", icon="play",
                      layout=w.Layout(width="150px"))
    panel = RunPanel(None, controls, lambda: None, w.HTML(), button=button, status=w.HTML(),
                     image=w.Image(format="png",        # hidden until a run draws in it
                                   layout=w.Layout(max_width="100%", display="none")),
                     run_kw=dict(run_kw, timeout=timeout), cluster=ClusterMode(),
                     result_html=w.HTML(), trace_path=trace_path)
    panel.update = panel.refresh
    for c in controls.values():
        c.observe(panel.refresh, names="value")
    panel.cluster.observe(panel.refresh)
    controls["schedule"].observe(lambda ch: setattr(controls["V"], "value", default_V(ch["new"])),
                                 names="value")
    button.on_click(panel._start)
    panel.widget = w.VBox([
        w.HBox([controls["schedule"], controls["P"], controls["M"], controls["V"]]),
        w.HBox([controls["emulate"], controls["tf"], controls["tb"], controls["tw"]]),
        w.HBox([button, controls["trace"]]), panel.cluster.widget,
        panel.message, panel.status, panel.result_html, panel.image])
    panel.refresh()
    CANVASES.append(panel)
    return panel


__all__ = ["check_run", "preview", "launch", "render_result", "result_text", "run_panel",
           "RunPanel", "GRAD_TOLERANCE", "RUN_P_RANGE", "RUN_M_RANGE", "RUN_V_RANGE",
           "RUN_COST_RANGE"]
