"""Limits per sandbox, not per uid (issue 29, item 5): each sandbox has its own cgroup.

The concurrent test runs three sandboxes at once, a fork bomb, a memory hog that forks and
an honest kernel that needs several processes; the honest one completes, each attacker is
held by its own group, and every group is gone afterwards. It runs as root and again as an
ordinary user in a cgroup delegated to that user (what the docs recommend for a shared
server). Attacks carry their own backstops (a bounded fork loop with an alarm, a bounded
number of bounded allocations), and every request has a timeout.

``ordinary_user`` is shared with test_grading_sandbox.py (the red team as an ordinary user).
"""
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from pplab.grading import cgroups
from pplab.grading.untrusted import sandbox, student_edition

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
LOCK = "/tmp/pplab-ordinary-user.lock"
PROCESSES = 64
GROUP_MEMORY = 400 << 20

BOMB = '''import os, signal, time
made, refused = 0, ""
for _ in range(300):                        # backstop: 300 processes at most
    try:
        pid = os.fork()
    except OSError as e:
        refused = str(e)
        break
    if pid == 0:
        signal.alarm(20)                    # backstop: every child is gone within 20 s
        time.sleep(12)
        os._exit(0)
    made += 1
print("made", made, "refused", refused)'''

HOG = '''import os, signal
kids = []
for _ in range(4):                          # backstop: 4 children of 250 MB at most
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)
        hold = bytearray(250 << 20)         # touched: every page is charged
        os._exit(0)
    kids.append(pid)
print("hog statuses", [os.waitpid(k, 0)[1] for k in kids])'''

HONEST = '''import subprocess, sys
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2); print(7)"],
                         stdout=subprocess.PIPE) for _ in range(8)]
print("honest", sum(int(k.communicate(timeout=60)[0]) for k in kids))'''

# Runs as its own process (as root, or as the ordinary user); prints one JSON line.
CLASS = f'''import json, tempfile, threading, time
from pathlib import Path
from pplab.grading.untrusted import sandbox, student_edition
BOMB, HOG, HONEST = {BOMB!r}, {HOG!r}, {HONEST!r}
lib = student_edition.build(["closed_forms.*"], Path(tempfile.mkdtemp()))
limits = sandbox.Limits(processes={PROCESSES}, memory=1 << 30, sandbox_memory={GROUP_MEMORY})
boxes = {{name: sandbox.Sandbox(lib, limits) for name in ("bomb", "hog", "honest")}}
out = {{"grouped": {{n: b.group is not None for n, b in boxes.items()}}, "most": 0}}
done = threading.Event()
def watch():
    while not done.is_set():
        out["most"] = max(out["most"], int(boxes["bomb"].group.read("pids", "pids.current")))
        time.sleep(0.01)
def ask(name, code):
    try:
        out[name] = str(boxes[name].request({{"op": "execute", "code": code}}, 60))
    except Exception as e:
        out[name] = f"{{type(e).__name__}}: {{e}}"
if all(out["grouped"].values()):
    threading.Thread(target=watch, daemon=True).start()
    ask("bomb", BOMB)                       # its children live on for 12 s
    hog = threading.Thread(target=ask, args=("hog", HOG))
    hog.start()
    ask("honest", HONEST)
    hog.join(90)
    done.set()
    out["peak"] = int(boxes["bomb"].group.read("pids", "pids.peak") or 0)
    mem = "memory.peak" if boxes["hog"].group.version == 2 else "memory.max_usage_in_bytes"
    out["hog_memory"] = int(boxes["hog"].group.read("memory", mem))
    out["folders"] = [str(f) for b in boxes.values() for f in b.group.folders]
for b in boxes.values():
    b.close()
print(json.dumps(out))
'''


def _needs_sandbox():
    why = sandbox.unavailable()
    if why:
        pytest.skip(why)


def _run_class(run) -> dict:
    r = run([sys.executable, "-c", CLASS], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check_class(out: dict) -> None:
    assert all(out["grouped"].values()), out["grouped"]
    assert "honest 56" in out["honest"], out["honest"]
    assert "made" in out["bomb"] and "refused" in out["bomb"], out["bomb"]
    made = int(out["bomb"].split("made ")[1].split()[0])
    assert made < PROCESSES, out["bomb"]
    assert out["most"] <= PROCESSES and out["peak"] <= PROCESSES, out
    assert out["hog_memory"] <= GROUP_MEMORY, out
    assert "hog statuses" in out["hog"] or "stopped" in out["hog"], out["hog"]
    assert out["folders"] and not any(os.path.exists(f) for f in out["folders"]), out


@pytest.mark.slow
def test_a_fork_bomb_and_a_memory_hog_leave_a_concurrent_sandbox_alone():
    """As root: each of three concurrent sandboxes has its own group, and it holds."""
    _needs_sandbox()
    if cgroups.unavailable():
        pytest.skip(f"no cgroup here: {cgroups.unavailable()}")
    out = _run_class(lambda cmd, timeout: subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd="/tmp"))
    _check_class(out)


