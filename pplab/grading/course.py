"""nbgrader course directories: the release (generate_assignment) and the scratch course
a class is graded in (:mod:`.classroom`, :mod:`.job`).

nbgrader runs ``alembic`` as a program, so every call gets this interpreter's bin folder on
PATH.
"""
from __future__ import annotations

import filecmp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


def nbgrader_env(seed: int | None = None) -> dict:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if seed is not None:
        env["PPLAB_GRADE_SEED"] = str(seed)
    return env


def assignments(source: Path) -> list[str]:
    """Assignment names: the folders of the source directory that hold a notebook."""
    return sorted(p.name for p in source.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def _api(root: Path):
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config
    config = Config()
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    config.CourseDirectory.source_directory = "source"
    config.CourseDirectory.release_directory = "release"
    config.CourseDirectory.submitted_directory = "submitted"
    return NbGraderAPI(config=config)


def scratch_course(source: Path, root: Path) -> list[str]:
    """Copy ``source`` into a course at ``root`` and generate every assignment (which also
    records its graded cells in the gradebook); return the assignment names."""
    shutil.copytree(source, root / "source", ignore=shutil.ignore_patterns(".ipynb_*"))
    os.environ["PATH"] = nbgrader_env()["PATH"]
    api = _api(root)
    names = assignments(root / "source")
    for name in names:
        result = api.generate_assignment(name, force=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_assignment {name} failed: "
                               f"{result.get('error') or result.get('log')}")
    return names


def release_changes(source: Path, release: Path, write: bool) -> list[Path]:
    """Release files that differ from what nbgrader generates now (written when ``write``)."""
    with tempfile.TemporaryDirectory(prefix="pplab-release-") as tmp:
        scratch_course(source, Path(tmp))
        fresh = Path(tmp) / "release"
        new = {p.relative_to(fresh) for p in fresh.rglob("*.ipynb")}
        old = {p.relative_to(release) for p in release.rglob("*.ipynb")} if release.exists() \
            else set()
        changed = sorted(p for p in new | old if p not in new or p not in old
                         or not filecmp.cmp(fresh / p, release / p, shallow=False))
        if write and changed:
            shutil.rmtree(release, ignore_errors=True)
            shutil.copytree(fresh, release)
    return [release / p for p in changed]
