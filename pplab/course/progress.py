"""Which predictions and quizzes a student has done, kept in a small JSON file.

The file is ``notebooks/.pplab-progress.json`` (next to the lessons) unless the environment
variable ``PPLAB_PROGRESS`` names another. A prediction counts once it is committed; a quiz
counts once it is answered right. A file that cannot be written never stops a lesson. Entries
recorded under a question's old id (``bank.renamed()``) count for its new id.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

FILENAME = ".pplab-progress.json"


def default_path() -> Path:
    """``$PPLAB_PROGRESS``, else the lessons' folder seen from the working directory."""
    env = os.environ.get("PPLAB_PROGRESS")
    if env:
        return Path(env)
    cwd = Path.cwd()
    if cwd.name != "notebooks" and (cwd / "notebooks").is_dir():
        cwd = cwd / "notebooks"
    return cwd / FILENAME


class Progress:
    """Load, record and summarise answers; every write goes straight to the file."""

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path else default_path()
        self.answers: dict[str, dict] = {}
        try:
            data = json.loads(self.path.read_text())
            self.answers = dict(data.get("answers", {}))
        except (OSError, ValueError, AttributeError):
            self.answers = {}
        self._carry_renamed()

    def _carry_renamed(self) -> None:
        """Move entries kept under an old id to the new id, merging with any entry there
        (tries add up; right once is right)."""
        from .bank import renamed
        for old, new in renamed().items():
            entry = self.answers.pop(old, None)
            if not isinstance(entry, dict):
                continue
            merged = self.answers.setdefault(new, dict(entry, tries=0, correct=False))
            merged["tries"] = merged.get("tries", 0) + entry.get("tries", 0)
            merged["correct"] = bool(merged.get("correct")) or bool(entry.get("correct"))

    def record(self, q, ok: bool) -> str | None:
        """Note one check of question ``q``; returns a warning instead of raising."""
        entry = self.answers.setdefault(q.id, {"lesson": q.lesson, "mode": q.mode, "tries": 0,
                                                "correct": False})
        entry["tries"] += 1
        entry["correct"] = entry["correct"] or bool(ok)
        try:
            self.path.write_text(json.dumps({"version": 1, "answers": self.answers},
                                            indent=1, sort_keys=True))
        except OSError as e:
            return f"progress not saved ({e.strerror or e})"
        return None

    def done(self, q) -> bool:
        entry = self.answers.get(q.id)
        if not entry:
            return False
        return True if q.mode == "predict" else bool(entry["correct"])

    def rows(self, questions) -> list[tuple[str, int, int, int, int]]:
        """Per lesson: (lesson, predictions done, predictions, quizzes done, quizzes)."""
        table: dict[str, list[int]] = {}
        for q in questions:
            row = table.setdefault(q.lesson, [0, 0, 0, 0])
            k = 0 if q.mode == "predict" else 2
            row[k + 1] += 1
            row[k] += self.done(q)
        return [(lesson, *row) for lesson, row in sorted(table.items())]

    def text(self, questions) -> str:
        """The progress table as plain text (what the widget shows, without colour)."""
        lines = ["lesson  predictions  quizzes"]
        for lesson, pd, pn, qd, qn in self.rows(questions):
            mark = "  done" if pd == pn and qd == qn else ""
            lines.append(f"{lesson:>6}  {pd:>5}/{pn:<5}  {qd:>3}/{qn:<3}{mark}")
        return "\n".join(lines)
