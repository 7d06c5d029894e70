"""Red team, issue 29 items 2, 3 (the trusted worker's own limits), 4 and 6: links in a
submitted folder, replayable hidden cases, scripts in feedback, a runaway trusted job.

Each route scores 0 (or is refused) on what it games, with its reason in one line, while an
honest classmate in the same run is graded in full. Every subprocess is bounded in time.
"""
import csv
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import nbformat
import psutil
import pytest

from pplab.exercises.hidden import grade, seed_digest
from pplab.grading import classroom, job, safe_paths
from pplab.grading.sanitize import clean_html
from pplab.grading.untrusted import sandbox

ROOT = Path(__file__).resolve().parents[2]
ONE = "01_bubble_and_1f1b"

EVIL_MARKDOWN = textwrap.dedent("""\
    My honest explanation of the bubble.

    <script>document.title = 'owned-by-script'</script>
    <img src="x.png" onerror="alert('owned-by-onerror')">
    <iframe src="https://evil.example/owned-by-iframe"></iframe>
    <a href="javascript:alert('owned-by-link')">a link</a>
    <object data="owned-by-object.swf"></object><embed src="owned-by-embed.swf">
    <div onmouseover="alert('owned-by-handler')">hover text stays</div>
    """)
ACTIVE = ("<script", "onerror", "onmouseover", "<iframe", "<object", "<embed", "javascript:",
          "owned-by")


# ---- item 2: paths that never follow links ---------------------------------------------

def test_a_link_at_any_level_is_refused_naming_it(tmp_path):
    sub = tmp_path / "submitted"
    shutil.copytree(ROOT / "solutions" / ONE, sub / "alice" / ONE)
    (sub / "eve").mkdir()
    (sub / "eve" / ONE).symlink_to(ROOT / "solutions" / ONE)       # the answer key
    (sub / "mallory").symlink_to(sub / "alice")                      # a classmate's folder
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    with safe_paths.folder(sub, "alice", ONE):
        pass
    with pytest.raises(safe_paths.LinkRefused, match=f"^eve/{ONE} is a symbolic link"):
        with safe_paths.folder(sub, "eve", ONE):
            pass
    with pytest.raises(safe_paths.LinkRefused, match="^mallory is a symbolic link"):
        with safe_paths.folder(sub, "mallory", ONE):
            pass
    with pytest.raises(safe_paths.LinkRefused, match=f"^{tmp_path / 'linked'} is a symbolic"):
        with safe_paths.folder(tmp_path / "linked"):
            pass
    assert safe_paths.subfolders(sub) == ["alice", "eve", "mallory"]     # listed, to refuse


def test_a_notebook_or_any_file_that_is_a_link_is_refused(tmp_path):
    sub = tmp_path / "submitted"
    (sub / "bob" / ONE).mkdir(parents=True)
    (sub / "bob" / ONE / f"{ONE}.ipynb").symlink_to(ROOT / "solutions" / ONE / f"{ONE}.ipynb")
    why = job._copy_submission(sub, "bob", ONE, tmp_path / "copy")
    assert why.startswith(f"bob/{ONE}/{ONE}.ipynb is a symbolic link"), why
    assert not any((tmp_path / "copy").iterdir())
    (sub / "bob" / ONE / f"{ONE}.ipynb").unlink()
    (sub / "bob" / ONE / "data").symlink_to("/etc")
    assert "data is a symbolic link" in job._copy_submission(sub, "bob", ONE, tmp_path / "c2")
    assert job._copy_submission(sub, "nobody", ONE, tmp_path / "c3") is None    # not handed in


# ---- item 4: fresh cases every run, the seed never shown ---------------------------------

def _options(tmp_path, resume=False, seed=None) -> classroom.Options:
    return classroom.Options(submitted=tmp_path / "sub", out=tmp_path / "grades.csv",
                             source=tmp_path / "src", course_dir=None, seed=seed, jobs=1,
                             timeout=60, cell_timeout=10, resume=resume)


