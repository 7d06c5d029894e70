"""Lesson notebooks run headless, every canvas they build survives every control value, and
every output the notebook saves is what a fresh run prints.

All three read the one run of each lesson the session makes (tests/helpers/lesson_run.py:
Run All in a fresh kernel, then, in the same kernel, every control of every canvas moved
through its whole range; a canvas records any unexpected exception in ``canvas.errors``, bad
input being a message, not an error). The saved outputs are compared as nbval 0.11's strict
mode compares them (``pytest --nbval notebooks`` still does the same on its own run):
solutions/ stays under nbval in ``make test``.
"""
from collections import defaultdict
from copy import deepcopy
from pathlib import Path

import nbformat
import pytest
from cell_tags import checked, skipped, tags
from lesson_run import lesson_run
from nbval.plugin import coalesce_streams, transform_streams_for_comparison

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: what nbval 0.11 leaves out of a comparison (``IPyNbFile.skip_compare`` without --nbdime)
NBVAL_SKIPS = {"metadata", "traceback", "prompt_number", "output_type", "name",
               "execution_count", "application/vnd.jupyter.widget-view+json",
               "image/png", "image/jpeg"}


def as_nbval_compares(outputs) -> dict[str, list]:
    """A cell's outputs as nbval 0.11 compares them (``IPyNbCell.compare_outputs``): streams
    merged per name, then each output field and MIME type the list of its values in order;
    two cells agree when these are equal."""
    flat = defaultdict(list)
    for out in transform_streams_for_comparison(coalesce_streams(deepcopy(list(outputs)))):
        for key, value in out.items():
            if key == "data":
                for mime, text in value.items():
                    if mime not in NBVAL_SKIPS:
                        flat[mime].append(text)
            elif key not in NBVAL_SKIPS:
                flat[key].append(value)
    return dict(flat)


def compared_cells(nb) -> list[int]:
    """The cells nbval compares in strict mode: run (not ``nbval-skip``), saved executed, and
    not ``nbval-ignore-output``."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and not skipped(c)
            and c.execution_count is not None and "nbval-ignore-output" not in tags(c)]


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_lesson_runs_and_every_canvas_value_works(path):
    out = lesson_run(path).sweep
    assert "SWEEP" in out and "errors: []" in out, out


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_saved_outputs_are_what_a_fresh_run_prints(path):
    """nbval's check of the lesson, on the session's run: every compared cell's outputs
    equal the saved ones (a cell that raised has already failed the run)."""
    nb = nbformat.read(path, as_version=4)
    run = lesson_run(path)
    cells = compared_cells(nb)
    assert cells, "no saved output to compare"
    for i in cells:
        assert as_nbval_compares(run.outputs[i]) == as_nbval_compares(nb.cells[i].outputs), \
            f"cell {i} prints other than its saved output:\n{nb.cells[i].source[:300]}"


def test_the_comparison_is_the_one_nbval_makes(tmp_path):
    """nbval 0.11 itself, run on a small notebook, fails exactly the cells that
    ``as_nbval_compares`` tells apart on lesson_run's execution of it: a stream split in two
    and another execution count agree; another text, an ignored cell, output where none was
    saved do as nbval says."""
    import re
    import subprocess
    import sys
    from lesson_run import run_all
    cells = [('print("same")', [nbformat.v4.new_output("stream", name="stdout", text="same\n")]),
             ('print("a"); print("b")',
              [nbformat.v4.new_output("stream", name="stdout", text=t) for t in ("a\n", "b\n")]),
             ("6 * 7", [nbformat.v4.new_output("execute_result", {"text/plain": "42"},
                                                execution_count=9)]),
             ('print("new")', [nbformat.v4.new_output("stream", name="stdout", text="old\n")]),
             ('print("x")', [nbformat.v4.new_output("stream", name="stdout", text="y\n")]),
             ('import sys; print("warn", file=sys.stderr)', [])]
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3",
                                                            "display_name": "Python 3",
                                                            "language": "python"}})
    for n, (source, outputs) in enumerate(cells, 1):
        nb.cells.append(nbformat.v4.new_code_cell(source, outputs=outputs, execution_count=n))
    nb.cells[4].metadata["tags"] = ["nbval-ignore-output"]
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    said = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env",
                           "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-rf",
                           str(path)], capture_output=True, text=True, cwd=tmp_path).stdout
    nbval_fails = {int(n) for n in re.findall(r"FAILED \S*tiny.ipynb::Cell (\d+)", said)}
    run = run_all(path)
    ours = {i for i in compared_cells(nb)
            if as_nbval_compares(run.outputs[i]) != as_nbval_compares(nb.cells[i].outputs)}
    assert nbval_fails == ours == {3, 5}, said[-2000:]


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_lesson_conventions(path):
    """Checked cells are saved executed (else nbval silently skips them), nothing else carries
    outputs, widget cells are tagged for nbval, and the file stays small."""
    nb = nbformat.read(path, as_version=4)
    assert path.stat().st_size < 300_000
    n_checked = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if checked(cell):
            assert cell.execution_count is not None and cell.outputs, cell.source[:80]
            text = "".join(o.get("text", "") for o in cell.outputs)
            assert "0x" not in text and " at 0x" not in text       # no memory addresses
            n_checked += 1
        else:
            assert not cell.outputs, f"unchecked cell saved with outputs: {cell.source[:80]}"
        if "_canvas(" in cell.source:
            assert "nbval-ignore-output" in cell.metadata.get("tags", [])
    assert n_checked >= 1
    assert "widgets" not in nb.metadata


def test_welcome_guards_the_real_run():
    nb = nbformat.read(ROOT / "notebooks" / "00_setup_and_first_run.ipynb", as_version=4)
    runs = [c for c in nb.cells if "run_schedule(" in c.source]
    assert runs and all(skipped(c) for c in runs)
