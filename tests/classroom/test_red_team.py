"""A student against the class's hub: every attack made as the student account makes it,
through the real JupyterHub (PAM login, LocalProcessSpawner, the kit's roles), its student
servers and kernels, nbgrader's exchange and the formgrader service; each must be refused.

One hub for the module: Mallory (the attacker) and Bob (a classmate), students; Teacher, an
instructor; the grader account runs the formgrader. Mallory's code runs in her own kernel,
with the token every kernel holds; Teacher drives the formgrader logged in, as a browser.

* tokens: Mallory's kernel token, her login and her password cannot mint a token; her token
  reaches neither Bob's server nor the hub's record of him, nor stops his server;
* the instructor's lab token cannot drive the grader account: no formgrader API, no
  terminal, no token (the same instructor, logged in, opens the formgrader: the control);
* around the hub: the proxy's API, the formgrader's and Bob's ports reached directly, and the
  hub's own state are closed to her;
* the exchange: the course folder renamed, ``nbgrader submit --student=<Bob>``, a folder for
  Bob dated 2099 and one with a garbage date; the instructor's collect through the formgrader
  keeps Bob's own work and names each refused folder;
* limits: her server sits in a cgroup with the class file's memory, CPU and task limits; a
  memory hog is killed at the limit and a fork bomb meets the task limit, while Bob's server
  answers and runs his code; her server's stop leaves no process and no cgroup behind.

What the formgrader shows of a submission is tested in Chromium by test_formgrader_safe.py,
the exchange's every malformed folder by test_exchange.py.
"""
from __future__ import annotations

import json
import shutil
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import classroom_hub as C

pytestmark = pytest.mark.slow

COURSE, ONE = "pplred", "01_bubble_and_1f1b"
#: names of this module's own, so a journey test on the same machine keeps its accounts
MALLORY, BOB, TEACHER, GRADER = "pplr-mallory", "pplr-bob", "pplr-teacher", "pplr-grader"
#: the class file's limits for each JupyterLab, small enough for a hog to meet quickly
LIMITS = {"server_memory": "1G", "server_cpus": "1", "server_processes": "256"}


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    reason = C.skip_reason()
    if reason:
        pytest.skip(reason)
    from pplab.grading import cgroups
    why = cgroups.unavailable()
    if why:
        pytest.skip(f"no cgroup for a student's server here: {why}")
    source = tmp_path_factory.mktemp("red-source")
    shutil.copytree(C.ROOT / "solutions" / ONE, source / ONE)
    with C.running_class([MALLORY, BOB], [TEACHER], GRADER, COURSE,
                         {**LIMITS, "source": str(source)}) as (hub, accounts, folder):
        people = {n: C.Person(hub.url(), n, accounts.password(n))
                  for n in (MALLORY, BOB, TEACHER)}
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda p: p.start_server(), people.values()))
        yield hub, people, folder


def probe(person: C.Person, calls: list[tuple[str, str, str]]) -> dict[str, object]:
    """Status codes of HTTP calls made from ``person``'s kernel with the token it holds
    (``$JUPYTERHUB_API_TOKEN``): (label, method, url; ``{hub}`` is the hub's address)."""
    code = textwrap.dedent(f"""
        import json, os, urllib.request, urllib.error
        token, hub = os.environ["JUPYTERHUB_API_TOKEN"], {person.hub!r}
        out = {{}}
        for label, method, url in {calls!r}:
            req = urllib.request.Request(url.format(hub=hub), method=method,
                data=b"{{}}" if method != "GET" else None,
                headers={{"Authorization": "token " + token, "Content-Type": "application/json"}})
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    out[label] = r.status
            except urllib.error.HTTPError as e:
                out[label] = e.code
            except OSError as e:
                out[label] = type(e).__name__
        print(json.dumps(out))
        """)
    said = person.run(code)
    return json.loads(said.strip().splitlines()[-1]) if said.strip().startswith("{") else said


def refused(status) -> bool:
    """A refusal as the hub and Jupyter give it (never a 2xx, never a redirect to a login
    that would then succeed: the probe follows redirects)."""
    return status in (401, 403, 404, 405)


