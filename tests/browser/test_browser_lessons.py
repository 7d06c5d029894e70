"""Every lesson in real JupyterLab + Debian's Chromium: it runs top to bottom without an error
output; every cell that draws a pplab figure shows it as a picture (issue 30: never the
Figure's text); every browser-drawn canvas redraws when its sliders go to their ends (screenshots of
both ends go to build/shots/ for a human to look at) and draws exactly the scene the kernel
sent; every prediction and quiz widget accepts an answer and gives feedback.

Cells marked ``# NBVAL_SKIP`` (real torchrun jobs) are blanked in the served copy: the real
runs are tested by tests/runtime/ and the run panel's button by
tests/browser/test_browser.py.
Skipped with the reason where Chromium or Playwright is missing.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import browser_util as B

if not Path(B.CHROMIUM).exists():
    pytest.skip(f"no Chromium at {B.CHROMIUM} (apt-get install chromium to run browser tests)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api")
pytest.importorskip("pytest_playwright")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab():
    with B.jupyter_lab(B.ROOT / "notebooks") as url:
        yield url


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": B.CHROMIUM, "args": B.ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1400, "height": 1000}}


SCENES_PY = ("import json\nfrom pplab.canvases.base import CANVASES as _C\n"
             "print(json.dumps([c.view.scene for c in _C if getattr(c, 'view', None)]))")
ERRORS_PY = ("from pplab.canvases.base import CANVASES as _C\n"
             "print(sum(len(c.errors) for c in _C))")


def check_lesson(page, panel, shot: str, lesson=None) -> dict:
    """The checks shared by JupyterLab and JupyterLite: no error outputs, a picture for
    every drawing cell, every canvas moves to its extremes and redraws, the drawn scenes are
    the kernel's, questions answer."""
    errors = B.error_outputs(page, panel)
    assert not errors, errors
    drawing = B.drawing_cells(lesson) if lesson is not None else []
    shown = B.pictures_shown(page, panel, drawing)
    assert all(n >= 1 for n in shown.values()), f"drawing cells without a picture: {shown}"
    _record_pictures(shot, len(drawing), sum(n >= 1 for n in shown.values()))
    expected = len(json.loads(B.kernel_exec(page, SCENES_PY) or "[]"))
    page.wait_for_function("([p, n]) => p.querySelectorAll('.widget-vbox canvas.pplab-scene')"
                           ".length >= n",
                           arg=[panel.element_handle(), expected], timeout=60_000)
    roots = B.canvas_roots(panel)
    moves = 0
    for i, root in enumerate(roots):
        root.scroll_into_view_if_needed()
        moves += B.sweep_extremes(page, root, f"{shot}_canvas{i}")
    kernel_scenes = json.loads(B.kernel_exec(page, SCENES_PY) or "[]")
    for root in roots:
        drawn = B.drawn_scene(root)
        assert drawn in kernel_scenes, "the browser drew a scene the kernel did not send"
    assert B.kernel_exec(page, ERRORS_PY).strip() == "0"
    questions = B.answer_questions(page, panel)
    assert not B.error_outputs(page, panel)
    return {"canvases": len(roots), "moves": moves, "questions": questions,
            "pictures": sum(n >= 1 for n in shown.values())}


def _record_pictures(shot: str, cells: int, pictures: int) -> None:
    """``PPLAB_PICTURE_REPORT=path``: per lesson, drawing cells and those showing a picture."""
    path = os.environ.get("PPLAB_PICTURE_REPORT")
    if path:
        report = json.loads(Path(path).read_text()) if Path(path).exists() else {}
        report[shot] = {"drawing cells": cells, "pictures shown": pictures}
        Path(path).write_text(json.dumps(report, indent=1))


@pytest.mark.parametrize("lesson", B.LESSONS, ids=[p.stem for p in B.LESSONS])
def test_lesson_in_jupyterlab(page, lab, lesson):
    panel = B.open_notebook(page, f"{lab}/lab/tree/{lesson.name}?token={B.TOKEN}&reset",
                            lesson.name)
    assert B.run_all(page), "run-all reported a failed cell"
    page.wait_for_timeout(500)
    summary = check_lesson(page, panel, f"lab_{lesson.stem}", lesson)
    if summary["canvases"]:
        assert summary["moves"] > 0, "no slider moved on any canvas"
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
