"""Grade a class: one job (:mod:`.job`) per (student, assignment), run N at a time here or
one Slurm job each through submitit, with progress, an ETA, and results that survive a
killed run.

Layout next to ``--out`` (``grades.csv``): ``grades.csv.parts/`` (the instructor's only,
mode 0700) holds ``run.json`` (the sources), ``seeds`` (every run's hidden-case seed with its
digest, mode 0600), ``master/`` (the scratch nbgrader course every job copies), and
``results/<student>/<assignment>.json`` written atomically as each job ends. The CSV and
feedback are built from the results at the end, so they always match them.

Every run draws fresh hidden cases, ``--resume`` included (a resumed run grades the rest with
a seed of its own, so no table built from an earlier run's cases holds them). Only the seed's
digest is printed or written into results and feedback; ``seeds`` maps it back, so a
dispute can be reproduced with ``--seed``. Student and assignment folders are never followed
through a link (:mod:`.safe_paths`), and every feedback page is cleaned of active content
(:mod:`.sanitize`) before the instructor opens it.
"""
from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from ..exercises.hidden import seed_digest
from . import course, safe_paths, sanitize, scores
from .job import write_atomic


@dataclass
class Options:
    submitted: Path
    out: Path
    source: Path
    course_dir: Path | None
    seed: int | None            # None: drawn now (a fresh one every run, resume included)
    jobs: int
    timeout: float
    cell_timeout: int
    sandbox: bool = True
    slurm: bool = False
    resume: bool = False
    feedback: Path | None = None
    memory_gb: float = 3.0
    slurm_partition: str | None = None

    def __post_init__(self):
        """Every folder as an absolute path: nbgrader changes into the course folder while it
        works, so a relative path (``--out grades.csv``) would point somewhere else there."""
        for name in ("submitted", "out", "source", "course_dir", "feedback"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, Path(value).resolve())


def _state(opts: Options) -> Path:
    return opts.out.parent / f"{opts.out.name}.parts"


def prepare(opts: Options) -> tuple[Path, list[str]]:
    """The state folder with its master course (kept with ``resume``), and this run's own
    seed recorded in it. The seed is never reused: ``--resume`` grades the rest with new
    cases."""
    state = _state(opts)
    if not opts.resume:
        shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)          # specs and Slurm's pickles hold the seed: the instructor's
    if opts.seed is None:
        opts.seed = secrets.randbits(32)
    master = state / "master"
    if not (master / ".ready").exists():
        shutil.rmtree(master, ignore_errors=True)
        if opts.course_dir:          # (the state folder may sit in the course: not copied)
            shutil.copytree(opts.course_dir, master, ignore=shutil.ignore_patterns(
                "submitted", "autograded", "feedback", state.name))
        else:
            try:
                course.scratch_course(opts.source, master)
            except RuntimeError as e:
                raise RuntimeError(f"could not make a course from {opts.source}: "
                                   f"{unreadable_notebook(opts.source) or root_cause(str(e))}"
                                   ) from None
        (master / ".ready").write_text("")
        write_atomic(state / "run.json", {"source": str(opts.source)})
    record_seed(state, opts.seed, opts.resume)
    return state, course.assignments(master / "source")


SEEDS = "seeds"     # the state folder's file of real seeds: the instructor's only (0600)


def record_seed(state: Path, seed: int, resume: bool) -> None:
    """Append this run's seed and its digest to the instructor-only seeds file."""
    state.mkdir(parents=True, exist_ok=True)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = f"{when} digest={seed_digest(seed)} seed={seed}{' (resumed)' if resume else ''}\n"
    fd = os.open(state / SEEDS, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, line.encode())
    finally:
        os.close(fd)


#: lines of an nbgrader log that say what really went wrong (its own summary, "error
#: accessing the nbgrader database … run nbgrader db upgrade", says the same for every cause)
CAUSES = ("OperationalError", "PermissionError", "FileNotFoundError", "OSError",
          "No such file", "Permission denied", "ValueError")


