"""tools/build_exercises.py --lessons reads nbval's cell tags: it keeps the outputs of
``nbval-check-output`` cells only and never runs an ``nbval-skip`` cell (a real job)."""
import importlib.util
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_execute_lesson_keeps_checked_outputs_and_skips_real_jobs(tmp_path):
    spec = importlib.util.spec_from_file_location("build", ROOT / "tools" / "build_exercises.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    cells = [nbformat.v4.new_code_cell('print("checked")'),
             nbformat.v4.new_code_cell('raise SystemExit("a real job ran")'),
             nbformat.v4.new_code_cell('print("plain")')]
    cells[0].metadata["tags"] = ["nbval-check-output"]
    cells[1].metadata["tags"] = ["nbval-skip"]
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    build.execute_lesson(path)
    checked, skipped, plain = nbformat.read(path, as_version=4).cells
    assert checked.execution_count == 1 and checked.outputs[0]["text"] == "checked\n"
    assert skipped.source == 'raise SystemExit("a real job ran")' and not skipped.outputs
    assert plain.execution_count is None and not plain.outputs
