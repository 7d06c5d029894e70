"""What a person does in the class's browser pages, with Playwright's async API (several
people at once, each in a browser context of their own): log in through the hub's form,
open a notebook in their JupyterLab, move a canvas's slider, answer a prediction, use
nbgrader's Assignments tab and the formgrader.

Waits are on what the page shows (the canvas's ``data-frame`` counter, the lists nbgrader
draws), never on fixed sleeps. JupyterLab is started with ``expose_app_in_browser`` (the test
class sets it in ``[hub] singleuser_args``), so notebooks open through ``window.jupyterapp``.
"""
from __future__ import annotations

import time
from pathlib import Path

from browser_util import CHROMIUM, SIGNATURE_JS


def skip_reason() -> str | None:
    """Why these pages cannot be driven here (no Chromium, no Playwright), or None."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "needs playwright (pip install -e '.[dev]')"
    return None

#: how long any wait on a page may last: only a broken product takes this long (a JupyterLab
#: starting beside two others on a loaded machine takes minutes, never a quarter of an hour);
#: every wait polls for the state it needs, so a working class never waits this long
PATIENCE_MS = 900_000

LAB_READY_JS = """() => !!(window.jupyterapp && window.jupyterapp.shell.currentWidget)"""
#: the open notebook at path n, found among the main area's tabs (not by focus: the lab may
#: still be restoring other tabs); made the current one once its kernel is ready
FIND_NB_JS = """n => { const app = window.jupyterapp; if (!app) return null;
    for (const w of app.shell.widgets('main'))
      if (w.context && w.context.path === n && w.sessionContext) return w;
    return null; }"""


async def login(browser, hub: str, name: str, password: str, next_path: str = ""):
    """A new browser context for ``name``, logged in through the hub's login form; returns
    its page (on wherever the hub sends it: their JupyterLab, or ``next_path``)."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.set_default_timeout(PATIENCE_MS)               # every click, fill and page load
    ctx.set_default_navigation_timeout(PATIENCE_MS)
    page = await ctx.new_page()
    await page.goto(f"{hub}/hub/login" + (f"?next={next_path}" if next_path else ""))
    await page.fill("#username_input", name)
    await page.fill("#password_input", password)
    await page.click("#login_submit")
    return page


async def wait_lab(page, timeout_ms: int = PATIENCE_MS) -> None:
    await page.wait_for_function(LAB_READY_JS, timeout=timeout_ms)


async def open_notebook(page, lab: str, path: str, timeout_ms: int = PATIENCE_MS):
    """Open ``path`` (relative to the server's root) at ``lab`` (``{hub}/user/{name}``);
    wait for its kernel; return the panel's locator."""
    await page.goto(f"{lab}/lab/tree/{path}?reset")
    await page.wait_for_function(f"n => !!({FIND_NB_JS})(n)", arg=path, timeout=timeout_ms)
    panel_id = await page.evaluate(f"""async n => {{ const w = ({FIND_NB_JS})(n);
        await w.context.ready; await w.sessionContext.ready;
        window.jupyterapp.shell.activateById(w.id); return w.id; }}""", path)
    return page.locator(f"[id='{panel_id}']")


async def command(page, name: str, args: dict | None = None):
    return await page.evaluate("([n, a]) => window.jupyterapp.commands.execute(n, a)",
                               [name, args or {}])


async def run_all(page, timeout_ms: int = PATIENCE_MS) -> None:
    ok = await page.evaluate("""ms => Promise.race([
        window.jupyterapp.commands.execute('notebook:run-all-cells'),
        new Promise((_, r) => setTimeout(() => r(new Error('run-all timed out')), ms))])""",
                             timeout_ms)
    assert ok, "run-all reported a failed cell"


async def kernel_exec(page, code: str) -> str:
    return await page.evaluate("""async code => {
      const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
      const f = k.requestExecute({code, store_history: false}); let out = '';
      f.onIOPub = m => { if (m.header.msg_type === 'stream') out += m.content.text;
                         if (m.header.msg_type === 'error') out += 'ERROR ' + m.content.ename
                                                                  + ': ' + m.content.evalue; };
      await f.done; return out; }""", code)


async def move_slider_and_see_redraw(page, panel, key: str = "End") -> tuple[str, str]:
    """Press ``key`` on the first canvas's first slider; wait until the browser-drawn picture
    changed (scene.js bumps ``data-frame``); returns the signature before and after."""
    root = panel.locator(".widget-vbox", has=page.locator("canvas.pplab-scene")).first
    await root.scroll_into_view_if_needed()
    handle = root.locator(".noUi-handle").first
    before = await root.evaluate(SIGNATURE_JS)
    await handle.press(key)
    await page.wait_for_function(f"([r, b]) => ({SIGNATURE_JS})(r) !== b",
                                 arg=[await root.element_handle(), before],
                                 timeout=PATIENCE_MS)
    return before, await root.evaluate(SIGNATURE_JS)


