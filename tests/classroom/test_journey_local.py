"""A term on one shared server, end to end, as docs/teaching.md tells it: the kit set up by
``pplab classroom init`` and served by ``pplab classroom up`` (JupyterHub, PAM login with
real Unix accounts, a JupyterLab per student from LocalProcessSpawner, nbgrader's exchange
and formgrader service, the idle culler), driven in Debian's Chromium, each person in a
browser context of their own:

the instructor releases assignment 01 in the formgrader; three students log in at once and
each gets their own server; each opens lesson 02, moves a slider and sees the picture
change, commits a prediction; each fetches 01, works it (honest, partial, blank) and
submits; the instructor collects, grades with ``pplab grade`` (sandboxed) and releases the
feedback; each student fetches their own feedback and sees only their own. A student asking
for another's server or files, or for the formgrader, is refused (status codes checked); a
restart keeps the student's own edits. The idle culler stops a server nobody uses.

Each stage's time is printed (``-s``). Skipped, with the reason, without root, Chromium,
Playwright or the hub's parts. Everything made is removed: accounts, homes, processes.
"""
from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import browser_util as B
import classroom_browser as W
import classroom_hub as C

pytestmark = pytest.mark.slow

COURSE, ONE = "pplabtest", "01_bubble_and_1f1b"
STUDENTS = {"pplt-alice": "honest", "pplt-bob": "partial", "pplt-carol": "blank"}
TEACHER, GRADER = "pplt-teacher", "pplt-grader"
EXPECTED = {"honest": 10.0, "partial": 5.0, "blank": 0.0}
#: the tasks each way of working answers (the partial student does the first two)
ANSWERS = {"honest": ("task1", "task2", "task3", "task4"), "partial": ("task1", "task2"),
           "blank": ()}
PORT, FORMGRADER_PORT = 18000, 18999
HUB = f"http://127.0.0.1:{PORT}"
#: what the instructor types in the formgrader's terminal (docs/teaching.md quotes these)
COLLECT_CMD = f"nbgrader collect {ONE}"
GRADE_CMD = "pplab grade submitted --course . --out grades.csv -j 2"
RELEASE_FEEDBACK_CMD = f"nbgrader release_feedback {ONE}"


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


def solution_sources() -> dict[str, str]:
    """Each answer cell's solution, without nbgrader's markers: what an honest student types."""
    nb = json.loads((C.ROOT / "solutions" / ONE / f"{ONE}.ipynb").read_text())
    out = {}
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution"):
            lines = "".join(cell["source"]).splitlines()
            out[meta["grade_id"]] = "\n".join(ln for ln in lines if "### " not in ln)
    return out


def as_grader(hub: C.Hub, cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
    """A command in the course folder as the grader account, with the formgrader's
    environment: what the instructor types in the formgrader's terminal."""
    from pplab.classroom.hub import environment
    from pplab.classroom.settings import Settings
    s = Settings.read(hub.settings)
    return subprocess.run([shutil.which("runuser"), "-u", GRADER, "--", *cmd], cwd=s.course_dir,
                          env=dict(os.environ, HOME=f"/home/{GRADER}",
                                   **environment(s, "grader")),
                          capture_output=True, text=True, timeout=timeout)


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
            "news": news}


async def student_works_and_submits(page, name: str, sources: dict[str, str]) -> int:
    tab = await W.assignments_tab(page)
    await W.assignment_button(tab, "released", ONE, "Fetch", "#fetched_assignments_list")
    await W.open_notebook(page, f"{HUB}/user/{name}", f"{ONE}/{ONE}.ipynb")
    plan = ANSWERS[STUDENTS[name]]
    n = await W.set_answer_cells(page, {f"{t}-answer": sources[f"{t}-answer"] for t in plan})
    tab = await W.assignments_tab(page)
    await W.assignment_button(tab, "fetched", ONE, "Submit", "#submitted_assignments_list")
    return n


async def student_gets_feedback(page, name: str) -> str:
    tab = await W.assignments_tab(page)
    await tab.locator("#refresh_assignments_list").click()
    await W.assignment_button(tab, "submitted", ONE, "Fetch Feedback",
                              "#submitted_assignments_list .list_item:has-text('view "
                              "feedback')")
    home = Path(f"/home/{name}") / ONE / "feedback"
    pages = sorted(home.glob(f"*/{ONE}.html"))
    assert len(pages) == 1, pages              # their one submission's page, nothing else
    rel = pages[0].relative_to(Path(f"/home/{name}"))
    r = await page.request.get(f"{HUB}/user/{name}/files/{rel}")
    assert r.status == 200
    return await r.text()


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
    sources, out = solution_sources(), {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=B.CHROMIUM, args=B.ARGS)
        try:
            t = time.monotonic()
            teacher = await W.login(browser, HUB, TEACHER, C.Accounts.password(TEACHER),
                                    f"/services/{COURSE}/formgrader")
            out["release"] = await W.formgrader_action(teacher, ONE, "release")
            watch.stage("instructor logs in, releases 01 in the formgrader", t)

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
            watch.stage("each: 01 fetched, worked, submitted", t)

            for key, cmd in (("collect", COLLECT_CMD), ("grade", GRADE_CMD),
                             ("release_feedback", RELEASE_FEEDBACK_CMD)):
                t = time.monotonic()
                out[key] = as_grader(hub, cmd.split())
                watch.stage(f"instructor: {cmd}", t)

            t = time.monotonic()
            out["feedback"] = dict(zip(STUDENTS, await asyncio.gather(
                *(student_gets_feedback(pages[s], s) for s in STUDENTS))))
            watch.stage("each student fetches and reads their feedback", t)

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


