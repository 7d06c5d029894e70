"""The exchange against a mischievous class, with real Unix accounts and nbgrader's commands.

``pplab classroom init`` sets the class up (no hub: nbgrader's exchange needs none); the grader
releases assignment 01; students fetch and submit with nbgrader as themselves; one of them
tries what students try, and the grader's ``nbgrader collect`` must collect each honest
submission, refuse the rest, and name each refused folder with its reason:

* renaming the course's exchange folder (the root is sticky);
* ``nbgrader submit --student=<classmate>`` (owner is not the student named);
* a folder named for a classmate and dated 2099 (owner, and the future date);
* folders of their own with a garbage date, an empty or linked ``submission_secret.txt``, no
  ``timestamp.txt``, or a notebook linked to the grader's answer key;
* a course folder made in the exchange before ``init`` (init refuses to take it over).

The answers stay where students cannot read them: the course's copy in the grader's private
home, and the source folder init copied them from made root-only.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import classroom_hub as C

pytestmark = pytest.mark.slow

COURSE, ONE = "pplexch", "01_bubble_and_1f1b"
MALLORY, BOB, CAROL = "pplt-mallory", "pplt-bob", "pplt-carol"
TEACHER, GRADER = "pplt-teacher", "pplt-grader"


@pytest.fixture(scope="module")
def klass():
    reason = C.skip_reason()
    if reason:
        pytest.skip(reason)
    with C.class_set_up([MALLORY, BOB, CAROL], [TEACHER], GRADER) as (accounts, folder):
        source = folder / "solutions"
        shutil.copytree(C.ROOT / "solutions" / ONE, source / ONE)
        values = {"course_id": COURSE, "students": C.GROUPS[0], "instructors": C.GROUPS[1],
                  "grader": GRADER, "course_dir": f"/home/{GRADER}/{COURSE}",
                  "exchange": str(folder / "exchange"), "home": str(folder / "hub"),
                  "source": str(source)}
        hub = C.Hub(folder, values)           # pplab classroom init, run for real
        yield hub, folder


def as_user(hub: C.Hub, name: str, cmd: str, cwd: str | None = None, role: str = "student"):
    from pplab.classroom.hub import environment
    from pplab.classroom.settings import Settings
    env = dict(os.environ, HOME=f"/home/{name}",
               **environment(Settings.read(hub.settings), role))
    return subprocess.run([shutil.which("runuser"), "-u", name, "--", "bash", "-c", cmd],
                          cwd=cwd or f"/home/{name}", env=env, capture_output=True,
                          text=True, timeout=600)


def test_a_class_cannot_rearrange_the_exchange(klass):
    hub, folder = klass
    exchange, course_dir = folder / "exchange", f"/home/{GRADER}/{COURSE}"
    grader = lambda cmd: as_user(hub, GRADER, cmd, course_dir, "grader")  # noqa: E731
    r = grader(f"nbgrader release_assignment {ONE}")
    assert r.returncode == 0, r.stderr[-2000:]
    st = exchange.stat()
    assert (st.st_uid, oct(st.st_mode & 0o7777)) == (0, "0o1777")
    inbound = exchange / COURSE / "inbound"
    assert oct(inbound.stat().st_mode & 0o7777) == "0o3733"

    # the course's folder cannot be renamed away by a student
    r = as_user(hub, MALLORY, f"mv {exchange / COURSE} {exchange / 'mine'}")
    assert r.returncode != 0 and (exchange / COURSE / "outbound" / ONE).is_dir()

    for name in (MALLORY, BOB):
        r = as_user(hub, name, f"nbgrader fetch_assignment {ONE} && nbgrader submit {ONE}")
        assert r.returncode == 0, (name, r.stderr[-2000:])
    honest = {p.name.split("+")[0]: p.name for p in inbound.iterdir()}
    # handed in under a classmate's name, the nbgrader way
    r = as_user(hub, MALLORY, f"nbgrader submit {ONE} --student={CAROL}")
    assert r.returncode == 0, r.stderr[-2000:]
    # by hand: a folder for Bob dated 2099, and malformed ones of Mallory's own
    mine = f"/home/{MALLORY}/{ONE}"
    plant = {
        f"{BOB}+{ONE}+2099-01-01 00:00:00.000000 UTC+x": "echo '2099-01-01 00:00:00 UTC' > "
        "timestamp.txt; echo s > submission_secret.txt",
        f"{MALLORY}+{ONE}+not a date+x": "echo s > submission_secret.txt; date > timestamp.txt",
        f"{MALLORY}+{ONE}+2025-01-01 00:00:01.000000 UTC+e": ": > submission_secret.txt; "
        "echo '2025-01-01 00:00:01 UTC' > timestamp.txt",
        f"{MALLORY}+{ONE}+2025-01-01 00:00:02.000000 UTC+l": "ln -s /etc/hostname "
        "submission_secret.txt; echo '2025-01-01 00:00:02 UTC' > timestamp.txt",
        f"{MALLORY}+{ONE}+2025-01-01 00:00:03.000000 UTC+t": "echo s > submission_secret.txt",
        f"{MALLORY}+{ONE}+2025-01-01 00:00:04.000000 UTC+k": "echo s > submission_secret.txt; "
        f"echo '2025-01-01 00:00:04 UTC' > timestamp.txt; rm {ONE}.ipynb; "
        f"ln -s {course_dir}/source/{ONE}/{ONE}.ipynb {ONE}.ipynb",
    }
    for name, then in plant.items():
        r = as_user(hub, MALLORY, f"mkdir '{inbound / name}' && cp -r {mine}/. "
                                  f"'{inbound / name}' && cd '{inbound / name}' && {then}")
        assert r.returncode == 0, r.stderr
    # nbgrader collects each student's newest folder: Mallory's honest one is dated back to
    # 2024 (by the test), so each of her malformed ones, dated 2025, would win if it passed
    honest_stamp = (inbound / honest[MALLORY] / "timestamp.txt").read_text()
    os.rename(inbound / honest[MALLORY], inbound / honest[MALLORY].replace(
        honest[MALLORY].split("+")[2], "2024-06-01 00:00:00.000000 UTC"))

    r = grader(f"nbgrader collect {ONE}")
    said = r.stdout + r.stderr
    assert r.returncode == 0, said[-3000:]
    submitted = Path(course_dir) / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == sorted([MALLORY, BOB]), said
    reasons = {
        f"{CAROL}+{ONE}": f"named for {CAROL} but was handed in by {MALLORY}",
        f"{BOB}+{ONE}+2099": f"named for {BOB} but was handed in by {MALLORY}",
        f"{MALLORY}+{ONE}+not a date": "is not a date",
        "+e:": "its submission_secret.txt is empty",
        "+l:": "its submission_secret.txt is not a plain file",
        "+t:": "it has no timestamp.txt",
        "+k:": f"{ONE}.ipynb in it is a link or not a plain file",
    }
    skipped = [ln for ln in said.splitlines() if "Skipped" in ln]
    for where, why in reasons.items():
        assert any(where in ln and why in ln for ln in skipped), (where, why, skipped)
    assert len(skipped) == len(reasons), skipped
    bob_stamp = (submitted / BOB / ONE / "timestamp.txt").read_text()
    assert "2099" not in bob_stamp
    mallory = submitted / MALLORY / ONE
    assert (mallory / "timestamp.txt").read_text() == honest_stamp
    for path in mallory.rglob("*"):
        assert not path.is_symlink(), path
    assert (mallory / "submission_secret.txt").read_text().strip() not in ("", "s")


def test_init_refuses_a_course_folder_a_student_made(klass):
    """A student made the exchange folder of a course before its first init: init stops
    and says whose it is, rather than run the course in a folder the student owns."""
    hub, folder = klass
    from pplab.classroom import setup
    from pplab.classroom.settings import Settings
    s = dataclasses.replace(Settings.read(hub.settings), course_id="pplexch-next")
    r = as_user(hub, MALLORY, f"mkdir {folder / 'exchange' / s.course_id}")
    assert r.returncode == 0, r.stderr
    with pytest.raises(RuntimeError, match=f"belongs to {MALLORY}, not {GRADER}"):
        setup.make_exchange(s, lambda m: None)


def test_students_cannot_read_the_answers(klass):
    hub, folder = klass
    for path in (folder / "solutions" / ONE / f"{ONE}.ipynb",
                 Path(f"/home/{GRADER}/{COURSE}/source/{ONE}/{ONE}.ipynb")):
        assert path.is_file()
        r = as_user(hub, MALLORY, f"cat '{path}'")
        assert r.returncode != 0 and "Permission denied" in r.stderr, path
    assert "chmod 700" in hub.init.stdout
