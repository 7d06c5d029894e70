#!/usr/bin/env python
"""Release the exercises with nbgrader, and execute lesson notebooks for commit.

``solutions/<assignment>/<assignment>.ipynb`` are nbgrader's source notebooks (solution
regions, autograded test cells with points and hidden tests). ``exercises/`` is the student
release, written by nbgrader's ``generate_assignment`` in a scratch course directory (so no
gradebook is left in the repository).

Usage (from the repository root)::

    .venv/bin/python tools/build_exercises.py            # regenerate exercises/
    .venv/bin/python tools/build_exercises.py --check    # exit 1 if the release is stale
    .venv/bin/python tools/build_exercises.py --lessons  # execute notebooks/*.ipynb
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pplab.grading.course import release_changes  # noqa: E402


def execute_lesson(path: Path, timeout: int = 300) -> None:
    """Execute a lesson notebook in its own folder; keep only the outputs of cells tagged
    ``nbval-check-output`` (other cells are saved unexecuted: nbval does not compare them)."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    skipped = {}
    def tagged(cell, tag):
        return cell.cell_type == "code" and tag in cell.metadata.get("tags", [])
    for i, cell in enumerate(nb.cells):     # never run nbval-skip cells (real torchrun jobs)
        if tagged(cell, "nbval-skip"):
            skipped[i], cell.source = cell.source, ""
    NotebookClient(nb, kernel_name="python3", timeout=timeout,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    n = 0
    for i, cell in enumerate(nb.cells):
        if i in skipped:
            cell.source = skipped[i]
        if cell.cell_type != "code":
            continue
        cell.metadata = nbformat.from_dict({k: v for k, v in cell.metadata.items()
                                            if k == "tags"})
        if not tagged(cell, "nbval-check-output"):
            cell.outputs, cell.execution_count = [], None
            continue
        n += 1   # renumber kept cells 1, 2, ... so re-running does not churn
        cell.execution_count = n
        for out in cell.outputs:
            if out.get("output_type") == "execute_result":
                out["execution_count"] = n
    nb.metadata.pop("widgets", None)      # nbclient stores the canvases' widget state here
    path.write_text(nbformat.writes(nb) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="report a stale release, write nothing")
    ap.add_argument("--lessons", nargs="*", metavar="NOTEBOOK",
                    help="execute these lesson notebooks (default: notebooks/*.ipynb)")
    args = ap.parse_args(argv)
    if args.lessons is not None:
        paths = [Path(p) for p in args.lessons] or sorted((ROOT / "notebooks").glob("*.ipynb"))
        for p in paths:
            execute_lesson(p.resolve())
            print(f"executed {p}")
        return 0
    changed = release_changes(ROOT / "solutions", ROOT / "exercises", write=not args.check)
    for p in changed:
        print(("stale " if args.check else "wrote ") + str(p))
    if args.check and changed:
        print("the release is stale: run tools/build_exercises.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
