"""One scratch folder per benchmark run, removed at the end, failures included.

torchrun writes ``torchelastic_*`` log folders into the temp dir unless told otherwise, and a
failed pplab run keeps its ``pplab-run-*`` folder for the error message to name; pointing
TMPDIR (this process's and every child's) at a folder of our own catches all of them.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile


@contextlib.contextmanager
def scratch_tmpdir(prefix: str = "pplab-bench-"):
    """TMPDIR → a fresh folder for the block, then the folder is removed and TMPDIR restored."""
    path = tempfile.mkdtemp(prefix=prefix)
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"], tempfile.tempdir = path, None
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
        tempfile.tempdir = None
        shutil.rmtree(path, ignore_errors=True)
