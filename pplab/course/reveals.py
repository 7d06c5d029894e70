"""The measurement behind each prediction, shown under the question once the guess is in.

A reveal is written beside its question, in the lesson's module of ``pplab.course.bank``,
registered by question id with ``@_reveals``, and computed only when the student commits a
guess (``widgets.question_widget`` calls :func:`measurement`), so nothing on the page, not
even after Run All, shows it before. Each one recomputes its figures with the simulator (or
the runtime) and asserts the closed forms they must equal, so the course's own numbers are
checked every time a student, or the Run-All test, commits a guess. A reveal returns its text,
or a list of parts: text and pictures (a figure, a scene) shown in order.

Several questions can share one reveal (it answers them all): it is then shown under the
last of them to be committed, and the others say which question still waits. Pure Python,
like the rest of ``pplab.course``.
"""
from __future__ import annotations

from typing import Callable

_REVEALS: dict[str, Callable[[], object]] = {}
_GROUPS: dict[str, tuple[str, ...]] = {}


def _reveals(*qids: str):
    def register(fn):
        for q in qids:
            _REVEALS[q] = fn
            _GROUPS[q] = qids
        return fn
    return register


def _registered() -> dict[str, Callable[[], object]]:
    """The reveals, once the lesson modules that define them are loaded."""
    from .bank import all_questions
    all_questions()
    return _REVEALS


def reveal_ids() -> list[str]:
    """Every question id that has a measurement."""
    return list(_registered())


def group(qid: str) -> tuple[str, ...]:
    """The questions whose answers ``qid``'s measurement shows (just ``qid`` if alone)."""
    _registered()
    return _GROUPS.get(qid, (qid,))


def measurement(qid: str) -> list:
    """The parts of ``qid``'s measurement (text first, then any pictures); [] if it has none."""
    if qid not in _registered():
        return []
    out = _REVEALS[qid]()
    return [out] if isinstance(out, str) else list(out)


def measurement_text(qid: str) -> str:
    """The measurement as words only: its text parts and each picture's plain-text form."""
    return "\n".join(part if isinstance(part, str) else repr(part) for part in measurement(qid))


def reveal(*qids: str, progress=None, show: bool = False) -> None:
    """Print the measurement for ``qids`` if they were all answered (or ``show=True``).

    Lessons no longer call this: the measurement appears under the question itself once the
    guess is committed. It stays for copies of lessons saved before, and for instructors
    (``show=True``). It returns nothing, so a cell ending in it shows no ``Out[]``.
    """
    from .bank import get, renamed
    from .progress import Progress
    qids = tuple(renamed().get(q, q) for q in qids)
    unknown = [q for q in qids if q not in _registered()]
    if unknown:
        print(f"no measurement for {', '.join(unknown)}: this copy of the lesson is older than "
              f"the course.")
        return
    prog = progress or Progress()
    if show or all(prog.done(get(q)) for q in qids):
        for text in dict.fromkeys(measurement_text(qid) for qid in qids):
            print(text)
    else:
        print(f"The measurement for {', '.join(qids)} now appears under the question itself "
              f"once you commit your guess there.")
