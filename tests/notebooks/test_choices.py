"""Choices cannot be answered by position or by look (issue 30): each student sees the options
in an order of their own (stable for them, seeded by who they are and the question); over
the bank, summed over students and for each student alone, no position holds more than its
fair share of right answers; the right option is no longer than the others nor marked by a
derivation they lack; renamed ids keep working.
"""
import json
from collections import Counter

import pytest
from course_pending import lesson_params

from pplab.course import Progress
from pplab.course.bank import LESSONS, all_questions, of_lesson
from pplab.course.questions import Option, Question, shown_options, student_identity

CHOICES = [q for q in all_questions() if q.kind == "choice"]
STUDENTS = [f"student{i:03d}" for i in range(300)]


def over_share(orders) -> dict:
    """Positions holding more right answers than their fair share (by more than 10 %).

    ``orders`` is a list of option lists; position j's fair share is the sum over the lists
    of 1/k for every list with more than j options."""
    held, fair = Counter(), Counter()
    for options in orders:
        held[next(j for j, o in enumerate(options) if o.correct)] += 1
        for j in range(len(options)):
            fair[j] += 1 / len(options)
    return {j: (held[j], round(fair[j], 1)) for j in fair if held[j] > 1.1 * fair[j]}


def test_the_fairness_check_fails_on_options_in_their_written_order():
    written = [list(q.options) for q in CHOICES]
    tilted = [[Option("right", "", True), Option("a", ""), Option("b", "")]] * 20
    assert over_share(tilted) == {0: (20, 6.7)}
    assert over_share(written + tilted)          # the bank as written leans on position 0


@pytest.mark.slow
def test_no_position_holds_more_than_its_fair_share_of_right_answers():
    shown = [shown_options(q, who) for who in STUDENTS for q in CHOICES]
    assert len(shown) == len(STUDENTS) * len(CHOICES) > 10_000
    assert over_share(shown) == {}


def excess(orders) -> float:
    """How far the most-held position's count of right answers exceeds its fair share."""
    held, fair = Counter(), Counter()
    for options in orders:
        held[next(j for j, o in enumerate(options) if o.correct)] += 1
        for j in range(len(options)):
            fair[j] += 1 / len(options)
    return max(held[j] - fair[j] for j in fair)


@pytest.mark.slow
def test_each_students_right_answers_spread_over_the_positions():
    over = {who: round(excess([shown_options(q, who) for q in CHOICES]), 2)
            for who in ["jovyan", "student", "ada", "grace"] + STUDENTS}
    assert {who: e for who, e in over.items() if e > 1.0} == {}


def test_the_per_student_check_fails_on_a_plain_shuffle():
    import hashlib
    import random

    def plain(q, who):
        options = list(q.options)
        random.Random(hashlib.sha256(f"{who}\0{q.id}".encode()).digest()).shuffle(options)
        return options
    assert max(excess([plain(q, who) for q in CHOICES]) for who in STUDENTS) > 3


def test_each_student_has_an_order_of_their_own_that_stays():
    for q in CHOICES:
        first = [o.text for o in shown_options(q, "ada")]
        assert first == [o.text for o in shown_options(q, "ada")]          # stable
        assert sorted(first) == sorted(o.text for o in q.options)          # all of them
    orders = {tuple(o.text for q in CHOICES for o in shown_options(q, who)) for who in STUDENTS}
    assert len(orders) == len(STUDENTS)


def test_identity_is_the_hub_user_then_the_login(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "grace")
    assert student_identity() == "grace"
    monkeypatch.delenv("JUPYTERHUB_USER")
    import getpass
    assert student_identity() == getpass.getuser()
    monkeypatch.setattr(getpass, "getuser", lambda: (_ for _ in ()).throw(OSError("no user")))
    assert student_identity() == "student"


def test_the_widget_shows_the_students_order(tmp_path, monkeypatch):
    monkeypatch.setenv("PPLAB_PROGRESS", str(tmp_path / "p.json"))
    from pplab.course import ask
    for who in ("ada", "grace"):
        monkeypatch.setenv("JUPYTERHUB_USER", who)
        box = ask("04.peaks")
        assert list(box.children[1].options) == [o.text for o in shown_options(box.question)]


def tells(q: Question) -> list[str]:
    """What sets the right option apart from every wrong one at a glance."""
    right = next(o.text for o in q.options if o.correct)
    wrong = [o.text for o in q.options if not o.correct]
    found = []
    if len(right) > 1.3 * max(map(len, wrong)) and len(right) - max(map(len, wrong)) > 12:
        found.append(f"the right option is the longest by far ({len(right)} characters)")
    for mark, what in (("=", "a derivation"), (":", "an explanation"), ("(", "an aside"),
                       ("because", "a reason")):
        if mark in right and not any(mark in w for w in wrong):
            found.append(f"only the right option carries {what} ({mark!r})")
    return found


@pytest.mark.parametrize("lesson", lesson_params("choices", LESSONS))
def test_the_right_option_looks_like_the_others(lesson):
    found = [f"{q.id}: {t}" for q in of_lesson(lesson) if q.kind == "choice" for t in tells(q)]
    assert not found, "\n".join(found)


def test_the_look_check_catches_a_derivation_and_a_long_right_option():
    q = Question("99.x", "quiz", "choice", "?", options=(
        Option("32 = 2,048 ÷ 64: sequences per replica (Table 4)", "", True),
        Option("128", ""), Option("64", "")))
    assert len(tells(q)) == 4


def test_a_renamed_id_keeps_asking_and_keeps_its_progress(tmp_path, monkeypatch):
    import pplab.course.bank as bank
    bank._load()
    monkeypatch.setitem(bank._RENAMED, "04.old-name", "04.peaks")
    assert bank.get("04.old-name") is bank.get("04.peaks")
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"version": 1, "answers": {
        "04.old-name": {"lesson": "04", "mode": "predict", "tries": 2, "correct": True},
        "04.peaks": {"lesson": "04", "mode": "predict", "tries": 1, "correct": False}}}))
    progress = Progress(path)
    assert progress.done(bank.get("04.peaks")) and "04.old-name" not in progress.answers
    assert progress.answers["04.peaks"] == {"lesson": "04", "mode": "predict", "tries": 3,
                                            "correct": True}
    progress.record(bank.get("04.peaks"), False)
    saved = json.loads(path.read_text())["answers"]
    assert list(saved) == ["04.peaks"] and saved["04.peaks"]["tries"] == 4


def test_a_rename_onto_a_missing_id_is_refused(monkeypatch):
    import pplab.course.bank as bank
    monkeypatch.setattr(bank, "_CACHE", {})
    monkeypatch.setattr(bank, "_RENAMED", {})
    import pplab.course.bank.l04 as l04
    monkeypatch.setattr(l04, "RENAMED", {"04.peaks-old": "04.no-such-question"}, raising=False)
    with pytest.raises(ValueError, match="renamed id"):
        bank.get("04.peaks")


def test_an_id_the_bank_no_longer_has_is_one_line_not_a_traceback(capsys):
    from pplab.course import ask, reveal
    box = ask("08.no-longer-asked")
    assert "pplab-notice" in box._dom_classes and "older than the course" in box.value
    assert reveal("08.no-longer-asked") is None
    assert "older than the course" in capsys.readouterr().out
