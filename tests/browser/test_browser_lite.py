"""The course with no install: the JupyterLite site (built by tools/build_site.py when missing
or stale) served on 127.0.0.1, lesson 03 (``PPLAB_BROWSER_LESSONS``: see
test_browser_lessons.py) opened in Debian's Chromium and run top to bottom, read as a student
sees it (nothing revealed before the guess, the reveal after it, once). Asserts no error
outputs, every canvas redraws at its sliders' ends (the drawn scene is the kernel's),
questions answer, no request leaves 127.0.0.1 (Playwright aborts and records any other), and
the progress those answers wrote survives a reload (browser storage). Cells that need torch
print one line there instead (pplab.probe.env). Latency there:
benchmarks/bench_browser.py --lite."""
from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

import browser_util as B
from test_browser_lessons import LESSONS, check_lesson, check_nothing_given_away

if not Path(B.CHROMIUM).exists():
    pytest.skip(f"no Chromium at {B.CHROMIUM} (apt-get install chromium to run browser tests)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api")
pytest.importorskip("pytest_playwright")
if any(__import__("shutil").which(tool) is None for tool in ("npm", "node")):
    pytest.skip("npm and node are needed to build the JupyterLite site", allow_module_level=True)

pytestmark = pytest.mark.slow


@pytest.fixture
def local_only(page, site_url):
    """Abort and record every request that does not go to the site's own server."""
    outside = []

    def route(r):
        url = r.request.url
        if url.startswith(site_url) or url.startswith(("data:", "blob:")):
            return r.continue_()
        outside.append(url)
        return r.abort()
    page.context.route("**/*", route)
    yield outside
    assert not outside, f"requests left 127.0.0.1: {outside[:5]}"


#: the progress file as the site's own storage (IndexedDB) holds it, as JSON text; '{}' while
#: it has none
STORED_JS = """async () => { try {
  const f = await window.jupyterapp.serviceManager.contents.get('.pplab-progress.json',
                                                                 {content: true});
  if (f.format === 'base64') return atob(f.content);      // as the kernel's writes are kept
  return typeof f.content === 'string' ? f.content : JSON.stringify(f.content);
} catch (e) { return '{}'; } }"""


def lessons_in(progress_json: str) -> set[str]:
    """The lessons with an answer recorded in a progress file's text."""
    answers = json.loads(progress_json).get("answers", {})
    return {entry.get("lesson") for entry in answers.values()}
PROGRESS_PY = ("import pathlib\np = pathlib.Path('.pplab-progress.json')\n"
               "print(p.read_text() if p.exists() else '{}')")


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_in_jupyterlite(page, site_url, local_only, lesson):
    url = f"{site_url}/lab/index.html?path={lesson.name}"
    panel = B.open_notebook(page, url, lesson.name)
    B.run_all(page)
    page.wait_for_timeout(500)
    if lesson.name.startswith("03_"):
        check_nothing_given_away(page, panel)
    summary = check_lesson(page, panel, f"lite_{lesson.stem}", lesson)
    if not summary["questions"]:
        return
    # the answers just given were written by the kernel; they reach the browser's storage
    # and a reloaded page's kernel reads them back
    mine = lesson.name[:2]
    assert B.poll(lambda: mine in lessons_in(page.evaluate(STORED_JS))), \
        "no progress in browser storage"
    page.reload()
    B.open_notebook(page, url, lesson.name)
    assert mine in lessons_in(B.kernel_exec(page, PROGRESS_PY)), "progress lost in a reload"


def test_kernel_starts_from_the_lock_with_bytecode(site):
    """What makes the kernel start fast (tools/build_site.py): its own wheels are preloaded
    from Pyodide's lock (no micropip install at start-up), and every preloaded wheel holds
    bytecode for the site's Python (else the kernel compiles IPython & co. at each start)."""
    cfg = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = cfg["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    preload = kernel["loadPyodideOptions"]["packages"]
    assert {"piplite", "ipykernel", "pyodide-kernel", "ipython", "pplab"} <= set(preload)
    assert "widgetsnbextension" not in preload
    lock = json.loads((site / "pyodide" / "pyodide-lock.json").read_text())
    tag = "cpython-" + "".join(lock["info"]["python"].split(".")[:2])
    for name in preload:
        entry = lock["packages"][name]
        whl = site / "pyodide" / entry["file_name"]
        assert hashlib.sha256(whl.read_bytes()).hexdigest() == entry["sha256"], name
        names = zipfile.ZipFile(whl).namelist()
        sources = [n for n in names if n.endswith(".py")]
        pycs = [n for n in names if n.endswith(f".{tag}.pyc")]
        assert len(pycs) >= 0.9 * len(sources), f"{name}: {len(pycs)} pycs, {len(sources)} .py"
