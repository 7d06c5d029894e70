"""Exercise 01: the solution passes its graders, the unsolved exercise fails every grader
cell, the graders catch wrong answers, and the generated files match their source."""
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_exercises  # noqa: E402

from pplab.exercises import (check_bubble_formulas, check_inflight,  # noqa: E402
                             check_one_f_one_b_rank, check_text_schedule)

NAME = "01_bubble_and_1f1b.ipynb"


#: every exercise: (number of grader cells, number of stubs a student fills in)
EXERCISES = {"01_bubble_and_1f1b.ipynb": (4, 6), "02_schedules.ipynb": (4, 4),
             "03_memory.ipynb": (4, 4), "04_real_pipeline.ipynb": (4, 4)}


def _run(path, allow_errors):
    """Execute a notebook headless; cells marked NBVAL_SKIP (real torchrun jobs) are blanked."""
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        if c.cell_type == "code" and c.source.startswith("# NBVAL_SKIP"):
            c.source = ""
    NotebookClient(nb, kernel_name="python3", timeout=180, allow_errors=allow_errors,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def _is_grader(cell):
    return cell.cell_type == "code" and cell.source.lstrip().startswith("check_")


def _errors(cell):
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def test_every_solution_is_listed():
    assert set(EXERCISES) == {p.name for p in (ROOT / "solutions").glob("*.ipynb")}


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_solution_passes_every_grader(name):
    nb = _run(ROOT / "solutions" / name, allow_errors=False)
    graders = [c for c in nb.cells if _is_grader(c)]
    assert len(graders) == EXERCISES[name][0]
    for c in graders:
        text = "".join(o.get("text", "") for o in c.outputs)
        assert "✓" in text, c.source


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_unsolved_exercise_fails_every_grader(name):
    nb = _run(ROOT / "exercises" / name, allow_errors=True)
    graders = [c for c in nb.cells if _is_grader(c)]
    assert len(graders) == EXERCISES[name][0]
    for c in graders:
        errs = _errors(c)
        assert errs, f"grader cell passed on the unsolved exercise: {c.source}"
        assert errs[0]["ename"] in ("AssertionError", "NameError"), errs[0]["ename"]
    stubs = sum(c.source.count("raise NotImplementedError") for c in nb.cells
                if c.cell_type == "code")
    assert stubs == EXERCISES[name][1]
    assert not any("BEGIN SOLUTION" in c.source for c in nb.cells)


def test_committed_files_match_their_source():
    assert build_exercises.build(check=True) == [], \
        "exercises/ or solutions/ out of date: run tools/build_exercises.py"


def test_build_is_idempotent(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    first = build_exercises.build(root=tmp_path)
    snap = {p: p.read_bytes() for p in tmp_path.rglob("*.ipynb")}
    assert build_exercises.build(root=tmp_path) == []
    assert {p: p.read_bytes() for p in tmp_path.rglob("*.ipynb")} == snap
    # every solution yields its exercise, byte-identical to the committed one
    want = sorted(tmp_path / "exercises" / p.name for p in (ROOT / "solutions").glob("*.ipynb"))
    assert sorted(first) == want
    for p in want:
        assert p.read_bytes() == (ROOT / "exercises" / p.name).read_bytes()


def test_check_mode_detects_drift(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    build_exercises.build(root=tmp_path)
    ex = tmp_path / "exercises" / NAME
    ex.write_text(ex.read_text().replace("your code here", "edited by hand"))
    assert build_exercises.build(root=tmp_path, check=True) == [ex]


def test_strip_solutions_keeps_indentation():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert build_exercises.strip_solutions(src) == \
        "def f(x):\n    raise NotImplementedError(\"your code here\")\n"
    with pytest.raises(ValueError):
        build_exercises.strip_solutions("### BEGIN SOLUTION\nx = 1\n")


# ---- the graders catch typical mistakes, with a useful message --------------------------------
def test_graders_reject_wrong_answers():
    with pytest.raises(AssertionError, match="bubble_of_total"):
        check_bubble_formulas(lambda P, M: (P - 1) / M, lambda P, M: (P - 1) / M)
    with pytest.raises(AssertionError, match="bubble_of_ideal"):
        check_bubble_formulas(lambda P, M: (P - 1) / (M + P - 1), lambda P, M: (P - 1) / (M * P))

    def no_min(P, M, r):                  # forgets min(): breaks when M < P
        w = P - r - 1
        return ([f"{r}F{i}" for i in range(w)]
                + [x for i in range(M - w) for x in (f"{r}F{w + i}", f"{r}B{i}")]
                + [f"{r}B{i}" for i in range(M - w, M)])
    with pytest.raises(AssertionError, match="warm-up"):
        check_one_f_one_b_rank(no_min)

    def ignores_w(actions):               # only B frees: wrong for zero-bubble schedules
        alive, peak = set(), 0
        for a in actions:
            if "F" in a:
                alive.add(a.replace("F", ""))
            elif "B" in a:
                alive.discard(a.replace("B", ""))
            peak = max(peak, len(alive))
        return peak
    with pytest.raises(AssertionError, match="zb-h1"):
        check_inflight(ignores_w)

    def stub(*a):
        raise NotImplementedError("your code here")
    with pytest.raises(AssertionError, match="not implemented yet"):
        check_bubble_formulas(stub, stub)

    naive = ["0F0 0B0 0F1 0B1 0F2 0B2 0F3 0B3", "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3",
             "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3"]
    with pytest.raises(AssertionError, match="target"):
        check_text_schedule(naive, P=3, M=4, max_bubble_of_ideal=0.5)
    assert check_text_schedule(naive, P=3, M=4)
    deadlock = ["0F0 0B0 0F1 0B1", "1B0 1F0 1F1 1B1"]
    with pytest.raises(AssertionError, match="does not validate"):
        check_text_schedule(deadlock, P=2, M=2)
    with pytest.raises(AssertionError, match="does not validate"):
        check_text_schedule(["0F0 0F1 0B0", "1F0 1B0 1F1 1B1"], P=2, M=2)


def test_build_script_cli_check():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "build_exercises.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
