"""The formgrader's submission view runs nothing a student wrote (pplab/classroom/formgrade.py).

A course folder with one tiny assignment, a submission carrying the payloads students try
(markdown with raw HTML, a display output), autograded by nbgrader; the formgrader served by
a Jupyter server with the kit's grader configuration, and opened in Chromium: the grading
form is there, the payloads are not, and none of them ran. Without the kit's filter nbgrader's
own template keeps the payload (checked too, so the test shows what it guards against).
"""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys

import nbformat
import pytest

import browser_util as B
import classroom_browser as W

pytestmark = pytest.mark.slow

#: each sets window.PWN if it runs (a javascript: link is clicked by the test)
PAYLOADS = [
    '<img src="x" onerror="window.PWN=1">',
    "<script>window.PWN=2</script>",
    '<svg onload="window.PWN=3"><rect/></svg>',
    '<iframe srcdoc="<script>parent.PWN=4</script>"></iframe>',
    '<details open ontoggle="window.PWN=5">d</details>',
    '<a id="jslink" href="javascript:window.PWN=6">html link</a>',
    "[md link](javascript:window.PWN=7)",
    '<a href="jav&#x09;ascript:window.PWN=8">tab link</a>',
    '<object data="javascript:window.PWN=9"></object>',
    '<math><mtext><img src=x onerror="window.PWN=10"></mtext></math>',
    '<style>#grading-form { display: none }</style>',
]
OUTPUT = ("from IPython.display import HTML, Javascript, display\n"
          "display(HTML('<img src=x onerror=\"window.PWN=20\">'))\n"
          "display(Javascript('window.PWN=21'))")


#: what of the payloads reached the rendered cells and outputs as something a browser acts on
PLANTED_JS = """() => [...document.querySelectorAll(
    '.text_cell_render *, .output_wrapper *, head style')].flatMap(e => {
    const out = [...e.attributes].filter(a => a.name.startsWith('on') ||
        /^\\s*javascript:/i.test(a.value.replace(/[\\x00-\\x20]/g, '')))
        .map(a => e.tagName + ' ' + a.name);
    if (['IFRAME', 'OBJECT', 'EMBED', 'SVG'].includes(e.tagName.toUpperCase()))
        out.push(e.tagName);
    if ((e.tagName === 'SCRIPT' || e.tagName === 'STYLE') && e.textContent.includes('PWN')
        || e.tagName === 'STYLE' && e.textContent.includes('#grading-form'))
        out.push(e.tagName + ' ' + e.textContent.slice(0, 60));
    return out; })"""


def _nb(cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    return nb


def _graded(cell, grade_id, points=None):
    cell.metadata.nbgrader = {"grade_id": grade_id, "solution": True, "grade": points is not None,
                              "locked": False, "schema_version": 3, **(
                                  {"points": points} if points is not None else {})}
    return cell


def make_course(course):
    """source/a1 (a markdown answer, a code answer), released, submitted by ``stud`` with
    the payloads, autograded."""
    src = course / "source" / "a1"
    src.mkdir(parents=True)
    nbformat.write(_nb([
        _graded(nbformat.v4.new_markdown_cell("YOUR ANSWER HERE"), "essay", 2),
        _graded(nbformat.v4.new_code_cell("x = 1"), "code")]), src / "a1.ipynb")
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.course_id = 'safe'\n"
        "c.Exchange.root = 'exchange'\n")
    from pplab.grading.course import nbgrader_env
    nbgrader, env = [sys.executable, "-m", "nbgrader"], nbgrader_env()
    subprocess.run([*nbgrader, "generate_assignment", "a1", "--force"], cwd=course, check=True,
                   capture_output=True, timeout=300, env=env)
    nb = nbformat.read(course / "release" / "a1" / "a1.ipynb", as_version=4)
    nb.cells[0].source = "My answer:\n\n" + "\n\n".join(PAYLOADS)
    nb.cells[1].source = OUTPUT
    nb.cells.append(nbformat.v4.new_markdown_cell("\n\n".join(PAYLOADS)))
    sub = course / "submitted" / "stud" / "a1"
    sub.mkdir(parents=True)
    nbformat.write(nb, sub / "a1.ipynb")
    r = subprocess.run([*nbgrader, "autograde", "a1", "--create"], cwd=course,
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def submission_id(course) -> str:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        return gb.find_submission_notebook("a1", "a1", "stud").id


def test_nbgraders_own_template_keeps_the_payload(tmp_path):
    """What the kit's filter is for: nbgrader's formgrade template as shipped."""
    from nbconvert import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    nb = _nb([nbformat.v4.new_markdown_cell(PAYLOADS[0])])
    html, _ = HTMLExporter(template_name="formgrade",
                           extra_template_basedirs=[handlers.template_path]).from_notebook_node(
        nb, resources={"base_url": "", "index": 0, "total": 1})
    assert 'onerror="window.PWN=1"' in html


async def open_submission(url: str) -> dict:
    from playwright.async_api import async_playwright
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=B.CHROMIUM, args=B.ARGS)
        try:
            page = await browser.new_page()
            dialogs = []
            page.on("dialog", lambda d: (dialogs.append(d.message),
                                         asyncio.ensure_future(d.dismiss())))
            await page.goto(url, wait_until="load")
            await page.wait_for_selector("#grading-form, .nbgrader_cell", timeout=120_000)
            # an image's error, a frame's load: give each a chance by loading once more
            await page.wait_for_function("() => document.readyState === 'complete'")
            for link in await page.locator("a").all():
                href = await link.get_attribute("href") or ""
                if "PWN" in href:
                    await link.click()
            text = await page.locator("body").inner_text()
            planted = await page.evaluate(PLANTED_JS)
            return {"pwn": await page.evaluate("() => window.PWN === undefined ? null : "
                                               "window.PWN"),
                    "planted": planted, "text": text, "dialogs": dialogs,
                    "form_shown": await page.locator(".nbgrader_cell").count()}
        finally:
            await browser.close()


def test_the_grading_view_runs_nothing_a_student_wrote(tmp_path):
    reason = W.skip_reason()
    if reason:
        pytest.skip(reason)
    from pplab.classroom.settings import KIT
    course = tmp_path / "course"
    make_course(course)
    config = tmp_path / "jupyter"
    shutil.copytree(KIT / "jupyter" / "grader", config)
    port, token = B.free_port(), "formgrade-test"
    from pplab.grading.course import nbgrader_env
    env = dict(nbgrader_env(), JUPYTER_CONFIG_PATH=str(config), JUPYTER_CONFIG_DIR=str(config))
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jupyter_server", "--no-browser",
                                 "--allow-root", f"--port={port}", "--ip=127.0.0.1",
                                 f"--IdentityProvider.token={token}",
                                 f"--ServerApp.root_dir={course}"], cwd=course, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        B.wait_http(f"{base}/api/status?token={token}", proc, log, limit=300)
        url = f"{base}/formgrader/submissions/{submission_id(course)}/?token={token}"
        seen = B.run_in_own_loop(lambda: open_submission(url), 600)
    finally:
        B.stop(proc)
    assert seen["form_shown"] >= 1, seen["text"][:2000]
    assert "My answer:" in seen["text"]
    assert seen["pwn"] is None and seen["dialogs"] == [], seen["pwn"]
    assert seen["planted"] == [], seen["planted"]
