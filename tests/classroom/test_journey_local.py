"""A term on one shared server, end to end, as docs/teaching.md tells it: the kit set up by
``pplab classroom init`` and served by ``pplab classroom up`` (JupyterHub, PAM login with
real Unix accounts, a JupyterLab per student from LocalProcessSpawner, nbgrader's exchange
and formgrader service, the idle culler), driven in Debian's Chromium, each person in a
browser context of their own:

the instructor opens the formgrader in the grader's JupyterLab and releases assignments 01
and 08 there (each assignment's link and its Preview open its folder in that JupyterLab);
three students log in at once and each gets their own server; each opens lesson 02, moves a
slider and sees the picture change, commits a prediction; each fetches 01 and 08, works
them (honest, partial, blank) and submits; in the formgrader's terminal, typed as
docs/teaching.md gives them, the instructor collects 01, grades with ``pplab grade``
(sandboxed) and releases its feedback, then does the same for 08 (a second ``pplab grade``
of the term, over the first one's read-only autograded notebooks); each student fetches
their own feedback and sees only their own. A student asking for another's server or files,
or for the formgrader, is refused (status codes checked); a restart keeps the student's own
edits. The idle culler stops a server nobody uses, on a hub restarted with HTTPS
(``pplab classroom up --ssl-cert --ssl-key``, a self-signed certificate on loopback).

Each stage's time is printed (``-s``). Skipped, with the reason, without root, Chromium,
Playwright or the hub's parts. Everything made is removed: accounts, homes, processes
(the hub, its proxy and Chromium are stopped in ``finally``, also when a stage fails).
"""
from __future__ import annotations

import asyncio
import csv
import http.client
import json
import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import browser_util as B
import classroom_browser as W
import classroom_hub as C

pytestmark = pytest.mark.slow

COURSE, ONE, TWO = "pplabtest", "01_bubble_and_1f1b", "08_derivations"
TERM = (ONE, TWO)
STUDENTS = {"pplt-alice": "honest", "pplt-bob": "partial", "pplt-carol": "blank"}
TEACHER, GRADER = "pplt-teacher", "pplt-grader"
#: (assignment, way of working): points; and the tasks each way answers (partial: two)
EXPECTED = {(ONE, "honest"): 10.0, (ONE, "partial"): 5.0, (ONE, "blank"): 0.0,
            (TWO, "honest"): 7.0, (TWO, "partial"): 5.0, (TWO, "blank"): 0.0}
ANSWERS = {(ONE, "honest"): ("task1", "task2", "task3", "task4"),
           (TWO, "honest"): ("task1", "task2", "task3"),
           (ONE, "partial"): ("task1", "task2"), (TWO, "partial"): ("task1", "task2"),
           (ONE, "blank"): (), (TWO, "blank"): ()}
MAX = {ONE: 10, TWO: 7}
PORT, FORMGRADER_PORT = 18000, 18999
HUB = f"http://127.0.0.1:{PORT}"
#: what the instructor types in the formgrader's terminal (docs/teaching.md quotes these)
COLLECT_CMD = f"nbgrader collect {ONE}"
GRADE_CMD = "pplab grade submitted --course . --out grades.csv -j 2"
RELEASE_FEEDBACK_CMD = f"nbgrader release_feedback {ONE}"
#: the term's commands, in order: each assignment collected, graded, its feedback released
TERMINAL = [(f"{step} {a}", cmd.replace(ONE, a)) for a in TERM for step, cmd in (
    ("collect", COLLECT_CMD), ("grade", GRADE_CMD), ("release_feedback", RELEASE_FEEDBACK_CMD))]


def class_values(folder: Path) -> dict[str, str]:
    return {"course_id": COURSE, "students": C.GROUPS[0], "instructors": C.GROUPS[1],
            "grader": GRADER, "course_dir": f"/home/{GRADER}/{COURSE}",
            "exchange": str(folder / "exchange"), "home": str(folder / "hub"),
            "ip": "127.0.0.1", "port": str(PORT), "formgrader_port": str(FORMGRADER_PORT),
            "singleuser_args": "--LabApp.expose_app_in_browser=True"}


