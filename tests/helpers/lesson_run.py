"""A lesson run as a student runs it, and everything they have seen: one execution per lesson
per test session, read by every check that needs an executed lesson.

The lesson is executed as Run All does: top to bottom in a fresh kernel with an empty progress
file, no guess committed (cells tagged ``nbval-skip``, real torchrun jobs, left out). After every
cell a hidden probe records the text of every live widget (seen_probe.py). That is the page a
student sees before guessing: ``RunAll.page``, a list of ``Seen`` chunks in reading order (each
cell's source, its outputs — text, HTML, figures' text form — and the widget texts that
appeared with it). Then, in the same kernel, every question is answered in order through the
widget's own button, and what each commit shows is kept: ``RunAll.commits``. Last, every
control of every canvas is moved through its whole range (``SWEEP``) and what it found is
``RunAll.sweep``. Each cell's own outputs are ``RunAll.outputs``, for the comparison with
the saved outputs that nbval would make. A lesson that builds a run panel or imports the
runtime runs with ``pplab.runtime.run_schedule`` replaced by a refusal (``NO_LAUNCH``): no
cell and no control may start torchrun.
"""
from __future__ import annotations

import html
import json
import os
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import nbformat
from cell_tags import checked, skipped

HELPERS = Path(__file__).resolve().parent
ASK = re.compile(r'ask\("([^"]+)"\)')
TAG = re.compile(r"<[^>]+>")
PROBE_SETUP = f"import sys\nsys.path.insert(0, {str(HELPERS)!r})\nimport seen_probe as _seen"
#: before the lesson's first cell, where a run panel or the runtime is in it
NO_LAUNCH = r'''
import pplab.runtime as _rt
def _no_launch(*a, **k):
    raise AssertionError("a lesson cell or a control launched torchrun")
_rt.run_schedule = _no_launch
'''
#: after the last commit: every canvas control through its whole range, in the same kernel. A
#: canvas records any unexpected exception in ``canvas.errors`` (bad input is a message, not
#: an error); the run panels must have started no job (no thread).
SWEEP = r'''
import os as _os
import ipywidgets as _w
import pplab.canvases.base as _pw
from pplab.canvases.base import CANVASES as _C
from pplab.canvases.runs import RunPanel as _RP
# Where a canvas shows a matplotlib picture, build every figure but skip its PNG encoding
# (2-3x faster); the initial render of each canvas above went through the real display path,
# and test_widgets.py rasterises figures across the range.
_shown = []
if hasattr(_pw, "show_figure"):
    _pw.show_figure = lambda out, fig: _shown.append(fig is not None)
def _values(c):
    if isinstance(c, _w.IntSlider):
        return list(range(c.min, c.max + 1, c.step))
    if isinstance(c, _w.FloatSlider):
        n = int(round((c.max - c.min) / c.step))
        return [c.min + i * c.step for i in range(n + 1)]
    if isinstance(c, _w.Dropdown):
        return list(c.options)
    return []
_n, _escaped = 0, []
try:            # an exception a canvas lets through is reported, not raised: the run's other
    for _c in _C:                   # readers (the page, the commits) stand without the sweep
        for _name, _ctl in _c.controls.items():
            _old = _ctl.value
            for _v in _values(_ctl):
                _ctl.value = _v
                _n += 1
            _ctl.value = _old
except Exception as _e:
    _escaped.append(f"{_name} = {_v!r}: {_e!r}")
_bad = [e for _c in _C for e in _c.errors] + _escaped
_panels = [c for c in _C if isinstance(c, _RP)]
# written to a file, not printed: a stream message sent while the IOPub thread still drains
# thousands of widget updates can arrive after the cell's idle status, and nbclient then
# drops it (CI lost one that way)
with open(_os.environ["PPLAB_SWEEP_REPORT"], "w") as _f:
    print("SWEEP", len(_C), "canvases", _n, "values", sum(_shown), "figures; errors:", _bad,
          file=_f)
    print("PANELS", len(_panels), "threads", sum(p.thread is not None for p in _panels),
          "launch refused", "_no_launch" in globals(), file=_f)
'''


@dataclass(frozen=True)
class Seen:
    """One thing a student has read: where it was and its text."""
    lesson: str
    cell: int
    kind: str          # "markdown", "code", "output", "widgets"
    text: str

    @property
    def where(self) -> str:
        return f"lesson {self.lesson} cell {self.cell} ({self.kind})"


def asked(cells) -> list[tuple[int, str]]:
    """(cell index, question id) for every question the lesson asks, in order."""
    return [(i, qid) for i, c in enumerate(cells) if c.cell_type == "code"
            for qid in ASK.findall(c.source)]


def _output_text(out) -> str:
    data = out.get("data", {})
    if out.get("output_type") == "error":
        return f"{out.get('ename')}: {out.get('evalue')}"
    text = out.get("text") or data.get("text/plain", "")
    if "text/html" in data and not text:
        text = html.unescape(TAG.sub(" ", data["text/html"]))
    return text if isinstance(text, str) else "".join(text)


