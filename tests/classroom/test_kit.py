"""The classroom kit's parts on their own: handing out lessons never overwrites a student's
file, the settings template and ``--set``, the hub configuration it produces for each
spawner, the roles' extension switches naming nbgrader's real extensions, ``pplab classroom``
refusing in one line, and nbgrader's release/collect in the repository's own course layout
with the class's course id and exchange (they failed there with "No course id specified").

The kit running for real, end to end, is test_journey_local.py and test_journey_slurm.py."""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pplab.canvases.labserver import SERVER_FLAG
from pplab.classroom import lessons, setup
from pplab.classroom.settings import KIT, Settings, render
from pplab.cli import main

ROOT = Path(__file__).resolve().parents[2]
ONE = "01_bubble_and_1f1b"
#: the instructor's and students' nbgrader commands, as docs/teaching.md writes them
RELEASE_CMD = f"nbgrader release_assignment {ONE}"
FETCH_CMD, SUBMIT_CMD = f"nbgrader fetch_assignment {ONE}", f"nbgrader submit {ONE}"
COLLECT_CMD, EXPORT_CMD = f"nbgrader collect {ONE}", "nbgrader export --to lms.csv"
#: a due date, so the export says who handed in late (teaching.md, step 6)
DUEDATE_CMD = f"nbgrader db assignment add {ONE} --duedate=2026-01-01T17:00:00Z"
#: grading in the course folder (the journey grades in the sandbox; this test without it)
GRADE_CMD = "pplab grade submitted --course . --out grades.csv -j 1 --no-sandbox"
#: making nbgrader's own exchange folder, for a term without a class (teaching.md)
DEFAULT_EXCHANGE = "/usr/local/share/nbgrader/exchange"
NO_CLASS_EXCHANGE_CMDS = (f"mkdir -p {DEFAULT_EXCHANGE}", f"chmod 0777 {DEFAULT_EXCHANGE}")


# ---- lessons ------------------------------------------------------------------------------
def test_hand_out_copies_what_is_missing_and_keeps_every_file_the_student_has(tmp_path):
    source, home = tmp_path / "lessons", tmp_path / "home" / "pplab"
    source.mkdir()
    for name in ("00_a.ipynb", "01_b.ipynb", "02_c.ipynb"):
        (source / name).write_text(f"lesson {name}")
    assert lessons.hand_out(source, home) == (["00_a.ipynb", "01_b.ipynb", "02_c.ipynb"], [])
    (home / "01_b.ipynb").write_text("my own work")                   # an edit
    (home / "02_c.ipynb").unlink()
    trap = tmp_path / "elsewhere"
    (home / "02_c.ipynb").symlink_to(trap)                             # a dangling link
    (source / "03_d.ipynb").write_text("a new lesson")                 # added later
    copied, kept = lessons.hand_out(source, home)
    assert copied == ["03_d.ipynb"] and kept == ["00_a.ipynb", "01_b.ipynb", "02_c.ipynb"]
    assert (home / "01_b.ipynb").read_text() == "my own work"
    assert not trap.exists()                          # nothing written through the link
    (home / "00_a.ipynb").unlink()                    # deleted: handed out again
    assert lessons.hand_out(source, home)[0] == ["00_a.ipynb"]


