"""Where is this running? In a browser tab (JupyterLite/Pyodide) there is no torch and no
process to launch, so the cells that need a real run say so in one line instead of failing.

    from pplab.probe.env import in_browser, local_only
    if local_only("pplab run --schedule 1f1b -P 4 -M 8"):   # prints the one line in the browser
        ...                                                  # runs only on a real machine

In the browser, once ``pplab`` is imported, any later cell that imports torch or
pplab.runtime (or runs a job ``with real_job(...)``) prints that one line instead of running; a
``# local: COMMAND`` comment in the cell names the command. A cell can also say it itself::

    %%local_only pplab run --schedule 1f1b -P 4 -M 8
    from pplab.runtime import run_schedule
    ...
"""
from __future__ import annotations

import re
import sys

WHY = "real runs need torch and processes, which a browser tab does not have"


def in_browser() -> bool:
    """True under Pyodide (JupyterLite): WebAssembly Python, no subprocesses, no torch."""
    return sys.platform == "emscripten" or "pyodide" in sys.modules


def browser_note(command: str) -> str:
    """The one line shown in place of a real run: why it is absent, and what to run locally."""
    return f"⏭ skipped in the browser: {WHY}. On your machine: {command}"


def local_only(command: str) -> bool:
    """True where real runs work; in the browser print :func:`browser_note` and return False."""
    if in_browser():
        print(browser_note(command))
        return False
    return True


def _local_only_magic(line: str, cell: str):
    """``%%local_only COMMAND``: run the cell, or in the browser print one line instead."""
    if local_only(line.strip() or "make lab (the course installed locally)"):
        from IPython import get_ipython
        get_ipython().run_cell(cell)


NEEDS_TORCH = re.compile(r"^\s*(from|import)\s+(torch|pplab\.runtime)\b|\breal_job\(", re.M)
LOCAL_COMMAND = re.compile(r"^\s*#\s*local:\s*(.+)$", re.M)


def skip_torch_cells(lines: list[str]) -> list[str]:
    """IPython input transformer (browser only): a cell that imports torch or pplab.runtime
    (or runs a job ``with real_job(...)``) becomes one printed line; ``# local: CMD`` names the
    command to run instead (default: run the lesson locally)."""
    text = "".join(lines)
    if not NEEDS_TORCH.search(text) or text.lstrip().startswith("%%local_only"):
        return lines
    found = LOCAL_COMMAND.search(text)
    command = found.group(1).strip() if found else "make lab, then run this cell"
    return [f"print({browser_note(command)!r})\n"]


def register_magic() -> None:
    """Register ``%%local_only`` when running inside IPython (never imports IPython itself),
    and in the browser the transformer that turns torch cells into one line."""
    ipython_mod = sys.modules.get("IPython")
    shell = ipython_mod.get_ipython() if ipython_mod is not None else None
    if shell is None:
        return
    if "local_only" not in shell.magics_manager.magics["cell"]:
        shell.register_magic_function(_local_only_magic, "cell", "local_only")
    if in_browser() and skip_torch_cells not in shell.input_transformers_post:
        shell.input_transformers_post.append(skip_torch_cells)


__all__ = ["in_browser", "browser_note", "local_only", "register_magic", "skip_torch_cells",
           "WHY"]
