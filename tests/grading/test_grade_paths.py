"""``pplab grade`` as docs/teaching.md writes it: relative paths everywhere (``--out
grades.csv``, ``--course .``), and a failure that names its real cause in one line.

nbgrader changes into the course folder while it works, so a relative path that is not made
absolute first points somewhere else there (the gradebook's sqlite URL was the first to
break, with nbgrader's misleading "run nbgrader db upgrade"). These grade without the sandbox:
the sandbox has its own tests (test_grading_sandbox.py); the paths are what is tested here.
"""
import csv
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pplab.grading import scores
from pplab.grading.classroom import Options, root_cause

ROOT = Path(__file__).resolve().parents[2]
ONE = "01_bubble_and_1f1b"


def pplab_grade(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pplab.cli", "grade", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def class_folder(tmp_path: Path) -> Path:
    """One assignment's sources, and alice's submission of its solution."""
    shutil.copytree(ROOT / "solutions" / ONE, tmp_path / "src" / ONE)
    shutil.copytree(ROOT / "solutions" / ONE, tmp_path / "submitted" / "alice" / ONE)
    return tmp_path


def rows(path: Path) -> dict:
    with open(path) as f:
        return {(r["student"], r["task"]): float(r["score"]) for r in csv.DictReader(f)}


@pytest.mark.slow
def test_relative_out_source_feedback_and_course(tmp_path):
    here = class_folder(tmp_path)
    r = pplab_grade(here, "submitted", "--out", "grades.csv", "--source", "src",
                    "--feedback", "fb", "--no-sandbox", "-j", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(here / "grades.csv")
    assert sum(got.values()) == 10 and len(got) == 4, got
    assert (here / "fb" / "alice" / ONE / f"{ONE}.html").is_file()
    # the scratch course it made is an nbgrader course: grade into it with --course ., as
    # collected by nbgrader (a timestamp and a secret with each submission; bob handed in
    # nothing)
    course = here / "course"
    shutil.copytree(here / "grades.csv.parts" / "master", course)
    alice = here / "submitted" / "alice" / ONE
    (alice / "timestamp.txt").write_text("2026-11-26 10:00:00.000000 UTC")
    (alice / "submission_secret.txt").write_text("a1b2c3")
    (here / "submitted" / "bob").mkdir()
    r = pplab_grade(course, "../submitted", "--course", ".", "--out", "grades.csv",
                    "--no-sandbox", "-j", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sum(rows(course / "grades.csv").values()) == 10
    page = course / "feedback" / "alice" / ONE
    assert (page / f"{ONE}.html").is_file()
    # what nbgrader release_feedback reads next to each page
    assert (page / "submission_secret.txt").read_text() == "a1b2c3"
    assert (page / "timestamp.txt").read_text().startswith("2026-11-26")
    assert not (course / "feedback" / "bob").exists()   # nothing the exchange cannot deliver
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission(ONE, "alice").score == 10
    # the gradebook held by another program (the formgrader, say) while grading into it:
    # one line naming the file and the cause; --resume afterwards only writes it
    db = course / "gradebook.db"
    held = sqlite3.connect(db)
    held.execute("BEGIN EXCLUSIVE")
    again = ("../submitted", "--course", ".", "--out", "grades.csv", "--no-sandbox", "-j", "1")
    r = pplab_grade(course, *again)
    held.rollback()
    held.close()
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"pplab: grade failed: the gradebook {db} is locked by another program (the "
        "formgrader, or another nbgrader command): close it" + scores.RESUME]
    r = pplab_grade(course, *again, "--resume")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sum(rows(course / "grades.csv").values()) == 10


def test_options_hold_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    opts = Options(submitted=Path("s"), out=Path("grades.csv"), source=Path("src"),
                   course_dir=Path("."), seed=1, jobs=1, timeout=1, cell_timeout=1,
                   feedback=Path("fb"))
    assert opts.out == tmp_path / "grades.csv" and opts.course_dir == tmp_path
    assert all(p.is_absolute() for p in (opts.submitted, opts.source, opts.feedback))


@pytest.mark.slow
def test_a_source_that_is_not_a_notebook_is_named_in_one_line(tmp_path):
    (tmp_path / "src" / "01_x").mkdir(parents=True)
    (tmp_path / "src" / "01_x" / "01_x.ipynb").write_text("not json")
    (tmp_path / "submitted" / "bob" / "01_x").mkdir(parents=True)
    r = pplab_grade(tmp_path, "submitted", "--out", "g.csv", "--source", "src",
                    "--no-sandbox", "-j", "1")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "01_x.ipynb is not a readable notebook: Notebook does not appear to be JSON" \
        in r.stderr


def test_root_cause_names_the_database_error_not_nbgraders_summary():
    log = ("[GenerateAssignment | ERROR] There was an error accessing the nbgrader database. "
           "This may occur if you recently upgraded nbgrader. To resolve the issue, first "
           "BACK UP your database and then run the command `nbgrader db upgrade`.\n"
           "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) unable to open "
           "database file\n"
           "nbgrader.converters.base.NbGraderException: Please see the above traceback")
    assert root_cause(log) == ("sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) "
                               "unable to open database file")
    assert root_cause("something odd\nmore") == "something odd"


@pytest.mark.parametrize("make, cause", [
    (lambda db: db.write_text("not sqlite " * 100),
     "is not an sqlite database (damaged, or another file of that name)"),
    (lambda db: db.mkdir(), "cannot be opened: its folder is missing or cannot be written"),
])
def test_a_gradebook_that_cannot_be_written_is_named_in_one_line(tmp_path, make, cause):
    """scores.record, which writes the instructor's gradebook after grading: the sqlalchemy
    error becomes one line (a RuntimeError, which ``pplab grade`` prints) naming the file
    and what is wrong with it."""
    db = tmp_path / "gradebook.db"
    make(db)
    with pytest.raises(RuntimeError) as e:
        scores.record(tmp_path, "alice", ONE, tmp_path, [], [])
    assert str(e.value) == f"the gradebook {db} {cause}{scores.RESUME}"


def test_a_record_the_gradebook_lacks_is_named(tmp_path):
    """A gradebook without the assignment (nbgrader's MissingEntry): one line as well."""
    with scores.gradebook(tmp_path):              # a new, empty gradebook
        pass
    with pytest.raises(RuntimeError, match=rf"^the gradebook {tmp_path / 'gradebook.db'}: "
                                           r"No such assignment"):
        scores.record(tmp_path, "alice", ONE, tmp_path, [], [])
