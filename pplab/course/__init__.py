"""Predict-then-check moments, checked quizzes and a progress view for the lessons.

Pure Python plus ipywidgets, so the same code runs in JupyterLab and in JupyterLite
(Pyodide): no numpy, torch or matplotlib here. Answers live in ``bank/`` (computed from the
simulator where they are measurements), never in a notebook's saved outputs.
"""
from .questions import Option, Question, Result, grade, parse_number, parse_order
from .progress import Progress, default_path

__all__ = ["Option", "Question", "Result", "grade", "parse_number", "parse_order", "Progress",
           "default_path", "ask", "progress_view", "question", "reveal"]


def question(qid: str) -> Question:
    """The question with this id, from the bank."""
    from .bank import get
    return get(qid)


def ask(qid: str, **kw):
    """A prediction or quiz widget for one question (see ``widgets.question_widget``); an id
    the bank does not know (an old copy of a lesson) is one line saying so, not a traceback."""
    from .widgets import notice_widget, question_widget
    try:
        q = question(qid)
    except ValueError as e:
        return notice_widget(f"{e}: this copy of the lesson is older than the course; "
                             f"the current lesson asks its questions anew.")
    return question_widget(q, **kw)


def progress_view(**kw):
    """The progress table across lessons (see ``widgets.progress_widget``)."""
    from .widgets import progress_widget
    return progress_widget(**kw)


def reveal(*qids: str, **kw):
    """Check the answer to ``qids`` and print it once they were answered (``reveals.reveal``)."""
    from .reveals import reveal as _reveal
    return _reveal(*qids, **kw)
