"""What the gradebook says: graded tasks of a source notebook, scores, the CSV, notes."""
from __future__ import annotations

import csv
import html
import json
import shutil
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


def scores(root: Path, student: str, assignment: str, notebook: str,
           tasks: list[tuple[str, float]]) -> list[tuple[str, float, float]]:
    """(task, score, max_score) from the course's gradebook."""
    from nbgrader.api import Gradebook
    out = []
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
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


def record(course_dir: Path, student: str, assignment: str, work: Path, notebooks: list,
           got: list) -> None:
    """Write a job's scores into the instructor's own gradebook (jobs grade in private
    copies, so only this process ever writes it) and keep the autograded notebook there."""
    from nbgrader.api import Gradebook
    score = {task: s for task, s, _ in got}
    with Gradebook(f"sqlite:///{Path(course_dir) / 'gradebook.db'}") as gb:
        gb.update_or_create_student(student)
        gb.update_or_create_submission(assignment, student)
        for nb in notebooks:
            for task, _ in nb["tasks"]:
                grade = gb.find_grade(task, nb["name"], assignment, student)
                grade.auto_score = score.get(task, 0.0)
                grade.needs_manual_grade = False
        gb.db.commit()
    done = Path(course_dir) / "autograded" / student / assignment
    if (work / "autograded").is_dir():
        shutil.copytree(work / "autograded", done, dirs_exist_ok=True)
