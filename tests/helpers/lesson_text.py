"""A lesson's words as written: its notebook's cells and the measurements its questions reveal
(kept beside the questions in pplab/course/bank/lNN.py). Checks that a corrected statement is
taught, or a wrong one is gone, read both: the text moved into a reveal is still the lesson's."""
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("[01][0-9]_*.ipynb"))}


def lesson_text(lesson: str) -> str:
    cells = nbformat.read(NOTEBOOKS[lesson], as_version=4).cells
    bank = ROOT / "pplab" / "course" / "bank" / f"l{lesson}.py"
    reveals = bank.read_text() if bank.exists() else ""
    return "\n".join(c.source for c in cells) + "\n" + reveals