def test_lessons_command_says_what_it_did(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "00_a.ipynb").write_text("x")
    r = subprocess.run([sys.executable, "-m", "pplab.classroom.lessons", str(tmp_path / "src"),
                        str(tmp_path / "dest")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "1 copied (00_a.ipynb), 0 kept"


# ---- settings -----------------------------------------------------------------------------
def test_render_sets_values_and_keeps_the_comments():
    template = (KIT / "classroom.ini").read_text()
    out = render(template, {"course_id": "pp101", "hub.port": "8080", "limits.nodes": "4"})
    assert "course_id = pp101\n" in out and "port = 8080\n" in out and "nodes = 4\n" in out
    assert "formgrader_port = 9999\n" in out                  # [hub] port only, not this one
    comments = [ln for ln in template.splitlines() if ln.startswith("#")]
    assert comments == [ln for ln in out.splitlines() if ln.startswith("#")]
    with pytest.raises(KeyError, match="the settings file has no colour"):
        render(template, {"colour": "red"})


def write_settings(tmp_path: Path, **values) -> Path:
    path = tmp_path / "classroom.ini"
    defaults = setup.here_defaults() | {"home": str(tmp_path / "hub")}
    path.write_text(render((KIT / "classroom.ini").read_text(), defaults | values))
    return path


def test_a_spawner_that_is_not_local_or_slurm_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"\[hub\] spawner must be local or slurm, got 'k8s'"):
        Settings.read(write_settings(tmp_path, spawner="k8s"))


def hub_config(path: Path, monkeypatch):
    """The kit's jupyterhub_config.py run as JupyterHub runs it, for these settings."""
    from traitlets.config import Config
    monkeypatch.setenv("PPLAB_CLASSROOM", str(path))
    c = Config()
    kit = KIT / "jupyterhub_config.py"
    exec(compile(kit.read_text(), str(kit), "exec"), {"get_config": lambda: c})
    return c


def test_the_hub_config_for_one_shared_server(tmp_path, monkeypatch):
    c = hub_config(write_settings(tmp_path, course_id="pp101"), monkeypatch)
    venv = sys.prefix
    assert c.JupyterHub.spawner_class == "pplab.classroom.spawner.LimitedSpawner"
    assert c.JupyterHub.authenticator_class == "pam"
    assert c.Spawner.cmd == [f"{venv}/bin/jupyterhub-singleuser"]
    assert c.Spawner.args[0] == SERVER_FLAG                        # NoDelayConnection
    assert c.Spawner.default_url == "/lab/tree/pplab/00_setup_and_first_run.ipynb"
    assert c.Spawner.pre_spawn_hook.__name__ == "before_spawn"
    services = {s["name"]: s for s in c.JupyterHub.services}
    assert services["pp101"]["user"] == "grader-pplab"             # nbgrader's service
    assert services["idle-culler"]["command"][-1] == "--timeout=3600"
    roles = {r["name"]: r for r in c.JupyterHub.load_roles}
    assert roles["formgrade-pp101"]["scopes"][0] == "access:services!service=pp101"
    assert roles["formgrade-pp101"]["groups"] == ["formgrade-pp101"]
    assert "delete:servers" in roles["idle-culler"]["scopes"]


@pytest.mark.slow
def test_the_hub_config_for_slurm(tmp_path, monkeypatch):
    c = hub_config(write_settings(tmp_path, spawner="slurm", partition="lab", cpus="4",
                                  hub_ip="10.0.0.5"), monkeypatch)
    venv = sys.prefix
    assert c.JupyterHub.spawner_class == "batchspawner.SlurmSpawner"
    assert c.SlurmSpawner.batchspawner_singleuser_cmd == f"{venv}/bin/batchspawner-singleuser"
    assert c.SlurmSpawner.req_prologue == f"export PATH={venv}/bin:$PATH"
    assert (c.SlurmSpawner.req_partition, c.SlurmSpawner.req_nprocs) == ("lab", "4")
    assert c.JupyterHub.hub_connect_ip == "10.0.0.5"


def test_each_role_switches_off_real_nbgrader_extensions():
    """The ids the kit disables are those nbgrader's lab extension and server declare (a
    misspelt one would silently leave the instructor tools on)."""
    import importlib
    static = Path(sys.prefix) / "share/jupyter/labextensions/@jupyter/nbgrader/static"
    js = "".join(p.read_text(errors="replace") for p in static.glob("*.js"))
    seen = {}
    for role in ("student", "instructor", "grader"):
        page = json.loads((KIT / "jupyter" / role / "labconfig" / "page_config.json").read_text())
        server = json.loads((KIT / "jupyter" / role / "jupyter_server_config.json").read_text())
        for plugin in page["disabledExtensions"]:
            assert plugin.split(":")[1] in js, plugin
        for module in server["ServerApp"]["jpserver_extensions"]:
            importlib.import_module(module)
        seen[role] = set(page["disabledExtensions"])
    assert "@jupyter/nbgrader:formgrader" in seen["student"] & seen["instructor"]
    assert "@jupyter/nbgrader:assignment-list" not in seen["student"]


# ---- pplab classroom ----------------------------------------------------------------------
def test_init_as_an_ordinary_user_says_to_run_it_as_root(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(setup.os, "geteuid", lambda: 1000)
    assert main(["classroom", "init", "--settings", str(tmp_path / "c.ini")]) == 1
    assert capsys.readouterr().out.strip() == (
        "pplab classroom init: pplab classroom init makes Unix groups, the grader account and "
        "the exchange: run it as root")
    assert not (tmp_path / "c.ini").exists()


def test_up_before_init_names_the_missing_step(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(setup.os, "geteuid", lambda: 0)
    path = write_settings(tmp_path)
    assert main(["classroom", "up", "--settings", str(path)]) == 1
    assert capsys.readouterr().out.strip() == (
        f"pplab classroom up: no {tmp_path / 'hub' / 'jupyterhub_config.py'}: run pplab "
        "classroom init first")


def test_the_first_init_prints_each_step(tmp_path, monkeypatch, capsys):
    """What ``pplab classroom init`` prints the first time, one line per step (the accounts
    and nbgrader's run are recorded, not made: the journey tests make them for real)."""
    monkeypatch.setattr(setup.os, "geteuid", lambda: 0)
    done = []

    def run(cmd, say, **kw):
        say("$ " + " ".join(cmd))
        done.append(cmd)
        plain = cmd[cmd.index("--") + 1:] if "--" in cmd else cmd
        if plain[0] in ("mkdir", "cp"):                   # the course folder's files
            subprocess.run(plain, check=True)
    monkeypatch.setattr(setup, "run", run)
    monkeypatch.setattr(setup, "check_reachable", lambda s: None)     # tested on its own
    monkeypatch.setattr(setup, "owner", lambda path: "pplab-test-none-g")
    monkeypatch.setattr(setup, "copy_as", lambda user, folder, dest, say: shutil.copytree(
        folder, dest / folder.name))
    ini, home, course = tmp_path / "c.ini", tmp_path / "hub", tmp_path / "course"
    source = tmp_path / "solutions"
    shutil.copytree(ROOT / "solutions", source)
    sets = [f"home={home}", f"course_dir={course}", f"exchange={tmp_path / 'x'}",
            "students=pplab-test-none-s", "instructors=pplab-test-none-i",
            "grader=pplab-test-none-g", f"source={source}"]
    assert main(["classroom", "init", "--settings", str(ini),
                 *[a for kv in sets for a in ("--set", kv)]]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"wrote {ini} (the class's settings and limits: edit it, then run init " \
                     "again)"
    for line in (f"wrote {home / 'jupyterhub_config.py'}",
                 f"wrote {home / 'jupyter' / 'nbgrader_config.py'}",
                 "$ groupadd pplab-test-none-s", "$ groupadd pplab-test-none-i",
                 f"made the exchange {tmp_path / 'x'}",
                 f"chown root, chmod 1777 {tmp_path / 'x'} (sticky: no student can rename "
                 "another's folder)",
                 f"$ runuser -u pplab-test-none-g -- mkdir {tmp_path / 'x' / 'pplab'}",
                 f"$ runuser -u pplab-test-none-g -- chmod 3733 "
                 f"{tmp_path / 'x' / 'pplab' / 'inbound'}",
                 f"$ runuser -u pplab-test-none-g -- mkdir -p {course / 'source'}",
                 f"chmod 700 {source} (the answers: students must not read them)",
                 f"$ runuser -u pplab-test-none-g -- {sys.prefix}/bin/nbgrader "
                 "generate_assignment *"):
        assert line in out, (line, out)
    assert any(ln.startswith("$ useradd --system") and ln.endswith(" pplab-test-none-g")
               for ln in out)
    assert out[-1].startswith("ready: pplab for the Unix groups pplab-test-none-s (students)")
    assert out[-1].endswith("start the hub with: pplab classroom up")
    assert sorted(p.name for p in (course / "source").iterdir()) == \
        sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())


def closed_python(tmp_path: Path) -> tuple[Path, Path]:
    """A clone whose environment's python links to an interpreter in a folder closed to
    other accounts (as a venv made from pyenv under /root is); (clone, closed folder)."""
    closed, clone = tmp_path / "root", tmp_path / "course"
    (closed / "bin").mkdir(parents=True)
    (closed / "bin" / "python3.11").write_text("")
    os.chmod(closed, 0o700)
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "python").symlink_to(closed / "bin" / "python3.11")
    (clone / "notebooks").mkdir()
    return clone, closed


@pytest.fixture
def open_tmp():
    """A temporary folder every account can pass through (pytest's own is its user's)."""
    folder = Path(tempfile.mkdtemp(prefix="pplab-kit-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_init_refuses_an_environment_others_cannot_run_and_says_how_to_remake_it(
        open_tmp, monkeypatch, capsys):
    """A venv made from a Python under a closed folder: init stops before anything is made
    and gives the command that makes one every account can run (not chmod o+x /root)."""
    monkeypatch.setattr(setup.os, "geteuid", lambda: 0)
    tmp_path = open_tmp
    clone, closed = closed_python(tmp_path)
    monkeypatch.setattr(setup, "SHARED_PYTHONS", (str(tmp_path / "usr-bin"),))
    (tmp_path / "usr-bin").mkdir()
    version = ".".join(map(str, sys.version_info[:2]))
    (tmp_path / "usr-bin" / f"python{version}").write_text("")
    path = write_settings(tmp_path, venv=str(clone / ".venv"), lessons=str(clone / "notebooks"))
    assert main(["classroom", "init", "--settings", str(path)]) == 1
    said = capsys.readouterr().out.strip().splitlines()[-1]
    assert said == (
        f"pplab classroom init: the grader and the students cannot run {closed}/bin/python3.11: "
        f"{closed} is closed to other accounts, and the environment's python is a link to it. "
        f"Make the environment from a Python they can run: cd {clone} && rm -rf .venv && make "
        f".venv/.installed PYTHON={tmp_path}/usr-bin/python{version}; then run init again")
    assert "chmod" not in said and not (tmp_path / "hub").exists()     # nothing made
    (clone / ".venv" / "bin" / "python").unlink()        # the fix, followed, is accepted
    (clone / ".venv" / "bin" / "python").symlink_to(tmp_path / "usr-bin" / f"python{version}")
    setup.check_reachable(Settings.read(path))


@pytest.mark.parametrize("args, words", [
    (["--set", "novalue"], "--set takes KEY=VALUE, got 'novalue'"),
    (["--set", "=x"], "--set takes KEY=VALUE, got '=x'")])
def test_bad_set_is_one_line(args, words, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(setup.os, "geteuid", lambda: 0)
    assert main(["classroom", "init", "--settings", str(tmp_path / "c.ini"), *args]) == 2
    assert capsys.readouterr().err.strip() == f"pplab: error: {words}"


# ---- nbgrader in the repository's course layout -------------------------------------------
def course_copy(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The repository's course layout (its nbgrader_config.py, assignment 01's release) in
    a folder of its own, a student's folder with the same config, and an empty exchange."""
    course, student, exchange = tmp_path / "course", tmp_path / "student", tmp_path / "x"
    for folder in (course, student):
        folder.mkdir()
        shutil.copy(ROOT / "nbgrader_config.py", folder)
    shutil.copytree(ROOT / "exercises" / ONE, course / "exercises" / ONE)
    return course, student, exchange


def shell(env: dict):
    """Run a documented command line in a folder with ``env``; its output, or fail."""
    def run(cmd: str, cwd: Path, **more) -> str:
        r = subprocess.run(cmd.split(), cwd=cwd, env=env | more, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
        return r.stdout + r.stderr
    return run


def venv_env(**more) -> dict:
    return dict(os.environ, **more,
                PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))


@pytest.mark.slow
def test_release_and_collect_in_the_repository_layout_use_the_class(tmp_path):
    """nbgrader_config.py at the repository root: the class's course id and exchange, so
    `nbgrader release_assignment` and `nbgrader collect` work as docs/teaching.md says
    (run in a copy of the layout: nothing is written into the checkout)."""
    course, student, exchange = course_copy(tmp_path)
    exchange.mkdir(mode=0o777)
    os.chmod(exchange, 0o777)
    settings = write_settings(tmp_path, course_id="pp101", exchange=str(exchange))
    nbgrader = shell(venv_env(PPLAB_CLASSROOM=str(settings)))
    assert "Released as: pp101 01_bubble_and_1f1b" in nbgrader(RELEASE_CMD, course)
    assert (exchange / "pp101" / "outbound" / ONE / f"{ONE}.ipynb").is_file()
    # a student (here: this account) fetches and submits with the kit's configuration for
    # students' JupyterLab, which names the same course and exchange
    students = {"JUPYTER_CONFIG_PATH": str(KIT / "jupyter")}
    nbgrader(FETCH_CMD, student, **students)
    nbgrader(SUBMIT_CMD, student, **students)
    assert "Collecting submission" in nbgrader(COLLECT_CMD, course)
    assert list((course / "submitted").glob(f"*/{ONE}/{ONE}.ipynb"))


@pytest.mark.slow
def test_the_term_without_a_class_as_teaching_md_writes_it(tmp_path, monkeypatch):
    """docs/teaching.md, "Without a hub": no class settings file, course ``pplab``; the
    exchange made as the docs make it (here a temporary one, named by $PPLAB_EXCHANGE
    instead of nbgrader's /usr/local one); release, fetch, submit and collect."""
    from pplab.probe import policy
    if policy.SYSTEM_PATH.exists():
        pytest.skip(f"this machine has a class ({policy.SYSTEM_PATH})")
    course, student, exchange = course_copy(tmp_path)
    env = venv_env(PPLAB_EXCHANGE=str(exchange))
    env.pop(policy.SETTINGS_VAR, None)
    run = shell(env)
    for cmd in NO_CLASS_EXCHANGE_CMDS:
        run(cmd.replace(DEFAULT_EXCHANGE, str(exchange)), tmp_path)
    assert oct(exchange.stat().st_mode & 0o777) == "0o777"
    assert "Released as: pplab 01_bubble_and_1f1b" in run(RELEASE_CMD, course)
    run(FETCH_CMD, student)
    assert (student / ONE / f"{ONE}.ipynb").is_file()
    run(SUBMIT_CMD, student)
    assert "Collecting submission" in run(COLLECT_CMD, course)
    assert list((course / "submitted").glob(f"*/{ONE}/{ONE}.ipynb"))


@pytest.mark.slow
def test_the_kits_course_folder_from_release_to_export(tmp_path):
    """The instructor's commands of teaching.md's term in a course folder laid out as
    ``pplab classroom init`` makes it (the kit's nbgrader_config.py, source/, generated):
    release, a student's fetch and submit of the solution, collect, ``pplab grade --course
    .`` three times (as a term grades again after each assignment: the last run's read-only
    autograded notebooks are replaced), a due date, and ``nbgrader export``, whose CSV has
    the student's 10 points from the gradebook and when they handed in, after the due date."""
    course, student, exchange = tmp_path / "course", tmp_path / "student", tmp_path / "x"
    shutil.copytree(ROOT / "solutions" / ONE, course / "source" / ONE)
    shutil.copy(KIT / "course" / "nbgrader_config.py", course)
    student.mkdir()
    exchange.mkdir()
    os.chmod(exchange, 0o777)
    settings = write_settings(tmp_path, course_id="pp101", exchange=str(exchange),
                              course_dir=str(course))
    run = shell(venv_env(PPLAB_CLASSROOM=str(settings)))
    run(f"nbgrader generate_assignment {ONE}", course)
    run(RELEASE_CMD, course)
    students = {"JUPYTER_CONFIG_PATH": str(KIT / "jupyter")}
    run(FETCH_CMD, student, **students)
    shutil.copy(ROOT / "solutions" / ONE / f"{ONE}.ipynb", student / ONE)   # honest work
    run(SUBMIT_CMD, student, **students)
    run(COLLECT_CMD, course)
    run(DUEDATE_CMD, course)
    for _ in range(3):
        run(GRADE_CMD, course)
    autograded = next((course / "autograded").glob(f"*/{ONE}/{ONE}.ipynb"))
    assert not autograded.stat().st_mode & 0o222          # nbgrader's read-only copy, again
    assert "Exporting grades to lms.csv" in run(EXPORT_CMD, course)
    with open(course / "lms.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["assignment"], float(r["score"]), float(r["max_score"])) for r in rows] == \
        [(ONE, 10.0, 10.0)]
    handed_in = next((course / "submitted").glob(f"*/{ONE}/timestamp.txt")).read_text()
    assert rows[0]["timestamp"][:19] == handed_in.strip()[:19].replace("T", " "), rows[0]
    assert rows[0]["duedate"] == "2026-01-01 17:00:00" < rows[0]["timestamp"], rows[0]
    assert (course / "grades.csv").read_text().startswith("student,assignment,task")


def test_the_documented_exchange_is_nbgraders_default():
    """Without a class and $PPLAB_EXCHANGE the root config leaves nbgrader's exchange as
    nbgrader's own default, the folder docs/teaching.md says to make."""
    from nbgrader.exchange.default.exchange import Exchange
    assert Exchange.class_traits()["root"].default_value == DEFAULT_EXCHANGE


# ---- the class's limits and a lesson's own run --------------------------------------------
def lessons_runs() -> dict[str, int]:
    """The processes of every real run a lesson starts itself (its run panel, its cells)."""
    import re
    out = {}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            code = "".join(cell["source"])
            for call in re.findall(r"(?:run_panel|run_schedule)\([^)]*\bP=(\d+)", code):
                out[nb.stem] = max(out.get(nb.stem, 0), int(call))
    return out


def test_the_kits_default_limit_lets_every_lessons_own_run_start(tmp_path, monkeypatch):
    """On a one-core server too: a class never disables a lesson's own Run for real."""
    from pplab.probe import policy
    runs = lessons_runs()
    assert runs["00_setup_and_first_run"] == 4 and len(runs) >= 5, runs
    monkeypatch.setattr(policy, "server_cores", lambda: 1)
    limits = policy.limits(write_settings(tmp_path))
    for lesson, procs in runs.items():
        limits.check_local(procs)


def test_a_lessons_cell_obeys_the_rule_that_disables_its_button(tmp_path, monkeypatch,
                                                                 capsys):
    """A class that allows fewer processes than lesson 00 runs: the button is disabled and
    the next cell (real_job around run_schedule) refuses in the same words, launching
    nothing."""
    from pplab.canvases.runs import run_panel
    from pplab.course.jobs import real_job
    from pplab.runtime import launcher, run_schedule
    path = write_settings(tmp_path, **{"limits.local_procs": "2"})
    monkeypatch.setenv("PPLAB_CLASSROOM", str(path))
    monkeypatch.setattr(launcher, "_launch", lambda *a, **k: pytest.fail("a run started"))
    panel = run_panel("1f1b", P=4, M=8, emulate=True, tf=0.05, tb=0.1)
    rule = f"4 local processes asked; this class allows at most 2 (local_procs in {path}, " \
           "set by your instructor)"
    assert panel.last_message == rule and panel.button.disabled
    with real_job("In a terminal: pplab run -s 1f1b -P 4 -M 8 --emulate --tf 0.05 --tb 0.1"):
        run_schedule("1f1b", P=4, M=8, emulate=dict(tf=0.05, tb=0.1))
    said = capsys.readouterr().out.strip()
    assert rule in said and len(said.splitlines()) == 1, said


# ---- pplab classroom up: ports and TLS -----------------------------------------------------
def free_ports(n: int) -> int:
    """The first of ``n`` consecutive ports free on 127.0.0.1 now."""
    import socket
    for base in range(21000, 29000, 7):
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    pytest.skip("no free ports")


@pytest.mark.parametrize("taken, setting", [(1, "hub.port"), (3, "hub.formgrader_port")])
def test_up_refuses_a_port_another_hub_holds(taken, setting, tmp_path, monkeypatch, capsys):
    """A second class (or a test) on this machine: up names the taken port and the setting
    that moves it, instead of a hub that dies on its API port or its formgrader's."""
    import socket
    monkeypatch.setattr(setup.os, "geteuid", lambda: 0)
    monkeypatch.setattr(setup.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(setup.os, "execve", lambda *a: pytest.fail("the hub started"))
    base = free_ports(4)
    path = write_settings(tmp_path, ip="127.0.0.1", port=str(base),
                          formgrader_port=str(base + 3))
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "jupyterhub_config.py").write_text("")
    with socket.socket() as other:
        other.bind(("127.0.0.1", base + taken))
        other.listen()
        assert main(["classroom", "up", "--settings", str(path)]) == 1
    said = capsys.readouterr().out.strip()
    assert said.startswith(f"pplab classroom up: port {base + taken} (") and \
        f"--set {setting}=..." in said, said


def test_up_with_half_a_tls_pair_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(setup.os, "geteuid", lambda: 0)
    monkeypatch.setattr(setup.shutil, "which", lambda name: f"/usr/bin/{name}")
    path = write_settings(tmp_path)
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "jupyterhub_config.py").write_text("")
    assert main(["classroom", "up", "--settings", str(path), "--ssl-cert", str(path)]) == 1
    assert capsys.readouterr().out.strip() == \
        "pplab classroom up: HTTPS needs both --ssl-cert and --ssl-key"
