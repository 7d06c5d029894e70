"""Hidden tests cannot be gamed (lookup tables, library shortcuts, grader overrides), the
puzzles are solvable but no built-in schedule solves them, and `pplab grade` keeps its
contract. The end-to-end class run is slow (real kernels, real processes)."""
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pplab
from pplab.cli import main as cli
from pplab.exercises import check_bubble_formulas, check_one_f_one_b_rank
from pplab.exercises.bubble import CASES
from pplab.exercises.hidden import draw_cases, grade, seed_digest
from pplab.exercises.puzzles import PUZZLES, builtin_scores, check_puzzle

from puzzle_answers import ANSWERS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sandboxed():
    """``pplab grade`` sandboxes every submission: skip, saying why, where it cannot."""
    from pplab.grading.untrusted.sandbox import unavailable
    why = unavailable()
    if why:
        pytest.skip(why)


def bubble_total(P, M):
    return (P - 1) / (M + P - 1)


def bubble_ideal(P, M):
    return (P - 1) / M


def lookup_total(P, M):
    """A lookup table of every visible case, 0 elsewhere."""
    return {c: bubble_total(*c) for c in CASES}.get((P, M), 0.0)


def lookup_ideal(P, M):
    return {c: bubble_ideal(*c) for c in CASES}.get((P, M), 0.0)


@pytest.mark.slow
def test_lookup_table_passes_public_cases_but_fails_hidden_ones(monkeypatch):
    monkeypatch.setenv("PPLAB_GRADE_SEED", "12345")
    assert check_bubble_formulas(lookup_total, lookup_ideal)
    with pytest.raises(AssertionError, match="bubble_of_total"):
        grade("check_bubble_formulas", lookup_total, lookup_ideal)
    assert grade("check_bubble_formulas", bubble_total, bubble_ideal)


def test_hidden_cases_follow_the_seed():
    assert draw_cases("check_peak_1f1b", 1) == draw_cases("check_peak_1f1b", 1)
    assert draw_cases("check_peak_1f1b", 1) != draw_cases("check_peak_1f1b", 2)
    assert draw_cases("check_text_schedule", 1) is None


def shortcut(P, M, rank):
    from pplab.registry import make_schedule
    return make_schedule("1f1b", P, M).rank_texts()[rank]


def swallowing_shortcut(P, M, rank):
    try:
        return shortcut(P, M, rank)
    except Exception:
        return []


@pytest.mark.parametrize("fn", [shortcut, swallowing_shortcut])
def test_library_call_is_blocked_with_the_derivation_message(fn):
    msg = "derive it, not to call pplab.registry.make_schedule"
    with pytest.raises(AssertionError, match=msg):
        check_one_f_one_b_rank(fn)
    with pytest.raises(AssertionError, match=msg):
        grade("check_one_f_one_b_rank", fn)
    assert pplab.make_schedule("1f1b", 2, 2).P == 2    # restored afterwards


def test_grader_helpers_are_blocked_too():
    def uses_answer_key(P, M, r):
        from pplab.exercises.pipeline import reference_plan
        return reference_plan(P, M, r)
    with pytest.raises(AssertionError, match="reference_plan"):
        grade("check_send_recv_plan", uses_answer_key)


def test_overriding_graders_and_the_library_gains_nothing(monkeypatch):
    import pplab.exercises as ex
    import pplab.exercises.bubble as bubble
    import pplab.sim.entry as entry
    monkeypatch.setattr(ex, "check_bubble_formulas", lambda *a, **k: True)
    monkeypatch.setattr(bubble, "check_bubble_formulas", lambda *a, **k: True)
    monkeypatch.setattr(bubble, "_fail", lambda msg: None)
    monkeypatch.setattr(entry, "simulate", lambda *a, **k: None)
    wrong = (lambda P, M: 0.0)
    with pytest.raises(AssertionError):
        grade("check_bubble_formulas", wrong, wrong)


@pytest.mark.parametrize("name", sorted(PUZZLES))
def test_puzzle_has_an_answer_that_no_builtin_schedule_reaches(name):
    puzzle = PUZZLES[name]
    assert check_puzzle(ANSWERS[name], name)
    results = builtin_scores(name)
    assert results, "no registry schedule shares this placement: nothing to compare"
    for schedule, V, makespan, peak in results:
        assert makespan > puzzle.max_makespan + 1e-9 or peak > puzzle.max_peak + 1e-9, \
            (schedule, V, makespan, peak)


def test_puzzle_rejects_a_registry_schedule_with_its_reason():
    over_cap = pplab.make_schedule("zb-h1", 4, 8).rank_texts()
    with pytest.raises(AssertionError, match="cap is 3"):
        check_puzzle([" ".join(r) for r in over_cap], "memory-capped")
    naive = pplab.make_schedule("naive", 4, 8).rank_texts()
    with pytest.raises(AssertionError, match="makespan is 96"):
        check_puzzle([" ".join(r) for r in naive], "full-backward-capped")


