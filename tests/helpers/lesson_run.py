"""A lesson run as a student runs it, and everything they have seen at each step.

The lesson is executed top to bottom in a fresh kernel (``# NBVAL_SKIP`` cells, real torchrun
jobs, left out as the other notebook tests do). After every cell a hidden probe records the
text of every live widget (seen_probe.py); after every question the probe answers it once,
as a student commits a guess before running on, so the reveals that follow print their
answers and the question's feedback shows. The result is a list of ``Seen`` chunks in
reading order: each cell's source, its outputs (text, HTML, figures' text form) and the
widget texts that appeared with it.
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


def run_lesson(path: Path, timeout: int = 600) -> list[Seen]:
    """Execute ``path`` as a student would and return what was seen, in order."""
    from nbclient import NotebookClient
    lesson = path.name[:2]
    nb = nbformat.read(path, as_version=4)
    cells = nb.cells
    work = [nbformat.v4.new_code_cell(PROBE_SETUP)]
    place = {}                                  # our cell index -> index in ``work``
    for i, cell in enumerate(cells):
        run = cell.copy()
        if run.cell_type == "code" and run.source.lstrip().startswith("# NBVAL_SKIP"):
            run.source = ""
        place[i] = len(work)
        work.append(run)
        probe = "".join(f"_seen.answer({qid!r})\n" for qid in ASK.findall(cell.source)
                        if cell.cell_type == "code")
        work.append(nbformat.v4.new_code_cell(probe + f"_seen.snapshot({i})"))
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
        snaps = [json.loads(line) for line in log.read_text().splitlines()]
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
    return seen