async def log_in_and_leave(name: str) -> None:
    from playwright.async_api import async_playwright
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=B.CHROMIUM, args=B.ARGS)
        page = await W.login(browser, HUB, name, C.Accounts.password(name))
        await W.wait_lab(page)
        await browser.close()


def idle_culler_stops_an_unused_server(hub: C.Hub, name: str, timeout: float = 900) -> dict:
    """The instructor shortens the idle time in the settings, runs init again and restarts
    the hub; a student logs in and leaves: the culler stops that server."""
    init = subprocess.run([*C.PPLAB, "classroom", "init", "--settings", str(hub.settings),
                           "--set", "hub.idle_timeout=20"], capture_output=True, text=True,
                          timeout=600, env=hub.env)
    hub.stop()
    hub.start()
    B.run_in_own_loop(lambda: log_in_and_leave(name), 1800)
    t0 = time.monotonic()
    while singleuser_cmdlines(name) and time.monotonic() - t0 < timeout:
        time.sleep(1)
    return {"init": init.stdout, "left": singleuser_cmdlines(name),
            "after_s": time.monotonic() - t0}


def test_a_term_on_one_shared_server(classroom):
    hub, accounts = classroom
    watch = W.Stopwatch("local journey")
    out = B.run_in_own_loop(lambda: journey(hub, watch), 3600)
    handed_out = hub.log.read_text()
    t = time.monotonic()
    out["culler"] = idle_culler_stops_an_unused_server(hub, list(STUDENTS)[2])
    watch.stage("idle culler (20 s): settings changed, hub restarted, server stopped", t)
    print(watch.summary())

    assert "Successfully released" in out["release"]
    assert "Invalid username or password" in out["wrong_password"], out["wrong_password"]
    from pplab.canvases.labserver import SERVER_FLAG
    for name, cmdlines in out["servers"].items():        # a server of its own, fast websocket
        assert len(cmdlines) == 1 and SERVER_FLAG in cmdlines[0], (name, cmdlines)
    for name, lesson in out["lesson"].items():
        assert lesson["frames"][0] != lesson["frames"][1], f"{name}'s picture did not change"
        assert lesson["feedback"].strip()
        assert lesson["news"] == {"disabled": True}, lesson["news"]    # no "Jupyter news?"
        progress = Path(f"/home/{name}/pplab/.pplab-progress.json")
        assert "02.naive-makespan" in json.loads(progress.read_text())["answers"]
        assert progress.stat().st_uid == C.pwd_uid(name)          # written by the student
    assert out["answered"] == {n: len(ANSWERS[w]) for n, w in STUDENTS.items()}
    for key in ("collect", "grade", "release_feedback"):
        r = out[key]
        assert r.returncode == 0, (key, r.stdout[-3000:] + r.stderr[-3000:])
    said = {k: out[k].stdout + out[k].stderr for k in ("collect", "release_feedback")}
    assert all(f"Collecting submission: {n} {ONE}" in said["collect"] for n in STUDENTS)
    course = Path(f"/home/{GRADER}/{COURSE}")
    got = {}
    with open(course / "grades.csv") as f:
        for row in csv.DictReader(f):
            if row["assignment"] == ONE:
                got[row["student"]] = got.get(row["student"], 0.0) + float(row["score"])
    assert got == {n: EXPECTED[w] for n, w in STUDENTS.items()}, got
    assert said["release_feedback"].count("Feedback released to") == len(STUDENTS)

    for name, html in out["feedback"].items():
        score = EXPECTED[STUDENTS[name]]
        assert re.search(rf"Score:\s*{score:g}(\.0+)?\s*/\s*10", html), (name, html[:2000])
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
    assert "updated" in culler["init"] and "hub.idle_timeout" in culler["init"], culler["init"]
    assert culler["left"] == [], culler
    assert "Culling server" in hub.log.read_text()
    print(f"    (the unused server was stopped {culler['after_s']:.0f} s after its student "
          "left)")