@pytest.fixture(scope="module")
def classroom():
    reason = W.skip_reason() or C.skip_reason()
    if reason:
        pytest.skip(reason)
    with C.class_set_up(list(STUDENTS), [TEACHER], GRADER) as (accounts, folder):
        hub = None
        try:
            hub = C.Hub(folder, class_values(folder))
            print(f"\n  pplab classroom init: {hub.init_seconds:.1f} s")
            print(f"  pplab classroom up (hub answering): {hub.start():.1f} s")
            yield hub, accounts
        finally:
            if hub:
                hub.stop()
                assert hub.proxy_pid() is None


def solution_sources(assignment: str) -> dict[str, str]:
    """Each answer cell's solution, without nbgrader's markers: what an honest student types."""
    nb = json.loads((C.ROOT / "solutions" / assignment / f"{assignment}.ipynb").read_text())
    out = {}
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution"):
            lines = "".join(cell["source"]).splitlines()
            out[meta["grade_id"]] = "\n".join(ln for ln in lines if "### " not in ln)
    return out


# ---- the instructor's part ----------------------------------------------------------------
async def instructor_opens_the_formgrader(browser):
    """The instructor logs in to the grader's JupyterLab (the course's service) and opens
    the formgrader there (Nbgrader › Formgrader); returns (page, the formgrader's frame)."""
    page = await W.login(browser, HUB, TEACHER, C.Accounts.password(TEACHER),
                         f"/services/{COURSE}/lab")
    await W.wait_lab(page)
    await W.command(page, "nbgrader:open-formgrader")
    frame = page.frame_locator("#formgrader-iframe iframe")
    await frame.locator("tr", has_text=ONE).first.wait_for(timeout=W.PATIENCE_MS)
    return page, frame


async def release_in_formgrader(page, frame, assignment: str) -> dict:
    """Manage Assignments: the assignment's link and its Preview, each followed (where the
    file browser goes), then its release button (the success window's text)."""
    row = frame.locator("tr", has_text=assignment).first
    went = {}
    for column, folder in (("name", "source"), ("preview", "release")):
        await row.locator(f"td.{column} a").click(timeout=W.PATIENCE_MS)
        went[column] = await file_browser_path(page, f"{folder}/{assignment}")
    await row.locator("td.release a").click(timeout=W.PATIENCE_MS)
    modal = frame.locator("#success-modal, #error-modal").first
    await modal.wait_for(timeout=W.PATIENCE_MS)
    went["release"] = await modal.inner_text()
    await modal.locator(".modal-footer button").first.click()
    await modal.wait_for(state="detached", timeout=W.PATIENCE_MS)
    return went


async def file_browser_path(page, folder: str) -> str:
    """The JupyterLab file browser's folder, once a link sent it to ``folder``."""
    return await page.evaluate("""f => new Promise((resolve, reject) => {
        const t0 = Date.now(); const poll = () => {
          const fb = Array.from(window.jupyterapp.shell.widgets('left')).find(
            w => w.id === 'filebrowser');
          const path = fb ? fb.model.path : '';
          if (path.endsWith(f)) resolve(path);
          else if (Date.now() - t0 > 900000) reject(new Error('file browser at ' + path));
          else setTimeout(poll, 200); }; poll(); })""", folder)


async def in_terminal(page, cmd: str) -> tuple[int, str]:
    """Type ``cmd`` in a new terminal of this JupyterLab (File › New › Terminal: a shell as
    the server's account); its exit status and what the terminal showed."""
    # a terminal and an end marker of this command's own: a name JupyterLab would reuse
    # replays the last terminal's screen, its marker included
    tag = f"pplab{time.monotonic_ns()}"
    rc, out = await page.evaluate("""async ([cmd, tag, ms]) => {
        const t = await window.jupyterapp.serviceManager.terminals.startNew({name: tag});
        let out = '';
        const done = new Promise((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('timed out:' + out.slice(-3000))), ms);
          t.messageReceived.connect((_, msg) => {
            if (msg.type !== 'stdout') return;
            out += msg.content[0];
            const m = out.match(new RegExp('__' + tag + '_([0-9]+)__'));
            if (m) { clearTimeout(timer); resolve(Number(m[1])); } }); });
        t.send({type: 'stdin', content: [cmd + '; echo __' + tag + '_$?__\\r']});
        const rc = await done; await t.shutdown(); return [rc, out]; }""",
                                  [cmd, tag, W.PATIENCE_MS])
    return rc, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r", "", out)


