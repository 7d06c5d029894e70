"""``pplab classroom init``: put a class on this machine, printing each thing it does.

Run as root, again after every edit of the settings file; a step already done is left as it
is (a kit file you edited is kept, and said so). The steps:

1. the settings file, from the kit's template with this installation's paths;
2. the kit's files into ``[hub] home``: jupyterhub_config.py and the three roles' Jupyter
   configuration (``jupyter/``);
3. the Unix groups of students and instructors;
4. nbgrader's exchange: its root root's and 1777 (anyone may make a folder in it, nobody may
   rename or remove another's), the course's folder in it made now by the grader, before a
   student could claim the name (``inbound`` write-only and sticky, ``outbound``,
   ``feedback``); a course folder someone else made is refused, never taken over;
5. the course folder in the grader's private home: the assignments' sources (answers and
   hidden tests) copied in by root, written by the grader; the source folder they came from
   made root-only; nbgrader's config; each assignment generated.
"""
from __future__ import annotations

import filecmp
import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from ..probe.policy import SYSTEM_PATH
from .hub import environment, members
from .settings import KIT, Settings, render

ROOT = Path(__file__).resolve().parents[2]
#: kit files copied into [hub] home (the template and the course's config go elsewhere)
HOME_FILES = ("jupyterhub_config.py", "jupyter")


def here_defaults() -> dict[str, str]:
    """The settings that depend on where pplab is installed: this environment and checkout."""
    return {"venv": sys.prefix, "source": str(ROOT / "solutions"),
            "lessons": str(ROOT / "notebooks")}


def write_settings(path: Path, values: dict[str, str], say) -> Settings:
    if path.exists():
        if values:
            path.write_text(render(path.read_text(), values))
            say(f"updated {path}: {', '.join(sorted(values))}")
        else:
            say(f"kept {path}")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render((KIT / "classroom.ini").read_text(), here_defaults() | values))
        say(f"wrote {path} (the class's settings and limits: edit it, then run init again)")
    os.chmod(path, 0o644)                    # every student's run panel reads the limits
    return Settings.read(path)


def copy_kit_file(src: Path, dest: Path, say) -> None:
    """Write ``dest`` unless something is there already (a file, a link: never followed,
    since init runs as root in folders other accounts may write)."""
    if os.path.lexists(dest):
        if dest.is_symlink() or not filecmp.cmp(src, dest, shallow=False):
            say(f"kept {dest}: it differs from the kit's {src}")
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as f, open(dest, "xb") as out:
        shutil.copyfileobj(f, out)
    say(f"wrote {dest}")


def install_kit(s: Settings, say) -> None:
    for name in HOME_FILES:
        src = KIT / name
        for path in sorted(src.rglob("*")) if src.is_dir() else [src]:
            if path.is_file():
                copy_kit_file(path, Path(s.home) / path.relative_to(KIT), say)
    os.chmod(s.home, 0o755)                  # every JupyterLab reads its role's config here
    state = Path(s.home) / "state"           # the hub's database and cookie secret: root's
    state.mkdir(mode=0o700, exist_ok=True)
    os.chmod(state, 0o700)


def run(cmd: list[str], say, **kw) -> None:
    say("$ " + " ".join(cmd))
    cmd = [shutil.which(cmd[0]) or cmd[0], *cmd[1:]]     # found on this PATH, not env's
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    if r.returncode:
        raise RuntimeError(f"{cmd[0]} failed: {(r.stderr or r.stdout).strip()[-500:]}")


def make_accounts(s: Settings, say) -> None:
    import grp
    for group in (s.students, s.instructors):
        try:
            grp.getgrnam(group)
        except KeyError:
            run(["groupadd", group], say)
    try:
        pwd.getpwnam(s.grader)
    except KeyError:
        run(["useradd", "--system", "--create-home", "--shell", "/bin/bash", "-K",
             "HOME_MODE=0700", s.grader], say)


#: the course's folders in the exchange, with the modes nbgrader gives them; ``inbound`` also
#: sticky, so a student can never rename or remove a classmate's submission
EXCHANGE_FOLDERS = (("", 0o755), ("outbound", 0o755), ("inbound", 0o3733), ("feedback", 0o711))


def owner(path: Path) -> str:
    uid = os.lstat(path).st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def make_exchange(s: Settings, say) -> None:
    """nbgrader's exchange root (root's, 1777: nbgrader checks only its 0777 part) and the
    course's folders in it, each the grader's with nbgrader's modes."""
    root = Path(s.exchange)
    if root.is_symlink():
        raise RuntimeError(f"the exchange {root} is a link: make it a folder")
    if not root.is_dir():
        root.mkdir(parents=True)
        say(f"made the exchange {root}")
    info = root.stat()
    if (info.st_uid, stat.S_IMODE(info.st_mode)) != (0, 0o1777):
        os.chown(root, 0, 0)
        os.chmod(root, 0o1777)
        say(f"chown root, chmod 1777 {root} (sticky: no student can rename another's folder)")
    grader = ["runuser", "-u", s.grader, "--"]
    for name, mode in EXCHANGE_FOLDERS:
        folder = root / s.course_id / name
        if not os.path.lexists(folder):
            run([*grader, "mkdir", str(folder)], say)
        if folder.is_symlink() or not folder.is_dir() or owner(folder) != s.grader:
            raise RuntimeError(f"{folder} belongs to {owner(folder)}, not {s.grader} (a "
                               "student may have made it to take the course's exchange "
                               f"over): remove it (rm -r {folder}), then run init again")
        if stat.S_IMODE(folder.stat().st_mode) != mode:
            run([*grader, "chmod", f"{mode:o}", str(folder)], say)


