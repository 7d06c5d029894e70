"""pplab.course: answers are read leniently, graded with feedback on every wrong option, the
progress file records what is done, the widgets carry the DOM classes the browser tests use,
and the package stays pure (it must run in JupyterLite)."""
import json
import subprocess
import sys

import pytest

from pplab.course import Option, Progress, Question, grade, parse_number, parse_order
from pplab.course.bank import LESSONS, all_questions, get, of_lesson


def test_parse_number_forms():
    assert parse_number("46.7%") == 46.7
    assert parse_number("7/15", "%") == pytest.approx(46.666, rel=1e-3)
    assert parse_number("7/15") == pytest.approx(0.4667, rel=1e-3)
    assert parse_number(" 2,048 ") == 2048 and parse_number("1e-3") == 0.001
    for bad in ("", "abc", "1/0"):
        with pytest.raises(ValueError):
            parse_number(bad)


def test_parse_order_drops_rank_labels_and_stage_numbers():
    assert parse_order("rank 0: 0F0 0F1, 0B0\n1: F0 b0\n\n") == [["F0", "F1", "B0"], ["F0", "B0"]]
    with pytest.raises(ValueError, match="X9"):
        parse_order("F0 X9")


def test_prediction_reveals_the_measurement_with_trap_feedback():
    q = get("02.naive-idle-p8")
    wrong = grade(q, "7/15")
    assert not wrong.ok and wrong.reveal and "(P−1)/(2P−1)" in wrong.feedback and "87.5%" in wrong.feedback
    right = grade(q, "87.5%")
    assert right.ok and right.reveal


def test_quiz_keeps_the_answer_until_right():
    q = get("03.q-two-denominators")
    wrong = grade(q, "58.3")
    assert not wrong.ok and not wrong.reveal and "36.8" not in wrong.feedback
    assert "÷ ideal" in wrong.feedback
    assert grade(q, "7/19").ok


def test_choice_feedback_for_each_option():
    q = get("04.peaks")
    for opt in q.options:
        res = grade(q, opt.text)
        assert res.ok == opt.correct and opt.feedback in res.feedback
    assert "pick one" in grade(q, None).feedback.lower()


def test_order_grid_names_the_first_difference():
    q = get("04.order-grid")
    res = grade(q, "F0 F1 F2 B0 F3 B1 B2 B3\nF0 F1 B0 F2 B1 F3 B2 B3\nF0 F1 B0 B1 F2 B2 F3 B3")
    assert not res.ok and "rank 2, action 2: you wrote F1, the schedule runs B0" in res.feedback
    good = "\n".join(" ".join(row) for row in q.value())
    assert grade(q, good).ok


@pytest.mark.slow
def test_every_question_is_well_formed():
    qs = all_questions()
    assert {q.lesson for q in qs} == set(LESSONS)
    for lesson in LESSONS:
        mine = of_lesson(lesson)
        assert sum(q.mode == "predict" for q in mine) >= 3, lesson
        assert sum(q.mode == "quiz" for q in mine) >= 1, lesson
    for q in qs:
        assert q.prompt and q.value() is not None, q.id
        if q.kind == "choice":
            assert len(q.options) >= 3 and all(o.feedback for o in q.options), q.id
        if q.kind == "number" and q.mode == "quiz":
            assert q.traps or q.hint, q.id
        right = q.value() if q.kind != "order" else "\n".join(" ".join(r) for r in q.value())
        assert grade(q, right if q.kind != "number" else str(right)).ok, q.id


def test_bad_definitions_and_unknown_ids_are_refused():
    with pytest.raises(ValueError, match="exactly one correct"):
        Question("99.x", "quiz", "choice", "?", options=(Option("a", "b"), Option("c", "d")))
    with pytest.raises(ValueError, match="mode"):
        Question("99.x", "guess", "number", "?")
    with pytest.raises(ValueError, match="no question"):
        get("99.nothing")


def test_progress_file_records_and_summarises(tmp_path):
    path = tmp_path / ".pplab-progress.json"
    p = Progress(path)
    pred, quiz = get("02.naive-makespan"), get("02.q-idle-p5")
    assert p.record(pred, False) is None and p.record(quiz, False) is None
    again = Progress(path)
    assert again.done(pred) and not again.done(quiz)       # a committed guess counts, a wrong quiz not
    again.record(quiz, True)
    rows = dict((r[0], r[1:]) for r in Progress(path).rows(of_lesson("02")))
    assert rows["02"] == (1, 3, 1, 2)
    assert json.loads(path.read_text())["answers"]["02.q-idle-p5"]["tries"] == 2
    assert "predictions" in again.text(all_questions())


def test_unwritable_progress_is_a_warning(tmp_path):
    p = Progress(tmp_path / "missing-dir" / "p.json")
    assert "not saved" in p.record(get("02.naive-makespan"), True)


def test_default_path_is_next_to_the_lessons(tmp_path, monkeypatch):
    from pplab.course import default_path
    monkeypatch.delenv("PPLAB_PROGRESS", raising=False)
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path)
    assert default_path() == tmp_path / "notebooks" / ".pplab-progress.json"
    monkeypatch.chdir(tmp_path / "notebooks")
    assert default_path() == tmp_path / "notebooks" / ".pplab-progress.json"


def test_widget_dom_contract_and_initial_state(tmp_path, monkeypatch):
    monkeypatch.setenv("PPLAB_PROGRESS", str(tmp_path / "p.json"))
    from pplab.course import ask
    box = ask("03.gpipe-bubble")
    prompt, answer, button, feedback, measured = box.children
    assert "pplab-question" in box._dom_classes and "pplab-answer" in answer._dom_classes
    assert "pplab-check" in button._dom_classes and "pplab-feedback" in feedback._dom_classes
    assert "pplab-reveal" in measured._dom_classes
    assert feedback.value == "" and "33.3" not in prompt.value     # nothing revealed yet
    assert measured.outputs == ()
    answer.value = "50"
    button.click()
    assert "a different denominator" in feedback.value and "33.3%" in feedback.value
    text = "".join(o.get("text", "") for o in measured.outputs)     # in place, once
    assert text.count("makespan 27") == 1
    assert any("image/png" in o.get("data", {}) for o in measured.outputs)   # and its figure
    assert answer.disabled and button.disabled                     # a committed guess stays
    assert json.loads((tmp_path / "p.json").read_text())["answers"]["03.gpipe-bubble"]["tries"] == 1


def test_quiz_widget_accepts_retries_and_progress_view(tmp_path, monkeypatch):
    monkeypatch.setenv("PPLAB_PROGRESS", str(tmp_path / "p.json"))
    from pplab.course import ask, progress_view
    box = ask("03.q-which-m")
    _, answer, button, feedback, _ = box.children
    answer.value = next(o for o in answer.options if o.startswith("M = 12"))
    button.click()
    assert "÷ ideal" in feedback.value and not button.disabled
    answer.value = next(o for o in answer.options if o.startswith("M = 9 or 12"))
    button.click()
    assert feedback.value.startswith('<div style="color:#1a7f37">Right')
    view = progress_view()
    assert "pplab-progress" in view._dom_classes and "<td>03</td><td>0/3</td><td>1/4</td>" \
        in view.children[0].value


@pytest.mark.slow
def test_course_package_is_pure():
    code = ("import sys, pplab.course, pplab.course.bank as b, pplab.course.questions;"
            "[q.value() for q in b.all_questions()];"
            "bad = [m for m in ('torch', 'numpy', 'matplotlib', 'ipywidgets') if m in sys.modules];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