# ---- the students' part --------------------------------------------------------------------
async def student_logs_in(browser, name: str):
    page = await W.login(browser, HUB, name, C.Accounts.password(name))
    await W.wait_lab(page)
    assert f"/user/{name}/lab" in page.url, page.url
    return page


async def student_lesson(page, name: str) -> dict:
    lab = f"{HUB}/user/{name}"
    panel = await W.open_notebook(page, lab, "pplab/02_bubble.ipynb")
    await W.run_all(page)
    before, after = await W.move_slider_and_see_redraw(page, panel)
    feedback = await W.commit_prediction(page, panel, "12")
    await W.append_cell(page, f"# {name}'s own note: keep me")
    news = await page.evaluate("() => JSON.parse(document.getElementById("
                               "'jupyter-config-data').textContent).news")
    return {"frames": (before.split("#")[0], after.split("#")[0]), "feedback": feedback,
            "news": news, "news_prompts": await news_prompts(page)}


async def news_prompts(page) -> int:
    """How many "Would you like to get notified about official Jupyter news?" the lab shows."""
    return await page.get_by_text("official Jupyter news").count()


async def student_works_and_submits(page, name: str, sources: dict) -> dict[str, int]:
    """Each assignment of the term fetched, worked as this student works, submitted; how
    many answer cells they filled in, by assignment."""
    filled = {}
    for a in TERM:
        tab = await W.assignments_tab(page)
        await W.assignment_button(tab, "released", a, "Fetch", "#fetched_assignments_list")
        await W.open_notebook(page, f"{HUB}/user/{name}", f"{a}/{a}.ipynb")
        plan = ANSWERS[a, STUDENTS[name]]
        filled[a] = await W.set_answer_cells(page, {f"{t}-answer": sources[a][f"{t}-answer"]
                                                    for t in plan})
        tab = await W.assignments_tab(page)
        await W.assignment_button(tab, "fetched", a, "Submit", "#submitted_assignments_list")
    return filled


async def student_gets_feedback(page, name: str) -> dict[str, str]:
    """Fetch Feedback for each assignment; the page the student reads, by assignment."""
    out = {}
    for a in TERM:
        tab = await W.assignments_tab(page)
        await tab.locator("#refresh_assignments_list").click()
        await W.assignment_button(tab, "submitted", a, "Fetch Feedback",
                                  f"#submitted_assignments_list .list_item:has-text('{a}')"
                                  ":has-text('view feedback')")
        pages = sorted((Path(f"/home/{name}") / a / "feedback").glob(f"*/{a}.html"))
        assert len(pages) == 1, pages          # their one submission's page, nothing else
        rel = pages[0].relative_to(Path(f"/home/{name}"))
        r = await page.request.get(f"{HUB}/user/{name}/files/{rel}")
        assert r.status == 200
        out[a] = await r.text()
    return out


async def refused(page, name: str, other: str) -> dict[str, int]:
    """Status codes of ``name``'s requests for ``other``'s things and the formgrader."""
    out = {}
    for what, url in (("other's lab", f"/user/{other}/lab"),
                      ("other's contents API", f"/user/{other}/api/contents/pplab"),
                      ("other's file", f"/user/{other}/files/pplab/02_bubble.ipynb"),
                      ("other on the hub API", f"/hub/api/users/{other}"),
                      ("formgrader service", f"/services/{COURSE}/formgrader"),
                      ("formgrader in own server", f"/user/{name}/formgrader")):
        r = await page.request.get(HUB + url, max_redirects=10)
        out[what] = r.status
    return out


