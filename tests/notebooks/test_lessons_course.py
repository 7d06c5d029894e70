"""Lessons 00-12 as a course: one notebook per lesson, at least three predictions before the
reveal and checked quizzes in each, no committed output that gives an answer away, guidance
beside every canvas, and the corrected errors stated where they were wrong."""
import re
from pathlib import Path

import nbformat
import pytest

from pplab.course.bank import LESSONS, get, of_lesson
from tests.helpers.lesson_text import lesson_text

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("[01][0-9]_*.ipynb"))}
ASK = re.compile(r'ask\("([^"]+)"\)')
CANVAS = re.compile(r"\b(\w+_canvas|run_panel)\(")


def _nb(lesson):
    return nbformat.read(NOTEBOOKS[lesson], as_version=4)


def _outputs(nb) -> str:
    return "\n".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def _renderings(q) -> list[str]:
    """How an answer could appear in printed output."""
    if q.kind == "choice":
        return [q.value()] if len(q.value()) >= 8 else []    # "TP" is in every table
    if q.kind == "order":
        return [" ".join(row) for row in q.value() if len(row) > 2]
    v = float(q.value())
    if v == int(v) and abs(v) < 10:
        return []                      # small integers appear everywhere; nothing to check
    forms = {f"{v:.1f}", f"{v:.2f}", f"{v:g}"} if q.unit != "%" else \
        {f"{v:.1f}%", f"{v:.2f}", f"{v / 100:.3f}", f"{v / 100:.4f}"}
    if v == int(v):
        forms = {str(int(v))}
    return sorted(forms)


def test_one_notebook_per_lesson():
    assert sorted(NOTEBOOKS) == list(LESSONS)


@pytest.mark.parametrize("lesson", LESSONS)
def test_predictions_and_quizzes_are_in_place(lesson):
    nb = _nb(lesson)
    asked = [m for c in nb.cells if c.cell_type == "code" for m in ASK.findall(c.source)]
    assert len(asked) == len(set(asked)), "a question is asked twice"
    assert sorted(asked) == sorted(q.id for q in of_lesson(lesson))
    assert sum(get(i).mode == "predict" for i in asked) >= 3
    assert any(get(i).mode == "quiz" for i in asked)
    assert all("<details>" not in c.source for c in nb.cells)
    first_predict = next(i for i, c in enumerate(nb.cells) if ASK.search(c.source)
                         and get(ASK.search(c.source).group(1)).mode == "predict")
    assert first_predict < len(nb.cells) - 3          # predictions come before the end
    assert any("progress_view()" in c.source for c in nb.cells)


@pytest.mark.parametrize("lesson", LESSONS)
def test_no_committed_output_gives_an_answer_away(lesson):
    nb = _nb(lesson)
    text = _outputs(nb)
    for c in nb.cells:
        if ASK.search(c.source):
            assert not c.outputs, f"question cell saved with output: {c.source}"
    for qid in (m for c in nb.cells for m in ASK.findall(c.source)):
        for form in _renderings(get(qid)):
            pattern = r"(?<![\d.])" + re.escape(form) + r"(?![\d])"
            assert not re.search(pattern, text), f"{qid}: committed output shows {form!r}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_canvas_says_what_to_try_and_notice(lesson):
    cells = _nb(lesson).cells
    for i, c in enumerate(cells):
        calls = [ln for ln in c.source.splitlines() if not ln.startswith(("from ", "import "))]
        if c.cell_type == "code" and CANVAS.search("\n".join(calls)):
            near = " ".join(cells[j].source for j in (i - 1, i + 1)
                            if 0 <= j < len(cells) and cells[j].cell_type == "markdown")
            assert "Try" in near and "Notice" in near, f"{lesson}: {c.source[:60]}"


def _text(lesson):
    return lesson_text(lesson)


def test_corrected_errors_are_stated():
    assert "2P + 1 = 17" in _text("07") and "P + 1 half-rank" not in _text("07")
    for lesson in ("06", "07"):
        assert "a little longer." not in _text(lesson).replace('"a little longer"', "")
    assert "the other ranks hold less" not in _text("05")
    assert "next to (P−1)/V" in _text("05").replace("\n", " ")
    assert "dropout output (2 bytes)" in _text("08") and "2 + 2 + 1" not in _text("08")
    assert "96·B·s·L·h²" in _text("08") and "Narayanan et al. 2021, §5.1" in _text("08")
    assert "Llama 3 70B has grouped-query attention" in _text("07")
    assert "This is a model, not a measurement" in _text("04")
    for lesson in ("02", "03"):                      # recomputation is taught in 08
        assert 'recompute="selective"' not in _text(lesson)


def test_corrections_have_their_measurements():
    import inspect

    from pplab.course.bank import l02, l03    # each check runs when its guess is committed
    naive = inspect.getsource(l02._naive_idle)
    assert "7/8 = 87.5% at P = 8" in naive and "(2 * P - 1)) > 0.15" in naive
    assert 'ask("02.naive-idle-p8")' in _text("02")
    assert 'ask("03.smallest-m")' in _text("03") and \
        "smallest_M(8, 0.20) == 4 * 7 + 1" in inspect.getsource(l03._smallest_m)
    assert 'ask("03.remat-cost")' in _text("03")
    assert "4 / 3) < 1e-9" in inspect.getsource(l03._remat_cost)
    assert "18.3% lower" in _text("05")
    assert "GPipe runs 8" in _outputs(_nb("04")) and "differs at action 2" in _outputs(_nb("04"))
    assert "rank 0's first backward starts at t = 4" in _outputs(_nb("06"))
    assert "makespan 102" in _outputs(_nb("06"))
