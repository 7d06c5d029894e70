"""Run All gives nothing away, and each guess brings its own reveal (the student's view).

Each lesson runs as a student's Run All does (tests/helpers/lesson_run.py: a fresh kernel,
an empty progress file, no guess committed). Everything then on the page is read: each
output's text and HTML, figures' titles and labels, printed tables, every widget's text
(canvas messages and pictures, sliders, measurement areas). With every question still open,
none of its answer forms (tests/helpers/answer_forms.py) may appear in any output or widget
anywhere in the lesson, nor in the text around it: the cells above it and those right
under it, up to the next question or section heading (## or #). Further down, where a later
section may go on to derive its formula, the text may not state its result: its value, its
right option or its key words. Then every guess is committed through the
widget's own button: a prediction's feedback gives the answer, and a question with a
measurement shows it once, in its own area and nowhere else.

test_leaks.py searches the same runs across lessons (what earlier lessons taught).
Lessons whose fixes are pending are strict xfails (tests/helpers/course_pending.py).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from answer_forms import answer_forms, shown_settings_hits
from course_pending import lesson_params
from lesson_run import lesson_run, measured

from pplab.course.bank import LESSONS, get
from pplab.course.reveals import group, reveal_ids

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("[01][0-9]_*.ipynb"))}
#: a section's own heading ends what is read with its question; a sub-heading (###) does not:
#: the subsection's text stands beside the question on the page
SECTION = re.compile(r"\s*#{1,2}\s")
#: the forms a later section may write below an open question: it derives the formula the
#: student is asked to guess the result of; the result itself waits for the guess
DERIVED_BELOW = {"closed form", "rule"}



def _known(run):
    """The questions this run committed (ids the bank has), with their cells."""
    return [(c.cell, get(c.qid)) for c in run.commits]


def _read_with(run, cell: int) -> tuple[list, list]:
    """What a student reads with the question at ``cell`` while it is open: every output
    and widget of the lesson (Run All made them all) but the question's own (its widget, and
    the text form of it that the cell's output holds), and the
    text above it and right under it (up to the next question or section heading); and,
    apart, the text further down the page."""
    asked_cells = sorted({c.cell for c in run.commits})
    nxt = next((c for c in asked_cells if c > cell), None)
    heading = next((s.cell for s in run.page if s.cell > cell and s.kind == "markdown"
                    and SECTION.match(s.text)), None)
    until = min(c for c in (nxt, heading, 10**9) if c is not None)
    near, below = [], []
    for s in run.page:
        if s.kind in ("output", "widgets"):
            if s.cell != cell:          # the question's own cell shows only its widget
                near.append(s)
        elif s.cell < until and s.cell != cell:
            near.append(s)
        elif s.cell >= until:
            below.append(s)
    return near, below


def page_leaks(lesson: str) -> list[str]:
    run = lesson_run(NOTEBOOKS[lesson])
    found = []
    for cell, q in _known(run):
        forms = answer_forms(q)
        near, below = _read_with(run, cell)
        for s in near:
            found += _hits(q, forms, s)
            if q.mode == "predict":
                found += [f"{q.id}: closed form at a shown setting in {s.where}: {hit}"
                          for hit in shown_settings_hits(forms, s.text)]
        results = [f for f in forms if f.what not in DERIVED_BELOW]
        for s in below:
            found += _hits(q, results, s)
    return found


def _hits(q, forms, s) -> list[str]:
    """Where the seen chunk ``s`` holds one of ``forms`` of the answer to ``q``."""
    out = []
    for form in forms:
        passage = form.find(s.text)
        if passage:
            out.append(f"{q.id}: {form.what} {form.text!r} in {s.where}: …{passage}…")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("lesson", lesson_params("run-all", LESSONS))
def test_run_all_shows_no_answer_to_an_open_question(lesson):
    found = page_leaks(lesson)
    assert not found, "\n".join(found)


@pytest.mark.slow
@pytest.mark.parametrize("lesson", lesson_params("reveal-in-place", LESSONS))
def test_each_guess_brings_its_reveal_once_in_place(lesson):
    run = lesson_run(NOTEBOOKS[lesson])
    assert run.commits, f"lesson {lesson} asks nothing"
    committed = set()
    for c in run.commits:
        q = get(c.qid)
        committed.add(q.id)
        if q.mode == "predict":
            assert c.feedback.strip(), f"{q.id}: no feedback after the guess"
        if q.id not in reveal_ids() or (q.mode == "quiz" and "Right" not in c.feedback):
            continue
        if not set(group(q.id)) <= committed:
            assert any("appears under the last" in t for t in c.mine), q.id
            continue
        first = measured(q.id).strip().splitlines()[0].strip()
        mine = "\n".join(c.mine)
        assert mine.count(first) == 1, f"{q.id}: measurement shown {mine.count(first)}× in place"
        assert not any(first in t for t in c.others), f"{q.id}: measurement outside its question"


@pytest.mark.parametrize("lesson", lesson_params("explained", LESSONS))
def test_every_prediction_has_a_reveal(lesson):
    """A prediction's reveal is its feedback (the answer and why it is so) plus, where one
    is registered, its measurement."""
    from pplab.course.bank import of_lesson
    for q in (q for q in of_lesson(lesson) if q.mode == "predict"):
        assert q.explain or q.id in reveal_ids(), f"{q.id}: the answer comes with no why"


def test_every_measurement_belongs_to_a_question():
    for qid in reveal_ids():
        assert get(qid).id == qid


@pytest.mark.parametrize("lesson", lesson_params("jobs", LESSONS))
def test_a_cell_that_starts_real_processes_ends_in_one_line_where_it_cannot_run(lesson):
    """Run All also runs the cells the tests leave out (tagged ``nbval-skip``: real torchrun
    jobs). Each runs its job inside ``real_job(...)``: where the job cannot run, one line says
    why and how to run it, and the lesson goes on; in a browser tab the cell is that line."""
    import nbformat
    from cell_tags import skipped
    from pplab.probe.env import NEEDS_TORCH
    for i, cell in enumerate(nbformat.read(NOTEBOOKS[lesson], as_version=4).cells):
        if skipped(cell):
            assert "real_job(" in cell.source, f"lesson {lesson} cell {i}: not inside real_job"
            assert NEEDS_TORCH.search(cell.source), f"lesson {lesson} cell {i}"


def test_real_job_turns_a_failure_into_one_line(capsys):
    from pplab.course.jobs import real_job
    with real_job("Run it in a terminal: pplab run -P 4"):
        raise RuntimeError("rank 2 exited with code 1\nTraceback ...")
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "rank 2 exited with code 1" in out and "pplab run -P 4" in out
