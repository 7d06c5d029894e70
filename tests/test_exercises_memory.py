"""Exercise 03 (memory): the solution passes its graders, the unsolved exercise fails every
grader cell, the graders reject typical wrong answers, and the build is reproducible."""
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from pplab.exercises import (check_layer_activations, check_layout, check_peak_1f1b,
                             check_zero_bytes)
from pplab.memory import ParallelConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_exercises  # noqa: E402

NAME = "03_memory.ipynb"
GRADERS = 4


def _run(path, allow_errors):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=180, allow_errors=allow_errors,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def _graders(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith("check_")]


def test_solution_passes_every_grader():
    nb = _run(ROOT / "solutions" / NAME, allow_errors=False)
    cells = _graders(nb)
    assert len(cells) == GRADERS
    for c in cells:
        assert "✓" in "".join(o.get("text", "") for o in c.outputs), c.source


def test_unsolved_exercise_fails_every_grader():
    nb = _run(ROOT / "exercises" / NAME, allow_errors=True)
    cells = _graders(nb)
    assert len(cells) == GRADERS
    for c in cells:
        errs = [o for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert errs, f"grader passed on the unsolved exercise: {c.source}"
        assert errs[0]["ename"] in ("AssertionError", "NameError"), errs[0]["ename"]
    assert not any("BEGIN SOLUTION" in c.source for c in nb.cells)
    assert sum(c.source.count("raise NotImplementedError") for c in nb.cells
               if c.cell_type == "code") == 4


def test_committed_exercise_matches_its_source_and_rebuild_is_idempotent(tmp_path):
    assert (ROOT / "exercises" / NAME) not in build_exercises.build(check=True)
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    build_exercises.build(root=tmp_path)
    snap = (tmp_path / "exercises" / NAME).read_bytes()
    assert snap == (ROOT / "exercises" / NAME).read_bytes()
    assert build_exercises.build(root=tmp_path) == []
    assert (tmp_path / "exercises" / NAME).read_bytes() == snap


# ---- typical wrong answers ---------------------------------------------------------------------
def _raises(fn, *args, match):
    with pytest.raises(AssertionError, match=match):
        fn(*args)


def test_zero_grader_rejects_sharding_gradients_in_stage_1():
    def wrong(psi, nd, stage):
        return {0: 16 * psi, 1: 2 * psi + 14 * psi / nd, 2: 2 * psi + 14 * psi / nd,
                3: 16 * psi / nd}[stage]
    _raises(check_zero_bytes, wrong, match="ZeRO-1 shards only")


def test_activation_grader_rejects_the_seed_formula_and_missing_sp():
    _raises(check_layer_activations, lambda s, b, h, a, t=1, sp=False, recompute="none":
            b * s * (10 * h + a * s) * 2, match="expected")

    def no_sp(s, b, h, a, t=1, sp=False, recompute="none"):
        if recompute == "full":
            return 2 * s * b * h
        attn = 5 * a * s / (h * t) if recompute == "none" else 0
        return s * b * h * (10 + 24 / t + attn)
    _raises(check_layer_activations, no_sp, match="SP also divides")


def test_peak_grader_rejects_p_on_every_rank_and_even_split():
    _raises(check_peak_1f1b, lambda P, M, r, L, w: P * (L // P) * w, match="min\\(P − r, M\\)")
    _raises(check_peak_1f1b, lambda P, M, r, L, w: min(P - r, M) * (L // P) * w,
            match="extra layer")


def test_layout_grader_rejects_bad_layouts():
    good = ParallelConfig(tp=2, pp=8, dp=4, zero=2, sp=True, recompute="selective",
                          microbatches=128, schedule="zbv")
    assert check_layout(good)
    _raises(check_layout, good.with_(dp=2), match="budget is 64")
    _raises(check_layout, good.with_(microbatches=32), match="global batch")
    _raises(check_layout, good.with_(zero=0, recompute="none"), match="GB >")
    _raises(check_layout, good.with_(tp=8, pp=8, dp=1, microbatches=512, schedule="1f1b",
                                     recompute="full", zero=0), match="step is")
    _raises(check_layout, "TP=2 PP=8", match="ParallelConfig")
