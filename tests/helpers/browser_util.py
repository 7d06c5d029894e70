"""Shared by the browser tests and benchmarks (JupyterLab and JupyterLite): Chromium flags, a
throw-away JupyterLab, and page helpers that open a notebook, run it, find its canvases, move
their sliders and wait for the browser-drawn picture to change.

Pattern (see the browser-tests recipe): scope every locator to the open panel, wait on what
the page shows (the canvas's ``data-frame`` counter that scene.js bumps on every draw), never
on "execute some code" barriers.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from pplab.canvases.labserver import SERVER_FLAG
from cell_tags import checked, skipped

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("PPLAB_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage"]
TOKEN = "pplab-browser-test"
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SHOTS = Path(os.environ.get("PPLAB_SHOTS", ROOT / "build" / "shots"))
#: how long the page may take for one step (a kernel's reply, a redraw, a feedback) and for a
#: whole one (a server or kernel start, Run All, a real job): far beyond what a machine with
#: other work beside it takes, so that only a broken product reaches them. Every wait polls
#: for the state it needs; no verdict depends on speed.
STEP_MS = 300_000
RUN_MS = 900_000


def run_in_own_loop(make_coroutine, timeout: float):
    """Run ``make_coroutine()`` to its end in a new event loop on a thread of its own, within
    ``timeout`` seconds, and return its result. In a full test session pytest-playwright's
    sync API keeps a loop running on the main thread, where ``asyncio.run`` refuses to start."""
    import asyncio
    import threading
    result, failure = [], []

    def target():
        try:
            result.append(asyncio.run(asyncio.wait_for(make_coroutine(), timeout)))
        except BaseException as e:          # re-raised in the caller's thread
            failure.append(e)
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout + 30)
    if thread.is_alive():
        raise TimeoutError(f"the event loop did not finish within {timeout + 30:.0f} s")
    if failure:
        raise failure[0]
    return result[0]


def poll(check, timeout_ms: float = STEP_MS, every: float = 0.2):
    """``check()`` again every ``every`` seconds until it is true or ``timeout_ms`` has
    passed; its last answer (a wait for a state, not for a time)."""
    deadline = time.monotonic() + timeout_ms / 1000
    while not (answer := check()) and time.monotonic() < deadline:
        time.sleep(every)
    return answer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc, log: Path, limit: float = RUN_MS / 1000) -> None:
    deadline = time.time() + limit
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            assert time.time() < deadline, f"{url} did not answer within {limit:.0f} s"
            time.sleep(0.2)


def stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def blank_skipped_cells(folder: Path) -> None:
    """Empty the cells nbval skips (``# NBVAL_SKIP``: real torchrun jobs, covered by the
    runtime tests) in the served copies, so "run all" stays quick."""
    import nbformat
    for path in folder.glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if skipped(cell):
                cell.source = ""
        nbformat.write(nb, path)


@contextmanager
def jupyter_lab(notebooks: Path):
    """A throw-away JupyterLab on 127.0.0.1 serving a copy of ``notebooks`` (no user settings,
    no autosave, skipped cells blanked); yields its URL; stopped and removed afterwards."""
    state = Path(tempfile.mkdtemp(prefix="pplab-lab-"))
    shutil.copytree(notebooks, state / "nb", ignore=shutil.ignore_patterns(".*"))
    blank_skipped_cells(state / "nb")
    for rel, content in {
            "apputils-extension/notification.jupyterlab-settings":
                {"fetchNews": "false", "checkForUpdates": False},
            "docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
            # render every cell's output, not only the visible ones: tests look for them all
            "notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"}}.items():
        p = state / "settings" / "@jupyterlab" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(content))
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env.update(JUPYTER_CONFIG_DIR=str(state / "config"),
               JUPYTERLAB_SETTINGS_DIR=str(state / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(state / "ws"), JUPYTER_RUNTIME_DIR=str(state / "rt"))
    port = free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}",
           f"--ServerApp.root_dir={state / 'nb'}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.news_url=None", SERVER_FLAG] + (["--allow-root"] if os.geteuid() == 0 else [])
    log = state / "lab.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/lab?token={TOKEN}", proc, log)
        yield url
    finally:
        stop(proc)
        shutil.rmtree(state, ignore_errors=True)


@contextmanager
def static_server(folder: Path):
    """``python -m http.server`` on 127.0.0.1 for a built JupyterLite site."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="pplab-http-")[1])
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                                 "127.0.0.1", "-d", str(folder)], stdout=fh,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/", proc, log)
        yield url
    finally:
        stop(proc)
        log.unlink(missing_ok=True)


