"""Where is this running? In a browser tab (JupyterLite/Pyodide) there is no torch and no
process to launch, so the cells that need a real run say so in one line instead of failing.

    from pplab.env import in_browser, local_only
    if local_only("pplab run --schedule 1f1b -P 4 -M 8"):   # prints the one line in the browser
        ...                                                  # runs only on a real machine

In a notebook, a whole cell is guarded by its first line (the magic is registered when
``pplab`` is imported inside IPython)::

    %%local_only pplab run --schedule 1f1b -P 4 -M 8
    from pplab.runtime import run_schedule
    ...
"""
from __future__ import annotations

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


def register_magic() -> None:
    """Register ``%%local_only`` when running inside IPython (never imports IPython itself)."""
    ipython_mod = sys.modules.get("IPython")
    shell = ipython_mod.get_ipython() if ipython_mod is not None else None
    if shell is not None and "local_only" not in shell.magics_manager.magics["cell"]:
        shell.register_magic_function(_local_only_magic, "cell", "local_only")


__all__ = ["in_browser", "browser_note", "local_only", "register_magic", "WHY"]
