"""A question, how a typed answer is read, and how it is graded.

Three kinds: ``number`` (a value with a tolerance, and typical wrong values that get their
own feedback), ``choice`` (options, each with feedback) and ``order`` (a small grid: one line
of actions per rank, compared with a schedule). ``mode`` says whether it is a prediction —
graded once and then revealed with the measurement and an explanation — or a quiz, which
keeps giving feedback until the answer is right.
"""
from __future__ import annotations

import getpass
import hashlib
import os
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable, Sequence

MODES = ("predict", "quiz")
KINDS = ("number", "choice", "order")


@dataclass(frozen=True)
class Option:
    """One choice; ``feedback`` says why it is right or what it confuses."""
    text: str
    feedback: str
    correct: bool = False


@dataclass(frozen=True)
class Question:
    """One predict-then-check moment or quiz question.

    ``answer`` is a number, or for ``order`` a list of rank rows; a callable is evaluated on
    demand, so a measured answer (the simulator's) is computed, not typed in. ``traps`` maps
    typical wrong numbers to what they confuse. ``explain`` is shown with the reveal.
    """
    id: str
    mode: str
    kind: str
    prompt: str
    answer: Any = None
    options: Sequence[Option] = ()
    tol: float = 0.02
    unit: str = ""
    traps: Sequence[tuple[float, str]] = ()
    explain: str = ""
    source: str = "the simulator"
    hint: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.mode not in MODES or self.kind not in KINDS:
            raise ValueError(f"{self.id}: mode must be one of {MODES}, kind one of {KINDS}")
        if self.kind == "choice" and sum(o.correct for o in self.options) != 1:
            raise ValueError(f"{self.id}: a choice question needs exactly one correct option")

    @property
    def lesson(self) -> str:
        return self.id.split(".", 1)[0]

    def value(self):
        """The answer, computed now if it is a measurement."""
        if self.kind == "choice":
            return next(o.text for o in self.options if o.correct)
        return self.answer() if callable(self.answer) else self.answer


def student_identity() -> str:
    """Who is answering: JupyterHub's user name, else the login name (the same on every
    run, so a student's shuffled options do not move between sessions)."""
    who = os.environ.get("JUPYTERHUB_USER")
    if who:
        return who
    try:
        return getpass.getuser()
    except Exception:                # no user database (some containers, the browser)
        return "student"


def _seed(who: str, qid: str) -> bytes:
    return hashlib.sha256(f"{who}\0{qid}".encode()).digest()


@lru_cache(maxsize=256)
def right_positions(who: str) -> dict[str, int]:
    """Where this student finds the right option of each choice question in the bank.

    The positions are dealt so that each student's right answers spread evenly: lesson by
    lesson (within a lesson in an order of the student's own), each question puts its right
    option where the student's count lags its fair share most (ties broken by the student's
    hash). A question added later moves only the positions of its lesson and the later ones.
    """
    from .bank import all_questions
    choices = sorted((q for q in all_questions() if q.kind == "choice"),
                     key=lambda q: (q.lesson, _seed(who, q.id)))
    held, fair, out = Counter(), Counter(), {}
    for q in choices:
        k, seed = len(q.options), _seed(who, q.id)
        for j in range(k):
            fair[j] += 1 / k
        out[q.id] = max(range(k), key=lambda j: (round(fair[j] - held[j], 9), seed[j]))
        held[out[q.id]] += 1
    return out


def shown_options(q: Question, who: str | None = None) -> list[Option]:
    """``q``'s options in the order this student sees them: the right one where
    :func:`right_positions` deals it, the others shuffled by a hash of the student and the
    question, so the position of the right answer tells nothing, yet stays put when the
    student reopens the lesson."""
    who = student_identity() if who is None else who
    options = list(q.options)
    random.Random(_seed(who, q.id)).shuffle(options)
    at = right_positions(who).get(q.id)
    if at is not None and at < len(options):
        right = next(o for o in options if o.correct)
        options.remove(right)
        options.insert(at, right)
    return options


@dataclass(frozen=True)
class Result:
    """The outcome of one check: right or not, what to tell the student, the value read."""
    ok: bool
    feedback: str
    read: Any = None
    reveal: bool = False


_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?"


def parse_number(text: str, unit: str = "") -> float:
    """Read ``46.7``, ``46.7%``, ``7/15``, ``1e-3`` or ``2,048``; ValueError names the problem.

    With ``unit == "%"`` a fraction like ``7/15`` is turned into a percentage.
    """
    s = str(text).strip().lower().replace(",", "").replace("−", "-").replace(" ", "")
    if not s:
        raise ValueError("type a number first")
    pct = s.endswith("%")
    s = s.rstrip("%")
    m = re.fullmatch(rf"({_NUM})/({_NUM})", s)
    if m:
        if float(m.group(2)) == 0:
            raise ValueError("division by zero")
        x = float(Fraction(m.group(1)) / Fraction(m.group(2)))
        return x * 100 if unit == "%" and not pct else x
    if not re.fullmatch(_NUM, s):
        raise ValueError(f"could not read {text!r} as a number (try 0.25, 25% or 1/4)")
    return float(s)


