"""Grading a class that attacks its grader (docs/teaching.md, "Threat model").

A red-team class of exercise 01 is graded by ``pplab grade -j 2`` in the sandbox: each
attack scores 0 on what it games, with the reason in its feedback; the honest solution
scores full marks; no other student's score or file changes; nothing is left running.
Attacks carry their own backstops (a bounded fork fan-out with an alarm, their own
address-space limit), and the only network target is a server this test runs on the
loopback. The fast tests check the pieces: patterns resolve, the student edition has no
answer code, the wire builds only allow-listed types.
"""
import ast
import csv
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import nbformat
import pytest

from pplab.exercises import guard
from pplab.exercises.tasks import TASKS
from pplab.grading import verdict
from pplab.grading.untrusted import sandbox, student_edition, wire
from pplab.grading.execute import plan_runs
from test_sandbox_cgroups import ordinary_user      # same folder (pytest puts it on the path)

ROOT = Path(__file__).resolve().parents[2]
NAME = "01_bubble_and_1f1b"
SOLUTION = ROOT / "solutions" / NAME / f"{NAME}.ipynb"


# ---- fast: the pieces ---------------------------------------------------------------------

def test_every_blocked_pattern_names_at_least_one_function():
    patterns = {p for check in TASKS for p in guard.sandbox_cut(check)}
    assert "registry.make_schedule" in patterns and "closed_forms.*" in patterns
    empty = sorted(p for p in patterns if not student_edition.resolve(p))
    assert not empty, f"these patterns block nothing (a renamed function fails open): {empty}"


def test_what_every_task_blocks_leaves_the_simulator_whole():
    """A derive-it task cuts every function its patterns name, re-exports included, with no
    exception for the library's own calls in the sandbox's files: a core function imported
    into a generator module would be cut, and the simulator the student may use would then
    fail (as ``ir.key_of`` did, imported into ``schedules._common``)."""
    cut = {(m, n) for p in guard.always() for m, n in student_edition.resolve(p)}
    assert not {(m, n) for m, n in cut if m in ("keys", "ir", "sim.fast", "sim.compiled")
                or m.startswith("ir.")}
    assert not cut & {("sim.entry", "execute"), ("timeline", "run_events")}


def test_a_stale_pattern_fails_closed(tmp_path):
    with pytest.raises(ValueError, match="names no function"):
        student_edition.build(["closed_forms.no_such_function"], tmp_path)


