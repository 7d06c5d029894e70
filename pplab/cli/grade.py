"""``pplab grade SUBMITTED_DIR --out grades.csv``: autograde a class with nbgrader, every
submission in a sandbox of its own, verdicts in this process (docs/teaching.md).

SUBMITTED_DIR is nbgrader's layout, ``<student>/<assignment>/<notebook>.ipynb``; it is only
ever read. Without ``--course`` a scratch course is made from the source notebooks
(``solutions/``); with it, the instructor's own course and gradebook are used. ``-j N``
grades N submissions at once (default: the cores); ``--slurm`` sends one Slurm job per
submission through submitit; ``--resume`` after a killed run grades only what is missing.
Where no sandbox can be made it refuses, unless ``--no-sandbox`` says to grade without one.
"""
from __future__ import annotations

import os
import secrets
import sys
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
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds per notebook (default: 600)")
    p.add_argument("--cell-timeout", type=int, default=180,
                   help="seconds per cell (default: 180)")
    p.add_argument("--seed", type=int, help="seed of the hidden cases (default: drawn now)")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                   help="submissions graded at once (default: the cores)")
    p.add_argument("--slurm", action="store_true",
                   help="one Slurm job per submission, submitted with submitit")
    p.add_argument("--slurm-partition", help="partition for --slurm (default: the cluster's)")
    p.add_argument("--resume", action="store_true",
                   help="keep what a killed run finished; grade the rest with fresh hidden "
                        "cases")
    p.add_argument("--memory", type=float, default=3.0,
                   help="GiB of address space per sandboxed process (default: 3)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="grade without bubblewrap (only where none can be made; the student's "
                        "code then runs as you, with your file access)")


def _check(args) -> tuple[Path, Path, Path | None, Path]:
    submitted = Path(args.submitted)
    if not submitted.is_dir():
        raise UsageError(f"SUBMITTED_DIR {submitted} is not a folder")
    out = Path(args.out)
    if not out.parent.resolve().is_dir():
        raise UsageError(f"--out: folder {out.parent} does not exist")
    if not os.access(out.parent.resolve(), os.W_OK | os.X_OK):
        raise UsageError(f"--out: cannot write in {out.parent.resolve()} (grades, feedback and "
                         "the run's state go there)")
    course = Path(args.course) if args.course else None
    source = (course / "source") if course else Path(args.source)
    if course is not None and not course.is_dir():
        raise UsageError(f"--course {course} is not a folder")
    if not source.is_dir():
        raise UsageError(f"no source notebooks in {source}")
    if args.timeout <= 0 or args.cell_timeout <= 0 or args.jobs < 1 or args.memory <= 0:
        raise UsageError("--timeout, --cell-timeout, --jobs and --memory must be positive")
    if not any(p.is_dir() for p in submitted.iterdir()):
        raise UsageError(f"no student folders in {submitted}")
    return submitted, out, course, source


def main(args) -> int:
    from ..grading.classroom import Options, grade_class
    from ..grading.untrusted.sandbox import limits_note, unavailable
    submitted, out, course_dir, source = _check(args)
    if not args.no_sandbox:
        why = unavailable()
        if why:
            raise UsageError(f"cannot sandbox the submissions: {why}. Fix that, or pass "
                             "--no-sandbox to grade without one (their code then runs as you)")
        note = limits_note()         # before any worker starts: it may move this process
        if note:
            print(f"pplab: {note}", file=sys.stderr)
    if args.slurm:
        from ..probe.slurm import unavailable_reason
        why = unavailable_reason()
        if why:
            raise UsageError(f"--slurm: {why}")
    opts = Options(submitted=submitted, out=out, source=source, course_dir=course_dir,
                   seed=secrets.randbits(32) if args.seed is None else args.seed,
                   jobs=args.jobs, timeout=args.timeout, cell_timeout=args.cell_timeout,
                   sandbox=not args.no_sandbox, slurm=args.slurm, resume=args.resume,
                   feedback=Path(args.feedback) if args.feedback else None,
                   memory_gb=args.memory, slurm_partition=args.slurm_partition)
    try:
        return grade_class(opts)
    except (RuntimeError, OSError) as e:     # the cause in one line, not a traceback
        print(f"pplab: grade failed: {e}", file=sys.stderr)
        return 1
