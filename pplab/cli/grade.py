"""``pplab grade SUBMITTED_DIR --out grades.csv``: autograde a class with nbgrader.

SUBMITTED_DIR is nbgrader's layout, ``<student>/<assignment>/<notebook>.ipynb``. Without
``--course`` a scratch course is made from the source notebooks (``solutions/``); with it,
the instructor's own course directory and gradebook are used. A notebook that is missing,
hangs past ``--timeout`` or cannot be graded scores 0 on its tasks with the reason in the
feedback, and the run goes on.
"""
from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path

from . import UsageError

DEFAULT_SOURCE = Path(__file__).resolve().parents[2] / "solutions"


def add_arguments(p) -> None:
    p.add_argument("submitted", help="folder of <student>/<assignment>/<notebook>.ipynb")
    p.add_argument("--out", required=True, help="CSV to write: student,assignment,task,...")
    p.add_argument("--course", help="an nbgrader course directory to grade in (default: a "
                   "scratch one made from --source)")
    p.add_argument("--source", default=str(DEFAULT_SOURCE),
                   help="source notebooks, one folder per assignment (default: solutions/)")
    p.add_argument("--feedback", help="where per-student feedback HTML goes (default: "
                   "feedback/ next to --out)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per notebook")
    p.add_argument("--cell-timeout", type=int, default=180, help="seconds per cell")
    p.add_argument("--seed", type=int, help="seed of the hidden cases (default: drawn now)")


def _check(args) -> tuple[Path, Path, Path | None, Path]:
    submitted = Path(args.submitted)
    if not submitted.is_dir():
        raise UsageError(f"SUBMITTED_DIR {submitted} is not a folder")
    out = Path(args.out)
    if not out.parent.resolve().is_dir():
        raise UsageError(f"--out: folder {out.parent} does not exist")
    course = Path(args.course) if args.course else None
    source = (course / "source") if course else Path(args.source)
    if course is not None and not course.is_dir():
        raise UsageError(f"--course {course} is not a folder")
    if not source.is_dir():
        raise UsageError(f"no source notebooks in {source}")
    if args.timeout <= 0 or args.cell_timeout <= 0:
        raise UsageError("--timeout and --cell-timeout must be positive")
    return submitted, out, course, source


def grade_assignment(root, submitted, student, assignment, source, feedback_dir, args):
    """Rows for one student's assignment; writes its feedback."""
    from ..grading import course, scores
    rows = []
    for nb in sorted((source / assignment).glob("*.ipynb")):
        tasks = scores.graded_tasks(nb)
        if not (submitted / student / assignment / nb.name).exists():
            ok, why = False, f"{assignment}/{nb.name} was not submitted"
        else:
            ok, why = course.autograde(root, submitted, student, assignment, args.timeout,
                                       args.cell_timeout, args.seed)
        if ok:
            course.feedback(root, student, assignment)
            got = scores.scores(root, student, assignment, nb.stem, tasks)
        else:
            print(f"  {assignment}: 0 on every task — {why}")
            scores.write_note(feedback_dir / student / assignment, assignment, why, tasks)
            got = [(t, 0.0, p) for t, p in tasks]
        rows += [(student, assignment, t, s, m) for t, s, m in got]
    return rows


def main(args) -> int:
    from ..grading import course, scores
    submitted, out, course_dir, source = _check(args)
    args.seed = secrets.randbits(32) if args.seed is None else args.seed
    feedback_dir = Path(args.feedback) if args.feedback else out.parent / "feedback"
    students = sorted(p.name for p in submitted.iterdir() if p.is_dir())
    if not students:
        raise UsageError(f"no student folders in {submitted}")
    with tempfile.TemporaryDirectory(prefix="pplab-grade-") as tmp:
        root = course_dir.resolve() if course_dir else Path(tmp)
        names = course.assignments(source) if course_dir else course.scratch_course(source, root)
        print(f"grading {len(students)} students × {len(names)} assignments "
              f"(hidden-case seed {args.seed})", flush=True)
        rows = []
        for k, student in enumerate(students, 1):
            print(f"student {k} of {len(students)}: {student}", flush=True)
            for name in names:
                rows += grade_assignment(root, submitted, student, name, source,
                                         feedback_dir, args)
            made = root / "feedback" / student
            if made.is_dir():
                shutil.copytree(made, feedback_dir / student, dirs_exist_ok=True)
    scores.write_csv(out, rows)
    print(f"wrote {out} ({len(rows)} rows) and feedback in {feedback_dir}")
    return 0