def _run_against(lib, code: str, tmp_path):
    """Run ``code`` in a fresh Python that imports pplab from a task's edition ``lib``."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(lib)), cwd=tmp_path, timeout=60)


def test_the_student_edition_holds_no_answer_code(tmp_path):
    lib = student_edition.build(guard.sandbox_cut("check_bubble_formulas"), tmp_path)
    text = (lib / "pplab" / "closed_forms.py").read_text()
    tree = ast.parse(text)
    for fn in [n for n in tree.body if isinstance(n, ast.FunctionDef)]:
        assert len(fn.body) == 2 and isinstance(fn.body[1], ast.Raise), fn.name
    registry = ast.parse((lib / "pplab" / "registry.py").read_text())
    make = next(n for n in registry.body if getattr(n, "name", "") == "make_schedule")
    assert isinstance(make.body[-1], ast.Raise), "make_schedule kept: something runs it on import"
    code = ("import importlib.util, sys, os, pplab\n"
            "root = os.path.dirname(pplab.__file__)\n"
            "spec = importlib.util.spec_from_file_location('copy', os.path.join(root, "
            "'__init__.py'), submodule_search_locations=[root])\n"
            "m = importlib.util.module_from_spec(spec); sys.modules['copy'] = m\n"
            "spec.loader.exec_module(m)\n"
            "try:\n    m.make_schedule('1f1b', 4, 8)\nexcept Exception as e:\n"
            "    print(type(e).__name__, e)\n")
    r = _run_against(lib, code, tmp_path)
    assert "derive it, not to call pplab.registry.make_schedule" in r.stdout, r.stderr


def test_the_wire_rebuilds_only_allow_listed_types():
    bad = {"__obj__": "Popen", "fields": {"args": ["sh", "-c", "true"]}}
    got = wire.decode(bad)
    assert isinstance(got, wire.Unreadable) and got != got and got != 0
    sched = wire.decode(wire.encode(__import__("pplab").make_schedule("1f1b", 2, 3)))
    assert sched.rank_texts()[0][0] == "0F0"
    assert wire.decode(wire.encode((1, [2.5, range(0, 3)], {"a": None}))) == \
        (1, [2.5, range(0, 3)], {"a": None})


def test_every_schedule_crosses_the_wire_whole_keyed_ones_included():
    """A schedule a grader hands the student's code must arrive as a Schedule, whatever
    the generator made it (its rows kept as keys)."""
    from pplab import NAMES, make_schedule
    for name in NAMES:
        sched = make_schedule(name, 4, 8)
        got = wire.decode(wire.encode(sched))
        assert not isinstance(got, wire.Unreadable), name
        assert got == sched and got.rank_keys() == sched.rank_keys(), name


def test_a_forged_schedule_is_rebuilt_by_the_rules_or_not_at_all(tmp_path):
    """The wire's schedule door, attacked from the sandbox side: a look-alike class named
    Schedule crosses as its repr, and fields forged to carry code come out as an Unreadable
    (a wrong answer); nothing is run, and what is rebuilt is plain pplab data (an order
    that breaks the rules is then the validator's to reject)."""
    from pplab import ir, validate

    class Schedule:                                   # the student's own, not pplab's
        def rank_texts(self):
            return [["0F0"]]
    assert isinstance(wire.decode(wire.encode(Schedule())), wire.Unreadable)
    marker = tmp_path / "ran"
    forged = [{"ranks": [[f"__import__('pathlib').Path({str(marker)!r}).touch()"]]},
              {"ranks": [["0F0", "0F0"]], "stage_to_rank": [0, 0]},
              {"ranks": [["0F0"]], "stage_to_rank": "x"},
              {"ranks": [["0F0"]], "M": {"__repr__": "1"}},
              {"ranks": [[["0F0"]]], "V": 1.5}]
    base = {"stage_to_rank": [0], "M": 1, "name": "x", "V": 1, "copies": 1}
    for fields in forged:
        got = wire.decode({"__obj__": "Schedule", "fields": {**base, **fields}})
        if not isinstance(got, wire.Unreadable):
            assert type(got) is ir.Schedule and all(type(a) is ir.Action
                                                    for ops in got.ranks for a in ops)
            with pytest.raises(ValueError, match="runs 2 times"):
                validate(got)
    assert not marker.exists()


def test_tasks_whose_answers_use_the_library_get_a_run_of_their_own():
    nb = nbformat.read(ROOT / "solutions" / "03_memory" / "03_memory.ipynb", as_version=4)
    runs = plan_runs(nb)
    assert len(runs) == 2
    strict, planner = runs
    assert "registry.make_schedule" in strict[0] and "registry.make_schedule" not in planner[0]
    assert "memory.planner.plan" in planner[0]


def test_the_hidden_line_is_read_not_run():
    src = ('with task("T", 2):\n    check(x)\n### BEGIN HIDDEN TESTS\n'
           'grade("check_text_schedule", my_schedule, P=3, M=4, max_bubble_of_ideal=0.5)\n'
           '### END HIDDEN TESTS')
    check, args, kwargs = verdict.hidden_call(src)
    assert check == "check_text_schedule" and args[0].id == "my_schedule"
    assert kwargs["P"] == 3 and kwargs["max_bubble_of_ideal"] == 0.5


# ---- slow: the red-team class -------------------------------------------------------------

def _answer(nb, task: str, source: str):
    cell = next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == f"{task}-answer")
    cell.source = source


FRAMES = '''import sys
def _steal(attr):
    f = sys._getframe(1)
    while f is not None:
        for name in ("tl", "ref", "peaks", "want", "expected"):
            if name in f.f_locals:
                v = f.f_locals[name]
                return getattr(v, attr, v)
        f = f.f_back
    return 0.0
def bubble_of_total(P, M):
    return _steal("bubble_fraction")
def bubble_of_ideal(P, M):
    return _steal("bubble_ratio")'''

