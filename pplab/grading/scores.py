"""What the gradebook says: graded tasks of a source notebook, scores, the CSV, notes."""
from __future__ import annotations

import csv
import html
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

COLUMNS = ["student", "assignment", "task", "score", "max_score"]


def graded_tasks(notebook: Path) -> list[tuple[str, float]]:
    """(grade_id, points) of every autograded cell, in notebook order."""
    cells = json.loads(notebook.read_text())["cells"]
    out = []
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            out.append((meta["grade_id"], float(meta.get("points", 0))))
    return out


#: what sqlite's message means for the instructor, by a phrase in it
SQLITE_CAUSES = (
    ("file is not a database", "is not an sqlite database (damaged, or another file of that "
                               "name)"),
    ("database is locked", "is locked by another program (the formgrader, or another nbgrader "
                           "command): close it"),
    ("readonly database", "cannot be written: check its owner and mode, and its folder's"),
    ("unable to open database file", "cannot be opened: its folder is missing or cannot be "
                                     "written"),
)


def gradebook_problem(path: Path, error: Exception) -> str:
    """One line: which gradebook, and what is wrong with it (not nbgrader's "db upgrade")."""
    text = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
    why = next((means for phrase, means in SQLITE_CAUSES if phrase in text), None)
    return f"the gradebook {path} {why}" if why else f"the gradebook {path}: {text[:200]}"


@contextmanager
def gradebook(folder: Path, then: str = ""):
    """nbgrader's Gradebook of the course in ``folder``; a database error, or a record it
    lacks, as a RuntimeError whose one line names the file and the cause (+ ``then``)."""
    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SQLAlchemyError

    from .course import nbgrader_env
    os.environ["PATH"] = nbgrader_env()["PATH"]      # a new gradebook runs `alembic` from PATH
    path = Path(folder) / "gradebook.db"
    try:
        with Gradebook(f"sqlite:///{path}") as gb:
            yield gb
    except (SQLAlchemyError, MissingEntry) as e:
        raise RuntimeError(gradebook_problem(path, e) + then) from None


def scores(root: Path, student: str, assignment: str, notebook: str,
           tasks: list[tuple[str, float]]) -> list[tuple[str, float, float]]:
    """(task, score, max_score) from the course's gradebook."""
    out = []
    with gradebook(root) as gb:
        for task, points in tasks:
            grade = gb.find_grade(task, notebook, assignment, student)
            out.append((task, float(grade.score), float(grade.max_score)))
    return out


def write_csv(path: Path, rows: list[tuple]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for student, assignment, task, score, max_score in rows:
            writer.writerow([student, assignment, task, f"{score:g}", f"{max_score:g}"])


def write_note(folder: Path, assignment: str, reason: str, tasks) -> Path:
    """A feedback page for an assignment nbgrader could not grade: why, and what scored 0."""
    folder.mkdir(parents=True, exist_ok=True)
    items = "".join(f"<li>{html.escape(t)}: 0 / {p:g}</li>" for t, p in tasks)
    path = folder / "not_graded.html"
    path.write_text(f"<html><body><h1>{html.escape(assignment)}: not graded</h1>"
                    f"<p>{html.escape(reason)}</p><p>These tasks score 0:</p><ul>{items}</ul>"
                    "</body></html>\n")
    return path


#: said after a failure to write the course's gradebook: nothing graded is lost
RESUME = "; every result is kept: fix it, then run the same command with --resume"


def record(course_dir: Path, student: str, assignment: str, work: Path, notebooks: list,
           got: list, timestamp=None) -> None:
    """Write a job's scores into the instructor's own gradebook (jobs grade in private
    copies, so only this process ever writes it), with the submission's ``timestamp`` (a
    datetime, from its ``timestamp.txt``: ``nbgrader export`` shows it next to the due
    date), and keep the autograded notebook there in place of an earlier run's."""
    score = {task: s for task, s, _ in got}
    with gradebook(course_dir, RESUME) as gb:
        gb.update_or_create_student(student)
        gb.update_or_create_submission(assignment, student,
                                       **({"timestamp": timestamp} if timestamp else {}))
        for nb in notebooks:
            for task, _ in nb["tasks"]:
                grade = gb.find_grade(task, nb["name"], assignment, student)
                grade.auto_score = score.get(task, 0.0)
                grade.needs_manual_grade = False
        gb.db.commit()
    done = Path(course_dir) / "autograded" / student / assignment
    if (work / "autograded").is_dir():
        remove_read_only(done)          # nbgrader leaves it read-only; a regrade replaces it
        shutil.copytree(work / "autograded", done)


def remove_read_only(folder: Path) -> None:
    """Remove ``folder`` (if there) whose files and folders nbgrader made read-only; a link
    is removed, never followed."""
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
        return
    if not folder.is_dir():
        return
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            os.chmod(path, 0o700)
    shutil.rmtree(folder)