# ---- page helpers -------------------------------------------------------------------------
def open_notebook(page, url: str, name: str, timeout: float = RUN_MS):
    """Open ``name`` at ``url`` (a lab/tree or lite URL); wait for its kernel; return the
    panel locator (every later locator is scoped to it: other tabs may be restored)."""
    page.goto(url)
    page.wait_for_function("""n => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
        return !!(w && w.context && w.context.path.endsWith(n) && w.sessionContext); }""",
                           arg=name, timeout=timeout)
    panel_id = page.evaluate("""async () => { const w = window.jupyterapp.shell.currentWidget;
        await w.context.ready; await w.sessionContext.ready; return w.id; }""")
    return page.locator(f"[id='{panel_id}']")


def run_all(page, timeout_ms: int = RUN_MS) -> bool:
    return page.evaluate("""ms => Promise.race([
        window.jupyterapp.commands.execute('notebook:run-all-cells'),
        new Promise((_, r) => setTimeout(() => r(new Error('run-all timed out')), ms))])""",
                         timeout_ms)


ERRORS_JS = """() => { const w = window.jupyterapp.shell.currentWidget, out = [];
  const cells = w.content.model.cells;
  for (let i = 0; i < cells.length; i++) { const c = cells.get(i);
    if (c.type !== 'code') continue;
    for (const o of c.outputs.toJSON()) {
      if (o.output_type === 'error') out.push(`cell ${i}: ${o.ename}: ${o.evalue}`);
      const t = o.text ? [].concat(o.text).join('') : '';
      if (o.name === 'stderr' && /Traceback|Error:/.test(t)) out.push(`cell ${i} stderr: ${t.slice(0, 300)}`);
    } }
  return out; }"""


def error_outputs(page, panel) -> list[str]:
    """Error outputs, tracebacks on stderr, and canvases reporting an internal error."""
    errs = page.evaluate(ERRORS_JS)
    text = panel.inner_text()
    if "internal error (please report)" in text:
        errs.append("a canvas reports an internal error")
    return errs


KERNEL_EXEC_JS = """async code => {
  const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const f = k.requestExecute({code, store_history: false}); let out = '';
  f.onIOPub = m => { if (m.header.msg_type === 'stream') out += m.content.text;
                     if (m.header.msg_type === 'error') out += 'ERROR ' + m.content.evalue; };
  await f.done; return out; }"""


def kernel_exec(page, code: str) -> str:
    return page.evaluate(KERNEL_EXEC_JS, code)


def canvas_roots(panel) -> list:
    """The widget box of each live canvas (controls + message + picture); static pictures
    drawn by the page (pplab.draw in JupyterLite) have no box or stand in a question's
    measurement (``.pplab-reveal``), and are left out."""
    box = "contains(concat(' ', @class, ' '), ' {} ')"
    canvases = panel.locator(f"xpath=.//canvas[{box.format('pplab-scene')}]"
                             f"[ancestor::div[{box.format('widget-vbox')}]]"
                             f"[not(ancestor::*[{box.format('pplab-reveal')}])]")
    return [canvases.nth(i).locator("xpath=ancestor::div[contains(concat(' ', @class, ' '),"
                                    " ' widget-vbox ')][1]") for i in range(canvases.count())]


SIGNATURE_JS = """root => { const c = root.querySelector('canvas.pplab-scene');
  const html = [...root.querySelectorAll('.widget-html-content')].map(e => e.innerText).join('|');
  return (c ? c.dataset.frame : '-') + '#' + html; }"""


def settle(page, root, action, timeout: float = STEP_MS) -> None:
    """Do ``action`` and wait until the canvas's picture or message has changed and then
    stayed the same for 300 ms (the kernel's answer arrived and was drawn)."""
    before = root.evaluate(SIGNATURE_JS)
    action()
    root.page.wait_for_function(f"""([root, before]) => ({SIGNATURE_JS})(root) !== before""",
                                arg=[root.element_handle(), before], timeout=timeout)
    last, since = root.evaluate(SIGNATURE_JS), time.time()
    while time.time() - since < 0.3:
        time.sleep(0.05)
        now = root.evaluate(SIGNATURE_JS)
        if now != last:
            last, since = now, time.time()


def handle_at(handle, which: str) -> bool:
    now = float(handle.get_attribute("aria-valuenow"))
    return now == float(handle.get_attribute("aria-value" + ("max" if which == "End" else "min")))