def _fake_course(source, master):
    (master / "source" / "01_x").mkdir(parents=True)
    (master / "source" / "01_x" / "01_x.ipynb").write_text("{}")


def test_every_run_and_every_resume_draws_its_own_seed_kept_private(tmp_path, monkeypatch):
    monkeypatch.setattr(classroom.course, "scratch_course", _fake_course)
    first = _options(tmp_path)
    classroom.prepare(first)
    second = _options(tmp_path)
    classroom.prepare(second)
    resumed = _options(tmp_path, resume=True)
    classroom.prepare(resumed)
    seeds = [first.seed, second.seed, resumed.seed]
    assert len(set(seeds)) == 3, seeds
    file = tmp_path / "grades.csv.parts" / classroom.SEEDS
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    lines = file.read_text().splitlines()       # a fresh run starts a fresh state folder
    assert [f"digest={seed_digest(s)} seed={s}" in ln for s, ln in zip(seeds[1:], lines)] \
        == [True, True] and len(lines) == 2 and lines[1].endswith("(resumed)")
    assert "seed" not in (tmp_path / "grades.csv.parts" / "run.json").read_text()


def test_the_kernel_rehearsal_prints_the_digest_not_the_seed(monkeypatch, capsys):
    monkeypatch.setenv("PPLAB_GRADE_SEED", "918273645")
    grade("check_bubble_formulas", lambda P, M: (P - 1) / (M + P - 1),
          lambda P, M: (P - 1) / M)
    out = capsys.readouterr().out
    assert "918273645" not in out and seed_digest(918273645) in out


def test_feedback_shows_the_seed_only_as_its_digest(tmp_path):
    page = tmp_path / "fb" / "a.html"
    page.parent.mkdir()
    page.write_text("<pre>hidden tests passed (seed 4242) ✓ and seed 42421</pre>")
    job.hide_seed(tmp_path / "fb", 4242)
    text = page.read_text()
    assert f"(seed {seed_digest(4242)})" in text and "seed 4242)" not in text
    assert "seed 42421" in text                     # only the whole number is the seed


# ---- item 6: feedback without active content --------------------------------------------

def test_clean_html_drops_active_content_and_keeps_text_and_layout():
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            "<style>a[href^=\"javascript:\"]:after{content:''} .c{color:red}</style></head>"
            f"<body><div class='c'>{EVIL_MARKDOWN}</div>"
            "<img src='data:image/png;base64,iVBORw0KGgo='><a href='https://ok.example/'>ok</a>"
            "<svg><script>alert(1)</script></svg><base href='javascript:alert(2)//'>"
            "<meta http-equiv='refresh' content='0;url=javascript:alert(3)'>"
            "<a href=' JaVa&#x09;ScRiPt:alert(4)'>x</a><!-- <script>alert(5)</script> -->"
            "</body></html>")
    out = clean_html(page)
    for bad in ACTIVE + ("<base", "http-equiv", "alert("):
        assert bad not in out.lower(), bad
    assert "My honest explanation of the bubble." in out and "hover text stays" in out
    assert ".c{color:red}" in out and "<div class=\"c\">" in out
    assert "data:image/png;base64,iVBORw0KGgo=" in out and 'href="https://ok.example/"' in out


# ---- item 3 (half): the trusted job's own memory and CPU limits --------------------------