def root_cause(log: str) -> str:
    """The most specific line of a failed nbgrader step's log, else its first line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for marker in CAUSES:
        found = [ln for ln in lines if marker in ln and "NbGraderException" not in ln]
        if found:
            return found[-1][:300]
    return lines[0][:300] if lines else "no message"


def unreadable_notebook(source: Path) -> str | None:
    """The first source notebook nbformat cannot read, and why (nbgrader's own message for
    it is only "see the above traceback")."""
    import nbformat
    for path in sorted(source.glob("*/*.ipynb")):
        try:
            nbformat.read(path, as_version=4)
        except Exception as e:          # nbformat raises several kinds; each names the cause
            return f"{path} is not a readable notebook: {str(e).splitlines()[0][:200]}"
    return None


def _notebooks(master: Path, assignment: str) -> list[dict]:
    return [{"name": nb.stem, "tasks": scores.graded_tasks(nb)}
            for nb in sorted((master / "source" / assignment).glob("*.ipynb"))]


def _spec(opts, state, master, student, assignment) -> dict:
    work = state / "work" / student / assignment
    return {"student": student, "assignment": assignment, "seed": opts.seed,
            "submitted": str(opts.submitted), "master": str(master),
            "workdir": str(work), "result": str(_result_path(state, student, assignment)),
            "notebooks": _notebooks(master, assignment), "cell_timeout": opts.cell_timeout,
            "sandbox": opts.sandbox, "memory_gb": opts.memory_gb,
            "edition_cache": str(state / "editions")}


def _result_path(state: Path, student: str, assignment: str) -> Path:
    return state / "results" / student / f"{assignment}.json"


def _die_with_parent() -> None:
    """In the worker before exec: its own session, and SIGKILL when ``pplab grade`` dies
    (however it dies), which takes its sandbox down too (bwrap --die-with-parent)."""
    import ctypes
    os.setsid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG


SWEEP_GRACE = 60.0      # seconds past --timeout for a worker to stop a job and clean up


class Worker:
    """One ``job --serve`` process, reused job after job; it runs each job in a fork of its
    own and stops one past its timeout itself (:func:`.job.run`). A worker that does not
    answer even then is killed, and the next job starts a fresh one."""

    def __init__(self, log: Path):
        self.log, self.proc = log, None

    def _start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "pplab.grading.job", "--serve",
                                          str(self.log.parent)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, preexec_fn=_die_with_parent,
                                         env=course.nbgrader_env())

    def run(self, spec: dict, timeout: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        Path(spec["workdir"]).parent.mkdir(parents=True, exist_ok=True)
        try:    # the spec as one JSON line (any folder name), the timeout kept by the worker
            self.proc.stdin.write((json.dumps(dict(spec, timeout=timeout)) + "\n").encode())
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout + SWEEP_GRACE)
            answer = self.proc.stdout.readline() if ready else None
        except OSError:
            answer = b""
        if answer is None:
            self.stop()
            return _failed(spec, f"the notebook did not finish within {timeout:g} s and was "
                                 "stopped")
        result_file = Path(spec["result"])
        if not answer or not result_file.exists():
            self.stop()
            return _failed(spec, f"the grading job failed: {self._last_log_line()}")
        return json.loads(result_file.read_text())

    def _last_log_line(self) -> str:
        try:
            lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln]
        except OSError:
            lines = []
        return (lines or ["no message"])[-1][:300]

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None


def _failed(spec: dict, why: str) -> dict:
    result = {"ok": False, "why": why, "student": spec["student"],
              "assignment": spec["assignment"], "seed_digest": seed_digest(spec["seed"])}
    write_atomic(Path(spec["result"]), result)
    return result


class Progress:
    """``[####......] 12/240 · 3m10s elapsed · ETA 4m02s`` after each finished job."""

    def __init__(self, total: int, already: int):
        self.total, self.done, self.start = total, already, time.monotonic()
        self.fresh = 0

    def step(self, result: dict) -> None:
        self.done += 1
        self.fresh += 1
        elapsed = time.monotonic() - self.start
        left = self.total - self.done
        eta = elapsed / self.fresh * left
        bar = "#" * round(20 * self.done / self.total)
        got = _summary(result)
        print(f"[{bar:<20}] {self.done}/{self.total} · {result['student']}/"
              f"{result['assignment']}: {got} · {_clock(elapsed)} elapsed · ETA "
              f"{_clock(eta)}", flush=True)


def _summary(result: dict) -> str:
    if not result.get("ok"):
        return f"0 — {result.get('why')}"
    got = sum(s for _, s, _ in result["scores"])
    return f"{got:g}/{sum(m for _, _, m in result['scores']):g}"


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds + 0.5), 60)
    return f"{m}m{s:02d}s"


def run_jobs(opts: Options, specs: list[dict], progress: Progress) -> None:
    if opts.slurm:
        from .slurm_fanout import run_on_slurm
        run_on_slurm(opts, specs, progress)
        return
    local, workers = threading.local(), []

    def grade_one(spec: dict) -> dict:
        if not hasattr(local, "worker"):
            local.worker = Worker(_state(opts) / "work" / f"worker-{len(workers)}.log")
            workers.append(local.worker)
        return local.worker.run(spec, opts.timeout)

    try:
        with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
            for f in as_completed([pool.submit(grade_one, spec) for spec in specs]):
                progress.step(f.result())
    finally:
        for w in workers:
            w.stop()