@pytest.mark.slow
def test_one_user_s_fork_bomb_does_not_fail_a_classmate():
    """The reported case: as an ordinary user the uid's process count is shared by every
    sandbox; in a delegated cgroup each sandbox counts only its own."""
    _needs_sandbox()
    with ordinary_user(delegate=True) as user:
        if user.delegated is None:
            pytest.skip("no cgroup could be delegated to an ordinary user here")
        out = _run_class(user.run)
    _check_class(out)


@pytest.mark.slow
def test_without_a_cgroup_one_line_says_which_promise_is_weaker(tmp_path, monkeypatch):
    """An empty cgroup root: no group, the rlimits hold, and limits_note names the cost."""
    monkeypatch.setenv(cgroups.ROOT_ENV, str(tmp_path))
    assert cgroups.unavailable() is not None
    note = sandbox.limits_note()
    assert note is not None and "\n" not in note and note.startswith("no cgroup available")
    promise = "memory and CPU" if os.geteuid() == 0 else "process limits are per user"
    assert promise in note, note
    if sandbox.unavailable() is None:
        lib = student_edition.build(["closed_forms.*"], tmp_path / "edition")
        with sandbox.Sandbox(lib) as box:
            assert box.group is None
            reply = box.request({"op": "execute", "code": "print(6 * 7)"}, 60)
        assert "42" in str(reply), reply


def test_a_group_is_made_with_its_limits_and_removed(tmp_path):
    """The plumbing, on the real hierarchy where there is one: limits written, a process
    moved in is counted, and close kills it and removes every folder."""
    why = cgroups.unavailable()
    if why:
        pytest.skip(f"no cgroup here: {why}")
    group = cgroups.make(processes=10, memory=64 << 20)
    assert group.read("pids", "pids.max") == "10"
    sleeper = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: group.add(os.getpid()))
    try:
        assert group.pids() == [sleeper.pid]
        assert group.close() == []
        assert sleeper.wait(timeout=10) != 0
    finally:
        sleeper.kill()
    assert not any(f.exists() for f in group.folders)


def test_a_v2_group_is_made_under_this_process_s_own_cgroup(tmp_path, monkeypatch):
    """cgroup v2 (this machine has only v1 controllers), on a fake tree of plain files: the
    controllers are enabled for the children of our own cgroup and the limits written."""
    own = tmp_path / "user.slice" / "grading.scope"
    own.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.controllers").write_text("cpu io memory pids\n")
    (own / "cgroup.subtree_control").write_text("\n")
    monkeypatch.setenv(cgroups.ROOT_ENV, str(tmp_path))
    monkeypatch.setattr(cgroups, "own_paths",
                        lambda text=None: {"": "/user.slice/grading.scope"})
    group = cgroups.make(processes=7, memory=1 << 20, cpus=1.5)
    folder = group.dirs["pids"]
    assert group.version == 2 and folder.parent == own and set(group.dirs.values()) == {folder}
    assert (own / "cgroup.subtree_control").read_text() == "+pids +memory +cpu"
    assert (folder / "pids.max").read_text() == "7"
    assert (folder / "memory.max").read_text() == str(1 << 20)
    assert not (folder / "cpu.max").exists()        # only written where the kernel made it
    monkeypatch.setattr(cgroups, "own_paths",
                        lambda text=None: {"": f"/user.slice/grading.scope/{cgroups.LEAF}"})
    assert cgroups.make(processes=7, memory=1 << 20).dirs["pids"].parent == own
    (own / "cgroup.controllers").write_text("cpu io\n")
    with pytest.raises(cgroups.Unavailable, match="no pids, memory controller"):
        cgroups.make(processes=7, memory=1 << 20)


def test_own_paths_reads_both_hierarchies():
    text = "12:pids:/a\n4:cpu,cpuacct:/b\n0::/user.slice/x.scope\n"
    assert cgroups.own_paths(text) == {"pids": "/a", "cpu": "/b", "cpuacct": "/b",
                                       "": "/user.slice/x.scope"}


