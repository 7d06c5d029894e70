"""A lesson run as a student runs it, and everything they have seen.

The lesson is executed as Run All does: top to bottom in a fresh kernel with an empty progress
file, no guess committed (cells tagged ``nbval-skip``, real torchrun jobs, left out as the
other notebook tests do). After every cell a hidden probe records the text of every live
widget (seen_probe.py). That is the page a student sees before guessing: ``RunAll.page``, a
list of ``Seen`` chunks in reading order (each cell's source, its outputs — text, HTML,
figures' text form — and the widget texts that appeared with it). Then, in the same kernel,
every question is answered in order through the widget's own button, and what each commit
shows is kept: ``RunAll.commits``.
"""
from __future__ import annotations

import html
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
from cell_tags import checked, skipped

HELPERS = Path(__file__).resolve().parent
ASK = re.compile(r'ask\("([^"]+)"\)')
TAG = re.compile(r"<[^>]+>")
PROBE_SETUP = f"import sys\nsys.path.insert(0, {str(HELPERS)!r})\nimport seen_probe as _seen"


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

    def seen_with_answers(self) -> list[Seen]:
        """The page with each question's feedback and measurement where it was asked: what a
        student has read by the time they reach a later question, having answered the
        earlier ones."""
        extra = [Seen(self.lesson, c.cell, "widgets", "\n".join([c.feedback, *c.mine]))
                 for c in self.commits]
        return sorted(self.page + tuple(extra), key=lambda s: s.cell)


def run_all(path: Path, timeout: int = 600) -> RunAll:
    """Execute ``path`` as Run All does, then commit every guess; see the module doc."""
    from nbclient import NotebookClient
    lesson = path.name[:2]
    nb = nbformat.read(path, as_version=4)
    cells = nb.cells
    work = [nbformat.v4.new_code_cell(PROBE_SETUP)]
    place = {}                                  # our cell index -> index in ``work``
    for i, cell in enumerate(cells):
        run = cell.copy()
        if skipped(run):
            run.source = ""
        place[i] = len(work)
        work.append(run)
        work.append(nbformat.v4.new_code_cell(f"_seen.snapshot({i})"))
    work.append(nbformat.v4.new_code_cell(f"_seen.commit_all({asked(cells)!r})"))
    nb.cells = work
    with tempfile.TemporaryDirectory(prefix="pplab-seen-") as tmp:
        log = Path(tmp) / "seen.jsonl"
        env = {"PPLAB_SEEN_LOG": str(log), "PPLAB_PROGRESS": str(Path(tmp) / "progress.json")}
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
    return RunAll(lesson, tuple(seen), commits)


_RUNS: dict = {}


def lesson_run(path: Path) -> RunAll:
    """``run_all(path)``, once per test session (the leak tests share one run per lesson)."""
    if path not in _RUNS:
        _RUNS[path] = run_all(path)
    return _RUNS[path]