COPY_BY_PATH = '''import importlib.util, os, sys, pplab
root = os.path.dirname(pplab.__file__)
spec = importlib.util.spec_from_file_location("mine", os.path.join(root, "__init__.py"),
                                              submodule_search_locations=[root])
mine = importlib.util.module_from_spec(spec); sys.modules["mine"] = mine
spec.loader.exec_module(mine)
def bubble_of_total(P, M):
    return mine.simulate(mine.make_schedule("gpipe", P, M)).bubble_fraction
def bubble_of_ideal(P, M):
    return mine.simulate(mine.make_schedule("gpipe", P, M)).bubble_ratio'''

IMPORT_HOOK = '''import sys, types, importlib.machinery
class Fake:
    def find_spec(self, name, path=None, target=None):
        if name == "pplab.exercises.hidden":
            return importlib.machinery.ModuleSpec(name, self)
    def create_module(self, spec):
        m = types.ModuleType(spec.name); m.grade = lambda *a, **k: True; return m
    def exec_module(self, m):
        pass
sys.meta_path.insert(0, Fake())
sys.modules.pop("pplab.exercises.hidden", None)
import pplab.exercises as ex
ex.check_bubble_formulas = check_bubble_formulas = lambda *a, **k: True
def bubble_of_total(P, M):
    return 0.0
def bubble_of_ideal(P, M):
    return 0.0'''

TRANSFORMER = '''ip = get_ipython()
def _empty(lines):
    return [] if any("grade(" in l or "check_" in l for l in lines) else lines
ip.input_transformers_cleanup.append(_empty)
def bubble_of_total(P, M):
    return 0.0
def bubble_of_ideal(P, M):
    return 0.0'''

FORK_BOMB = '''import os, signal, time
made = 0
for _ in range(2000):                       # backstop: 2000 processes at most
    try:
        pid = os.fork()
    except OSError as e:
        print("fork refused after", made, "children:", e)
        break
    if pid == 0:
        signal.alarm(20)                    # backstop: every child is gone within 20 s
        time.sleep(15)
        os._exit(0)
    made += 1'''

MEMORY_HOG = '''import resource
_, hard = resource.getrlimit(resource.RLIMIT_AS)
cap = 8 << 30 if hard == resource.RLIM_INFINITY else min(hard, 8 << 30)
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))     # backstop: 8 GiB at most
hold = []
for _ in range(80):
    hold.append(bytearray(100 << 20))'''

DISK_FILLER = '''import os
block = b"x" * (16 << 20)
for folder in ("/dev/shm", "/tmp", os.getcwd()):
    written = 0
    try:
        with open(os.path.join(folder, "fill"), "wb") as f:
            while written < (1 << 30):              # backstop: 1 GiB per folder at most
                f.write(block); f.flush(); written += len(block)
    except OSError as e:
        print("full after", written >> 20, "MB in", folder, "-", e.strerror)'''

LOOP = '''while True:
    pass'''

RAISES = "raise RuntimeError('a student bug')"

FLOOD = '''import os, sys
chunk = "x" * (1 << 20)
for _ in range(1024):
    sys.stdout.write(chunk)
for _ in range(1024):
    try:
        os.write(1, chunk.encode())
    except OSError as e:
        print("write refused:", e); break'''


HUGE_NUMBER = '''import sys
sys.set_int_max_str_digits(0)               # lifted in the kernel: the grader must cope
def bubble_of_total(P, M):
    return 10 ** 5000
def bubble_of_ideal(P, M):
    return 10 ** 5000'''

NEWLINE = "new\nline"


def _spy(targets: dict) -> str:
    """Read the answer key, the class's files, the home directory and /etc; overwrite every
    classmate's notebook; write outside the scratch; call home on the host's loopback."""
    return f'''import glob, json, os, socket
T = {json.dumps(targets)}
def _try(label, fn):
    try:
        print(label, repr(fn())[:300])
    except Exception as e:
        print(label, "refused:", type(e).__name__)
_try("KEY", lambda: open(T["key"]).read())
_try("CANARY", lambda: open(T["canary"]).read())
_try("SHADOW", lambda: open("/etc/shadow").read())
_try("ETC", lambda: sorted(os.listdir("/etc")))
_try("CLASS", lambda: os.listdir(T["submitted"]))
for path in T["classmates"]:
    _try("OVERWRITE", lambda: open(path, "w").write("{{}}"))
_try("ESCAPE", lambda: open(T["escape"], "w").write("out"))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        _try("CMDLINE", lambda: open(f"/proc/{{pid}}/cmdline").read().replace("\\0", " "))
def _call():
    s = socket.create_connection(("127.0.0.1", T["port"]), timeout=3)
    s.sendall(b"escaped"); s.close(); return "sent"
_try("NETWORK", _call)
def bubble_of_total(P, M):
    return 0.0
def bubble_of_ideal(P, M):
    return 0.0'''


