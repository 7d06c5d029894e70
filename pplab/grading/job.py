"""Grade one (student, assignment): nbgrader's autograde and feedback in a private copy of
the course, with :class:`.execute.SandboxExecute` in place of nbgrader's ``Execute``.

Each job reads the instructor's submitted notebooks (regular files only, size-capped; a
link is refused, so a "notebook" cannot point the trusted grader at another file) into a
folder of its own, so concurrent jobs share no gradebook and no submission is ever
written. The result (scores per task, or why it could not be graded) is written
atomically as JSON, so a killed run loses nothing that finished (``--resume``).

``python -m pplab.grading.job SPEC.json`` runs one job, ``python -m pplab.grading.job
--serve`` one job per line of stdin (the local workers of ``-j``); ``run(spec)`` is the
same thing for submitit on a Slurm node.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import time
from pathlib import Path

MAX_NOTEBOOK = 20 << 20         # bytes: a submitted notebook larger than this is refused

AUTOGRADE_STEPS = ["pplab.grading.execute.SandboxExecute",
                   "nbgrader.preprocessors.IgnorePattern",
                   "nbconvert.preprocessors.ClearMetadataPreprocessor",
                   "nbgrader.preprocessors.LimitOutput",
                   "nbgrader.preprocessors.SaveAutoGrades",
                   "nbgrader.preprocessors.AssignLatePenalties",
                   "nbgrader.preprocessors.CheckCellMetadata"]


def _copy_submission(src: Path, dest: Path) -> str | None:
    """Copy the submitted notebooks; why not, if they cannot be taken."""
    dest.mkdir(parents=True)
    for path in sorted(src.iterdir()) if src.is_dir() else []:
        if not path.name.endswith(".ipynb"):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return f"{path.name} is a link or cannot be read; submit the notebook file itself"
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return f"{path.name} is not a regular file"
            if info.st_size > MAX_NOTEBOOK:
                return f"{path.name} is {info.st_size >> 20} MB; the limit is " \
                       f"{MAX_NOTEBOOK >> 20} MB"
            data = f.read(MAX_NOTEBOOK + 1)
        try:
            json.loads(data)
        except ValueError:
            return f"{path.name} is not a notebook (not JSON)"
        (dest / path.name).write_bytes(data)
    return None


def _config(course: Path, spec: dict):
    from traitlets.config import Config
    c = Config()
    c.CourseDirectory.root = str(course)
    c.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    c.Autograde.autograde_preprocessors = AUTOGRADE_STEPS
    c.SandboxExecute.timeout = int(spec["cell_timeout"])
    c.SandboxExecute.isolate = bool(spec.get("sandbox", True))
    c.SandboxExecute.memory = float(spec.get("memory_gb", 3.0))
    c.Execute.timeout = int(spec["cell_timeout"])
    return c


def _grade(spec: dict, course: Path) -> dict:
    from nbgrader.apps import NbGraderAPI
    from nbgrader.api import Gradebook
    student, assignment = spec["student"], spec["assignment"]
    api = NbGraderAPI(config=_config(course, spec))
    result = api.autograde(assignment, student, force=True, create=True)
    done = course / "autograded" / student / assignment
    if not result.get("success") or not any(done.glob("*.ipynb")):
        log = str(result.get("error") or "") + "\n" + str(result.get("log") or "")
        lines = [ln.strip() for ln in log.splitlines()
                 if re.search(r"\w(Error|Exception)\b", ln) and "NbGraderException" not in ln
                 and "[ERROR]" not in ln]
        return {"ok": False, "why": "nbgrader could not grade it: "
                                    + (lines[-1][:300] if lines else "nbgrader failed")}
    api.generate_feedback(assignment, student, force=True)
    scores = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for nb in spec["notebooks"]:
            for task, points in nb["tasks"]:
                grade = gb.find_grade(task, nb["name"], assignment, student)
                scores.append([task, float(grade.score or 0.0), float(grade.max_score)])
    return {"ok": True, "scores": scores}


def run(spec: dict) -> dict:
    """Grade one submission in ``spec["workdir"]``; write and return its result."""
    start = time.monotonic()
    work = Path(spec["workdir"])
    shutil.rmtree(work, ignore_errors=True)
    course = work / "course"
    shutil.copytree(spec["master"], course, ignore=shutil.ignore_patterns(
        "submitted", "autograded", "feedback", "*.db-journal"))
    student, assignment = spec["student"], spec["assignment"]
    why = _copy_submission(Path(spec["submitted"]) / student / assignment,
                           course / "submitted" / student / assignment)
    os.environ["PPLAB_GRADE_SEED"] = str(spec["seed"])
    os.environ.setdefault("PPLAB_EDITION_CACHE", spec.get("edition_cache", ""))
    if why is None and not any((course / "submitted" / student / assignment).glob("*.ipynb")):
        why = f"{assignment} was not submitted"
    result = {"ok": False, "why": why} if why else _grade(spec, course)
    result.update(student=student, assignment=assignment, seed=spec["seed"],
                  seconds=round(time.monotonic() - start, 2))
    if result["ok"]:
        fb = course / "feedback" / student / assignment
        if fb.is_dir():
            shutil.copytree(fb, work / "feedback", dirs_exist_ok=True)
        shutil.copytree(course / "autograded" / student / assignment, work / "autograded")
    shutil.rmtree(course, ignore_errors=True)
    write_atomic(Path(spec["result"]), result)
    return result


def write_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def serve() -> None:
    """A worker that grades job after job, so nbgrader and pplab are imported once: it reads
    a spec's path per line on stdin and answers ``done`` on the descriptor it was started
    with (stdout is moved to stderr, so nothing a library prints can mix in)."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        run(json.loads(Path(line.strip()).read_text()))
        out.write("done\n")
        out.flush()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":        # its second argument only names the run, for ps
        serve()
    else:
        run(json.loads(Path(sys.argv[1]).read_text()))
