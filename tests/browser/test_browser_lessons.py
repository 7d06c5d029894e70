"""A lesson in real JupyterLab + Debian's Chromium, read as a student sees it: Run All with an
empty progress file gives no answer away (every reveal area empty, the first prediction's
answer nowhere on the page); committing that guess in the page fills its reveal area, once.
Then: no error output; every cell that draws a pplab figure shows it as a picture (never the
Figure's text); every browser-drawn canvas redraws when its sliders go to their ends
(screenshots of both ends go to build/shots/ for a human to look at) and draws exactly the
scene the kernel sent; every prediction and quiz widget accepts an answer and gives feedback.

One lesson (03) by default: what the browser proves is the page, the widgets and scene.js,
not each lesson's content, which the kernel-side tests execute (tests/notebooks/, nbval).
``PPLAB_BROWSER_LESSONS=all`` (or ``03,05``) drives more, in JupyterLab and JupyterLite.
Cells tagged as real jobs are blanked in the served copy: the real runs are tested by
tests/runtime/ and the run panel's button by tests/browser/test_browser.py.
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


def lessons() -> list[Path]:
    """The lessons to drive: ``PPLAB_BROWSER_LESSONS`` ("all", or numbers "03,05"); 03."""
    want = os.environ.get("PPLAB_BROWSER_LESSONS", "03")
    if want == "all":
        return B.LESSONS
    picked = [p for p in B.LESSONS if p.name[:2] in want.split(",")]
    assert picked, f"PPLAB_BROWSER_LESSONS={want!r} names no lesson"
    return picked


LESSONS = lessons()
#: lesson 03's first prediction and what its measurement says (its answer's forms)
FIRST = "03.gpipe-bubble"
ANSWER_FORMS = ("33.3%", "makespan 27")
REVEAL_TEXT = "makespan 27; bubble 33.3% of the total"


def check_nothing_given_away(page, panel) -> None:
    """After Run All with no guess committed: every ``.pplab-reveal`` is empty and the first
    prediction's answer is not on the page; committing the right guess through the page's
    own input and button fills that question's reveal, once, and no other."""
    reveals = panel.locator(".pplab-reveal")
    assert reveals.count() == panel.locator(".pplab-question").count() > 0
    filled = [i for i, text in enumerate(reveals.all_inner_texts()) if text.strip()]
    assert not filled, f"reveal areas with content before any guess: {filled}"
    text = panel.inner_text()
    for form in ANSWER_FORMS:
        assert form not in text, f"{form!r} is on the page before the guess is committed"
    q = panel.locator(".pplab-question", has_text=FIRST)
    assert q.count() == 1, f"{FIRST} is not on the page once"
    q.scroll_into_view_if_needed()
    box = q.locator(".pplab-answer").locator("input, textarea").first
    box.fill("33.3")
    box.dispatch_event("change")
    check = q.locator(".pplab-check")
    (check.locator("button").first if check.locator("button").count() else check).click()
    page.wait_for_function("([q, t]) => q.querySelector('.pplab-reveal').innerText.includes(t)",
                           arg=[q.element_handle(), REVEAL_TEXT], timeout=B.STEP_MS)
    page.wait_for_timeout(500)                  # a second copy would arrive by now
    assert panel.inner_text().count(REVEAL_TEXT) == 1
    filled = [t for t in reveals.all_inner_texts() if t.strip()]
    assert len(filled) == 1 and REVEAL_TEXT in filled[0], filled


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
                           arg=[panel.element_handle(), expected], timeout=B.STEP_MS)
    roots = B.canvas_roots(panel)
    moves = 0
    for i, root in enumerate(roots):
        root.scroll_into_view_if_needed()
        moves += B.sweep_extremes(page, root, f"{shot}_canvas{i}")
    kernel_scenes = json.loads(B.kernel_exec(page, SCENES_PY) or "[]")
    for root in roots:                  # the kernel has handled every move; the last redraw
        assert B.poll(lambda: B.drawn_scene(root) in kernel_scenes), \
            "the browser drew a scene the kernel did not send"
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


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_in_jupyterlab(page, lab, lesson):
    panel = B.open_notebook(page, f"{lab}/lab/tree/{lesson.name}?token={B.TOKEN}&reset",
                            lesson.name)
    assert B.run_all(page), "run-all reported a failed cell"
    page.wait_for_timeout(500)
    if lesson.name.startswith("03_"):
        check_nothing_given_away(page, panel)
    summary = check_lesson(page, panel, f"lab_{lesson.stem}", lesson)
    if summary["canvases"]:
        assert summary["moves"] > 0, "no slider moved on any canvas"
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
