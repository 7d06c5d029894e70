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
import socket
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


#: where a Python every account can run is commonly installed (Debian's, a make install's)
SHARED_PYTHONS = ("/usr/bin", "/usr/local/bin", "/opt/python/bin")


def shared_python(version: str) -> str | None:
    """A Python ``version`` (e.g. "3.11") every account can run, if this machine has one."""
    for folder in SHARED_PYTHONS:
        python = Path(folder) / f"python{version}"
        if python.exists() and unreadable(python) is None:
            return str(python)
    return None


def check_reachable(s: Settings) -> None:
    """The grader's formgrader and every student's JupyterLab run from the shared
    environment and read the lessons: refuse, saying exactly what to do, where other
    accounts cannot reach them. A virtual environment's ``python`` is a link to the
    interpreter it was made from, so one made from a Python under ``/root`` (pyenv) is out
    of their reach however open the environment's own folder is."""
    python = os.path.realpath(f"{s.bin}/python")
    blocked = unreadable(Path(python))
    if blocked:
        version = ".".join(map(str, sys.version_info[:2]))
        shared = shared_python(version)
        clone = Path(s.venv).parent
        fix = (f"cd {clone} && rm -rf {Path(s.venv).name} && make .venv/.installed "
               f"PYTHON={shared}" if shared else
               f"install Python {version} where every account can run it (apt-get install "
               f"python{version}), then in {clone}: rm -rf {Path(s.venv).name} && make "
               f".venv/.installed PYTHON=/usr/bin/python{version}")
        raise RuntimeError(f"the grader and the students cannot run {python}: {blocked} is "
                           "closed to other accounts, and the environment's python is a link "
                           f"to it. Make the environment from a Python they can run: {fix}; "
                           "then run init again")
    for what, path in (("the environment", s.venv), ("the lessons", s.lessons)):
        blocked = unreadable(Path(path))
        if blocked:
            raise RuntimeError(f"the grader and the students cannot reach {what} {path}: "
                               f"{blocked} is closed to other accounts. Clone the course where "
                               "every account can read it (e.g. /srv/pplab/course), make its "
                               "environment there, and run init from it")


def init(settings: Path = SYSTEM_PATH, values: dict[str, str] | None = None,
         say=print) -> Settings:
    if os.geteuid() != 0:
        raise PermissionError("pplab classroom init makes Unix groups, the grader account and "
                              "the exchange: run it as root")
    s = write_settings(Path(settings), values or {}, say)
    check_reachable(s)
    install_kit(s, say)
    make_accounts(s, say)
    make_exchange(s, say)
    make_course(s, say)
    hide_source(s, say)
    say(f"ready: {s.course_id} for the Unix groups {s.students} (students) and "
        f"{s.instructors} (instructors: {', '.join(members(s.instructors)) or 'none yet'}); "
        f"start the hub with: pplab classroom up")
    return s


def up(settings: Path = SYSTEM_PATH, say=print, ssl_cert: str | None = None,
       ssl_key: str | None = None) -> None:
    """Start JupyterHub with the kit's configuration; it replaces this process (its logs on
    stderr, Ctrl-C or SIGTERM stops it with every JupyterLab it started). With ``ssl_cert``
    and ``ssl_key`` (PEM files) the hub serves HTTPS only, so passwords never cross the
    network in the clear."""
    s = Settings.read(Path(settings))
    config = Path(s.home) / "jupyterhub_config.py"
    if os.geteuid() != 0:
        raise PermissionError("the hub starts every JupyterLab as its user: run it as root")
    if not config.exists():
        raise FileNotFoundError(f"no {config}: run pplab classroom init first")
    if shutil.which("configurable-http-proxy") is None:
        raise FileNotFoundError("JupyterHub's proxy is missing: npm install -g "
                                "configurable-http-proxy")
    tls = tls_args(ssl_cert, ssl_key)
    check_ports(s)
    env = dict(os.environ, PPLAB_CLASSROOM=str(s.path),
               PATH=os.pathsep.join([s.bin, os.environ.get("PATH", "/usr/bin:/bin")]))
    say(f"JupyterHub for {s.course_id} at {'https' if tls else 'http'}://{s.ip or '0.0.0.0'}:"
        f"{s.port}/ ({s.spawner} spawner, formgrader at /services/{s.course_id}/, idle "
        f"servers stopped after {s.idle_timeout} s), state in {Path(s.home) / 'state'}")
    sys.stdout.flush()
    os.chdir(Path(s.home) / "state")
    os.execve(f"{s.bin}/jupyterhub", ["jupyterhub", "-f", str(config), *tls], env)


def tls_args(cert: str | None, key: str | None) -> list[str]:
    """JupyterHub's options for HTTPS from a certificate and its key (both, or neither)."""
    if not cert and not key:
        return []
    if not (cert and key):
        raise RuntimeError("HTTPS needs both --ssl-cert and --ssl-key")
    for what, path in (("certificate", cert), ("key", key)):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no TLS {what} at {path}")
    return [f"--JupyterHub.ssl_cert={os.path.abspath(cert)}",
            f"--JupyterHub.ssl_key={os.path.abspath(key)}"]


def hub_ports(s: Settings) -> list[tuple[str, int, str, str]]:
    """(address, port, what it is, the setting that moves it) of every port the hub takes."""
    port = int(s.port)
    return [(s.ip or "0.0.0.0", port, "the hub's address", "hub.port"),
            (s.hub_ip or "127.0.0.1", port + 1, "the hub's API ([hub] port + 1)", "hub.port"),
            ("127.0.0.1", port + 2, "the proxy's API ([hub] port + 2)", "hub.port"),
            ("127.0.0.1", int(s.formgrader_port), "the formgrader", "hub.formgrader_port")]


def check_ports(s: Settings) -> None:
    """Refuse, naming the port and the setting that moves it, when another program (another
    class's hub, a test's) holds one of this hub's ports. A proxy this class's previous hub
    left running is not in the way: JupyterHub ends it (its pid file) before it starts."""
    proxy_ports = {int(s.port), int(s.port) + 2} if previous_proxy(s) else set()
    for address, port, what, key in hub_ports(s):
        if port in proxy_ports:
            continue
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((address, port))
            except OSError as e:
                raise RuntimeError(f"port {port} ({what}) on {address} is taken ({e.strerror}):"
                                   " another program, or another class's hub, listens there; "
                                   f"give this class another one (pplab classroom init --set "
                                   f"{key}=...{', at least 3 away' if key == 'hub.port' else ''}"
                                   ")") from None


def previous_proxy(s: Settings) -> bool:
    """Whether the proxy this class's last hub started still runs (its pid file)."""
    try:
        pid = int((Path(s.home) / "state" / "jupyterhub-proxy.pid").read_text().strip())
        return b"configurable-http-proxy" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
