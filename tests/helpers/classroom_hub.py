"""A real class for tests: Unix accounts made here and removed after, the kit set up by
``pplab classroom init`` in a folder of the test's own, and its JupyterHub started with
``pplab classroom up`` (the commands docs/classroom.md gives).

Accounts carry a tag and their test process's id in their comment field; ones left by a
run that was killed (its process gone) are found by it and removed before new ones are made,
never those of a run still going beside (another test process on this machine). The
groups are named after the test process too. ``Accounts.close`` ends every process of the accounts (by
their uid: only the hub of this test started any) and deletes them with their homes.
"""
from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import psutil

TAG = "pplab classroom test"
ROOT = Path(__file__).resolve().parents[2]
PPLAB = [sys.executable, "-m", "pplab.cli"]
PASSWORD = "pplab-{name}-secret"
#: seconds a stopping hub gets to stop its services and servers: under load (10 on 2 cores)
#: the formgrader alone took 28 s, and a hub killed at 60 s left the culler running
STOP_PATIENCE = 300
#: the commands docs/classroom.md gives, as the tests run them (plus --settings/--set)
INIT_CMD, UP_CMD = "pplab classroom init", "pplab classroom up"
USERADD = "useradd --create-home -K HOME_MODE=0700 --groups {group} {name}"
GROUPS = (f"pplt-students-{os.getpid()}", f"pplt-instructors-{os.getpid()}")


def skip_reason() -> str | None:
    """Why a class cannot be set up here, or None."""
    if os.geteuid() != 0:
        return "needs root (Unix accounts, the hub's PAM login and setuid spawner)"
    for tool in ("useradd", "userdel", "chpasswd", "groupadd", "runuser"):
        if shutil.which(tool) is None:
            return f"needs {tool} (passwd, util-linux)"
    if not Path("/etc/pam.d/login").exists():
        return "needs PAM's login service (/etc/pam.d/login: apt-get install login)"
    if shutil.which("configurable-http-proxy") is None:
        return ("needs JupyterHub's proxy: npm install -g configurable-http-proxy (.ci/run "
                "does it as root)")
    try:
        import batchspawner  # noqa: F401
        import jupyterhub  # noqa: F401
        import jupyterhub_idle_culler  # noqa: F401
        import pamela  # noqa: F401
    except ImportError as e:
        return f"needs the classroom extra (pip install -e '.[classroom]'): {e}"
    return None


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True, **kw)