RUN_JOBS = """
import json, resource, sys
from pplab.grading import job
def runaway(spec, work):
    if spec["student"] == "honest":
        return {"ok": True, "scores": [["task1", 1.0, 1.0]],
                "limits": [resource.getrlimit(resource.RLIMIT_AS)[0],
                           resource.getrlimit(resource.RLIMIT_CPU)[0]]}
    if spec["student"] == "one_c_call":     # one call that never reaches a bytecode boundary:
        step = 2 ** 61 - 1                  # 200,000 numbers with one hash, quadratic
        return set(range(0, step * 200_000, step))
    grow = []
    while True:                     # a verdict that expands a result without end
        grow.append(bytearray(1 << 20)) if spec["student"] == "hog" else sum(range(10**6))
job._run = runaway
out = [job.run({"student": s, "assignment": "a", "seed": 7, "workdir": sys.argv[1] + "/" + s,
                "result": sys.argv[1] + f"/{s}.json", "timeout": 60})
       for s in ("hog", "spin", "one_c_call", "honest")]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_a_runaway_trusted_job_ends_as_its_own_error_line(tmp_path):
    """Memory, a Python loop and one C call that no signal handler can interrupt: each is
    stopped at its limit (the kernel's, held by the job's parent), and says so."""
    env = dict(os.environ, PPLAB_TRUSTED_MEMORY_GB="0.5", PPLAB_TRUSTED_CPU_S="2")
    r = subprocess.run([sys.executable, "-c", RUN_JOBS, str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    hog, spin, c_call, honest = json.loads(r.stdout.splitlines()[-1])
    assert not hog["ok"] and hog["trusted_limit"]
    assert hog["why"] == ("the trusted grader ran out of its 0.5 GiB memory limit on this "
                          "submission and stopped")
    for stopped in (spin, c_call):
        assert not stopped["ok"] and stopped["trusted_limit"]
        assert stopped["why"] == ("the trusted grader used more than 2 CPU seconds on this "
                                  "submission and was stopped")
    assert honest["ok"] and honest["limits"][0] == 1 << 29 and honest["limits"][1] < 10_000
    assert "seed" not in honest and honest["seed_digest"] == seed_digest(7)
    assert json.loads((tmp_path / "hog.json").read_text())["why"] == hog["why"]


KILLED_JOBS = """
import json, os, signal, sys, time
from pathlib import Path
from pplab.grading import job
from pplab.grading.untrusted import sandbox, student_edition
here = Path(sys.argv[1])
def killed(spec, work):
    if spec["student"] == "slow":
        time.sleep(600)
    lib = student_edition.build(["closed_forms.*"], here / "lib")
    box = sandbox.Sandbox(lib)
    box.request({"op": "execute", "code": "import time; time.sleep(1)"}, 120)
    (here / "pid").write_text(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGKILL)        # as --timeout or a limit kills a job
job._run = killed
out = [job.run({"student": s, "assignment": "a", "seed": 7, "workdir": str(here / s),
                "result": str(here / f"{s}.json"), "timeout": t})
       for s, t in (("killed", 300), ("slow", 2))]
