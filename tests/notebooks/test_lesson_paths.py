"""Every exercise file a lesson sends the student to exists where the lesson says (from the
repository root, as `make lab` opens the course)."""
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "notebooks").glob("[01][0-9]_*.ipynb"))
PATH = re.compile(r"exercises/[\w./-]+\.ipynb")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name[:2])
def test_named_exercise_files_exist(lesson):
    named = {m for c in nbformat.read(lesson, as_version=4).cells for m in PATH.findall(c.source)}
    assert all((ROOT / p).is_file() for p in named), sorted(p for p in named
                                                            if not (ROOT / p).is_file())
