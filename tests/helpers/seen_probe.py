"""Runs inside a lesson's kernel (tests/helpers/lesson_run.py adds it between the cells): says
what a student sees on the page besides the cells' own outputs — the text of every live
widget (canvas messages and pictures, sliders, question prompts and feedback) — and answers
each question as a student does, so the feedback that follows a guess is seen too.

Each call appends one JSON line to ``$PPLAB_SEEN_LOG``: ``{"cell": i, "texts": [...]}`` for a
snapshot, ``{"commit": qid, "cell": i, "feedback": ..., "mine": [...], "others": [...]}`` for
a committed guess (its feedback, what its own measurement area shows, and what every other
question's area shows).
"""
import html
import json
import os
import re

TAG = re.compile(r"<[^>]+>")
#: scene keys that hold geometry or colours, not words
SKIP_KEYS = {"boxes", "strips", "strip_chars", "colors", "color", "points", "values", "lanes"}
#: a guess for each kind of question (a student's first try; the feedback follows it)
GUESS = {"number": "0", "order": "F0"}


def _strings(value, out):
    """Every word-bearing string in a scene (titles, labels, legend names, notes)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in SKIP_KEYS:
                _strings(item, out)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _strings(item, out)
    elif isinstance(value, str) and not re.fullmatch(r"[\d|#a-fA-F]*|[A-Z]{1,2}", value):
        out.append(value)


def _output_texts(outputs, out):
    for o in outputs:
        data = o.get("data", {})
        text = o.get("text") or data.get("text/plain") or TAG.sub(" ", data.get("text/html", ""))
        out.append(html.unescape(text))


def widget_texts() -> list[str]:
    """The text of every live widget, in creation order."""
    from ipywidgets.widgets.widget import _instances
    widgets = list(_instances.values())
    # the progress table holds lesson numbers and counts, never an answer ("12" is lesson 12)
    progress = {id(c) for w in widgets if "pplab-progress" in getattr(w, "_dom_classes", ())
                for c in w.children}
    out = []
    for w in (w for w in widgets if id(w) not in progress):
        for attr in ("description", "value", "placeholder"):
            v = getattr(w, attr, None)
            if isinstance(v, str) and v:
                out.append(html.unescape(TAG.sub(" ", v)))
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and attr == "value":
                out.append(f"{getattr(w, 'description', '')} {v}")
        options = getattr(w, "options", None)
        if options and all(isinstance(o, str) for o in options):
            out.append(" | ".join(options))
        if hasattr(w, "outputs"):
            _output_texts(w.outputs, out)
        if hasattr(w, "scene"):
            _strings(w.scene, out)
    return [t for t in out if t.strip()]


def snapshot(cell: int) -> None:
    """Log what the page shows after cell ``cell`` ran."""
    with open(os.environ["PPLAB_SEEN_LOG"], "a") as f:
        f.write(json.dumps({"cell": cell, "texts": widget_texts()}) + "\n")


def _area_texts(area) -> list[str]:
    out = []
    _output_texts(area.outputs, out)
    return [t for t in out if t.strip()]


def commit_all(asked) -> None:
    """After Run All: commit a guess in every question, in the lesson's order, as a student
    does by pressing its button, and log what then shows (``asked``: (cell, id) pairs)."""
    from pplab.course.widgets import BUILT
    boxes = [b for b in BUILT if hasattr(b, "measured")]
    for cell, qid in asked:
        box = answer(qid)
        if box is None:
            continue
        entry = {"commit": box.question.id, "cell": cell,
                 "feedback": html.unescape(TAG.sub(" ", box.children[3].value)),
                 "mine": _area_texts(box.measured),
                 "others": [t for b in boxes if b is not box for t in _area_texts(b.measured)]}
        with open(os.environ["PPLAB_SEEN_LOG"], "a") as f:
            f.write(json.dumps(entry) + "\n")


def answer(qid: str):
    """Answer the question widget asked for ``qid`` as a student's first try; the box."""
    from pplab.course import question
    from pplab.course.widgets import BUILT
    try:
        qid = question(qid).id                   # an old id asks the renamed question
    except ValueError:
        return None                              # an old lesson's question the bank dropped
    box = next(b for b in reversed(BUILT) if b.question.id == qid)
    answer_widget = box.children[1]
    q = box.question
    answer_widget.value = answer_widget.options[0] if q.kind == "choice" else GUESS[q.kind]
    box.check()
    return box