def test_a_student_cannot_mint_tokens_or_reach_a_classmate(klass):
    hub, people, _ = klass
    mallory = people[MALLORY]
    seen = probe(mallory, [
        ("mint with kernel token", "POST", f"{{hub}}/hub/api/users/{MALLORY}/tokens"),
        ("read Bob", "GET", f"{{hub}}/hub/api/users/{BOB}"),
        ("stop Bob's server", "DELETE", f"{{hub}}/hub/api/users/{BOB}/server"),
        ("Bob's files", "GET", f"{{hub}}/user/{BOB}/api/contents"),
        ("Bob's terminals", "POST", f"{{hub}}/user/{BOB}/api/terminals"),
        ("list users", "GET", "{hub}/hub/api/users"),
        ("own server: the control", "GET", f"{{hub}}/user/{MALLORY}/api/status"),
    ])
    assert seen.pop("own server: the control") == 200, seen
    assert all(refused(v) for v in seen.values()), seen
    # her login (the browser's session) and her password, without a session, mint nothing
    r = mallory.hub_api("POST", f"/users/{MALLORY}/tokens", json={"expires_in": 10**8})
    assert r.status_code == 403, r.text
    import requests
    r = requests.post(f"{hub.url()}/hub/api/users/{MALLORY}/tokens", timeout=120, json={
        "auth": {"username": MALLORY, "password": C.Accounts.password(MALLORY)}})
    assert r.status_code == 403, r.text
    assert mallory.hub_api("GET", f"/users/{MALLORY}").status_code == 200     # the control


def test_the_instructors_lab_token_cannot_drive_the_grader(klass):
    hub, people, _ = klass
    teacher = people[TEACHER]
    base = f"{{hub}}/services/{COURSE}"
    seen = probe(teacher, [
        ("formgrader API", "GET", f"{base}/formgrader/api/assignments"),
        ("release through the formgrader", "POST",
         f"{base}/formgrader/api/assignment/{ONE}/release"),
        ("grader terminal", "POST", f"{base}/api/terminals"),
        ("grader's files", "GET", f"{base}/api/contents"),
        ("mint a token", "POST", f"{{hub}}/hub/api/users/{TEACHER}/tokens"),
    ])
    assert all(refused(v) for v in seen.values()), seen
    # the same instructor, logged in, opens the formgrader, and the hub's menu lists it
    r = teacher.http.get(f"{hub.url()}/services/{COURSE}/formgrader", timeout=300,
                         headers={"Accept": "text/html"})
    assert r.status_code == 200 and "formgrader" in r.url, (r.status_code, r.url)
    assert f"/services/{COURSE}/" in teacher.http.get(f"{hub.url()}/hub/home",
                                                       timeout=120).text


def test_around_the_hub_is_closed_to_a_student(klass):
    hub, people, folder = klass
    from pplab.classroom.settings import Settings
    s = Settings.read(hub.settings)
    environ = Path(f"/proc/{server_pid(BOB)}/environ").read_bytes().split(b"\0")
    bob_url = next(v.split(b"=", 1)[1].decode() for v in environ
                   if v.startswith(b"JUPYTERHUB_SERVICE_URL="))     # his server's own port
    seen = probe(people[MALLORY], [
        ("Bob's port", "GET", f"{bob_url.rstrip('/')}/api/contents"),
        ("proxy API", "GET", f"http://127.0.0.1:{int(s.port) + 2}/api/routes"),
        ("formgrader's port", "GET", f"http://127.0.0.1:{s.formgrader_port}"
                                     f"/services/{COURSE}/formgrader/api/assignments"),
    ])
    assert all(refused(v) for v in seen.values()), seen
    files = [str(Path(s.home) / "state" / "jupyterhub_cookie_secret"),
             str(Path(s.home) / "state" / "jupyterhub.sqlite")]
    folders = [f"/home/{BOB}", f"/home/{GRADER}/{COURSE}/source"]
    said = people[MALLORY].run(textwrap.dedent(f"""
        import os
        for path, read in [(f, lambda f: open(f, 'rb').read(1)) for f in {files!r}] + \\
                          [(d, os.listdir) for d in {folders!r}]:
            try:
                read(path)
                print('READ', path)
            except PermissionError:
                print('refused', path)
        """))
    assert said.count("refused") == 4 and "READ" not in said, said