# ---- the journey ---------------------------------------------------------------------------
async def journey(hub: C.Hub, watch: W.Stopwatch) -> dict:
    from playwright.async_api import async_playwright
    sources, out = {a: solution_sources(a) for a in TERM}, {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=B.CHROMIUM, args=B.ARGS)
        try:
            t = time.monotonic()
            teacher, formgrader = await instructor_opens_the_formgrader(browser)
            out["release"] = {a: await release_in_formgrader(teacher, formgrader, a)
                              for a in TERM}
            out["grader_news_prompts"] = await news_prompts(teacher)
            watch.stage("instructor logs in, releases 01 and 08 in the formgrader", t)

            t = time.monotonic()
            out["wrong_password"] = await wrong_password(browser, list(STUDENTS)[0])
            pages = dict(zip(STUDENTS, await asyncio.gather(
                *(student_logs_in(browser, s) for s in STUDENTS))))
            out["servers"] = {s: singleuser_cmdlines(s) for s in STUDENTS}
            watch.stage("3 students log in at once, each server started", t)

            t = time.monotonic()
            out["lesson"] = dict(zip(STUDENTS, await asyncio.gather(
                *(student_lesson(pages[s], s) for s in STUDENTS))))
            watch.stage("each: lesson 02 run, slider moved, prediction committed", t)

            t = time.monotonic()
            out["answered"] = dict(zip(STUDENTS, await asyncio.gather(
                *(student_works_and_submits(pages[s], s, sources) for s in STUDENTS))))
            watch.stage("each: 01 and 08 fetched, worked, submitted", t)

            out["path"] = await in_terminal(teacher, "command -v nbgrader pplab; whoami; pwd")
            for key, cmd in TERMINAL:
                t = time.monotonic()
                out[key] = await in_terminal(teacher, cmd)
                watch.stage(f"instructor, in the formgrader's terminal: {cmd}", t)

            t = time.monotonic()
            out["feedback"] = dict(zip(STUDENTS, await asyncio.gather(
                *(student_gets_feedback(pages[s], s) for s in STUDENTS))))
            watch.stage("each student fetches and reads their feedback on 01 and 08", t)

            names = list(STUDENTS)
            t = time.monotonic()
            out["refused"] = await refused(pages[names[0]], names[0], names[1])
            await W.open_notebook(pages[names[0]], f"{HUB}/user/{names[0]}",
                                  "pplab/02_bubble.ipynb")
            out["kernel"] = await W.kernel_exec(pages[names[0]], isolation_probe(hub,
                                                                                  names[1]))
            out["commands"] = await pages[names[0]].evaluate("""() => ['formgrader',
                'create-assignment', 'course-list', 'assignment-list'].filter(c =>
                window.jupyterapp.commands.hasCommand('nbgrader:open-' + c))""")
            watch.stage("isolation probes", t)

            t = time.monotonic()
            out["restart"] = await restart_keeps_edits(pages[names[0]], names[0])
            watch.stage("a student's server restarted: edits kept", t)
        finally:
            await browser.close()
    return out


async def wrong_password(browser, name: str) -> str:
    """PAM refuses a wrong password: the login form comes back with its message."""
    page = await W.login(browser, HUB, name, "not-" + C.Accounts.password(name))
    message = page.locator(".login_error").first
    await message.wait_for(timeout=W.PATIENCE_MS)
    text = (await message.inner_text()).strip()
    await page.context.close()
    return text


def singleuser_cmdlines(name: str) -> list[str]:
    """Command lines of the JupyterLab servers running as ``name``."""
    out = []
    for pid in C.pids_of(C.pwd_uid(name)):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "jupyterhub-singleuser" in cmd:
            out.append(cmd)
    return out


def isolation_probe(hub: C.Hub, other: str) -> str:
    """Kernel code: try another student's home, the exchange's inbound and feedback folders;
    prints one word per attempt."""
    exchange = Path(hub.folder / "exchange" / COURSE)
    return ("import os\n"
            "def probe(f):\n"
            "    try:\n        f(); print('OPEN')\n"
            "    except PermissionError:\n        print('DENIED')\n"
            f"probe(lambda: open('/home/{other}/pplab/02_bubble.ipynb').read())\n"
            f"probe(lambda: os.listdir('/home/{other}'))\n"
            f"probe(lambda: os.listdir('{exchange / 'inbound'}'))\n"
            f"probe(lambda: os.listdir('{exchange / 'feedback'}'))\n")


async def restart_keeps_edits(page, name: str) -> dict:
    """Stop and start the student's server from the hub's home page, after one lesson was
    deleted from their folder: their edited lesson stays as they left it, the deleted one
    comes back."""
    lessons = Path(f"/home/{name}/pplab")
    (lessons / "14_a_published_run.ipynb").unlink()
    await page.goto(f"{HUB}/hub/home")
    await page.locator("#stop").click()
    # the home page offers "Start" while the stop is still pending (a minute on a loaded
    # machine), and a start asked for then waits on a server that never comes: start only
    # once the server's process is gone and the hub's own page says it is stopped
    deadline = time.monotonic() + W.PATIENCE_MS / 1000
    while singleuser_cmdlines(name) or not await stopped_on_home(page):
        assert time.monotonic() < deadline, "the server did not stop"
        await asyncio.sleep(2)
    await page.locator("#start").click()
    await W.wait_lab(page)
    return {"note": f"{name}'s own note: keep me" in (lessons / "02_bubble.ipynb").read_text(),
            "restored": (lessons / "14_a_published_run.ipynb").exists()}