@pytest.mark.parametrize("argv, words", [
    (["grade"], "required"),
    (["grade", "/no/such/dir", "--out", "g.csv"], "is not a folder"),
    (["grade", ".", "--out", "/no/such/dir/g.csv"], "does not exist"),
    (["grade", ".", "--out", "g.csv", "--timeout", "0"], "must be positive"),
    (["grade", ".", "--out", "g.csv", "-j", "0"], "must be positive"),
])
def test_grade_bad_arguments_exit_2_with_one_line(argv, words, capsys, tmp_path):
    assert cli(argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


# ---- the whole instructor workflow on a small class ---------------------------------------
LOOKUP = '''def bubble_of_total(P, M):
    table = {%s}
    return table.get((P, M), 0.0)


def bubble_of_ideal(P, M):
    table = {%s}
    return table.get((P, M), 0.0)''' % (
    ", ".join(f"{c!r}: {bubble_total(*c)!r}" for c in CASES),
    ", ".join(f"{c!r}: {bubble_ideal(*c)!r}" for c in CASES))
SHORTCUT = '''def one_f_one_b_rank(P, M, rank):
    from pplab.registry import make_schedule
    return make_schedule("1f1b", P, M).rank_texts()[rank]'''
OVERRIDE = '''import pplab.exercises, pplab.exercises.bubble
def inflight_peak(actions):
    return 0
def peak_1f1b(P, M, rank):
    return 0
check_inflight = pplab.exercises.check_inflight = lambda *a, **k: True
pplab.exercises.bubble.check_inflight = check_inflight
pplab.exercises.bubble._fail = lambda msg: None'''


def _answer(nb, task, source):
    cell = next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == f"{task}-answer")
    cell.source = source


def _class(tmp_path) -> Path:
    import nbformat
    sub = tmp_path / "submitted"
    for assignment in sorted(p.name for p in (ROOT / "solutions").iterdir()):
        for student, tree in (("solver", "solutions"), ("blank", "exercises")):
            shutil.copytree(ROOT / tree / assignment, sub / student / assignment)
    name = "01_bubble_and_1f1b"
    nb = nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)
    _answer(nb, "task1", LOOKUP)
    _answer(nb, "task2", SHORTCUT)
    _answer(nb, "task3", OVERRIDE)
    (sub / "cheater" / name).mkdir(parents=True)
    nbformat.write(nb, str(sub / "cheater" / name / f"{name}.ipynb"))
    return sub


