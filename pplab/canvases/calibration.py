"""Lesson 10's calibration button: measure a few real runs on this machine, fit the
simulator's costs to them (``pplab calibrate``), and show measured against simulated
makespans with the errors before and after.

A measurement takes a minute and its numbers change from one run to the next, so it happens
only on a click, in a background thread: a notebook's committed output holds the button, not
timings. :func:`calibration_report` is the work without widgets (tests call it). Importing
this module does not import torch; pressing the button does.
"""
from __future__ import annotations

import os
import statistics
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..probe.env import browser_note, in_browser
from .base import message_html

#: what the button measures by default: the four the fit needs plus two it predicts
SCHEDULES = ("1f1b", "interleaved", "zbv", "naive", "gpipe", "dualpipev")
FIT_ON = ("1f1b", "interleaved", "zbv", "naive")


def calibration_report(names: Sequence[str] = SCHEDULES, P: int = 2, M: int = 8,
                       repeats: int = 5, fit_on: Sequence[str] = FIT_ON,
                       statistic: str = "min",
                       progress: Callable[[str], None] | None = None) -> str:
    """Measure ``names`` (``repeats`` runs each), fit on ``fit_on``, and return the table of
    measured vs simulated makespans with the fitted costs and the machine's load."""
    from ..sim.calibrate import costs_to_dict
    from ..runtime.calibration import calibrate, comparison, measure, table_text
    load = os.getloadavg()[0]
    measured = measure(list(names), P, M, repeats=repeats, progress=progress)
    costs, cores = calibrate(measured, list(fit_on), statistic=statistic)
    rows = comparison(measured, costs, cores, statistic=statistic)
    errs = [abs(r["calibrated_error"]) for r in rows]
    fitted = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in costs_to_dict(costs).items())
    return (f"P = {P}, M = {M}, {repeats} runs each; ranks sharing "
            f"{'%.2g' % cores if cores else 'no'} cores (effectively); "
            f"load average {load:.1f} → {os.getloadavg()[0]:.1f}\n"
            f"fitted on {', '.join(fit_on)}: {fitted}\n\n{table_text(rows)}\n\n"
            f"calibrated |error|: median {statistics.median(errs):.1%}, "
            f"max {max(errs):.1%}, ≤ 10 % on {sum(e <= 0.10 for e in errs)}/{len(errs)}")


@dataclass
class CalibrationPanel:
    """The button, its status line and the report; ``click()`` + ``join()`` for tests."""
    widget: Any
    button: Any = None
    status: Any = None
    report: Any = None
    kw: dict = field(default_factory=dict)
    ranks: Any = None               # the P chooser: 2 (a core each here) or 4 (two per core)
    thread: threading.Thread | None = None
    text: str = ""

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)

    def click(self) -> None:
        self.button.click()

    def join(self, timeout: float | None = None) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def _work(self) -> None:
        try:
            kw = dict(self.kw, P=self.ranks.value) if self.ranks is not None else self.kw
            self.text = calibration_report(progress=self._progress, **kw)
            self.report.value = f"<pre>{self.text}</pre>"
            self.status.value = message_html("done", True)
        except Exception as e:          # a failed run names its rank and cause: show it
            self.text = f"calibration failed: {e}"
            self.status.value = message_html(self.text, False)
        finally:
            self.button.disabled = False

    def _progress(self, line: str) -> None:
        self.status.value = message_html(f"running… {line}", True)

    def _start(self, _=None) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        self.button.disabled = True
        self.status.value = message_html("starting torchrun…", True)
        self.thread = threading.Thread(target=self._work, daemon=True,
                                       name="pplab-calibration")
        self.thread.start()


def calibration_panel(**kw) -> CalibrationPanel:
    """A **Measure and calibrate** button with a P chooser (2 or 4: one core per rank on a
    two-core laptop, or two ranks per core; arguments as :func:`calibration_report`, ``P``
    the chooser's start). In a browser tab it is one line saying why it is absent and what
    to run instead."""
    import ipywidgets as w
    if in_browser():
        note = browser_note("make lab, or: pplab calibrate -P 2 --table")
        return CalibrationPanel(w.HTML(message_html(note, True)), text=note)
    button = w.Button(description="Measure and calibrate", button_style="primary",
                      icon="play", layout=w.Layout(width="220px"))
    P = kw.pop("P", 2)
    ranks = w.ToggleButtons(options=sorted({2, 4, P}), value=P, description="P",
                            tooltips=["ranks (processes) to measure and fit at"] * 3,
                            style={"button_width": "48px"})
    panel = CalibrationPanel(None, button, w.HTML(), w.HTML(), kw, ranks)
    button.on_click(panel._start)
    panel.widget = w.VBox([w.HBox([ranks, button]), panel.status, panel.report])
    return panel