@dataclass(frozen=True)
class Commit:
    """One committed guess: the feedback, what the question's own measurement area then
    shows, and what every other question's area shows."""
    qid: str
    cell: int
    feedback: str
    mine: tuple
    others: tuple


@dataclass(frozen=True)
class RunAll:
    lesson: str
    page: tuple          # Seen chunks after Run All, nothing committed
    commits: tuple       # Commit per question, in the lesson's order
    outputs: tuple       # each cell's outputs from this run (nbformat nodes; () for markdown)
    sweep: str           # the SWEEP report: canvases, values, errors; run panels, threads

    def seen_with_answers(self) -> list[Seen]:
        """The page with each question's feedback and measurement where it was asked: what a
        student has read by the time they reach a later question, having answered the
        earlier ones."""
        extra = [Seen(self.lesson, c.cell, "widgets", "\n".join([c.feedback, *c.mine]))
                 for c in self.commits]
        return sorted(self.page + tuple(extra), key=lambda s: s.cell)


def guards_launches(cells) -> bool:
    """Whether the lesson's run needs ``NO_LAUNCH``: a cell that is run builds a run panel
    or imports the runtime (elsewhere, importing the runtime would only add torch)."""
    code = "\n".join(c.source for c in cells if c.cell_type == "code" and not skipped(c))
    return "run_panel(" in code or "pplab.runtime" in code


def run_all(path: Path, timeout: int = 1200) -> RunAll:
    """Execute ``path`` as Run All does, commit every guess, sweep every canvas; see the
    module doc. ``timeout`` (per cell) is far beyond any cell's time on a loaded machine:
    only a hung cell reaches it."""
    from nbclient import NotebookClient
    lesson = path.name[:2]
    nb = nbformat.read(path, as_version=4)
    cells = nb.cells
    work = [nbformat.v4.new_code_cell(PROBE_SETUP)]
    if guards_launches(cells):
        work.append(nbformat.v4.new_code_cell(NO_LAUNCH))
    place = {}                                  # our cell index -> index in ``work``
    for i, cell in enumerate(cells):
        run = cell.copy()
        if skipped(run):
            run.source = ""
        place[i] = len(work)
        work.append(run)
        work.append(nbformat.v4.new_code_cell(f"_seen.snapshot({i})"))
    work.append(nbformat.v4.new_code_cell(f"_seen.commit_all({asked(cells)!r})"))
    work.append(nbformat.v4.new_code_cell(SWEEP))
    nb.cells = work
    with tempfile.TemporaryDirectory(prefix="pplab-seen-") as tmp:
        log = Path(tmp) / "seen.jsonl"
        report = Path(tmp) / "sweep.txt"
        env = {"PPLAB_SEEN_LOG": str(log), "PPLAB_PROGRESS": str(Path(tmp) / "progress.json"),
               "PPLAB_SWEEP_REPORT": str(report)}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)                  # the kernel inherits them
        try:
            NotebookClient(nb, kernel_name="python3", timeout=timeout,
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        entries = [json.loads(line) for line in log.read_text().splitlines()]
        sweep = report.read_text()
    snaps = [e for e in entries if "texts" in e]
    commits = tuple(Commit(e["commit"], e["cell"], e["feedback"], tuple(e["mine"]),
                           tuple(e["others"])) for e in entries if "commit" in e)
    seen, shown = [], set()
    widget_texts = {s["cell"]: s["texts"] for s in snaps}
    for i, cell in enumerate(cells):
        seen.append(Seen(lesson, i, "markdown" if cell.cell_type == "markdown" else "code",
                         cell.source))
        if cell.cell_type == "code":
            for out in work[place[i]].get("outputs", []):
                seen.append(Seen(lesson, i, "output", _output_text(out)))
        new = [t for t in widget_texts.get(i, []) if t not in shown]
        shown.update(new)
        if new:
            seen.append(Seen(lesson, i, "widgets", "\n".join(new)))
    outputs = tuple(tuple(work[place[i]].get("outputs", [])) if cell.cell_type == "code" else ()
                    for i, cell in enumerate(cells))
    return RunAll(lesson, tuple(seen), commits, outputs, sweep)


@lru_cache(maxsize=None)
def measured(qid: str) -> str:
    """``measurement_text(qid)``, once per test session: a reveal recomputes its figures (some
    train a tiny model with torch), and the reveal's own check, the page checks and the
    wording checks all read the same text."""
    from pplab.course.reveals import measurement_text
    return measurement_text(qid)


_RUNS: dict = {}


def lesson_run(path: Path) -> RunAll:
    """``run_all(path)``, once per test session: every check of an executed lesson reads this
    run (the page and reveal checks, the leak search, the canvas sweep, the saved outputs).
    A run that fails fails each of them with its error, without running the lesson again."""
    path = Path(path).resolve()
    if path not in _RUNS:
        try:
            _RUNS[path] = run_all(path)
        except Exception as e:                  # kept: each later reader re-raises it
            _RUNS[path] = e
    if isinstance(_RUNS[path], Exception):
        raise _RUNS[path]
    return _RUNS[path]