@pytest.mark.slow
def test_pplab_grade_runs_the_instructor_workflow_on_a_small_class(tmp_path, sandboxed):
    sub = _class(tmp_path)
    out = tmp_path / "grades.csv"
    r = subprocess.run([sys.executable, "-m", "pplab.cli", "grade", str(sub), "--out", str(out),
                        "--cell-timeout", "90", "--seed", "2024", "-j", "2"],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "grading 3 students × 8 assignments" in r.stdout and "24/24" in r.stdout
    with open(out, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["student", "assignment", "task", "score", "max_score"]
    by = {(s, a, t): (float(x), float(m)) for s, a, t, x, m in rows[1:]}
    assert len(rows) - 1 == len(by) == 3 * 30
    assert len({a for _, a, _ in by}) == 8
    for key, (score, max_score) in by.items():
        assert max_score > 0
        if key[0] == "solver":
            assert score == max_score, key
        if key[0] == "blank":
            assert score == 0, key
    cheat = {t: by[("cheater", "01_bubble_and_1f1b", t)] for t in ("task1", "task2", "task3",
                                                                   "task4")}
    assert [cheat[t][0] for t in ("task1", "task2", "task3")] == [0, 0, 0]
    assert cheat["task4"][0] == cheat["task4"][1]
    fb = tmp_path / "feedback"
    page = (fb / "cheater" / "01_bubble_and_1f1b" / "01_bubble_and_1f1b.html").read_text()
    assert "derive it, not to call pplab.registry.make_schedule" in page
    assert "was not submitted" in (fb / "cheater" / "02_schedules" /
                                   "not_graded.html").read_text()
    assert (fb / "solver" / "06_real_processes" / "06_real_processes.html").exists()


def _grade_one(tmp_path, student, answers, *options) -> tuple[dict, Path]:
    """Grade one student's 08_derivations (the only assignment in the source)."""
    import nbformat
    name = "08_derivations"
    shutil.copytree(ROOT / "solutions" / name, tmp_path / "source" / name)
    nb = nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)
    for task, source in answers.items():
        _answer(nb, task, source)
    (tmp_path / "sub" / student / name).mkdir(parents=True)
    nbformat.write(nb, str(tmp_path / "sub" / student / name / f"{name}.ipynb"))
    out = tmp_path / "grades.csv"
    r = subprocess.run([sys.executable, "-m", "pplab.cli", "grade", str(tmp_path / "sub"),
                        "--out", str(out), "--source", str(tmp_path / "source"), *options],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(out, newline="") as f:
        got = {t: float(x) for s, a, t, x, m in list(csv.reader(f))[1:]}
    return got, tmp_path / "feedback" / student / name


@pytest.mark.slow
def test_a_notebook_past_its_timeout_scores_0_with_the_reason(tmp_path, sandboxed):
    got, fb = _grade_one(tmp_path, "slow", {t: "import time\ntime.sleep(20)"
                                            for t in ("task1", "task2", "task3")},
                         "--timeout", "10")
    assert got == {"task1": 0, "task2": 0, "task3": 0}
    assert "did not finish within 10 s" in (fb / "not_graded.html").read_text()


def test_without_a_sandbox_grading_refuses_with_one_line(tmp_path, capsys, monkeypatch):
    import pplab.grading.untrusted.sandbox as sandbox
    monkeypatch.setattr(sandbox, "unavailable", lambda: "bubblewrap is not installed")
    (tmp_path / "sub" / "someone").mkdir(parents=True)
    assert cli(["grade", str(tmp_path / "sub"), "--out", str(tmp_path / "g.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "bubblewrap is not installed" in err and "--no-sandbox" in err
    assert len(err.splitlines()) == 1


def _processes_naming(text: str) -> list[int]:
    import os
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(int(pid))
        except OSError:
            continue
    return out


@pytest.mark.slow
def test_resume_after_a_killed_run_regrades_nothing_and_loses_nothing(tmp_path, sandboxed):
    """Kill ``pplab grade`` once two results are written; ``--resume`` grades only the
    rest, with a seed of its own (never the killed run's), and the CSV has every row."""
    import os
    import signal
    import time
    name = "01_bubble_and_1f1b"
    sub = tmp_path / "sub"
    for k in range(5):
        shutil.copytree(ROOT / "solutions" / name, sub / f"s{k}" / name)
    (tmp_path / "source").mkdir()
    shutil.copytree(ROOT / "solutions" / name, tmp_path / "source" / name)
    out = tmp_path / "grades.csv"
    cmd = [sys.executable, "-m", "pplab.cli", "grade", str(sub), "--out", str(out),
           "--source", str(tmp_path / "source"), "-j", "1", "--seed", "31"]
    results = tmp_path / "grades.csv.parts" / "results"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while len(list(results.rglob("*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    deadline = time.monotonic() + 60        # the kernel ends a killed group at its own pace
    while _processes_naming(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_naming(str(tmp_path)) == [], "a grading worker outlived pplab grade"
    first = {p: p.stat().st_mtime_ns for p in results.rglob("*.json")}
    assert 2 <= len(first) < 5 and not out.exists()
    for p in first:
        json.loads(p.read_text())                   # whole files only: written atomically
    r = subprocess.run(cmd[:-2] + ["--seed", "77", "--resume"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"{len(first)} already graded, {5 - len(first)} to go" in r.stdout
    assert f"seed digest {seed_digest(77)}" in r.stdout      # its own seed, shown as a digest
    assert "seed 31" not in r.stdout and "seed 77" not in r.stdout
    assert {p: p.stat().st_mtime_ns for p in first} == first    # nothing regraded
    with open(out, newline="") as f:
        rows = list(csv.reader(f))[1:]
    assert len(rows) == 5 * 4 and all(float(x) == float(m) for *_, x, m in rows)


@pytest.mark.slow
def test_no_sandbox_still_judges_outside_the_students_kernel(tmp_path):
    """--no-sandbox (where bubblewrap cannot run) keeps the trusted verdicts and the student
    edition: a copy of pplab loaded by path still cannot call make_schedule."""
    import nbformat
    name = "01_bubble_and_1f1b"
    shutil.copytree(ROOT / "solutions" / name, tmp_path / "source" / name)
    nb = nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)
    _answer(nb, "task2", SHORTCUT)
    (tmp_path / "sub" / "s" / name).mkdir(parents=True)
    nbformat.write(nb, str(tmp_path / "sub" / "s" / name / f"{name}.ipynb"))
    out = tmp_path / "grades.csv"
    r = subprocess.run([sys.executable, "-m", "pplab.cli", "grade", str(tmp_path / "sub"),
                        "--out", str(out), "--source", str(tmp_path / "source"), "-j", "1",
                        "--no-sandbox"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "WITHOUT a sandbox" in r.stdout
    with open(out, newline="") as f:
        got = {t: float(x) for s, a, t, x, m in list(csv.reader(f))[1:]}
    assert got == {"task1": 2, "task2": 0, "task3": 3, "task4": 2}