def pids_of(uid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    out.append(int(entry))
            except FileNotFoundError:
                pass
    return out


def _kill_uid(uid: int, timeout: float = 10) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids_of(uid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while pids_of(uid) and time.monotonic() < deadline:
            time.sleep(0.1)


def tagged_accounts() -> list[str]:
    """Accounts a test made whose test process is gone."""
    out = []
    for p in pwd.getpwall():
        if p.pw_gecos == TAG:                       # made before the tag held a pid
            out.append(p.pw_name)
        elif p.pw_gecos.startswith(f"{TAG} "):
            pid = p.pw_gecos.rsplit(" ", 1)[1]
            if not (pid.isdigit() and Path(f"/proc/{pid}").exists()):
                out.append(p.pw_name)
    return out


def stale_groups() -> list[str]:
    """Groups of a test process that is gone (named as GROUPS names them)."""
    out = []
    for g in grp.getgrall():
        base, _, pid = g.gr_name.rpartition("-")
        if base in ("pplt-students", "pplt-instructors") and pid.isdigit() and \
                not Path(f"/proc/{pid}").exists():
            out.append(g.gr_name)
    return out


def remove_account(name: str) -> None:
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    _kill_uid(uid)
    subprocess.run(["userdel", "--remove", name], capture_output=True, timeout=60)


class Accounts:
    """``Accounts(students=[...], instructors=[...], grader=...)``: made now, removed by
    ``close``; ``password(name)`` is each one's (set with chpasswd)."""

    def __init__(self, students: list[str], instructors: list[str], grader: str):
        for name in [*tagged_accounts(), grader]:      # left by a run that was killed
            remove_account(name)
        for g in [*GROUPS, *stale_groups()]:
            subprocess.run(["groupdel", g], capture_output=True, timeout=60)
        self.names = [*students, *instructors]
        self.grader = grader
        self.made: list[str] = []
        try:
            for g in GROUPS:
                _run(["groupadd", g])
            for name in self.names:
                group = GROUPS[1] if name in instructors else GROUPS[0]
                _run([*USERADD.format(group=group, name=name).split(), "--comment",
                      f"{TAG} {os.getpid()}"])
                self.made.append(name)
            _run(["chpasswd"], input="".join(f"{n}:{self.password(n)}\n" for n in self.names))
        except BaseException:
            self.close()
            raise

    @staticmethod
    def password(name: str) -> str:
        return PASSWORD.format(name=name)

    def home(self, name: str) -> Path:
        return Path(pwd.getpwnam(name).pw_dir)

    def close(self) -> None:
        for name in [*self.made, self.grader]:
            remove_account(name)
        for g in GROUPS:
            subprocess.run(["groupdel", g], capture_output=True, timeout=60)

    def left(self) -> list[str]:
        """Accounts, groups, homes or processes of this class still on the machine."""
        out = [n for n in [*self.names, self.grader] if _exists(pwd.getpwnam, n)]
        out += [g for g in GROUPS if _exists(grp.getgrnam, g)]
        out += [f"/home/{n}" for n in [*self.names, self.grader] if Path(f"/home/{n}").exists()]
        return out


def pwd_uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def _exists(lookup, name: str) -> bool:
    try:
        lookup(name)
        return True
    except KeyError:
        return False


def open_path_for_others(path: Path) -> list[tuple[Path, int]]:
    """Let other accounts pass through every folder above ``path`` (o+x, not o+r: nothing
    is listed); returns (folder, old mode) pairs for ``restore_modes``. A clean clone under
    /root needs it for the students' JupyterLab to run from its environment."""
    changed = []
    for folder in [*reversed(path.resolve().parents), path.resolve()]:
        mode = stat.S_IMODE(folder.stat().st_mode)
        if not mode & stat.S_IXOTH:
            os.chmod(folder, mode | stat.S_IXOTH)
            changed.append((folder, mode))
    return changed


def restore_modes(changed: list[tuple[Path, int]]) -> None:
    for folder, mode in reversed(changed):
        os.chmod(folder, mode)


class Hub:
    """The class set up in ``folder`` with ``pplab classroom init --settings ... --set ...``
    and served by ``pplab classroom up`` (in ``netns`` when given: ``ip netns exec``)."""

    def __init__(self, folder: Path, values: dict[str, str], netns: str | None = None,
                 env: dict | None = None, port: int = 0):
        self.folder, self.netns = folder, netns
        self.settings = folder / "classroom.ini"
        self.env = dict(env or os.environ, PPLAB_CLASSROOM=str(self.settings))
        self.env.pop("MPLBACKEND", None)
        self.port = int(values.get("hub.port") or values.get("port") or 8000)
        if "source" not in values:      # init makes the source root-only: never the checkout's
            shutil.copytree(ROOT / "solutions", folder / "solutions")
            values = {**values, "source": str(folder / "solutions")}
        args = [f"--set={k}={v}" for k, v in values.items()]
        t0 = time.monotonic()
        self.init = subprocess.run([*PPLAB, *INIT_CMD.split()[1:], "--settings",
                                    str(self.settings), *args], capture_output=True,
                                   text=True, timeout=600, env=self.env)
        self.init_seconds = time.monotonic() - t0
        if self.init.returncode:
            raise RuntimeError(f"pplab classroom init failed:\n{self.init.stdout}"
                               f"{self.init.stderr}")
        self.log = folder / "hub.log"
        self.proc = None

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}"

    def start(self, host: str = "127.0.0.1", timeout: float = 600) -> float:
        cmd = [*PPLAB, *UP_CMD.split()[1:], "--settings", str(self.settings)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        t0 = time.monotonic()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         env=self.env, start_new_session=True)
        self.wait_api(host, timeout)
        return time.monotonic() - t0

    def wait_api(self, host: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the hub stopped:\n{self.log_tail()}")
            if self.netns:
                probe = f"import urllib.request as u; u.urlopen('{self.url(host)}/hub/api')"
                ok = subprocess.run(["ip", "netns", "exec", self.netns, sys.executable, "-c",
                                     probe], capture_output=True, timeout=20).returncode == 0
            else:
                try:
                    urllib.request.urlopen(f"{self.url(host)}/hub/api", timeout=2).read()
                    ok = True
                except (urllib.error.URLError, OSError):
                    ok = False
            if ok:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the hub did not answer in {timeout:g} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.3)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM: JupyterHub stops the services it started (the formgrader, the culler) and
        the servers, then exits, which on a loaded machine can take minutes. Whatever of its
        children is left once it has gone (it was killed first) is killed, and a proxy still
        running is ended by its pid file: nothing of this hub outlives it."""
        if self.proc is not None and self.proc.poll() is None:
            children = psutil.Process(self.proc.pid).children()
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_PATIENCE)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            for child in children:
                try:
                    child.kill()        # psutil checks it is still that process, not a reuse
                except psutil.NoSuchProcess:
                    pass
        self.stop_proxy()

    def proxy_pid(self) -> int | None:
        """The pid of this hub's proxy while it runs (from the pid file the kit sets)."""
        from pplab.classroom.settings import Settings
        pid_file = Path(Settings.read(self.settings).home) / "state" / "jupyterhub-proxy.pid"
        try:
            pid = int(pid_file.read_text().strip())
            running = b"configurable-http-proxy" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if running else None

    def stop_proxy(self) -> None:
        pid = self.proxy_pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)