def test_the_exchange_through_the_hub_keeps_each_students_own_work(klass):
    hub, people, folder = klass
    teacher, mallory, bob = people[TEACHER], people[MALLORY], people[BOB]
    api = f"{hub.url()}/services/{COURSE}/formgrader/api"
    xsrf = lambda: next((c.value for c in teacher.http.cookies            # noqa: E731
                         if c.name == "_xsrf" and COURSE in c.path), "")
    r = teacher.http.post(f"{api}/assignment/{ONE}/release", timeout=600,
                          headers={"X-XSRFToken": xsrf()})
    assert r.status_code == 200 and r.json()["success"], r.text[:2000]
    exchange = folder / "exchange"
    for person in (bob, mallory):
        said = person.run(textwrap.dedent(f"""
            import subprocess
            r = subprocess.run('nbgrader fetch_assignment {ONE} && nbgrader submit {ONE}',
                               shell=True, capture_output=True, text=True)
            print('rc', r.returncode, r.stderr[-1500:])
            """))
        assert said.startswith("rc 0"), said
    inbound = exchange / COURSE / "inbound"
    said = mallory.run(textwrap.dedent(f"""
        import os, shutil, subprocess
        try:
            os.rename({str(exchange / COURSE)!r}, {str(exchange / 'mine')!r})
            print('renamed')
        except OSError as e:
            print('rename refused', e.errno)
        r = subprocess.run(['nbgrader', 'submit', {ONE!r}, '--student={BOB}'],
                           capture_output=True, text=True)
        print('forged submit rc', r.returncode)
        for name, stamp in (('{BOB}+{ONE}+2099-01-01 00:00:00.000000 UTC+x',
                             '2099-01-01 00:00:00 UTC'),
                            ('{MALLORY}+{ONE}+not a date+x', 'not a date')):
            d = os.path.join({str(inbound)!r}, name)
            shutil.copytree(os.path.expanduser('~/{ONE}'), d)
            open(os.path.join(d, 'timestamp.txt'), 'w').write(stamp)
            open(os.path.join(d, 'submission_secret.txt'), 'w').write('s')
        print('planted')
        """))
    assert "rename refused" in said and "planted" in said, said
    r = teacher.http.post(f"{api}/assignment/{ONE}/collect", timeout=600,
                          headers={"X-XSRFToken": xsrf()})
    assert r.status_code == 200, r.text[:2000]
    log = r.json().get("log", "") + r.json().get("error", "")
    submitted = Path(f"/home/{GRADER}/{COURSE}/submitted")
    assert sorted(p.name for p in submitted.iterdir()) == sorted([MALLORY, BOB]), log
    stamp = (submitted / BOB / ONE / "timestamp.txt").read_text()
    assert "2099" not in stamp, stamp
    for why in (f"named for {BOB} but was handed in by {MALLORY}", "is not a date"):
        assert why in log, log
    assert log.count(f"named for {BOB} but was handed in by {MALLORY}") == 2, log


def cgroup_of(pid: int, controller: str) -> Path:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(",") or (names == "" and controller == ""):
            return Path(path)
    raise LookupError(controller)


def server_pid(name: str) -> int:
    pids = [p for p in C.pids_of(C.pwd_uid(name))
            if b"jupyterhub-singleuser" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(pids) == 1, pids
    return pids[0]


def test_a_students_server_keeps_to_the_class_limits_beside_a_classmate(klass):
    hub, people, _ = klass
    mallory, bob = people[MALLORY], people[BOB]
    from pplab.grading import cgroups
    pid = server_pid(MALLORY)
    own = {c: cgroup_of(pid, c) for c in ("memory", "pids")}
    assert all(p.name.startswith(f"pplab-server-{MALLORY}-") for p in own.values()), own
    folders = [cgroups.top() / c / str(p).lstrip("/") for c, p in own.items()]
    limit = (cgroups.top() / "memory" / str(own["memory"]).lstrip("/"))
    assert int((limit / "memory.limit_in_bytes").read_text()) == 1 << 30
    assert (folders[1] / "pids.max").read_text().strip() == "256"
    cpu = cgroups.top() / "cpu" / str(cgroup_of(pid, "cpu")).lstrip("/")
    assert int((cpu / "cpu.cfs_quota_us").read_text()) == int(
        (cpu / "cpu.cfs_period_us").read_text())                       # 1 CPU
    # a memory hog (at most 3 GiB, each page written) in a child of her kernel
    said = mallory.run(textwrap.dedent("""
        import subprocess, sys
        hog = "b = []\\nfor _ in range(48): b.append(b'x' * (64 << 20))\\nprint('held 3 GiB')"
        r = subprocess.run([sys.executable, '-c', hog], capture_output=True, text=True)
        print('hog', r.returncode, r.stdout.strip())
        """))
    assert "hog -9" in said, said
    # a fork bomb, bounded: children that sleep until the group is emptied
    said = mallory.run(textwrap.dedent("""
        import os, time
        n = 0
        try:
            while n < 2000:
                if os.fork() == 0:
                    time.sleep(600)
                    os._exit(0)
                n += 1
        except OSError as e:
            print('fork refused after', n, type(e).__name__)
        """))
    assert "fork refused after" in said and int(said.split()[3]) < 256, said
    # Bob's server answers and runs his code while hers is at its limits
    assert bob.server("GET", "api/status").status_code == 200
    assert bob.run("print(6 * 7)").strip() == "42"
    # her server stopped through the hub: no process of hers and no group left
    r = mallory.hub_api("DELETE", f"/users/{MALLORY}/server")
    assert r.status_code in (202, 204), r.text
    import time
    deadline = time.monotonic() + 300
    while (C.pids_of(C.pwd_uid(MALLORY)) or any(f.exists() for f in folders)) and \
            time.monotonic() < deadline:
        time.sleep(0.3)
    assert C.pids_of(C.pwd_uid(MALLORY)) == [] and not any(f.exists() for f in folders)