class LoopbackServer:
    """A TCP server on the host's loopback that records whether anyone reached it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(5)
        self.sock.settimeout(0.5)
        self.port, self.reached, self.stop = self.sock.getsockname()[1], [], False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.reached.append(conn.recv(100))
            conn.close()

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close()


def _digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def _write(sub: Path, student: str, nb) -> Path:
    path = sub / student / NAME / f"{NAME}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, str(path))
    return path


ATTACKS = {"frames": FRAMES, "copy_by_path": COPY_BY_PATH, "import_hook": IMPORT_HOOK,
           "transformer": TRANSFORMER, "fork_bomb": FORK_BOMB, "memory_hog": MEMORY_HOG,
           "loop": LOOP, "raises": RAISES, "flood": FLOOD, "disk_filler": DISK_FILLER,
           "huge_number": HUGE_NUMBER}
#: the attacks whose defence is the operating system's (limits, namespaces, file modes), so
#: the grader's Unix user can change the outcome; the others are refused inside Python or by
#: the grader's reading of results, the same whoever runs it
OS_ATTACKS = ("fork_bomb", "memory_hog", "disk_filler")


def _red_team_class(tmp_path: Path, port: int, canary: Path, whole: bool) -> Path:
    """The red-team class: the honest student, the spy (who reads for the key, the canary and
    classmates) and every attack when ``whole``, else only the ``OS_ATTACKS``."""
    sub = tmp_path / "submitted"
    honest = nbformat.read(SOLUTION, as_version=4)
    _write(sub, "honest", honest)
    for student, code in ATTACKS.items():
        if whole or student in OS_ATTACKS:
            nb = nbformat.read(SOLUTION, as_version=4)
            _answer(nb, "task1", code)
            _write(sub, student, nb)
    if whole:
        _write(sub, NEWLINE, honest)                # the job's spec must carry any name
        forged = nbformat.read(SOLUTION, as_version=4)       # the grade cell itself, edited
        _answer(forged, "task1", "pass")
        cell = next(c for c in forged.cells
                    if c.metadata.get("nbgrader", {}).get("grade_id") == "task1")
        cell.source = ('### BEGIN HIDDEN TESTS\ngrade("check_text_schedule", my_schedule, '
                       'P=3, M=4)\n### END HIDDEN TESTS')
        cell.metadata["nbgrader"]["points"] = 100
        _write(sub, "forged_grade_cell", forged)
        (sub / "not_json" / NAME).mkdir(parents=True)
        (sub / "not_json" / NAME / f"{NAME}.ipynb").write_text("this is not a notebook {")
        (sub / "symlink" / NAME).mkdir(parents=True)
        (sub / "symlink" / NAME / f"{NAME}.ipynb").symlink_to(SOLUTION)
    classmates = sorted(str(p) for p in sub.rglob("*.ipynb"))
    spy = nbformat.read(SOLUTION, as_version=4)
    _answer(spy, "task1", _spy({"key": str(SOLUTION), "canary": str(canary),
                                "submitted": str(sub), "classmates": classmates,
                                "escape": str(tmp_path / "escaped.txt"), "port": port}))
    _write(sub, "aaa_spy", spy)                 # graded first
    return sub


def _leftover_sandboxes(run_dir: Path) -> list[int]:
    """bubblewrap processes of this run (their command line names its edition folder); a
    sandbox's kernel and everything it forked die with its PID namespace."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and str(run_dir).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(int(pid))
        except OSError:
            continue
    return out