_ACTION = re.compile(r"^(\d*)([FBIW])(\d+)$")


def parse_order(text: str) -> list[list[str]]:
    """One row per non-empty line: ``rank 0: F0 F1 B0`` → ``["F0", "F1", "B0"]``.

    A stage number in front (``0F1``) is dropped: the grid asks for the order on each rank.
    """
    rows = []
    for line in str(text).strip().splitlines():
        line = re.sub(r"^\s*(rank\s*)?\d+\s*:", "", line.strip(), flags=re.I)
        if not line.strip():
            continue
        row = []
        for tok in re.split(r"[\s,;]+", line.strip().upper()):
            m = _ACTION.match(tok)
            if not m:
                raise ValueError(f"could not read {tok!r}: write actions like F0, B3 (or W2)")
            row.append(m.group(2) + m.group(3))
        rows.append(row)
    if not rows:
        raise ValueError("write one line of actions per rank first")
    return rows


def close(a: float, b: float, tol: float) -> bool:
    """Relative tolerance, with an absolute floor for answers near zero."""
    return abs(a - b) <= tol * max(abs(b), 1e-9) or abs(a - b) <= 1e-9


def fmt(x: float, unit: str = "") -> str:
    """A number as the feedback prints it."""
    text = f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"
    return text + unit if unit == "%" else (f"{text} {unit}".strip())


def _grade_number(q: Question, text: str) -> Result:
    got = parse_number(text, q.unit)
    want = q.value()
    if close(got, want, q.tol):
        return Result(True, f"Right: {q.source} gives {fmt(want, q.unit)}. {q.explain}", got, True)
    trap = next((fb for v, fb in q.traps if close(got, v, q.tol)), None)
    if q.mode == "predict":
        note = trap or f"You said {fmt(got, q.unit)}."
        return Result(False, f"{note} {q.source.capitalize()} gives {fmt(want, q.unit)}. "
                             f"{q.explain}", got, True)
    return Result(False, trap or ("Not yet. " + (q.hint or "Check the formula's denominator.")),
                  got)


def _grade_choice(q: Question, text) -> Result:
    texts = [o.text for o in q.options]
    if text is None or text not in texts:
        raise ValueError("pick one option first")
    opt = q.options[texts.index(text)]
    if opt.correct:
        return Result(True, f"Right. {opt.feedback} {q.explain}".strip(), text, True)
    if q.mode == "predict":
        return Result(False, f"{opt.feedback} The answer: {q.value()}. {q.explain}".strip(),
                      text, True)
    return Result(False, opt.feedback, text)


def _first_difference(got: list[list[str]], want: list[list[str]]) -> str | None:
    if len(got) != len(want):
        return f"the grid has {len(want)} ranks, you wrote {len(got)} rows"
    for r, (g, w) in enumerate(zip(got, want)):
        for i, (a, b) in enumerate(zip(g, w)):
            if a != b:
                return f"rank {r}, action {i + 1}: you wrote {a}, the schedule runs {b}"
        if len(g) != len(w):
            return f"rank {r} runs {len(w)} actions, you wrote {len(g)}"
    return None


def _grade_order(q: Question, text: str) -> Result:
    got, want = parse_order(text), q.value()
    diff = _first_difference(got, want)
    grid = "<br>".join(f"rank {r}: " + " ".join(row) for r, row in enumerate(want))
    if diff is None:
        return Result(True, f"Right: that is the order {q.source} runs. {q.explain}", got, True)
    if q.mode == "predict":
        return Result(False, f"Not quite: {diff}. The order:<br><code>{grid}</code><br>"
                             f"{q.explain}", got, True)
    return Result(False, f"Not yet: {diff}. " + q.hint, got)


GRADERS: dict[str, Callable[[Question, Any], Result]] = {
    "number": _grade_number, "choice": _grade_choice, "order": _grade_order}


def grade(q: Question, answer) -> Result:
    """Grade one answer; unreadable input is a ``Result`` that says so, never an exception."""
    try:
        return GRADERS[q.kind](q, answer)
    except ValueError as e:
        return Result(False, str(e).capitalize() + ".")


def order_rows(schedule) -> list[list[str]]:
    """A schedule's per-rank order without stage numbers (``F0``, ``B3``, ``W1``)."""
    return [[f"{a.kind}{a.microbatch}" for op in ops for a in op.parts] for ops in schedule.ranks]