def sweep_extremes(page, root, shot_prefix: str | None = None) -> int:
    """Every slider of one canvas to its maximum, then its minimum (a canvas without sliders:
    every dropdown to its last, then first option); screenshots at both ends. Returns how
    many moves redrew something."""
    handles, selects = root.locator(".noUi-handle"), root.locator("select")
    moves = 0
    for key in ("End", "Home"):
        for i in range(handles.count()):
            h = handles.nth(i)
            if handle_at(h, key):
                continue
            settle(page, root, lambda: h.press(key))
            moves += 1
        for i in range(0 if handles.count() else selects.count()):
            sel = selects.nth(i)
            options = sel.locator("option").all_inner_texts()
            want = options[-1 if key == "End" else 0]
            if sel.evaluate("s => s.options[s.selectedIndex].text") != want:
                settle(page, root, lambda: sel.select_option(label=want))
                moves += 1
        if shot_prefix:
            SHOTS.mkdir(parents=True, exist_ok=True)
            root.screenshot(path=str(SHOTS / f"{shot_prefix}_{key.lower()}.png"))
        overlaps = root.locator("canvas.pplab-scene").get_attribute("data-overlaps")
        assert overlaps in (None, "0"), \
            f"{shot_prefix} at {key}: {overlaps} axis labels overlap (scene.js labelRow)"
    return moves


def drawn_scene(root):
    """The scene the browser last drew (scene.js keeps it on the canvas element)."""
    return root.locator("canvas.pplab-scene").evaluate("c => c.pplabScene")


def answer_questions(page, panel) -> int:
    """Answer every quiz/prediction widget (contract: .pplab-question holding .pplab-answer,
    .pplab-check, .pplab-feedback) not answered yet and wait for each to give feedback;
    returns how many questions there are."""
    qs = panel.locator(".pplab-question")
    for i in range(qs.count()):
        q = qs.nth(i)
        if q.locator(".pplab-feedback").inner_text().strip():
            continue                            # committed already (a test's own answer)
        q.scroll_into_view_if_needed()
        ans = q.locator(".pplab-answer")
        if ans.locator("input[type=radio]").count():
            ans.locator("input[type=radio]").first.check()
        elif ans.locator("button").count():
            ans.locator("button").first.click()
        elif ans.locator("input, textarea").count():
            box = ans.locator("input, textarea").first
            box.fill("1")
            box.dispatch_event("change")
        check = q.locator(".pplab-check")
        (check.locator("button").first if check.locator("button").count() else check).click()
        try:
            page.wait_for_function("q => { const f = q.querySelector('.pplab-feedback');"
                                   " return f && f.innerText.trim().length > 0; }",
                                   arg=q.element_handle(), timeout=STEP_MS)
        except Exception as e:
            raise AssertionError(f"no feedback from question {i}: {q.inner_text()[:300]!r}") \
                from e
    return qs.count()


DRAWS = re.compile(r"^(?!\s*(from|import)\b).*\bdraw_\w+\(", re.M)


def drawing_cells(path: Path) -> list[int]:
    """Indices of the cells that draw a static picture with ``pplab.draw`` (the served copy
    keeps the cells in place: skipped ones are blanked, not removed)."""
    import nbformat
    cells = nbformat.read(path, as_version=4).cells
    return [i for i, c in enumerate(cells) if c.cell_type == "code"
            and not skipped(c) and DRAWS.search(c.source)]


PICTURE_JS = """([panel, i]) => { const cell = panel.querySelectorAll('.jp-Cell')[i];
  const out = cell ? [...cell.querySelectorAll('.jp-OutputArea-output')] : [];
  const seen = el => { const r = el.getBoundingClientRect();
    return r.width > 100 && r.height > 50 && getComputedStyle(el).visibility !== 'hidden'; };
  const imgs = out.flatMap(o => [...o.querySelectorAll('img')])
    .filter(im => im.complete && im.naturalWidth > 100 && seen(im));
  const scenes = out.flatMap(o => [...o.querySelectorAll('canvas.pplab-scene')])
    .filter(c => c.width > 100 && seen(c));
  return {pictures: imgs.length + scenes.length, text: out.map(o => o.innerText).join('\\n')}; }"""
FIGURE_TEXT = re.compile(r"<Figure size \d+x\d+")


def pictures_shown(page, panel, cells: list[int], timeout: float = STEP_MS) -> dict[int, int]:
    """For each drawing cell, how many pictures its output shows (an image in JupyterLab, a
    page-drawn scene in JupyterLite); waits until each shows one. A cell that prints a
    matplotlib Figure's text instead of drawing it is an assertion error."""
    handle = panel.element_handle()
    shown = {}
    for i in cells:
        panel.locator(".jp-Cell").nth(i).scroll_into_view_if_needed()
        try:
            page.wait_for_function(f"a => ({PICTURE_JS})(a).pictures > 0", arg=[handle, i],
                                   timeout=timeout)
        except Exception:                        # reported below with what the cell shows
            pass
        got = page.evaluate(PICTURE_JS, [handle, i])
        assert not FIGURE_TEXT.search(got["text"]), f"cell {i} prints {got['text'][:80]!r}"
        shown[i] = got["pictures"]
    text = panel.inner_text()
    assert not FIGURE_TEXT.search(text), "a Figure's text stands where its picture should"
    return shown


