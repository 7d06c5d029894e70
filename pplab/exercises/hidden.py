"""Hidden tests: cases drawn at grading time.

``pplab grade`` never runs :func:`grade` in the student's kernel: it reads a grade cell's
``grade("check_x", ...)`` line, draws the cases with :func:`draw_cases` and judges the
answers in its own process (:mod:`pplab.grading.verdict`). :func:`grade` is the same check
run in a notebook's own kernel (the solutions under nbval, an instructor trying a
submission by hand): a rehearsal, not the grade. In a kernel,

* a lookup table of the visible cases fails: hidden cases come from a generator seeded by
  ``PPLAB_GRADE_SEED`` (``pplab grade`` draws a fresh one every run, ``--resume`` included,
  and shows only its :func:`seed_digest`; unset, a fresh seed is drawn), so no table written
  before grading holds them;
* casual patches of a grader or the library do not reach it: :func:`grade` loads a fresh,
  private copy of pplab's pure core from the installed files (under another module name).
  Code in the same process can still reach that copy (docs/teaching.md, threat model):
  only the trusted path is the grade.

A hidden test cell in a source notebook reads::

    import sys; sys.modules.pop("pplab.exercises.hidden", None)
    from pplab.exercises.hidden import grade
    grade("check_bubble_formulas", bubble_of_total, bubble_of_ideal)
"""
from __future__ import annotations

import hashlib
import importlib.util
import itertools
import os
import secrets
import sys
from pathlib import Path
from random import Random

from .tasks import TASKS

SEED_ENV = "PPLAB_GRADE_SEED"
_SEALED_PREFIX = "_pplab_sealed"
_counter = itertools.count()


def grading_seed() -> int:
    """The run's seed: from the environment when ``pplab grade`` set it, else fresh."""
    value = os.environ.get(SEED_ENV)
    if value is None:
        value = os.environ[SEED_ENV] = str(secrets.randbits(32))
    return int(value)


def seed_digest(seed: int) -> str:
    """What feedback and logs show of a run's seed: enough for the instructor (who keeps the
    seed in the run's own folder) to match a dispute to a run, nothing a student can replay."""
    return hashlib.sha256(f"pplab-grade-seed:{seed}".encode()).hexdigest()[:12]


def load_sealed() -> str:
    """Load a private copy of pplab from the files next to this one; return its name."""
    for name in [m for m in sys.modules if m.startswith(_SEALED_PREFIX)]:
        del sys.modules[name]
    root = Path(__file__).resolve().parents[1]
    name = f"{_SEALED_PREFIX}{next(_counter)}"
    spec = importlib.util.spec_from_file_location(
        name, root / "__init__.py", submodule_search_locations=[str(root)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return name


def draw_cases(check: str, seed: int | None = None):
    """The hidden cases of ``check`` for this grading run (None: the answer is data, so
    there is nothing to draw)."""
    return _draw(TASKS[check], seed)


def _draw(task, seed: int | None):
    if task.cases is None:
        return None
    seed = grading_seed() if seed is None else seed
    return task.cases(Random(f"{seed}:{task.check}"))


def grade(check: str, *answers, **kwargs):
    """Grade ``answers`` with a private copy of ``check`` on freshly drawn hidden cases (the
    task's row, too, is read from the private copy)."""
    package = load_sealed()
    task = importlib.import_module(f"{package}.exercises.tasks").TASKS[check]
    cases = _draw(task, None)
    if cases is not None:
        kwargs["cases"] = cases
    result = task.grader(package)(*answers, **kwargs)
    print(f"hidden tests passed (seed digest {seed_digest(grading_seed())}) ✓")
    return result
