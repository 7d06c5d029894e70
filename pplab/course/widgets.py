"""The widgets: one question (prompt, answer input, Check button, feedback, and the
measurement that the guess unlocks) and the progress table. CSS classes are a contract with
the browser tests: ``pplab-question`` (container), ``pplab-answer`` (input), ``pplab-check``
(button), ``pplab-feedback`` (feedback area), ``pplab-reveal`` (the measurement: empty until
the guess is committed).
"""
from __future__ import annotations

import html

from .progress import Progress
from .questions import Question, grade, shown_options

#: every question widget built in this kernel, newest last (headless tests click them)
BUILT: list = []

_LABEL = {"predict": "Predict", "quiz": "Quiz"}
_PLACEHOLDER = {"number": "a number, e.g. 0.25, 25% or 1/4",
                "order": "one line per rank, e.g.\nrank 0: F0 F1 B0 B1\nrank 1: F0 B0 F1 B1"}


def _input(q: Question):
    import ipywidgets as w
    if q.kind == "choice":
        return w.RadioButtons(options=[o.text for o in shown_options(q)], value=None,
                              layout=w.Layout(width="auto"))
    if q.kind == "order":
        rows = max(2, len(q.value()) + 1) if not callable(q.answer) else 4
        return w.Textarea(placeholder=_PLACEHOLDER["order"], rows=rows,
                          layout=w.Layout(width="520px"))
    unit = f" ({q.unit})" if q.unit else ""
    return w.Text(placeholder=_PLACEHOLDER["number"] + unit, layout=w.Layout(width="320px"))


def _feedback_html(ok: bool, text: str, note: str | None) -> str:
    colour = "#1a7f37" if ok else "#b35900"
    extra = f"<br><small>{html.escape(note)}</small>" if note else ""
    return f'<div style="color:{colour}">{text}</div>{extra}'


def _show_measurement(q: Question, area, progress: Progress) -> None:
    """Fill ``area`` with ``q``'s measurement, or say which question of its group still
    waits for a guess (a shared measurement answers them all). Replaces what was there, so
    a second commit shows it once."""
    from .bank import get
    from .reveals import group, measurement
    waiting = [other for other in group(q.id) if other != q.id and not progress.done(get(other))]
    area.outputs = ()
    if waiting:
        area.append_stdout(f"The measurement answers {', '.join(waiting)} too: it appears under "
                           f"the last of these questions you commit.\n")
        return
    try:
        parts = measurement(q.id)
    except Exception as e:          # one line, never a traceback under the question
        area.append_stdout(f"The measurement could not be made here: {type(e).__name__}: {e}\n")
        return
    for part in parts:
        if isinstance(part, str):
            area.append_stdout(part + "\n")
        else:
            area.append_display_data(part)


def question_widget(q: Question, progress: Progress | None = None):
    """The widget starts with the question only: no answer, no measurement, no hint. The
    measurement appears in the widget, under the feedback, once the guess is committed (a
    prediction) or right (a quiz): the reveal is the student's own action."""
    import ipywidgets as w
    title = f"<b>{_LABEL[q.mode]} ({q.id})</b> {q.prompt}"
    prompt = w.HTML(title)
    answer = _input(q)
    button = w.Button(description="Check" if q.mode == "quiz" else "Commit my guess",
                      button_style="primary")
    feedback = w.HTML("")
    measured = w.Output()
    box = w.VBox([prompt, answer, button, feedback, measured])
    for widget, cls in ((box, "pplab-question"), (answer, "pplab-answer"),
                        (button, "pplab-check"), (feedback, "pplab-feedback"),
                        (measured, "pplab-reveal")):
        widget.add_class(cls)

    def check(_=None):
        res = grade(q, answer.value)
        note = None
        prog = progress or Progress()
        if res.read is not None:
            note = prog.record(q, res.ok)
        feedback.value = _feedback_html(res.ok, res.feedback, note)
        if res.reveal and q.mode == "predict":     # a committed guess stays committed
            answer.disabled = button.disabled = True
        if res.read is not None and (q.mode == "predict" or res.ok):
            _show_measurement(q, measured, prog)

    button.on_click(check)
    box.question, box.check, box.measured = q, check, measured
    BUILT.append(box)
    return box


def notice_widget(text: str):
    """One line in place of a question that cannot be shown."""
    import ipywidgets as w
    box = w.HTML(f"<i>{html.escape(text)}</i>")
    box.add_class("pplab-notice")
    return box


def progress_widget(progress: Progress | None = None):
    """A table of every lesson's predictions and quizzes done, with a refresh button."""
    import ipywidgets as w
    from .bank import all_questions

    def table() -> str:
        p = progress or Progress()
        rows = "".join(
            f"<tr><td>{lesson}</td><td>{pd}/{pn}</td><td>{qd}/{qn}</td>"
            f"<td>{'✓' if pd == pn and qd == qn else ''}</td></tr>"
            for lesson, pd, pn, qd, qn in p.rows(all_questions()))
        return ("<table><tr><th>lesson</th><th>predictions</th><th>quizzes</th><th></th></tr>"
                f"{rows}</table><small>saved in {html.escape(str(p.path))}</small>")

    view = w.HTML(table())
    refresh = w.Button(description="Refresh")
    refresh.on_click(lambda _: setattr(view, "value", table()))
    box = w.VBox([view, refresh])
    box.add_class("pplab-progress")
    return box
