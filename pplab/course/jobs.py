"""A lesson cell that starts real processes (torchrun) ends in one line where they cannot run.

Under Run All a student's machine may lack what a real job needs (a second core, a free
port, torch itself in a browser tab). A traceback there would stop the lesson at that
cell; the line says what failed and how to run the job elsewhere, and the lesson goes on.
"""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def real_job(how: str):
    """Run the ``with`` body; if it raises, print one line: the cause and ``how`` to run it.

    ``how`` is the instruction for running the job where it can (a terminal command)."""
    try:
        yield
    except Exception as e:       # the job's own failure, whatever it is: one line, not a stop
        cause = (str(e).strip().splitlines() or [""])[0][:200]
        print(f"The real run could not run here ({type(e).__name__}: {cause}). {how}")