async def stopped_on_home(page) -> bool:
    """Whether the hub's home page, loaded afresh, shows the server stopped."""
    await page.goto(f"{HUB}/hub/home")
    return (await page.locator("#stop").count() == 0 or not await page.locator(
        "#stop").is_visible()) and "Start" in await page.locator("#start").inner_text()


async def log_in_and_leave(hub_url: str, name: str) -> None:
    from playwright.async_api import async_playwright
    async with async_playwright() as p:     # the test's certificate is its own: not checked
        browser = await p.chromium.launch(executable_path=B.CHROMIUM,
                                          args=[*B.ARGS, "--ignore-certificate-errors"])
        try:
            page = await W.login(browser, hub_url, name, C.Accounts.password(name))
            await W.wait_lab(page)
        finally:
            await browser.close()


#: docs/classroom.md's step for HTTPS, with a certificate made for the test's loopback
CERT_CMD = ("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
            "-addext subjectAltName=IP:127.0.0.1 -keyout hub.key -out hub.crt")
UP_TLS_CMD = f"{C.UP_CMD} --ssl-cert hub.crt --ssl-key hub.key"


def start_with_tls(hub: C.Hub, timeout: float = 600) -> dict:
    """``pplab classroom up --ssl-cert hub.crt --ssl-key hub.key`` with a self-signed
    certificate: the hub answers HTTPS with that certificate, and nothing on plain HTTP."""
    subprocess.run(CERT_CMD.split(), cwd=hub.folder, check=True, capture_output=True,
                   timeout=120)
    cmd = [*C.PPLAB, *UP_TLS_CMD.split()[1:], "--settings", str(hub.settings)]
    with open(hub.log, "ab") as log:      # hub.stop() ends it, as it ends the hub it started
        hub.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=hub.env,
                                    cwd=hub.folder, start_new_session=True)
    trusted = ssl.create_default_context(cafile=str(hub.folder / "hub.crt"))
    deadline = time.monotonic() + timeout
    while True:
        assert hub.proc.poll() is None, f"the hub stopped:\n{hub.log_tail()}"
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{PORT}/hub/api", context=trusted,
                                        timeout=5) as r:
                https = r.status
            break
        except (urllib.error.URLError, OSError):
            assert time.monotonic() < deadline, f"no HTTPS hub:\n{hub.log_tail()}"
            time.sleep(0.3)
    try:
        urllib.request.urlopen(f"{HUB}/hub/api", timeout=30).read()
        plain = "answered"
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        plain = f"refused ({type(e).__name__})"
    return {"https": https, "plain": plain}


def idle_culler_stops_an_unused_server(hub: C.Hub, name: str, timeout: float = 900) -> dict:
    """The instructor shortens the idle time in the settings, runs init again and restarts
    the hub, now with HTTPS; a student logs in and leaves: the culler stops that server."""
    init = subprocess.run([*C.PPLAB, "classroom", "init", "--settings", str(hub.settings),
                           "--set", "hub.idle_timeout=20"], capture_output=True, text=True,
                          timeout=600, env=hub.env)
    hub.stop()
    tls = start_with_tls(hub)
    t0 = time.monotonic()        # the term's server gone with the old hub, before a new login
    while singleuser_cmdlines(name) and time.monotonic() - t0 < timeout:
        time.sleep(1)
    B.run_in_own_loop(lambda: log_in_and_leave(f"https://127.0.0.1:{PORT}", name), 1800)
    t0 = time.monotonic()
    while singleuser_cmdlines(name) and time.monotonic() - t0 < timeout:
        time.sleep(1)
    return {"init": init.stdout, "left": singleuser_cmdlines(name), "tls": tls,
            "after_s": time.monotonic() - t0}


