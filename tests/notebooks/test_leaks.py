"""Nothing a student has seen before a question gives its answer away (issue 30).

Each lesson is run as a student runs it (tests/helpers/lesson_run.py: Run All in a fresh
kernel, every live widget's text read after each cell, then every question answered through
its own button; a question's feedback and measurement count as read from its cell on). For each prediction and quiz, everything seen before it — the earlier
lessons whole, and this lesson's cells above the question: markdown, code, printed and
drawn output, figure titles and labels, canvas messages and pictures, earlier questions'
feedback — is searched for the answer in every form the bank's own answer gives
(tests/helpers/answer_forms.py). No pattern is declared by hand.

Lessons whose fixes are pending are strict xfails (tests/helpers/course_pending.py).
``PPLAB_LEAK_REPORT=path`` writes every finding as JSON (the record kept in the issue);
``PPLAB_LEAK_NOTEBOOKS=folder`` runs the lessons found there instead (an older checkout's
``notebooks/``), to see what the search finds on them.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

import nbformat
import pytest
from answer_forms import answer_forms, shown_settings_hits
from course_pending import lesson_params
from lesson_run import asked, lesson_run

from pplab.course.bank import LESSONS, get

ROOT = Path(__file__).resolve().parents[2]
FOLDER = Path(os.environ.get("PPLAB_LEAK_NOTEBOOKS", ROOT / "notebooks"))
NOTEBOOKS = {p.name[:2]: p for p in sorted(FOLDER.glob("[01][0-9]_*.ipynb"))}

pytestmark = pytest.mark.slow


@lru_cache(maxsize=None)
def seen_in(lesson: str):
    """What a student has read in ``lesson`` having answered each question as they reached
    it (one Run-All run per lesson per session, shared with test_run_all.py)."""
    return tuple(lesson_run(NOTEBOOKS[lesson]).seen_with_answers())


def _asked(lesson: str) -> list[tuple[int, str]]:
    """The questions ``lesson`` asks that the bank has (an older checkout's lessons may ask
    one it dropped; the lessons' own tests require every asked id to exist)."""
    known = []
    for cell, qid in asked(nbformat.read(NOTEBOOKS[lesson], as_version=4).cells):
        try:
            get(qid)
        except ValueError:
            continue
        known.append((cell, qid))
    return known


def leaks(lesson: str) -> list[dict]:
    """Every answer form found before its question, for the questions of ``lesson``.

    A form an earlier lesson asked for (one of its questions' answer forms) is known from
    then on: a later lesson may build on it, so it is searched in this lesson only."""
    earlier = [s for other in LESSONS if other < lesson for s in seen_in(other)]
    taught = {(f.what, f.text) for other in LESSONS if other < lesson
              for _, qid in _asked(other) for f in answer_forms(get(qid))}
    here = seen_in(lesson)
    found = []
    for cell, qid in _asked(lesson):
        q = get(qid)
        forms = answer_forms(q)
        before = [s for s in here if s.cell < cell]
        for s in earlier + before:
            for form in forms:
                if s.lesson != lesson and (form.scope == "lesson"
                                           or (form.what, form.text) in taught):
                    continue
                passage = form.find(s.text)
                if passage:
                    found.append({"question": q.id, "form": form.what, "answer": form.text,
                                  "where": s.where, "passage": passage})
            mine = q.mode == "predict" and s.lesson == lesson
            for hit in shown_settings_hits(forms, s.text) if mine else ():
                found.append({"question": q.id, "form": "closed form at a shown setting",
                              "answer": hit.split(":")[0], "where": s.where,
                              "passage": hit.split(": ", 1)[1]})
    return found


def _record(lesson: str, found: list[dict]) -> None:
    path = os.environ.get("PPLAB_LEAK_REPORT")
    if not path:
        return
    report = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    report[lesson] = found
    Path(path).write_text(json.dumps(report, indent=1, ensure_ascii=False))


@pytest.mark.parametrize("lesson", lesson_params("leaks", LESSONS))
def test_nothing_seen_before_a_question_gives_its_answer(lesson):
    found = leaks(lesson)
    _record(lesson, found)
    assert not found, "\n".join(f"{f['question']}: {f['form']} {f['answer']!r} in {f['where']}:"
                                f" …{f['passage']}…" for f in found)