def _outputs(out: Path, student: str) -> str:
    """Everything the student's cells printed, from the autograded notebook."""
    done = out.parent / f"{out.name}.parts" / "work" / student / NAME / "autograded"
    nb = nbformat.read(done / f"{NAME}.ipynb", as_version=4)
    return "\n".join(o.get("text", "") + o.get("evalue", "") for c in nb.cells
                     if c.cell_type == "code" for o in c.outputs)


@pytest.mark.slow
@pytest.mark.parametrize("who", ["this user", "an ordinary user"])
def test_a_red_team_class_games_nothing_and_harms_no_one(tmp_path, who):
    """As the test's user and, when that is root, again as an ordinary user (``nobody``, in a
    cgroup delegated to it: the set-up the docs recommend for a shared server) with the
    attacks whose outcome the Unix user can change: the limits' and the spy's."""
    why = sandbox.unavailable()
    if why:
        pytest.skip(why)
    if who == "this user":
        _grade_red_team_class(tmp_path, None, whole=True)
    elif os.geteuid() != 0:
        pytest.skip("the tests run as an ordinary user already: the case above is this one")
    else:
        with ordinary_user(delegate=True) as user:
            _grade_red_team_class(user.home, user, whole=False)


#: seconds per cell: meant for the endless loop alone, never for an honest cell on a busy
#: machine (at 20 s an honest student of this class once scored 0 beside other work at
#: load 10, where it passes alone)
CELL_TIMEOUT = "60"


def _grade_red_team_class(tmp_path: Path, user, whole: bool) -> None:
    """Grade the red-team class in ``tmp_path``, as ``user`` (see test_sandbox_cgroups.py)
    or, when None, as the test's own user; then check every promise."""
    server = LoopbackServer()
    secret = f"pplab-canary-{uuid.uuid4()}"
    canary = (user.home if user else Path.home()) / f".{secret}"
    canary.write_text(secret)
    try:
        sub = _red_team_class(tmp_path, server.port, canary, whole)
        source = tmp_path / "source"
        (source / NAME).mkdir(parents=True)
        (source / NAME / f"{NAME}.ipynb").write_bytes(SOLUTION.read_bytes())
        before = _digest(sub)
        out = tmp_path / "grades.csv"
        cmd = [sys.executable, "-m", "pplab.cli", "grade", str(sub), "--out", str(out),
               "--source", str(source), "-j", "2", "--cell-timeout", CELL_TIMEOUT, "--seed", "99"]
        if user:
            user.own(tmp_path)
            r = user.run(cmd, timeout=900)
        else:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    finally:
        canary.unlink()
        server.close()
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert _digest(sub) == before, "a submission was changed"
    assert not (tmp_path / "escaped.txt").exists(), "the spy wrote outside its sandbox"
    assert server.reached == [], "the spy reached a server on the host's loopback"
    assert _leftover_sandboxes(tmp_path / "grades.csv.parts") == [], "a sandbox outlived the run"
    with open(out, newline="") as f:
        rows = list(csv.reader(f))[1:]
    scores = {(s, t): float(x) for s, a, t, x, m in rows}
    maxima = {(s, t): float(m) for s, a, t, x, m in rows}
    fb = tmp_path / "feedback"

    def page(student):
        return (fb / student / NAME / f"{NAME}.html").read_text()

    assert [scores[("honest", f"task{i}")] for i in range(1, 5)] == [2, 3, 3, 2]
    for student in (*OS_ATTACKS, "aaa_spy"):
        assert scores[(student, "task1")] == 0, student
    assert [scores[("aaa_spy", f"task{i}")] for i in (2, 3, 4)] == [3, 3, 2]
    # stopped by a limit it names: its address space (MemoryError) as a rule, but on a busy
    # machine touching 3 GB may take its cell past --cell-timeout first, and where memory is
    # short the kernel's OOM killer may end it first (docs/teaching.md)
    assert re.search(r"MemoryError|CellTimeoutError: the cell ran past|killed by a resource "
                     r"limit", page("memory_hog"))
    assert "fork refused after" in _outputs(out, "fork_bomb")
    filled = [ln for ln in _outputs(out, "disk_filler").splitlines() if ln.startswith("full")]
    assert len(filled) == 3 and all(int(ln.split()[2]) <= 512 for ln in filled), filled
    if whole:
        assert [scores[(NEWLINE, f"task{i}")] for i in range(1, 5)] == [2, 3, 3, 2]
        for student in ("frames", "copy_by_path", "import_hook", "transformer", "loop",
                        "raises", "flood", "not_json", "symlink", "forged_grade_cell",
                        "huge_number"):
            assert scores[(student, "task1")] == 0, student
        assert maxima[("forged_grade_cell", "task1")] == 2
        # a cell that hangs or raises costs its own task only
        for student in ("frames", "import_hook", "transformer", "loop", "raises", "flood",
                        "huge_number"):
            assert [scores[(student, f"task{i}")] for i in (2, 3, 4)] == [3, 3, 2], student
        assert "a whole number of 5001 digits" in page("huge_number")
        assert "bubble_of_total" in page("frames")
        assert "derive it, not to call pplab.registry.make_schedule" in page("copy_by_path")
        assert "bubble_of_total(" in page("import_hook")
        assert "bubble_of_total(" in page("transformer")
        assert "CellTimeoutError" in page("loop")
        assert "RuntimeError" in page("raises") and "a student bug" in page("raises")
        flood = page("flood")
        assert len(flood) < 5_000_000 and "more characters of output dropped" in flood
        assert "not JSON" in (fb / "not_json" / NAME / "not_graded.html").read_text()
        assert "link" in (fb / "symlink" / NAME / "not_graded.html").read_text()
    spy = _outputs(out, "aaa_spy")
    for leak in (secret, "BEGIN SOLUTION", "HIDDEN TESTS", str(sub)):
        assert leak not in spy, leak
    assert "KEY refused" in spy and "CANARY refused" in spy and "SHADOW refused" in spy
    assert "NETWORK refused" in spy and "ESCAPE refused" in spy
    etc = spy.split("ETC ")[1].split("\n")[0]
    for name in ("shadow", "hostname", "ssh", "resolv.conf"):
        assert name not in etc, etc


