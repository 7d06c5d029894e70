"""Checks every subcommand makes before it does any work: the pipeline's size flags, shared
by all (-P, -M, -V mean the same everywhere), and the files it will read or write — a result
must never be lost to an output path that only fails after a long run."""
from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path

from . import UsageError

#: ``pplab simulate``'s and ``pplab run``'s pipeline when -P/-M are not given
DEFAULT_P, DEFAULT_M = 4, 8


def add_pmv(p, P: int | None = DEFAULT_P, M: int = DEFAULT_M, P_help: str = "pipeline ranks",
            V_help: str = "stages per rank (default: the schedule's: 1, or 2 for interleaved "
                          "and V shapes)", unset: bool = False) -> None:
    """-P, -M, -V with the same meaning and defaults in every subcommand (``P=None``: no -P,
    the command has its own depth flag); ``unset`` stores None so the command can tell a flag
    given from its default (which it then applies)."""
    if P is not None:
        p.add_argument("-P", type=int, default=None if unset else P,
                       help=f"{P_help} (default: {P})")
    p.add_argument("-M", type=int, default=None if unset else M,
                   help=f"microbatches per step (default: {M})")
    p.add_argument("-V", type=int, default=None, help=V_help)


def writable_file(flag: str, path: str | None) -> None:
    """``path`` can be written: its folder exists and takes a new file, it is not a folder."""
    if path is None:
        return
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; give a file name")
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: folder {folder} does not exist")
    _probe(flag, path, folder)


def writable_folder(flag: str, path: str | None) -> None:
    """``path`` is a folder that can be written, or can be made in one that exists."""
    if path is None:
        return
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{flag} {path}: is a file, not a folder")
    parent = target if target.is_dir() else target.parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: folder {parent} does not exist")
    _probe(flag, path, parent)


def _probe(flag: str, path: str, folder: Path) -> None:
    """Make and remove a scratch file there: the only test of writability that root, read-only
    mounts and /proc all answer truthfully."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".pplab-probe-"):
            pass
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot write in {folder} ({e.strerror})") from None


def readable_file(flag: str, path: str | None) -> None:
    if path is not None and not os.path.isfile(path):
        raise UsageError(f"{flag} {path}: no such file")
    if path is not None and not os.access(path, os.R_OK):
        raise UsageError(f"{flag} {path}: cannot be read")


def checkpoint_folder(flag: str, path: str | None) -> None:
    """A folder ``pplab run --save-checkpoint`` wrote: meta.json and stage-i-of-n.pt files
    (the format of ``pplab.runtime.checkpoint``)."""
    if path is None:
        return
    if not os.path.isdir(path):
        raise UsageError(f"{flag} {path}: no such folder")
    if not os.path.isfile(os.path.join(path, "meta.json")) or \
            not glob.glob(os.path.join(path, "stage-*-of-*.pt")):
        raise UsageError(f"{flag} {path}: not a pplab checkpoint (no meta.json and "
                         "stage-*-of-*.pt files; pplab run --save-checkpoint writes them)")
