"""Grade one (student, assignment): nbgrader's autograde and feedback in a private copy of
the course, with :class:`.execute.SandboxExecute` in place of nbgrader's ``Execute``.

Each job reads the instructor's submitted notebooks (regular files only, size-capped; no
component of the path, from ``/`` to the notebook, is followed if it is a link: a student or
assignment folder that links to the answer key is refused, naming it) into a folder of its
own, so concurrent jobs share no gradebook and no submission is ever written. The feedback
it keeps is cleaned of active content (:mod:`.sanitize`) and shows the hidden cases' seed
only as its digest. The result (scores per task, or why it could not be graded) is written
atomically as JSON, so a killed run loses nothing that finished (``--resume``). The job
job runs in a process forked for it, under memory, CPU and wall-time limits its parent
enforces (:mod:`.trusted_limits`).

``python -m pplab.grading.job SPEC.json`` runs one job, ``python -m pplab.grading.job
--serve`` one job per line of stdin, each line the spec as JSON (the local workers of
``-j``); ``run(spec)`` is the same thing for submitit on a Slurm node.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import stat
import sys
import time
import traceback
from pathlib import Path

from ..exercises.hidden import seed_digest
from . import safe_paths, sanitize, trusted_limits

MAX_NOTEBOOK = 20 << 20         # bytes: a submitted notebook larger than this is refused
TIMEOUT = 600.0                 # seconds a job may take when its spec names no timeout

AUTOGRADE_STEPS = ["pplab.grading.execute.SandboxExecute",
                   "nbgrader.preprocessors.IgnorePattern",
                   "nbconvert.preprocessors.ClearMetadataPreprocessor",
                   "nbgrader.preprocessors.LimitOutput",
                   "nbgrader.preprocessors.SaveAutoGrades",
                   "nbgrader.preprocessors.AssignLatePenalties",
                   "nbgrader.preprocessors.CheckCellMetadata"]


def _copy_submission(root: Path, student: str, assignment: str, dest: Path) -> str | None:
    """Copy the submitted notebooks; why not, if they cannot be taken. Every component from
    ``/`` down to each notebook is opened without following links (:mod:`.safe_paths`)."""
    dest.mkdir(parents=True)
    try:
        with safe_paths.folder(root, student, assignment) as fd:
            for entry in safe_paths.entries(fd):
                why = _take(fd, entry, f"{student}/{assignment}/{entry.name}", dest)
                if why:
                    return why
    except FileNotFoundError:
        return None                         # nothing handed in: said by the caller
    except OSError as e:                    # LinkRefused names the link
        return str(e)
    return None


def _take(fd: int, entry: os.DirEntry, shown: str, dest: Path) -> str | None:
    """Copy one entry of the assignment folder if it is a notebook; refuse any link."""
    if entry.is_symlink():
        return str(safe_paths.LinkRefused(shown))
    if not entry.name.endswith(".ipynb"):
        return None
    data = safe_paths.read_file(fd, entry.name, shown, MAX_NOTEBOOK)
    if len(data) > MAX_NOTEBOOK:
        return f"{entry.name} is larger than the {MAX_NOTEBOOK >> 20} MB limit"
    try:
        json.loads(data)
    except ValueError:
        return f"{entry.name} is not a notebook (not JSON)"
    (dest / entry.name).write_bytes(data)
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
    student, assignment = nbgrader_id(spec["student"]), spec["assignment"]
    api = NbGraderAPI(config=_config(course, spec))
    result = api.autograde(assignment, student, force=True, create=True)
    done = course / "autograded" / student / assignment
    if not result.get("success") or not any(done.glob("*.ipynb")):
        log = str(result.get("error") or "") + "\n" + str(result.get("log") or "")
        if re.search(r"^\s*MemoryError\b", log, re.M):    # nbgrader's bare except caught it
            return {"ok": False, "why": trusted_limits.memory_reason(), "trusted_limit": True}
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
    """Grade one submission in a child process forked for it, held from outside
    (:mod:`.trusted_limits`): the kernel's memory and CPU limits, ``spec["timeout"]`` wall
    seconds. Whatever stops the child, the reason is the result; what its sandboxes left is
    removed. Writes the result atomically and returns it."""
    start, result_file = time.monotonic(), Path(spec["result"])
    result_file.unlink(missing_ok=True)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _child(spec, parent)
    status, why = trusted_limits.watch(pid, float(spec.get("timeout") or TIMEOUT))
    sweep(pid)
    shutil.rmtree(Path(spec["workdir"]) / "course", ignore_errors=True)
    if why is None and os.WIFEXITED(status) and result_file.exists():
        return json.loads(result_file.read_text())
    result = {"ok": False, "why": why or trusted_limits.ended(status),
              "trusted_limit": why == trusted_limits.cpu_reason()}
    return _finish(spec, result, start)


def sweep(pid: int) -> None:
    """Remove the sandbox folders and cgroups a killed job process left behind."""
    from .untrusted.sandbox import sweep as sweep_sandboxes
    sweep_sandboxes(pid)


def _child(spec: dict, parent: int) -> None:
    """The forked job: it dies with its parent, takes the limits, grades, and exits."""
    code, start = 1, time.monotonic()
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)
        trusted_limits.apply(int(float(spec.get("memory_gb", 3.0)) * (1 << 30)))
        _grade_here(spec)
        code = 0
    except BaseException as e:                  # noqa: BLE001 — the result says why
        traceback.print_exc()
        _finish(spec, {"ok": False, "why": f"the grading job failed: {type(e).__name__}: "
                                           f"{e}"[:300]}, start)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _grade_here(spec: dict) -> dict:
    start = time.monotonic()
    work = Path(spec["workdir"])
    try:
        result = _run(spec, work)
    except MemoryError:
        result = {"ok": False, "why": trusted_limits.memory_reason(), "trusted_limit": True}
    finally:
        shutil.rmtree(work / "course", ignore_errors=True)
    return _finish(spec, result, start)


def _finish(spec: dict, result: dict, start: float) -> dict:
    result.update(student=spec["student"], assignment=spec["assignment"],
                  seed_digest=seed_digest(spec["seed"]),
                  seconds=round(time.monotonic() - start, 2))
    write_atomic(Path(spec["result"]), result)
    return result


def _run(spec: dict, work: Path) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    course = work / "course"
    shutil.copytree(spec["master"], course, ignore=shutil.ignore_patterns(
        "submitted", "autograded", "feedback", "*.db-journal"))
    student, assignment = spec["student"], spec["assignment"]
    why = _copy_submission(Path(spec["submitted"]), student, assignment,
                           course / "submitted" / nbgrader_id(student) / assignment)
    student = nbgrader_id(student)              # the name in this job's private course
    os.environ["PPLAB_GRADE_SEED"] = str(spec["seed"])
    os.environ.setdefault("PPLAB_EDITION_CACHE", spec.get("edition_cache", ""))
    if why is None and not any((course / "submitted" / student / assignment).glob("*.ipynb")):
        why = f"{assignment} was not submitted"
    result = {"ok": False, "why": why} if why else _grade(spec, course)
    if result["ok"]:
        _keep(course, student, assignment, work, spec["seed"])
    return result


def nbgrader_id(student: str) -> str:
    """The student's name in the job's private course: nbgrader reads names back from
    paths with a pattern that stops at a line break, so a name holding one is graded
    under its digest there (results, feedback and the CSV keep the real name)."""
    if "\n" not in student:
        return student
    return "student-" + hashlib.sha256(student.encode()).hexdigest()[:16]


def _keep(course: Path, student: str, assignment: str, work: Path, seed: int) -> None:
    """Keep the feedback (cleaned of active content, the seed shown only as its digest) and
    the autograded notebooks; the private course is removed after."""
    done = course / "autograded" / student / assignment
    fb = course / "feedback" / student / assignment
    for folder in (fb, done):
        hide_seed(folder, seed)
    sanitize.clean_folder(fb)
    if fb.is_dir():
        shutil.copytree(fb, work / "feedback", dirs_exist_ok=True, symlinks=True)
    shutil.copytree(done, work / "autograded", symlinks=True)


def hide_seed(folder: Path, seed: int) -> None:
    """Show ``seed {digest}`` wherever a page or notebook says ``seed {seed}``: the hidden
    cases' seed stays in the instructor's own file (:mod:`.classroom`), never in feedback."""
    pattern = re.compile(rf"\bseed {int(seed)}\b")
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file() and not path.is_symlink() and path.suffix in (".html", ".ipynb"):
            text = path.read_text(errors="replace")
            if pattern.search(text):
                mode = path.stat().st_mode
                path.chmod(mode | stat.S_IWUSR)       # nbgrader leaves autograded files read-only
                path.write_text(pattern.sub(f"seed {seed_digest(seed)}", text))
                path.chmod(mode)


def write_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def serve() -> None:
    """A worker that grades job after job: nbgrader and the graders are imported once, here,
    and every job runs in a fresh fork of this process (:func:`run`). It reads one job's spec
    per line on stdin, as JSON (a student's folder name may hold any character), and answers
    ``done`` on the descriptor it was started with (stdout is moved to stderr, so nothing a
    library prints can mix in)."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    _warm()
    for line in sys.stdin:
        run(json.loads(line))
        out.write("done\n")
        out.flush()


def _warm() -> None:
    """Import what every job needs once, before the first fork."""
    import nbgrader.api  # noqa: F401
    import nbgrader.apps  # noqa: F401

    from . import execute, verdict  # noqa: F401


if __name__ == "__main__":
    if sys.argv[1] == "--serve":        # its second argument only names the run, for ps
        serve()
    else:
        run(json.loads(Path(sys.argv[1]).read_text()))
