"""Every lesson's predictions and quizzes, by id (``"03.smallest-m"``: lesson 03).

One module per lesson; each defines ``QUESTIONS`` and, beside them, the measurements their
commits reveal (``@_reveals``, :mod:`pplab.course.reveals`). Measured answers are callables
into the simulator, so they cannot drift from what the measurement shows.

A lesson module may also define ``RENAMED = {"old id": "new id"}`` when a question's id
changes: an old notebook that still asks for the old id gets the question, and a progress
file that recorded the old id counts it for the new one (:mod:`pplab.course.progress`).
"""
from __future__ import annotations

from importlib import import_module

LESSONS = tuple(f"{n:02d}" for n in range(15))
_CACHE: dict = {}
_RENAMED: dict = {}


def _load() -> dict:
    if not _CACHE:
        for lesson in LESSONS:
            module = import_module(f"{__name__}.l{lesson}")
            for q in module.QUESTIONS:
                if q.id in _CACHE or q.lesson != lesson:
                    raise ValueError(f"question id {q.id!r} is duplicated or in the wrong lesson")
                _CACHE[q.id] = q
            _RENAMED.update(getattr(module, "RENAMED", {}))
        for old, new in _RENAMED.items():
            if old in _CACHE or new not in _CACHE:
                raise ValueError(f"renamed id {old!r} -> {new!r}: the old id is still in use "
                                 f"or the new one does not exist")
    return _CACHE


def renamed() -> dict:
    """Old question ids and the ids they now go by."""
    _load()
    return dict(_RENAMED)


def get(qid: str):
    """The question with id ``qid`` (or the id it was renamed to); an unknown id is a
    one-line ValueError."""
    questions = _load()
    try:
        return questions[_RENAMED.get(qid, qid)]
    except KeyError:
        raise ValueError(f"no question {qid!r} in pplab.course.bank") from None


def all_questions() -> list:
    return list(_load().values())


def of_lesson(lesson: str) -> list:
    return [q for q in _load().values() if q.lesson == lesson]
