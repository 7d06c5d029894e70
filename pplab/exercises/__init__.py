"""Graders for the exercise notebooks.

Each ``check_*`` function takes the student's answer (usually a function), compares it with
pplab's own generators and simulator on many cases — including ones the notebook never
shows — and raises ``AssertionError`` with a message that says which case failed, what was
expected and a hint. On success it prints a short confirmation and returns ``True``.

Every graded task is a row of :data:`~.tasks.TASKS`; this package exports each task's
grader by its name (those of exercises 06 and 07 need torch, so they load when asked for).
"""
from __future__ import annotations

# the pure graders load with the package: the sandbox's copy of pplab keeps whole what
# ``import pplab.exercises`` runs (student_edition._loaded_by_notebooks)
from . import bubble, derive, pipeline, puzzles, schedules  # noqa: F401
from .memory import Budget, check_layout
from .pipeline import check_real_run
from .tasks import TASKS


def __getattr__(name: str):
    if name in TASKS:
        return TASKS[name].grader()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [*TASKS, "Budget", "check_layout", "check_real_run"]
