"""The student's view of points: each task's check cell runs inside ``task(name, points)``,
and the notebook's last cell calls ``points_so_far()``.

This tally is only what the public checks saw in this kernel; the grade comes from nbgrader
running the hidden tests (``pplab grade``), which may find what the public cases missed.
"""
from __future__ import annotations

from contextlib import contextmanager

_TALLY: dict[str, tuple[float, float]] = {}   # task -> (earned, possible)


@contextmanager
def task(name: str, points: float):
    """Run a task's public check: record its points if it passes, 0 if it raises."""
    _TALLY[name] = (0.0, float(points))
    try:
        yield
    except Exception as e:
        print(f"✗ {name}: 0 of {points:g} points so far — {type(e).__name__}: {e}")
        raise
    _TALLY[name] = (float(points), float(points))
    print(f"✓ {name}: {points:g} of {points:g} points (public check)")


def points_so_far(tasks: dict[str, float] | None = None) -> tuple[float, float]:
    """Print and return (earned, possible) over ``tasks`` (name -> points) or every task
    checked in this kernel; tasks whose check never ran count 0."""
    tasks = tasks or {n: p for n, (_, p) in _TALLY.items()}
    earned = 0.0
    for name, points in tasks.items():
        got = _TALLY.get(name, (0.0, points))[0]
        earned += got
        mark = "✓" if got == points else "·"
        print(f"{mark} {name}: {got:g} / {points:g}")
    possible = float(sum(tasks.values()))
    print(f"points so far: {earned:g} / {possible:g} (public checks; hidden tests run when "
          "your work is graded)")
    return earned, possible