def make_course(s: Settings, say) -> None:
    """The grader's course folder: sources, nbgrader's config, every assignment generated.
    All of it is written *as the grader*: root never writes where that account (and the
    instructors, through the formgrader's terminal) may plant a link."""
    course, grader = Path(s.course_dir), ["runuser", "-u", s.grader, "--"]
    env = dict(os.environ, **environment(s, "grader"))
    if not os.path.lexists(course / "source"):
        run([*grader, "mkdir", "-p", str(course / "source")], say, env=env)
    if not os.path.lexists(course / "nbgrader_config.py"):
        run([*grader, "cp", str(KIT / "course" / "nbgrader_config.py"), str(course)], say,
            env=env)
    for assignment in sorted(Path(s.source).iterdir()):
        dest = course / "source" / assignment.name
        if assignment.is_dir() and not os.path.lexists(dest):
            copy_as(s.grader, assignment, course / "source", say)
    missing = [a.name for a in (course / "source").iterdir()
               if a.is_dir() and not (course / "release" / a.name).exists()]
    if missing:
        run([*grader, f"{s.bin}/nbgrader", "generate_assignment", "*"], say, cwd=course,
            env=env)


def copy_as(user: str, folder: Path, dest: Path, say) -> None:
    """Copy ``folder`` into ``dest``: read by root (the source may be root-only), written by
    ``user`` (root never writes where that account could plant a link)."""
    say(f"$ tar -C {folder.parent} -c {folder.name} | runuser -u {user} -- tar -C {dest} -x")
    reader = subprocess.Popen(["tar", "-C", str(folder.parent), "-c", folder.name],
                              stdout=subprocess.PIPE)
    writer = subprocess.run(["runuser", "-u", user, "--", "tar", "-C", str(dest), "-x",
                             "--no-same-owner"], stdin=reader.stdout, capture_output=True,
                            text=True, timeout=600)
    reader.stdout.close()
    if reader.wait(timeout=600) or writer.returncode:
        raise RuntimeError(f"copying {folder} failed: {writer.stderr.strip()[-500:]}")


def hide_source(s: Settings, say) -> None:
    """The answers and hidden tests only where students cannot read them: the course's copy
    is in the grader's private home, and the folder it came from is made root-only."""
    source = Path(s.source)
    if stat.S_IMODE(source.stat().st_mode) & 0o077:
        os.chmod(source, 0o700)
        say(f"chmod 700 {source} (the answers: students must not read them)")


def unreadable(path: Path) -> str | None:
    """The first folder on the way to ``path`` other accounts cannot pass through, if any."""
    for folder in [*reversed(path.resolve().parents), path.resolve()]:
        if folder.is_dir() and not folder.stat().st_mode & stat.S_IXOTH:
            return str(folder)
    return None


def warn_unreachable(s: Settings, say) -> None:
    """Students' JupyterLab runs from the shared environment and reads the lessons: say so
    where other accounts cannot reach them."""
    python = os.path.realpath(f"{s.bin}/python")          # a venv's python links elsewhere
    for what in (python, s.venv, s.lessons):
        blocked = unreadable(Path(what))
        if blocked:
            say(f"warning: students cannot reach {what}: {blocked} is closed to others "
                f"(chmod o+x {blocked}, or install the course elsewhere)")


def init(settings: Path = SYSTEM_PATH, values: dict[str, str] | None = None,
         say=print) -> Settings:
    if os.geteuid() != 0:
        raise PermissionError("pplab classroom init makes Unix groups, the grader account and "
                              "the exchange: run it as root")
    s = write_settings(Path(settings), values or {}, say)
    install_kit(s, say)
    make_accounts(s, say)
    make_exchange(s, say)
    warn_unreachable(s, say)
    make_course(s, say)
    hide_source(s, say)
    say(f"ready: {s.course_id} for the Unix groups {s.students} (students) and "
        f"{s.instructors} (instructors: {', '.join(members(s.instructors)) or 'none yet'}); "
        f"start the hub with: pplab classroom up")
    return s


def up(settings: Path = SYSTEM_PATH, say=print) -> None:
    """Start JupyterHub with the kit's configuration; it replaces this process (its logs on
    stderr, Ctrl-C or SIGTERM stops it with every JupyterLab it started)."""
    s = Settings.read(Path(settings))
    config = Path(s.home) / "jupyterhub_config.py"
    if os.geteuid() != 0:
        raise PermissionError("the hub starts every JupyterLab as its user: run it as root")
    if not config.exists():
        raise FileNotFoundError(f"no {config}: run pplab classroom init first")
    if shutil.which("configurable-http-proxy") is None:
        raise FileNotFoundError("JupyterHub's proxy is missing: npm install -g "
                                "configurable-http-proxy")
    env = dict(os.environ, PPLAB_CLASSROOM=str(s.path),
               PATH=os.pathsep.join([s.bin, os.environ.get("PATH", "/usr/bin:/bin")]))
    say(f"JupyterHub for {s.course_id} at http://{s.ip or '0.0.0.0'}:{s.port}/ "
        f"({s.spawner} spawner, formgrader at /services/{s.course_id}/, idle servers stopped "
        f"after {s.idle_timeout} s), state in {Path(s.home) / 'state'}")
    sys.stdout.flush()
    os.chdir(Path(s.home) / "state")
    os.execve(f"{s.bin}/jupyterhub", ["jupyterhub", "-f", str(config)], env)