def grade_class(opts: Options) -> int:
    students = safe_paths.subfolders(opts.submitted)
    state, names = prepare(opts)
    master = state / "master"
    pairs = [(s, a) for s in students for a in names]
    todo = [(s, a) for s, a in pairs if not _result_path(state, s, a).exists()]
    print(f"grading {len(students)} students × {len(names)} assignments (hidden cases: seed "
          f"digest {seed_digest(opts.seed)}, the seed is in {state / SEEDS}); "
          f"{len(pairs) - len(todo)} already graded, {len(todo)} to go, "
          f"{'on Slurm' if opts.slurm else f'{opts.jobs} at a time'}"
          f"{'' if opts.sandbox else ' — WITHOUT a sandbox (--no-sandbox)'}", flush=True)
    for s, _ in todo:
        _result_path(state, s, "x").parent.mkdir(parents=True, exist_ok=True)
    specs = [_spec(opts, state, master, s, a) for s, a in todo]
    run_jobs(opts, specs, Progress(len(pairs), len(pairs) - len(todo)))
    rows = collect(opts, state, master, students, names)
    scores.write_csv(opts.out, rows)
    print(f"wrote {opts.out} ({len(rows)} rows) and feedback in {feedback_dir(opts)}")
    return 0


def feedback_dir(opts: Options) -> Path:
    return opts.feedback or opts.out.parent / "feedback"


#: what nbgrader's exchange keeps with a submission and ``nbgrader release_feedback`` reads
#: next to each feedback page (the secret names the page only its student can fetch)
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")


def _exchange_files(submitted: Path, student: str, assignment: str, feedback: Path) -> None:
    """Copy a collected submission's timestamp and secret next to its feedback (small
    regular files only, no component of their path followed through a link)."""
    try:
        with safe_paths.folder(submitted, student, assignment) as fd:
            for name in EXCHANGE_FILES:
                try:
                    data = safe_paths.read_file(fd, name, name, 4096)
                except OSError:
                    continue
                (feedback / name).write_bytes(data[:4096])
    except OSError:
        return


def collect(opts, state, master, students, names) -> list[tuple]:
    """Rows for the CSV from the results; feedback pages copied; the course's gradebook
    updated when grading in the instructor's own course. There the feedback folder is
    nbgrader's, which ``nbgrader release_feedback`` sends: no page is written for an
    assignment the student never handed in (the exchange could not deliver it). Every page
    is cleaned of active content here, whoever wrote it."""
    rows, fb = [], feedback_dir(opts)
    for student in students:
        for name in names:
            result = json.loads(_result_path(state, student, name).read_text())
            tasks = [t for nb in _notebooks(master, name) for t in nb["tasks"]]
            work = state / "work" / student / name
            handed_in = safe_paths.present(opts.submitted, student, name)
            if result.get("ok"):
                got = [tuple(r) for r in result["scores"]]
                if (work / "feedback").is_dir():
                    shutil.copytree(work / "feedback", fb / student / name, dirs_exist_ok=True,
                                    symlinks=True)
            else:
                got = [(t, 0.0, p) for t, p in tasks]
                if handed_in or not opts.course_dir:
                    scores.write_note(fb / student / name, name, result.get("why", "?"), tasks)
            if handed_in and (fb / student / name).is_dir():
                _exchange_files(opts.submitted, student, name, fb / student / name)
            sanitize.clean_folder(fb / student / name)      # the pages the instructor opens
            rows += [(student, name, t, s, m) for t, s, m in got]
            if opts.course_dir and result.get("ok"):
                scores.record(opts.course_dir, student, name, work, _notebooks(master, name),
                              got, submitted_at(opts.submitted, student, name))
    return rows


def submitted_at(submitted: Path, student: str, assignment: str):
    """When the student handed it in: the collected ``timestamp.txt`` (nbgrader's own
    format), as a datetime; None when it is missing or unreadable."""
    from nbgrader.utils import parse_utc
    try:
        with safe_paths.folder(submitted, student, assignment) as fd:
            text = safe_paths.read_file(fd, "timestamp.txt", "timestamp.txt", 200)
        return parse_utc(text.decode().strip())
    except (OSError, ValueError, OverflowError):      # UnicodeDecodeError is a ValueError
        return None
