"""Read a submitted folder without ever following a symbolic link.

A student controls what lies under SUBMITTED_DIR: a folder or notebook there that is a link
(to ``solutions/``, to a classmate's folder, to ``/etc``) would point the trusted grader at a
file the student could not otherwise read. So every component of a path is opened on its
own, relative to its parent's descriptor, with ``O_NOFOLLOW``: a link anywhere, even one
swapped in after the folder was listed, is refused with :class:`LinkRefused`, which names it.
SUBMITTED_DIR's own components are opened the same way, from ``/``; ``pplab grade`` resolves
the instructor's own argument once (:class:`.classroom.Options`), so only a link that appears
afterwards is refused there.
"""
from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
LINK = "a symbolic link"


class LinkRefused(OSError):
    """A component of a submitted path is a symbolic link (or not what it must be)."""

    def __init__(self, shown: str, what: str = LINK):
        why = (": links in a submission are refused (hand in the folder and notebook "
               "files themselves)") if what == LINK else ""
        super().__init__(f"{shown} is {what}{why}")
        self.shown = shown

    def __str__(self) -> str:
        return self.args[0]


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{name!r} is not a single path component")


def open_at(dir_fd: int, name: str, shown: str, directory: bool = True) -> int:
    """Open ``name`` in ``dir_fd`` without following a link; a link raises LinkRefused."""
    _check_name(name)
    try:
        return os.open(name, DIR_FLAGS if directory else FILE_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if _is_link(name, dir_fd):
            raise LinkRefused(shown) from None
        if directory and isinstance(e, NotADirectoryError):
            raise LinkRefused(shown, "not a folder") from None
        raise


def open_root(root: Path) -> int:
    """A descriptor on the absolute folder ``root``, walked from ``/`` one component at a
    time without following links."""
    root = Path(os.path.abspath(root))
    fd = os.open("/", DIR_FLAGS)
    walked = Path("/")
    try:
        for name in root.parts[1:]:
            walked = walked / name
            fd = _replace(fd, open_at(fd, name, str(walked)))
        return fd
    except BaseException:
        os.close(fd)
        raise


def _replace(old: int, new: int) -> int:
    os.close(old)
    return new


@contextmanager
def folder(root: Path, *names: str):
    """A descriptor on ``root/names...``; no component is followed if it is a link. Raises
    LinkRefused naming the first link (relative to ``root`` when it is below it), or
    FileNotFoundError when a component is missing."""
    fd = open_root(root)
    try:
        for i, name in enumerate(names):
            fd = _replace(fd, open_at(fd, name, "/".join(names[:i + 1])))
        yield fd
    finally:
        os.close(fd)


def entries(dir_fd: int) -> list[os.DirEntry]:
    """The entries of an open folder (sorted by name), not followed."""
    with os.scandir(dir_fd) as it:
        return sorted(it, key=lambda e: e.name)


def read_file(dir_fd: int, name: str, shown: str, limit: int) -> bytes:
    """A regular file's bytes (at most ``limit + 1``, so the caller sees it was larger);
    LinkRefused for a link or anything that is not a regular file."""
    fd = open_at(dir_fd, name, shown, directory=False)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise LinkRefused(shown, "not a regular file")
        return f.read(limit + 1)


def subfolders(root: Path) -> list[str]:
    """Names of the entries of ``root`` that are folders or links (a link is listed so that
    grading can refuse it with its name, instead of skipping it silently)."""
    with folder(root) as fd:
        return [e.name for e in entries(fd)
                if e.is_symlink() or e.is_dir(follow_symlinks=False)]


def present(root: Path, *names: str) -> bool:
    """Whether ``root/names...`` was handed in: a folder, or a link there (refused later,
    with its reason)."""
    try:
        with folder(root, *names):
            return True
    except LinkRefused:
        return True
    except OSError:
        return False
