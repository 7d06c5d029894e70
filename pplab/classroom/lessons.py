"""Hand the lessons to a student: ``python -m pplab.classroom.lessons SOURCE DEST``.

Every lesson in SOURCE that DEST lacks is copied in; a lesson DEST already has is left
exactly as it is, whatever the student did to it (an edit, a rename, a link). New lessons
the instructor adds later arrive at the student's next start. The hub runs this as the
student, in their home, before each start of their JupyterLab (``hub.before_spawn``).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def hand_out(source: Path, dest: Path) -> tuple[list[str], list[str]]:
    """``(copied, kept)``: lesson names copied now, and those the student already had."""
    dest.mkdir(parents=True, exist_ok=True)
    copied, kept = [], []
    for lesson in sorted(source.glob("*.ipynb")):
        target = dest / lesson.name
        try:
            # O_EXCL: never through a name that exists, a dangling link included
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            kept.append(lesson.name)
            continue
        with os.fdopen(fd, "wb") as out, open(lesson, "rb") as src:
            shutil.copyfileobj(src, out)
        copied.append(lesson.name)
    return copied, kept


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m pplab.classroom.lessons SOURCE DEST", file=sys.stderr)
        return 2
    copied, kept = hand_out(Path(argv[0]), Path(argv[1]))
    print(f"{len(copied)} copied ({', '.join(copied) or 'none'}), {len(kept)} kept")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
