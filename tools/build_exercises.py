#!/usr/bin/env python
"""Build exercise notebooks from their solutions, and execute lesson notebooks for commit.

One source per exercise: ``solutions/NN_name.ipynb``. Inside its code cells, the parts a
student must write are fenced::

    ### BEGIN SOLUTION
    return (P - 1) / M
    ### END SOLUTION

``exercises/NN_name.ipynb`` is generated from it with each fenced block replaced by
``raise NotImplementedError("...")`` at the same indentation (so function stubs still
define, and the grader cells fail until the student writes the code). Both notebooks are
written normalised — outputs cleared, stable cell ids, fixed metadata — so regenerating
gives byte-identical files and a test can prove the committed files have not drifted.

Usage (from the repository root)::

    .venv/bin/python tools/build_exercises.py            # regenerate exercises/ (and normalise solutions/)
    .venv/bin/python tools/build_exercises.py --check    # exit 1 if anything would change
    .venv/bin/python tools/build_exercises.py --lessons  # execute notebooks/*.ipynb, keep checked outputs
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("your code here")'
CHECK_MARK = "# NBVAL_CHECK_OUTPUT"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def normalise(nb, keep_outputs=lambda cell: False):
    """Stable ids, fixed metadata; outputs kept only where ``keep_outputs(cell)``."""
    nb.nbformat, nb.nbformat_minor = 4, 5
    nb.metadata = nbformat.from_dict({"kernelspec": KERNELSPEC,
                                      "language_info": {"name": "python"}})
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:02d}"
        meta = {k: v for k, v in cell.get("metadata", {}).items() if k == "tags"}
        cell.metadata = nbformat.from_dict(meta)
        if cell.cell_type == "code":
            if keep_outputs(cell):
                pass
            else:
                cell.outputs = []
                cell.execution_count = None
        else:
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
    return nb


def dumps(nb) -> str:
    return nbformat.writes(nb) + "\n"


def strip_solutions(source: str) -> str:
    """Replace every fenced block by a NotImplementedError stub at the fence's indentation."""
    out, inside = [], False
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped.startswith(BEGIN):
            if inside:
                raise ValueError("nested ### BEGIN SOLUTION")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.append(indent + STUB)
        elif stripped.startswith(END):
            if not inside:
                raise ValueError("### END SOLUTION without BEGIN")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("### BEGIN SOLUTION without END")
    return "\n".join(out)


def exercise_from_solution(sol):
    ex = nbformat.from_dict(nbformat.v4.new_notebook())
    ex.cells = []
    for cell in sol.cells:
        c = nbformat.from_dict(dict(cell))
        if c.cell_type == "code":
            c.source = strip_solutions(c.source)
        elif c.cell_type == "markdown":
            c.source = c.source.replace("(solution)", "(exercise)")
        ex.cells.append(c)
    return normalise(ex)


def build(check: bool = False, root: Path = ROOT) -> list[Path]:
    """Write (or, with ``check``, compare) every solution and its exercise; return paths that
    changed (or would change)."""
    changed = []
    for sol_path in sorted((root / "solutions").glob("*.ipynb")):
        sol = normalise(nbformat.read(sol_path, as_version=4))
        ex = exercise_from_solution(sol)
        for path, nb in ((sol_path, sol), (root / "exercises" / sol_path.name, ex)):
            text = dumps(nb)
            if not path.exists() or path.read_text() != text:
                changed.append(path)
                if not check:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
    return changed


def execute_lesson(path: Path, timeout: int = 300) -> None:
    """Execute a lesson notebook in its own folder; keep only ``# NBVAL_CHECK_OUTPUT`` outputs.

    Other cells are saved unexecuted (nbval does not compare unexecuted cells), which keeps
    figures and widget state out of git and the notebooks small and deterministic.
    """
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    skipped = {}
    for i, cell in enumerate(nb.cells):     # never run NBVAL_SKIP cells (e.g. real torchrun jobs)
        if cell.cell_type == "code" and cell.source.lstrip().startswith("# NBVAL_SKIP"):
            skipped[i], cell.source = cell.source, ""
    NotebookClient(nb, kernel_name="python3", timeout=timeout,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    for i, src in skipped.items():
        nb.cells[i].source = src
    keep = lambda cell: cell.source.lstrip().startswith(CHECK_MARK)
    normalise(nb, keep)
    # renumber the kept cells 1, 2, ... so re-running does not churn execution counts
    n = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.execution_count is not None:
            n += 1
            cell.execution_count = n
            for out in cell.outputs:
                if out.get("output_type") == "execute_result":
                    out["execution_count"] = n
    path.write_text(dumps(nb))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="report drift, write nothing")
    ap.add_argument("--lessons", nargs="*", metavar="NOTEBOOK",
                    help="execute these lesson notebooks (default: notebooks/*.ipynb)")
    args = ap.parse_args(argv)
    if args.lessons is not None:
        paths = [Path(p) for p in args.lessons] or sorted((ROOT / "notebooks").glob("*.ipynb"))
        for p in paths:
            execute_lesson(p.resolve())
            print(f"executed {p}")
        return 0
    changed = build(check=args.check)
    for p in changed:
        print(("would change " if args.check else "wrote ") + str(p.relative_to(ROOT)))
    if args.check and changed:
        print("exercises are out of date: run tools/build_exercises.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
