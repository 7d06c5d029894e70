"""Predict, then check: the measurement lives in the question's own widget and appears only
when the guess is committed, so no lesson cell calls ``reveal`` and nothing around a
prediction (the cells above it and the text right under it, up to the next question or
heading) states its answer in the source — not in a heading, an assert or a saved output.
This is the quick, source-level first line; tests/notebooks/test_run_all.py reads the page
a student sees after Run All."""
import inspect
import re
from pathlib import Path

import nbformat
import pytest
from course_pending import lesson_params

from pplab.course.bank import LESSONS, get
from pplab.course.reveals import reveal_ids

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("[01][0-9]_*.ipynb"))}
ASK = re.compile(r'ask\("([^"]+)"\)')

#: what would give each prediction away if it stood above its reveal (sources, headings, outputs)
LEAKS = {
    "02.ratio-to-ideal": ["== 4 - 1"],
    "03.gpipe-bubble": ["3 / 9", "3/9", "33.3%"],
    "03.forget-1-over-m": ["3.00", "4 times", "M times"],
    "03.remat-cost": ["4 / 3", "×1.333", "+33%", "×1.33"],
    "04.same-bubble": ["same bubble", "Same bubble", ").makespan == simulate("],
    "04.peaks": ["min(P - r, M)", "min(P − r, M)", "min(P−r, M)", "4, 3, 2, 1"],
    "04.fastest-m": ["times[16]", "== 16", "M = 16"],
    "06.zbh1-memory": ["[P] * P", "(P - r, r)", "P times as many", "P − r whole"],
    "06.dualpipe-m": ["for every M", "for\nevery M", "not** shrink", "does not shrink",
                      "constant in M"],
    "05.bubble-v2": ["(P-1)/(V*M)) < 1e-12"],
    "05.messages": ["2·M·(P·V−1)", "2·M·(P·V − 1)", "2 * M * (P * V - 1)"],
    "07.zero1-70b": ["4 * 70 + 12 * 70 / 64", "293.1"],
    "08.full-saving": ["2 vs 14.25", "86%", "2 / 14.25"],
    "08.selective": ["80 / 114", "80 of 114", "70%"],
    "09.loudest-axis": ['vol["tp"] > vol["dp"]', "TP moves 300 GB"],
    "09.dp": ["96 // (8 * 4)", "DP = 3"],
    "09.planner-tp": [" 1. TP=4 ", "winners use TP = 4"],
    "10.messages": ["2 * M * (P - 1)", "2·M·(P−1)"],
    "11.slow-stage": ["33 + 8 * 0.9", "8 × 0.9"],
    "11.slow-first": ["slow[1] < slow[0]", "first* stage costs less", "costs\nless here"],
    "11.head-layers": ["2.16", "head / layer", "10.16 against"],
    "12.m-lt-p": ['torch_refuses("Schedule1F1B", P=4, M=2) and', "refuses fewer microbatches"],
    "12.scale-grads": ["scale_grads=False) - 4)"],
    "13.vhalf-peak": ["9 of 16", "56.2%", "(P + 2)//2"],
    "13.search-cap2": ["found 41", "makespan 41"],
    "13.dualpipe-tfb": ["makespan 50", "(P/2 − 1)(F&B + B − 3W)"],
    "14.m-per-replica": ["64 replicas × 32", "batch/DP 32", "| 64 | 8,192 | 32", "= 32 sequences"],
    "14.denominators": ["15/256", "15/271", "5.9% of the busy", "15 / (32 * V)"],
    "14.lighter-ends": ["5.87%", "6.2% (5.9%)", "less than half a point"],
    "14.grad-gb": ["12.75", "12.8 GB", "= 12.8", "4 * psi"],
    "14.mfu-bubble": ["2.7 pt", "46.2%", "2.7 points", "MFU = (1 − bubble", "÷ (1 − 19%)"],
}


def around(cells, qid):
    """The cells a student reads with the question: everything above it, and the cells
    right under it up to the next question or section heading."""
    i = next(i for i, c in enumerate(cells) if f'ask("{qid}")' in c.source)
    j = i + 1
    while j < len(cells) and not ASK.search(cells[j].source) \
            and not cells[j].source.lstrip().startswith("#" if cells[j].cell_type == "markdown"
                                                        else "\0"):
        j += 1
    return cells[:j]


def _text(cells):
    return "\n".join(c.source + "".join(o.get("text", "") + str(o.get("data", {}).get(
        "text/plain", "")) for o in c.get("outputs", [])) for c in cells)


@pytest.mark.parametrize("lesson", lesson_params("around", LESSONS))
def test_nothing_around_a_prediction_gives_the_answer(lesson):
    cells = nbformat.read(NOTEBOOKS[lesson], as_version=4).cells
    assert not any("reveal(" in c.source for c in cells if c.cell_type == "code"), \
        "the measurement shows under the question once the guess is committed: no reveal cells"
    for qid in (m for c in cells for m in ASK.findall(c.source)):
        if get(qid).mode != "predict":
            continue
        text = _text(around(cells, qid))
        for pattern in LEAKS.get(qid, ()):
            assert pattern not in text, f"{qid}: {pattern!r} stands around its question"


def test_every_leak_pattern_names_a_prediction_with_a_reveal():
    for qid in LEAKS:
        assert get(qid).mode == "predict" and qid in reveal_ids(), qid


def test_the_measurement_shows_under_the_question_only_after_the_guess(tmp_path):
    from pplab.course import Progress, ask, reveal
    prog = Progress(tmp_path / "p.json")
    box = ask("04.peaks", progress=prog)
    assert box.measured.outputs == ()
    answer = box.children[1]
    answer.value = answer.options[0] if box.question.kind == "choice" else "3"
    box.check()
    shown = "".join(o.get("text", "") for o in box.measured.outputs)
    assert "min(P-r,M)" in shown
    box.check()                                  # a second commit shows it once, not twice
    assert "".join(o.get("text", "") for o in box.measured.outputs) == shown
    assert reveal("04.peaks", progress=prog) is None     # old copies: printed, no Out[]


def test_a_shared_measurement_waits_for_every_question_it_answers(tmp_path):
    from pplab.course import Progress, ask
    prog = Progress(tmp_path / "p.json")
    first, second = ask("06.zbh1-idle", progress=prog), ask("06.zbh1-memory", progress=prog)
    for box in (first, second):
        q = box.question
        box.children[1].value = box.children[1].options[0] if q.kind == "choice" else "1"
        box.check()
    waiting = "".join(o.get("text", "") for o in first.measured.outputs)
    shown = "".join(o.get("text", "") for o in second.measured.outputs)
    assert "06.zbh1-memory" in waiting and "ZB-H1 idle" not in waiting
    assert "ZB-H1 idle" in shown


def _runs_torch(qid: str) -> bool:
    """A reveal that trains a tiny model with torch (``pplab.runtime``): slow by nature, it
    runs in the slow tier; the rest run in the fast one."""
    from pplab.course.reveals import _REVEALS
    return "runtime" in inspect.getsource(_REVEALS[qid])


@pytest.mark.parametrize("qid", [pytest.param(q, marks=pytest.mark.slow) if _runs_torch(q) else q
                                 for q in reveal_ids()])
def test_every_reveal_checks_its_answer(qid):
    from lesson_run import measured
    assert measured(qid)
