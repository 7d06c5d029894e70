"""The course with no install: the JupyterLite site (built by tools/build_site.py when missing
or stale) served on 127.0.0.1, lesson 03 (``PPLAB_BROWSER_LESSONS``: see
test_browser_lessons.py) opened in Debian's Chromium and run top to bottom, read as a student
sees it (nothing revealed before the guess, the reveal after it, once). Asserts no error
outputs, every canvas redraws at its sliders' ends (the drawn scene is the kernel's),
questions answer, no request leaves 127.0.0.1 (Playwright aborts and records any other), and
progress written by the kernel survives a reload (browser storage). Cells that need torch
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


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_in_jupyterlite(page, site_url, local_only, lesson):
    panel = B.open_notebook(page, f"{site_url}/lab/index.html?path={lesson.name}", lesson.name)
    B.run_all(page)
    page.wait_for_timeout(500)
    if lesson.name.startswith("03_"):
        check_nothing_given_away(page, panel)
    check_lesson(page, panel, f"lite_{lesson.stem}", lesson)


PROGRESS_PY = ("import json, pathlib\np = pathlib.Path('.pplab-progress.json')\n"
               "{}\nprint(p.read_text() if p.exists() else 'missing')")


def test_progress_survives_a_reload(page, site_url, local_only):
    name = B.LESSONS[0].name
    B.open_notebook(page, f"{site_url}/lab/index.html?path={name}", name)
    write = PROGRESS_PY.format("p.write_text(json.dumps({'02_bubble': {'quiz-1': True}}))")
    assert "quiz-1" in B.kernel_exec(page, write)
    page.wait_for_timeout(1000)
    page.reload()
    B.open_notebook(page, f"{site_url}/lab/index.html?path={name}", name)
    assert "quiz-1" in B.kernel_exec(page, PROGRESS_PY.format(""))


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
