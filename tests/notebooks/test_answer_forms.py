"""The leak search (tests/helpers/answer_forms.py) recognises an answer in the forms a student
would, finds the instances issue 30 lists in the lessons as they were, and does not mistake
other quantities for answers. Fast: no lesson is executed here (test_leaks.py does that)."""
import pytest
from answer_forms import answer_forms, formulas, normalise, shown_settings_hits, value_forms

from pplab.course.bank import all_questions, get


def found(qid: str, text: str, scope: str | None = None) -> list[str]:
    """The forms of ``qid``'s answer (of ``scope`` only, if given) that ``text`` holds."""
    return [f"{f.what}: {f.text}" for f in answer_forms(get(qid))
            if scope in (None, f.scope) and f.find(text)]


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
    ("12.m-lt-p", "wrap each stage in a `PipelineStage`, pick a schedule class, respect its "
                  "rules (M ≥ P for\n1F1B), and know what `scale_grads` does"),
    ("13.dualpipe-tfb", "DualPipe's bubble, `(P/2 − 1)(F&B + B − 3W)`, is parametric in the "
                        "pair's cost `tfb` (lesson 06,\nsection 5)."),
    ("04.same-bubble", "| 04 | `04_1f1b.ipynb` | 1F1B: the same bubble, min(P − r, M) "
                       "microbatches in flight, measured on real processes |"),
    ("04.same-bubble", "Next: **`04_1f1b.ipynb`** — the same bubble with far less memory."),
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


#: how a student would read the answers that need their context (small counts, "P − 1",
#: "TP = 4", a rule in torch's words, a count next to its setting, the arithmetic a reveal
#: adds to the prompt's premises), and other things a lesson says that are not those answers
SHORT_ANSWERS = [
    ("02.ratio-to-ideal", "the step takes P − 1 = 3 times longer than ideal on top of it",
     "with P = 3 ranks the idle share is (P−1)/P"),
    ("02.ratio-to-ideal", "bubble ÷ ideal = 3 here", "3 ranks wait for the first"),
    ("09.dp", "so DP = 3 replicas", "TP = 8 inside each node, DP = 2"),
    ("12.scale-grads", "summed, the gradient is 4× the full-batch gradient",
     "M = 4 microbatches and scale_grads=False"),
    ("09.loudest-axis", "TP moves by far the most bytes per step",
     "TP inside a node, PP across nodes, DP for the rest: estimate the bytes each axis moves"),
    ("09.planner-tp", "the fastest layouts use TP = 4 and little pipeline",
     "the fastest layouts use TP = 8 and a deep pipeline"),
    ("12.m-lt-p", "torch checks n_microbatches ≥ the number of stages",
     "n_microbatches = 2 with 4 stages"),
    ("04.q-warmup", "rank 2 runs 9 warm-up forwards", "9 ranks, each with its warm-up"),
    ("14.mfu-bubble", "43.5% ÷ (1 − 0.059) = 46.2% while busy",
     "430 TFLOPs per GPU, 43.5% of the H100's 989"),
]


@pytest.mark.parametrize("qid, leak, other", SHORT_ANSWERS, ids=[q for q, *_ in SHORT_ANSWERS])
def test_answers_are_found_in_their_context_only(qid, leak, other):
    assert found(qid, leak)
    assert not found(qid, other)


@pytest.mark.slow
def test_every_prediction_has_forms_to_search():
    bare = [q.id for q in all_questions() if q.mode == "predict" and not answer_forms(q)]
    assert not bare, f"predictions the leak search cannot look for: {bare}"


def test_a_count_next_to_its_setting_is_found_in_the_lessons_before():
    assert found("10.messages", "1F1B at P=4 M=6: 36 point-to-point messages per step",
                 scope="course")
    assert not found("10.messages", "36 GB per step on 4 GPUs", scope="course")
    assert found("04.same-bubble", "Next: 1F1B, the same bubble at the same P and M",
                 scope="course")


def test_a_number_glued_to_a_name_is_not_the_value():
    assert found("14.m-per-replica", "each pipeline runs 32 microbatches")
    assert not found("14.m-per-replica", "the gradients accumulate in fp32 over the step")