# ---- latency ------------------------------------------------------------------------------
LATENCY_SETUP_JS = """root => { const c = root.querySelector('canvas.pplab-scene');
  window.__lat = []; window.__t0 = null;
  document.addEventListener('keydown', () => { window.__t0 = performance.now(); }, true);
  new MutationObserver(() => { if (window.__t0 !== null) {
      window.__lat.push(performance.now() - window.__t0); window.__t0 = null; } })
    .observe(c, {attributes: true, attributeFilter: ['data-frame']}); }"""


def redraw_latencies(page, root, label: str, moves: int = 30) -> list[float]:
    """Press →/← on the slider named ``label`` ``moves`` times; per press, the ms from the
    key event reaching the page to the canvas being redrawn (data-frame changing)."""
    handle = root.locator(".widget-slider", has=page.locator(".widget-label", has_text=label)
                          ).first.locator(".noUi-handle")
    root.evaluate(LATENCY_SETUP_JS)
    for i in range(moves):
        n = page.evaluate("() => window.__lat.length")
        handle.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
        page.wait_for_function("n => window.__lat.length > n", arg=n, timeout=STEP_MS)
        time.sleep(0.05)
    return page.evaluate("() => window.__lat")


def percentile(xs, q: float) -> float:
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = int(k)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (k - lo)


APPEND_RUN_JS = """async code => { const app = window.jupyterapp, nb = app.shell.currentWidget.content;
  nb.activeCellIndex = nb.widgets.length - 1;
  await app.commands.execute('notebook:insert-cell-below');
  nb.activeCell.model.sharedModel.setSource(code);
  await app.commands.execute('notebook:run-cell'); return nb.activeCellIndex; }"""


def append_and_run(page, panel, code: str):
    """Add a code cell at the end of the open notebook, run it, return its output area."""
    index = page.evaluate(APPEND_RUN_JS, code)
    return panel.locator(".jp-Cell").nth(index)


#: the benchmarked canvases; ``{cache}`` is how many pictures the canvases keep (0: nothing is
#: kept once shown), ``{prefetch}`` whether a step's neighbours are rendered while the kernel
#: idles
BENCH_SETUP = ("from pplab.canvases.cache import KEPT\nKEPT.pictures.size = {cache}; "
               "KEPT.pictures.clear(); c.prefetcher.enabled = {prefetch}; c")
BENCH_TIMELINE = ("from pplab.canvases.timeline import timeline_canvas\n"
                  "c = timeline_canvas({at})\n" + BENCH_SETUP)
#: the timeline canvas's setting while its V slider moves (bench_browser.py --at changes it)
BENCH_AT = ("interleaved", 8, 32, 2)
BENCH_MEMORY = ("from pplab.canvases.memory import memory_canvas\n"
                "c = memory_canvas(pp=8, schedule='1f1b', M=16, controls=('M', 'mbs'))\n"
                + BENCH_SETUP)
#: (what the figure means, render cache size, prefetch) — the last is the goal's figure
BENCH_MODES = (("revisits cached", 32, True),
               ("every move simulated on demand", 0, False),
               ("every move a first visit, its neighbours rendered while idle", 0, True))


def bench_canvases(page, panel, moves: int = 30, cache: int = 0, prefetch: bool = True,
                   at=BENCH_AT) -> dict:
    """Redraw latencies (ms) of the timeline canvas at ``at`` (schedule, P, M, V; V moved)
    and of the memory bars (M moved), in the open notebook. ``cache=0``: no picture is
    kept once shown (the slider goes back and forth, so a kept one would serve every
    revisit); ``prefetch``: the canvas renders a step's neighbours while it waits."""
    out = {}
    for name, code, label in (("memory bars", BENCH_MEMORY, "M"),
                              ("timeline", BENCH_TIMELINE, "V")):
        cell = append_and_run(page, panel, code.format(cache=cache, prefetch=prefetch,
                                                       at=", ".join(map(repr, at))))
        cell.locator("canvas.pplab-scene").wait_for(timeout=STEP_MS)
        root = canvas_roots(cell)[0]
        root.scroll_into_view_if_needed()
        out[name] = redraw_latencies(page, root, label, moves)
    return out


def empty_notebook(path: Path) -> None:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


def ensure_site(site: Path) -> Path:
    """The JupyterLite site, (re)built by tools/build_site.py when missing or older than
    pplab/ or the lessons."""
    sources = [p for d in ("pplab", "notebooks", "tools") for p in (ROOT / d).rglob("*")
               if p.is_file() and "__pycache__" not in p.parts]
    if str(ROOT / "tools") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools"))
    from build_site import BUILT_STAMP             # written last by the build
    stamp = site / BUILT_STAMP
    if not stamp.exists() or stamp.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        subprocess.run([sys.executable, str(ROOT / "tools" / "build_site.py"), str(site)],
                       check=True)
    return site
