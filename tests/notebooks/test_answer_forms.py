"""The leak search (tests/helpers/answer_forms.py) recognises an answer in the forms a student
would, finds the instances issue 30 lists in the lessons as they were, and does not mistake
other quantities for answers. Fast: no lesson is executed here (test_leaks.py does that)."""
import pytest
from answer_forms import answer_forms, formulas, normalise, shown_settings_hits, value_forms

from pplab.course.bank import get


def found(qid: str, text: str) -> list[str]:
    return [f"{f.what}: {f.text}" for f in answer_forms(get(qid)) if f.find(text)]


@pytest.mark.parametrize("text", ["0.273", "27.3 %", "27.3%", "27 %", "3/11", "3 / 11"])
def test_a_share_is_recognised_in_every_printed_form(text):
    assert any(f.find(f"the bubble is {text} here") for f in value_forms(300 / 11, "%", []))


@pytest.mark.parametrize("text", ["0.2731", "127.3%", "37.5 GB is not it", "13/11", "1.273"])
def test_other_numbers_are_not_that_share(text):
    assert not any(f.find(text) for f in value_forms(300 / 11, "%", []))


def test_a_number_with_a_unit_is_not_a_percentage_nor_a_count_of_thousands():
    forms = value_forms(37.5, "GB", [])
    assert any(f.find("37.5 GB per GPU") for f in forms)
    assert not any(f.find("bubble 37.5% of ideal") for f in forms)
    assert not any(f.find("a 128K-token vocabulary") for f in value_forms(128.48, "GB", []))


def test_closed_forms_match_however_they_are_written():
    [f] = formulas("so (P−1)/(V·M) = 3/24")
    assert normalise("(P - 1) / (M * V)") == f == normalise("(P−1)/(M·V)")
    assert "(1-bubble/total)" in formulas("MFU = (1 − bubble ÷ total) × utilisation")


#: what issue 30 lists, as the lessons printed it before the fix, and the question it answers
ISSUE_INSTANCES = [
    ("04.peaks", "| 04 | `04_1f1b.ipynb` | 1F1B: the same bubble, min(P − r, M) microbatches "
                 "in flight, measured on real processes |"),
    ("06.zbh1-memory", "ZB-H1 keeps 1F1B's order but runs `I` in place of `B` and lets rank r "
                       "postpone up to r of its `W`s into the cool-down."),
    ("05.bubble-v2", "So the fill-and-drain idle time per rank becomes `(P−1)(tf+tb)/V` while "
                     "the useful work `M·(tf+tb)` is unchanged:"),
    ("00.grad-error", "(about 1e-7: the pipeline computed the same thing)"),
    ("10.nccl-order", "**On NCCL that recipe would hang.** PyTorch runs all single sends"),
    ("14.mfu-bubble", "MFU = (1 − bubble ÷ total) × (share of peak reached while the ranks "
                      "compute)."),
]


@pytest.mark.parametrize("qid, text", ISSUE_INSTANCES, ids=[q for q, _ in ISSUE_INSTANCES])
def test_the_instances_the_issue_lists_are_found(qid, text):
    assert found(qid, text)


def test_a_figure_title_for_a_neighbouring_setting_is_found():
    title = ("<Figure: interleaved P=4 M=8 V=2 — makespan 28.5, bubble 15.8% of total, 18.8% "
             "of ideal | time (cost units) | forward | backward | idle>")
    assert shown_settings_hits(answer_forms(get("05.bubble-v2")), title)


def test_a_quiz_is_searched_for_its_value_not_for_what_the_lesson_teaches():
    q = get("05.q-v3")
    assert {f.what for f in answer_forms(q)} <= {"value", "fraction"}
    assert not found("05.q-v3", "÷ ideal it is (P−1)/(V·M), Megatron-LM's form")