AS_USER = '''import tempfile
from pathlib import Path
from pplab.grading.untrusted import sandbox, student_edition
why = sandbox.unavailable()
assert why is None, why
lib = student_edition.build(["closed_forms.*"], Path(tempfile.mkdtemp()))
with sandbox.Sandbox(lib) as box:
    print(box.request({"op": "execute", "code": "import os; print('uid', os.getuid())"}, 60))
    print(box.request({"op": "execute", "code": "open('/etc/shadow')"}, 60))
'''


@pytest.mark.slow
def test_the_sandbox_works_for_an_ordinary_user():
    """bubblewrap's unprivileged path (a user namespace), as an instructor without root; as
    root the test makes this Python readable to ``nobody`` and runs as that user."""
    with ordinary_user() as user:
        r = user.run([sys.executable, "-c", AS_USER], timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "'uid" in r.stdout and "FileNotFoundError" in r.stdout, r.stdout


def test_the_newer_simulators_are_no_way_round_a_cut_simulator(tmp_path):
    """The stream model and the shared-core executor also time a schedule; in the edition of a
    task that cuts the simulator, a hand-written schedule must not get events out of them."""
    lib = student_edition.build(guard.sandbox_cut("check_bubble_formulas"), tmp_path)
    code = ("from pplab.ir import Action as A, Schedule\n"
            "rows = ((A(0, 'F', 0), A(0, 'F', 1), A(0, 'B', 0), A(0, 'B', 1)),\n"
            "        (A(1, 'F', 0), A(1, 'B', 0), A(1, 'F', 1), A(1, 'B', 1)))\n"
            "s = Schedule('mine', 2, 2, (0, 1), rows)\n"
            "from pplab.streams import Link, simulate_streams\n"
            "from pplab.sim import contention\n"
            "for name, run in (('streams', lambda: simulate_streams(s, None, Link())),\n"
            "                  ('contention', lambda: contention.execute(\n"
            "                      s, [[1.0] * 4] * 2, 0.0, 8, ([], 0, [])))):\n"
            "    try:\n        run(); print(name, 'gave events')\n"
            "    except Exception as e:\n        print(name, type(e).__name__, e)\n")
    r = _run_against(lib, code, tmp_path)
    assert "gave events" not in r.stdout, r.stdout + r.stderr
    assert r.stdout.count("derive it, not to call") == 2, r.stdout + r.stderr
