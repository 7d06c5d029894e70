"""Every lesson's predictions and quizzes, by id (``"03.smallest-m"``: lesson 03).

One module per lesson; each defines ``QUESTIONS``. Measured answers are callables into the
simulator, so they cannot drift from what the lesson's reveal cell shows.
"""
from __future__ import annotations

from importlib import import_module

LESSONS = tuple(f"{n:02d}" for n in range(15))
_CACHE: dict = {}


def _load() -> dict:
    if not _CACHE:
        for lesson in LESSONS:
            for q in import_module(f"{__name__}.l{lesson}").QUESTIONS:
                if q.id in _CACHE or q.lesson != lesson:
                    raise ValueError(f"question id {q.id!r} is duplicated or in the wrong lesson")
                _CACHE[q.id] = q
    return _CACHE


def get(qid: str):
    """The question with id ``qid``; an unknown id is a one-line ValueError."""
    try:
        return _load()[qid]
    except KeyError:
        raise ValueError(f"no question {qid!r} in pplab.course.bank") from None


def all_questions() -> list:
    return list(_load().values())


def of_lesson(lesson: str) -> list:
    return [q for q in _load().values() if q.lesson == lesson]