print(json.dumps(out))
"""


def _named_after(pid: int) -> list[str]:
    """Sandbox folders and cgroups named after the job process ``pid``."""
    prefix = f"pplab-sandbox-{pid}-"
    found = [str(p) for p in Path(tempfile.gettempdir()).glob(prefix + "*")]
    for top, dirs, _ in os.walk("/sys/fs/cgroup"):
        found += [os.path.join(top, d) for d in dirs if d.startswith(prefix)]
    return found


@pytest.mark.slow
def test_a_killed_job_leaves_no_sandbox_folder_cgroup_or_process(tmp_path):
    """A job killed while its sandbox runs (as ``--timeout`` kills one) leaves nothing behind:
    its parent removes the sandbox's folder and cgroup, and the sandbox died with the job."""
    if sandbox.unavailable():
        pytest.skip(sandbox.unavailable())
    r = subprocess.run([sys.executable, "-c", KILLED_JOBS, str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    killed, slow = json.loads(r.stdout.splitlines()[-1])
    pid = int((tmp_path / "pid").read_text())
    assert killed["why"] == "the grading job was killed by signal SIGKILL"
    assert slow["why"] == "the notebook did not finish within 2 s and was stopped"
    assert _named_after(pid) == []
    assert not [p for p in psutil.process_iter(["cmdline"])
                if str(tmp_path / "lib") in " ".join(p.info["cmdline"] or [])]


def test_the_default_trusted_limits_fit_a_normal_job():
    from pplab.grading import trusted_limits as tl
    assert tl.memory_limit() >= 4 * 870e6           # 4x the measured peak (0.87 GB)
    assert 4 * 5 <= tl.cpu_budget() <= 600           # 4x a normal job's 5 s, under --timeout


# ---- one class run: links, seeds, feedback together (nbgrader end to end) -----------------

def _grade(cwd: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pplab.cli", "grade", "submitted", "--out",
                           "grades.csv", "--source", "src", "--no-sandbox", "-j", "2", *extra],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


def _scores(path: Path) -> dict:
    with open(path) as f:
        out = {}
        for r in csv.DictReader(f):
            out[r["student"]] = out.get(r["student"], 0) + float(r["score"])
        return out


def _shows(text: str, seed: int) -> bool:
    """Whether ``text`` holds the seed as a number of its own."""
    return re.search(rf"(?<![\w.]){seed}(?![\w.])", text) is not None


def _seeds(state: Path) -> list[int]:
    return [int(m) for m in re.findall(r"seed=(\d+)", (state / classroom.SEEDS).read_text())]


@pytest.mark.slow
def test_a_class_with_links_and_scripts_games_nothing_and_shows_no_seed(tmp_path):
    shutil.copytree(ROOT / "solutions" / ONE, tmp_path / "src" / ONE)
    sub = tmp_path / "submitted"
    shutil.copytree(ROOT / "solutions" / ONE, sub / "alice" / ONE)
    (sub / "eve").mkdir()
    (sub / "eve" / ONE).symlink_to(ROOT / "solutions" / ONE)
    shutil.copytree(ROOT / "solutions" / ONE, tmp_path / "key" / ONE)
    (sub / "mallory").symlink_to(tmp_path / "key")
    nb = nbformat.read(ROOT / "solutions" / ONE / f"{ONE}.ipynb", as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(EVIL_MARKDOWN))
    (sub / "xena" / ONE).mkdir(parents=True)
    nbformat.write(nb, str(sub / "xena" / ONE / f"{ONE}.ipynb"))

    r = _grade(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    state = tmp_path / "grades.csv.parts"
    (seed,) = _seeds(state)
    assert _scores(tmp_path / "grades.csv") == {"alice": 10, "eve": 0, "mallory": 0, "xena": 10}
    assert f"eve/{ONE}: 0 — eve/{ONE} is a symbolic link" in r.stdout
    assert "mallory/01_bubble_and_1f1b: 0 — mallory is a symbolic link" in r.stdout
    assert not _shows(r.stdout + r.stderr, seed) and seed_digest(seed) in r.stdout
    fb = tmp_path / "feedback"
    assert f"eve/{ONE} is a symbolic link" in (fb / "eve" / ONE / "not_graded.html").read_text()
    pages = {s: (fb / s / ONE / f"{ONE}.html").read_text() for s in ("alice", "xena")}
    for page in pages.values():
        assert not _shows(page, seed) and seed_digest(seed) in page
    for bad in ACTIVE:
        assert bad not in pages["xena"].lower(), bad
    assert "My honest explanation of the bubble." in pages["xena"]
    assert "hover text stays" in pages["xena"]

    # a resumed run grades what is left with a seed of its own
    (state / "results" / "alice" / f"{ONE}.json").unlink()
    r = _grade(tmp_path, "--resume")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    first, again = _seeds(state)
    assert first == seed and again != seed
    assert "3 already graded, 1 to go" in r.stdout and not _shows(r.stdout, again)
    result = json.loads((state / "results" / "alice" / f"{ONE}.json").read_text())
    assert result["seed_digest"] == seed_digest(again) and "seed" not in result
    assert _scores(tmp_path / "grades.csv")["alice"] == 10