# ---- an ordinary user, as root can make one -------------------------------------------------
class User:
    """Runs commands as an ordinary user (``nobody`` when the tests run as root), with a
    folder of its own and, when asked, a cgroup delegated to it (``delegated``: the folders
    it joins; [] when it can make groups already; None when it has none)."""

    def __init__(self, uid: int | None, home: Path, delegated: list[Path] | None):
        self.uid, self.home, self.delegated = uid, home, delegated

    def run(self, cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
        env = {"HOME": str(self.home), "PATH": os.environ["PATH"]}
        if os.environ.get("PYTHONPATH"):    # the same pplab as the test's
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        if self.uid is None:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env=env, cwd=self.home, **kw)
        drop = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
        return subprocess.run(drop + cmd, capture_output=True, text=True, timeout=timeout,
                              env=env, cwd=self.home, preexec_fn=self._enter, **kw)

    def _enter(self) -> None:
        """In the child, before it drops to the user: join the delegated group."""
        for folder in self.delegated or []:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def own(self, path: Path) -> None:
        """Hand a folder the test built (as root) to the user."""
        if self.uid is None:
            return
        for p in [path, *path.rglob("*")]:
            os.lchown(p, self.uid, self.uid)


def _traversable(paths: list[str]) -> dict[str, int]:
    """Give others search (x) permission on the folders above ``paths`` that lack it (e.g.
    /root above a pyenv Python); the old modes, to put back."""
    changed = {}
    for path in paths:
        for parent in [*Path(path).parents][::-1]:
            mode = parent.stat().st_mode
            if not mode & 0o001 and str(parent) not in changed:
                changed[str(parent)] = mode
                os.chmod(parent, (mode & 0o7777) | 0o001)
    return changed


def _delegate(uid: int) -> list[Path] | None:
    """A cgroup v1 folder per controller under the test's own, owned by ``uid`` (what an
    administrator does for a grading account); None where that cannot be done."""
    if cgroups.unavailable():
        return None
    own, made = cgroups.own_paths(), {}
    name = f"pplab-test-user-{uuid.uuid4().hex[:8]}"
    for controller in cgroups.REQUIRED + cgroups.OPTIONAL:
        mount = cgroups.top() / controller
        if not (mount / "cgroup.procs").exists():
            continue        # cgroup v2 only: left to systemd (Delegate=yes); not done here
        folder = mount / own.get(controller, "/").lstrip("/") / name
        folder.mkdir()
        made[controller] = folder
        for p in (folder, folder / "cgroup.procs", folder / "tasks"):
            os.chown(p, uid, uid)
    if all(c in made for c in cgroups.REQUIRED):
        return list(made.values())
    _undelegate(list(made.values()))
    return None


def _undelegate(folders: list[Path]) -> None:
    for folder in folders:
        cgroups.Group(1, {"pids": folder}).close()


@contextlib.contextmanager
def ordinary_user(delegate: bool = False):
    """As root: ``nobody``, able to read this Python and pplab (search permission added where
    missing, put back after), with a work folder of its own. Otherwise: this user."""
    home = Path(tempfile.mkdtemp(prefix="pplab-user-"))
    if os.geteuid() != 0:
        try:
            yield User(None, home, [] if cgroups.unavailable() is None else None)
        finally:
            subprocess.run(["rm", "-rf", str(home)])
        return
    os.chmod(home, 0o755)
    os.chown(home, NOBODY, NOBODY)
    lock = open(LOCK, "a")      # one at a time, across test processes: the modes go back
    fcntl.flock(lock, fcntl.LOCK_EX)
    changed = _traversable(sandbox._python_dirs() + [os.path.realpath(sys.executable),
                                                      str(ROOT)])
    delegated = _delegate(NOBODY) if delegate else None
    try:
        user = User(NOBODY, home, delegated)
        probe = user.run([sys.executable, "-c", "import pplab.grading.untrusted.sandbox"],
                         timeout=120)
        if probe.returncode != 0:
            pytest.fail("nobody cannot run this Python and pplab even with search permission "
                        f"on {sorted(changed) or 'every folder'}: {probe.stderr[-500:]}")
        yield user
    finally:
        if delegated:
            _undelegate(delegated)
        for path, mode in changed.items():
            os.chmod(path, mode & 0o7777)
        lock.close()
        subprocess.run(["rm", "-rf", str(home)])