async def commit_prediction(page, panel, answer: str) -> str:
    """Type ``answer`` into the first prediction, press its check button, return the
    feedback it gives."""
    q = panel.locator(".pplab-question").first
    await q.scroll_into_view_if_needed()
    box = q.locator(".pplab-answer input, .pplab-answer textarea").first
    await box.fill(answer)
    await box.dispatch_event("change")
    check = q.locator(".pplab-check")
    await (check.locator("button").first if await check.locator("button").count()
           else check).click()
    await page.wait_for_function("q => { const f = q.querySelector('.pplab-feedback');"
                                 " return f && f.innerText.trim().length > 0; }",
                                 arg=await q.element_handle(), timeout=PATIENCE_MS)
    return await q.locator(".pplab-feedback").inner_text()


async def set_answer_cells(page, sources: dict[str, str]) -> int:
    """In the open notebook, give each cell whose nbgrader grade_id is a key that source
    (what a student types), then save; returns how many cells were set."""
    n = await page.evaluate("""sources => { const nb = window.jupyterapp.shell.currentWidget;
        let n = 0; const cells = nb.content.model.cells;
        for (let i = 0; i < cells.length; i++) { const c = cells.get(i);
          const meta = c.getMetadata('nbgrader');
          if (meta && sources[meta.grade_id] !== undefined) {
            c.sharedModel.setSource(sources[meta.grade_id]); n++; } }
        return n; }""", sources)
    await command(page, "docmanager:save")
    return n


async def append_cell(page, source: str) -> None:
    """Add a cell at the end of the open notebook (not run), then save."""
    await page.evaluate("""async src => { const app = window.jupyterapp;
        const nb = app.shell.currentWidget.content;
        nb.activeCellIndex = nb.widgets.length - 1;
        await app.commands.execute('notebook:insert-cell-below');
        nb.activeCell.model.sharedModel.setSource(src); }""", source)
    await command(page, "docmanager:save")


# ---- nbgrader's Assignments tab ---------------------------------------------------------
async def assignments_tab(page):
    await command(page, "nbgrader:open-assignment-list")
    tab = page.locator("#assignments")
    await tab.wait_for(timeout=PATIENCE_MS)
    return tab


async def assignment_button(tab, section: str, assignment: str, label: str, after: str,
                            timeout_ms: int = PATIENCE_MS) -> None:
    """Press ``label`` on ``assignment``'s row in ``section`` (released / fetched /
    submitted), then wait until ``after`` shows in the list nbgrader redraws."""
    row = tab.locator(f"#{section}_assignments_list .list_item", has_text=assignment).first
    await row.locator("button", has_text=label).first.click(timeout=timeout_ms)
    await tab.locator(after, has_text=assignment).first.wait_for(timeout=timeout_ms)


# ---- the formgrader (the instructor) -----------------------------------------------------
async def formgrader_action(page, assignment: str, column: str, timeout_ms: int = PATIENCE_MS
                            ) -> str:
    """Press the formgrader's ``column`` link (release, collect, release-feedback) on the
    assignment's row of Manage Assignments; the text of the success window it opens (an
    error window fails)."""
    await page.goto(page.url.split("/formgrader")[0] + "/formgrader/manage_assignments")
    row = page.locator("tr", has_text=assignment).first
    await row.locator(f"td.{column} a").click(timeout=timeout_ms)
    modal = page.locator("#success-modal, #error-modal").first
    await modal.wait_for(timeout=timeout_ms)
    text = await modal.inner_text()
    assert await page.locator("#success-modal").count(), text
    return text


class Stopwatch:
    """Named stages and how long each took; printed as they end."""

    def __init__(self, title: str):
        self.title, self.times, self.t0 = title, {}, time.monotonic()

    def stage(self, name: str, start: float) -> None:
        self.times[name] = time.monotonic() - start
        print(f"  [{self.title}] {name}: {self.times[name]:.1f} s", flush=True)

    def summary(self) -> str:
        rows = "\n".join(f"    {k:<52} {v:6.1f} s" for k, v in self.times.items())
        return f"{self.title}, stage by stage:\n{rows}\n    {'total':<52} " \
               f"{time.monotonic() - self.t0:6.1f} s"


async def append_and_run(page, panel, code: str):
    """Add a code cell at the end of the open notebook, run it, return its cell locator."""
    index = await page.evaluate("""async code => { const app = window.jupyterapp;
        const nb = app.shell.currentWidget.content;
        nb.activeCellIndex = nb.widgets.length - 1;
        await app.commands.execute('notebook:insert-cell-below');
        nb.activeCell.model.sharedModel.setSource(code);
        await app.commands.execute('notebook:run-cell'); return nb.activeCellIndex; }""", code)
    return panel.locator(".jp-Cell").nth(index)
