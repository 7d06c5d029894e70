"""Lesson canvases in a real JupyterLab + headless Chromium (Playwright): lesson 04's
timeline, lesson 09's 3D configurator, lesson 00's run button.

What nbval and the headless sweeps cannot show: the widget renders in the page, moving a
slider with the keyboard redraws the figure, and an impossible combination shows its message
in place of the figure — never a traceback. Skipped (with the reason) where Debian's chromium
or playwright is missing: `apt-get install chromium` enables it.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("PPLAB_CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium to run browser tests)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api")
pytest.importorskip("pytest_playwright")

import browser_util as B

TOKEN = B.TOKEN


COMM_IDLE_JS = """() => { const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  window.__idle = 0;
  k.iopubMessage.connect((_, m) => { if (m.header.msg_type === 'status'
      && m.content.execution_state === 'idle' && m.parent_header
      && m.parent_header.msg_type === 'comm_msg') window.__idle++; }); }"""
KERNEL_EXEC_JS = B.KERNEL_EXEC_JS


def open_and_run(page, lab, name):
    panel = B.open_notebook(page, f"{lab}/lab/tree/{name}?token={TOKEN}&reset", name)
    page.evaluate(COMM_IDLE_JS)
    assert B.run_all(page), "a cell raised while running the lesson"
    return panel


def slider(canvas, label):
    return canvas.locator(".widget-slider", has=canvas.page.locator(".widget-label",
                                                                     has_text=label)).first


def settle(page, action, n=1):
    """Do ``action`` and wait until the kernel has finished handling the widget messages."""
    n0 = page.evaluate("() => window.__idle")
    action()
    page.wait_for_function("n => window.__idle >= n", arg=n0 + n, timeout=B.STEP_MS)


def figure_src(canvas):
    """Which drawing the browser-drawn picture shows ("frame N"), None while it is hidden."""
    c = canvas.locator("canvas.pplab-scene")
    if not c.count() or not c.first.evaluate("e => e.offsetParent !== null"):
        return None
    return "frame " + c.first.get_attribute("data-frame")


def walk_P(page, canvas) -> list[str]:
    """Walk P across its whole range with the keyboard, from its minimum; every value renders
    or explains, never a traceback. The readouts seen, in order."""
    handle = slider(canvas, "P").locator(".noUi-handle")
    lo = int(float(handle.get_attribute("aria-valuemin")))
    hi = int(float(handle.get_attribute("aria-valuemax")))
    if int(float(handle.get_attribute("aria-valuenow"))) != lo:
        settle(page, lambda: handle.press("Home"))
    seen = []
    for value in range(lo, hi + 1):
        seen.append(slider(canvas, "P").locator(".widget-readout").inner_text().strip())
        assert canvas.locator("[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
        if value < hi:          # at the maximum a key press changes nothing: no message to await
            settle(page, lambda: handle.press("ArrowRight"))
    assert seen == [str(v) for v in range(lo, hi + 1)]
    return seen


def test_timeline_canvas_in_a_real_browser(page, lab):
    """Lesson 04's GPipe-vs-1F1B timeline: P walked across its whole range by keyboard, each
    value drawn or explained; a key press redraws the picture; an impossible combination
    shows its message in place of the figure, and going back brings the figure back."""
    panel = open_and_run(page, lab, "04_1f1b.ipynb")
    # The GPipe-vs-1F1B canvas is the first widget box with a schedule dropdown and a P slider
    # (lesson 02's canvas offers only naive and GPipe).
    canvas = panel.locator(".widget-vbox", has=page.locator(".widget-dropdown")).first
    canvas.scroll_into_view_if_needed()
    p_handle = slider(canvas, "P").locator(".noUi-handle")
    start = p_handle.get_attribute("aria-valuenow")
    walk_P(page, canvas)
    while p_handle.get_attribute("aria-valuenow") != start:      # back to the lesson's P = 4
        settle(page, lambda: p_handle.press("ArrowLeft"))
    before = figure_src(canvas)
    assert before, "no picture drawn at P = 4"

    settle(page, lambda: p_handle.press("ArrowRight"))          # P 4 -> 5
    assert slider(canvas, "P").locator(".widget-readout").inner_text().strip() == "5"
    page.wait_for_function(
        """([sel, old]) => { const c = document.querySelector(sel);
                             return c && 'frame ' + c.dataset.frame !== old; }""",
        arg=[f"[id='{panel.get_attribute('id')}'] .widget-vbox canvas.pplab-scene", before],
        timeout=B.STEP_MS)
    assert figure_src(canvas) != before

    # An impossible combination: dualpipe needs an even P. The message replaces the figure.
    settle(page, lambda: canvas.locator(".widget-dropdown select").first.select_option("dualpipe"))
    page.wait_for_function("""(id) => document.querySelector(`[id='${id}']`).innerText
                              .includes('even number of ranks')""", arg=panel.get_attribute("id"),
                           timeout=B.STEP_MS)
    assert canvas.locator("[data-mime-type='application/vnd.jupyter.stderr']").count() == 0

    # Back to valid (P=4) by keyboard; the figure returns.
    settle(page, lambda: p_handle.press("ArrowLeft"))
    page.wait_for_function("""(id) => !document.querySelector(`[id='${id}']`).innerText
                              .includes('even number of ranks')""", arg=panel.get_attribute("id"),
                           timeout=B.STEP_MS)
    assert figure_src(canvas) is not None

    state = page.evaluate(KERNEL_EXEC_JS, "from pplab.canvases.base import CANVASES as C\n"
                          "c = [x for x in C if 'a' in x.controls][0]\n"
                          "print(c.controls['a'].value, c.controls['P'].value, c.errors)")
    assert state.split() == ["dualpipe", "4", "[]"]
    errors = page.evaluate(KERNEL_EXEC_JS, "from pplab.canvases.base import CANVASES as C\n"
                           "print(sum(len(c.errors) for c in C))")
    assert errors.strip() == "0"


def test_run_panel_button_runs_a_real_job(page, lab):
    """The welcome page's "Run for real" button, clicked in the browser, launches torchrun
    from the kernel and shows measured-over-simulated with the gradient check."""
    panel = open_and_run(page, lab, "00_setup_and_first_run.ipynb")
    button = panel.locator("button", has_text="Run for real")
    button.scroll_into_view_if_needed()
    assert button.is_enabled()
    button.click()
    pid = panel.get_attribute("id")
    page.wait_for_function("""(id) => document.querySelector(`[id='${id}']`).innerText
                              .includes('finished in')""", arg=pid, timeout=B.RUN_MS)
    text = panel.inner_text()
    assert "✓ matches" in text and "measured: makespan" in text and "simulated with the same" in text
    assert panel.locator("[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    page.wait_for_function("""(id) => { const b = [...document.querySelectorAll(`[id='${id}'] button`)]
                              .find(x => x.innerText.includes('Run for real'));
                              return b && !b.disabled; }""", arg=pid, timeout=B.STEP_MS)
    img = panel.locator(".widget-image").first
    assert img.evaluate("el => el.complete && el.naturalWidth > 0")
    state = page.evaluate(KERNEL_EXEC_JS, "from pplab.canvases.base import CANVASES as C\n"
                          "p = [x for x in C if hasattr(x, 'button')][0]\n"
                          "print(p.result.grad_max_rel_error < 1e-5, p.result.backend, p.errors)")
    assert state.split() == ["True", "gloo", "[]"]


def _dropdown(canvas, label):
    return canvas.locator(".widget-dropdown", has=canvas.page.locator("label", has_text=label)).first


def test_3d_configurator_in_a_real_browser(page, lab):
    """Lesson 09's configurator: a GPU count the degrees do not multiply to shows the rule in
    place of the figure; fixing DP brings the figure back, drawn for the new layout."""
    panel = open_and_run(page, lab, "09_3d_parallelism.ipynb")
    pid = panel.get_attribute("id")
    canvas = panel.locator(".widget-vbox", has=page.locator("label", has_text="GPUs")).first
    canvas.scroll_into_view_if_needed()
    before = figure_src(canvas)
    assert before, "no picture drawn at first"

    settle(page, lambda: _dropdown(canvas, "GPUs").locator("select").select_option("128"))
    page.wait_for_function("""(id) => document.querySelector(`[id='${id}']`).innerText
                              .includes('128 GPUs ≠ TP×PP×DP = 1×8×8 = 64')""", arg=pid,
                           timeout=B.STEP_MS)
    assert canvas.locator("[data-mime-type='application/vnd.jupyter.stderr']").count() == 0

    settle(page, lambda: _dropdown(canvas, "DP").locator("select").select_option("16"))
    page.wait_for_function("""(id) => !document.querySelector(`[id='${id}']`).innerText
                              .includes('128 GPUs ≠')""", arg=pid, timeout=B.STEP_MS)
    after = figure_src(canvas)
    assert after and after != before
    state = page.evaluate(KERNEL_EXEC_JS, "from pplab.canvases.base import CANVASES as C\n"
                          "c = [x for x in C if 'gpus' in x.controls][0]\n"
                          "print(c.controls['gpus'].value, c.controls['dp'].value, c.errors)")
    assert state.split() == ["128", "16", "[]"]