def class_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="pplab-class-"))
    os.chmod(folder, 0o755)
    return folder


def api(hub_url: str, path: str, token: str, method: str = "GET", body=None):
    """(status, JSON or text) of a hub API call with ``token``."""
    req = urllib.request.Request(f"{hub_url}/hub/api{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


@contextmanager
def class_set_up(students: list[str], instructors: list[str], grader: str):
    """The accounts made and the course reachable by them; yields (accounts, folder). After:
    accounts, homes, folder removed, folder modes restored, and no process of the class left
    (the caller stops its hub first)."""
    opened = (open_path_for_others(Path(os.path.realpath(sys.executable)).parent)
              + open_path_for_others(ROOT))
    folder, accounts = class_folder(), None
    try:
        accounts = Accounts(students, instructors, grader)
        yield accounts, folder
    finally:
        uids = [u for u in map(pwd_uid, [*students, *instructors, grader]) if u is not None]
        if accounts:
            accounts.close()
        shutil.rmtree(folder, ignore_errors=True)
        restore_modes(opened)
        assert accounts is None or accounts.left() == [], f"left behind: {accounts.left()}"
        assert not [p for u in uids for p in pids_of(u)], "a class process outlived the test"


def free_ports() -> tuple[int, int]:
    """A hub port whose next two are free too (the hub's API and the proxy's take them), and
    a formgrader port: another hub on this machine (a class, a test beside) keeps its own."""
    import random
    import socket
    for _ in range(200):        # below Linux's ephemeral ports, which any connection may take
        base = random.randrange(20000, 32000)
        try:
            with socket.socket() as a, socket.socket() as b, socket.socket() as c, \
                    socket.socket() as d:
                for sock, port in ((a, base), (b, base + 1), (c, base + 2), (d, base + 3)):
                    sock.bind(("127.0.0.1", port))
            return base, base + 3
        except OSError:
            continue
    raise RuntimeError("no four consecutive free ports on 127.0.0.1")


class Person:
    """Someone logged in through the hub's login form, over HTTP as a browser does it (its
    cookies, its XSRF token): the hub's API with their session, their own server started
    and opened (the OAuth redirects followed), and code run in a kernel of it over the
    kernel's websocket. Refusals come back as status codes, never exceptions."""

    def __init__(self, hub_url: str, name: str, password: str):
        import requests
        self.hub, self.name, self.http = hub_url, name, requests.Session()
        self.http.get(f"{hub_url}/hub/login", timeout=120)
        r = self.http.post(f"{hub_url}/hub/login", allow_redirects=False, timeout=120,
                           data={"username": name, "password": password,
                                 "_xsrf": self._xsrf("/hub/")})
        if r.status_code != 302:
            raise RuntimeError(f"{name} could not log in: {r.status_code} {r.text[:300]}")
        self.kernel_id = None

    def _xsrf(self, path: str) -> str:
        return next((c.value for c in self.http.cookies if c.name == "_xsrf" and
                     c.path.rstrip("/") == path.rstrip("/")), "")

    def hub_api(self, method: str, path: str, **kw):
        return self.http.request(method, f"{self.hub}/hub/api{path}", timeout=120,
                                 headers={"X-XSRFToken": self._xsrf("/hub/")}, **kw)

    def start_server(self, timeout: float = 600) -> None:
        """Ask the hub for their server (as the spawn page does) and open it once."""
        r = self.hub_api("POST", f"/users/{self.name}/server")
        if r.status_code not in (201, 202, 400):          # 400: already running
            raise RuntimeError(f"{self.name}'s server: {r.status_code} {r.text[:300]}")
        deadline = time.monotonic() + timeout
        while True:
            model = self.hub_api("GET", f"/users/{self.name}").json()
            if model.get("servers", {}).get("", {}).get("ready"):
                break
            if time.monotonic() > deadline or not model.get("servers"):
                raise RuntimeError(f"{self.name}'s server did not start: {model}")
            time.sleep(0.5)
        r = self.http.get(f"{self.hub}/user/{self.name}/lab", timeout=300,
                          headers={"Accept": "text/html"})     # the OAuth dance
        if r.status_code != 200:
            raise RuntimeError(f"{self.name}'s lab: {r.status_code} {r.url}")

    def server(self, method: str, path: str, owner: str | None = None, **kw):
        """A request to ``/user/<owner>/<path>`` (their own server by default)."""
        base = f"/user/{owner or self.name}/"
        return self.http.request(method, f"{self.hub}{base}{path}", timeout=120,
                                 headers={"X-XSRFToken": self._xsrf(base)}, **kw)

    def run(self, code: str, timeout: float = 600) -> str:
        """Run ``code`` in their kernel (started the first time); its stdout and errors."""
        import uuid

        import websocket
        if self.kernel_id is None:
            r = self.server("POST", "api/kernels", json={"name": "python3"})
            if r.status_code != 201:
                raise RuntimeError(f"no kernel for {self.name}: {r.status_code} {r.text}")
            self.kernel_id = r.json()["id"]
        url = (self.hub.replace("http", "ws", 1) +
               f"/user/{self.name}/api/kernels/{self.kernel_id}/channels")
        cookie = "; ".join(f"{c.name}={c.value}" for c in self.http.cookies
                           if c.path.rstrip("/") in ("", f"/user/{self.name}"))
        ws = websocket.create_connection(url, cookie=cookie, timeout=timeout)
        try:
            msg_id = uuid.uuid4().hex
            ws.send(json.dumps({
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "",
                           "session": uuid.uuid4().hex, "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": code, "silent": False, "store_history": False,
                            "user_expressions": {}, "allow_stdin": False}}))
            out, deadline = [], time.monotonic() + timeout
            while time.monotonic() < deadline:
                msg = json.loads(ws.recv())
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind, content = msg["header"]["msg_type"], msg["content"]
                if kind == "stream":
                    out.append(content["text"])
                elif kind == "error":
                    out.append(f"ERROR {content['ename']}: {content['evalue']}")
                elif kind == "status" and content["execution_state"] == "idle":
                    return "".join(out)
            raise TimeoutError(f"{self.name}'s code did not finish in {timeout:g} s")
        finally:
            ws.close()


@contextmanager
def running_class(students: list[str], instructors: list[str], grader: str, course: str,
                  more: dict[str, str] | None = None):
    """A class set up (accounts, init) and its hub started on free ports; yields
    (hub, accounts, folder). The hub and its proxy are stopped, also when the test fails."""
    with class_set_up(students, instructors, grader) as (accounts, folder):
        port, formgrader_port = free_ports()
        values = {"course_id": course, "students": GROUPS[0], "instructors": GROUPS[1],
                  "grader": grader, "course_dir": f"/home/{grader}/{course}",
                  "exchange": str(folder / "exchange"), "home": str(folder / "hub"),
                  "ip": "127.0.0.1", "port": str(port),
                  "formgrader_port": str(formgrader_port), **(more or {})}
        hub = None
        try:
            hub = Hub(folder, values)
            hub.start()
            yield hub, accounts, folder
        except BaseException:
            if hub:
                print("the hub's log, its warnings and errors:\n" + "\n".join(
                    ln for ln in hub.log_tail(100_000).splitlines()
                    if ln.startswith(("[W", "[E", "[C", "Traceback", " ")) and
                    "Skipping XSRF" not in ln)[-20_000:])
            raise
        finally:
            if hub:
                hub.stop()