def test_a_term_on_one_shared_server(classroom):
    hub, accounts = classroom
    watch = W.Stopwatch("local journey")
    out = B.run_in_own_loop(lambda: journey(hub, watch), 3600)
    handed_out = hub.log.read_text()
    t = time.monotonic()
    out["culler"] = idle_culler_stops_an_unused_server(hub, list(STUDENTS)[2])
    watch.stage("idle culler (20 s): settings changed, hub restarted on HTTPS, server "
                "stopped", t)
    print(watch.summary())

    assert out["grader_news_prompts"] == 0
    for a, went in out["release"].items():     # the formgrader's links open, release works
        assert went["name"].endswith(f"source/{a}") and went["preview"].endswith(
            f"release/{a}"), went
        assert f"Successfully released '{a}'" in went["release"], went
    assert "Invalid username or password" in out["wrong_password"], out["wrong_password"]
    from pplab.canvases.labserver import SERVER_FLAG
    for name, cmdlines in out["servers"].items():        # a server of its own, fast websocket
        assert len(cmdlines) == 1 and SERVER_FLAG in cmdlines[0], (name, cmdlines)
    for name, lesson in out["lesson"].items():
        assert lesson["frames"][0] != lesson["frames"][1], f"{name}'s picture did not change"
        assert lesson["feedback"].strip()
        assert lesson["news"] == {"disabled": True}, lesson["news"]    # no "Jupyter news?"
        assert lesson["news_prompts"] == 0, name
        progress = Path(f"/home/{name}/pplab/.pplab-progress.json")
        assert "02.naive-makespan" in json.loads(progress.read_text())["answers"]
        assert progress.stat().st_uid == C.pwd_uid(name)          # written by the student
    assert out["answered"] == {n: {a: len(ANSWERS[a, w]) for a in TERM}
                               for n, w in STUDENTS.items()}
    # the formgrader's terminal: the shared environment's nbgrader and pplab, as the grader
    # account, in the course folder (a login shell's PATH would find neither)
    course = Path(f"/home/{GRADER}/{COURSE}")
    rc, said = out["path"]
    venv = Path(sys.prefix)
    assert rc == 0 and f"{venv}/bin/nbgrader" in said and f"{venv}/bin/pplab" in said, said
    assert f"\n{GRADER}\n{course}\n" in said.replace("\r", ""), said
    for key, _ in TERMINAL:
        rc, said = out[key]
        assert rc == 0, (key, said[-4000:])
    for a in TERM:
        assert all(f"Collecting submission: {n} {a}" in out[f"collect {a}"][1]
                   for n in STUDENTS), out[f"collect {a}"][1][-3000:]
        assert out[f"release_feedback {a}"][1].count("Feedback released to") == len(STUDENTS)
    got = {}
    with open(course / "grades.csv") as f:         # the second run's: both assignments
        for row in csv.DictReader(f):
            key = (row["assignment"], row["student"])
            got[key] = got.get(key, 0.0) + float(row["score"])
    assert {k: v for k, v in got.items() if k[0] in TERM} == {
        (a, n): EXPECTED[a, w] for a in TERM for n, w in STUDENTS.items()}, got

    for name, pages in out["feedback"].items():
        for a, html in pages.items():
            score = EXPECTED[a, STUDENTS[name]]
            assert re.search(rf"Score:\s*{score:g}(\.0+)?\s*/\s*{MAX[a]}", html), \
                (name, a, html[:2000])
            for other in STUDENTS:
                assert other == name or other not in html

    a, b = list(STUDENTS)[:2]
    codes = out["refused"]
    assert codes["other's lab"] == 403 and codes["other's contents API"] == 403, codes
    assert codes["other's file"] == 403 and codes["formgrader service"] == 403, codes
    assert codes["other on the hub API"] in (403, 404), codes
    assert codes["formgrader in own server"] == 404, codes
    assert out["kernel"].split() == ["DENIED"] * 4, out["kernel"]
    assert out["commands"] == ["assignment-list"], out["commands"]    # Assignments only
    assert out["restart"] == {"note": True, "restored": True}
    assert "1 copied (14_a_published_run.ipynb), 14 kept" in handed_out

    culler = out["culler"]
    assert culler["tls"] == {"https": 200, "plain": culler["tls"]["plain"]} and \
        culler["tls"]["plain"].startswith("refused"), culler["tls"]
    assert "updated" in culler["init"] and "hub.idle_timeout" in culler["init"], culler["init"]
    assert culler["left"] == [], culler
    assert "Culling server" in hub.log.read_text()
    print(f"    (the unused server was stopped {culler['after_s']:.0f} s after its student "
          "left)")
