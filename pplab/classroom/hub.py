"""What the kit's ``jupyterhub_config.py`` calls: who is an instructor, each JupyterLab's
environment, and the hook that runs before every start.

Three kinds of JupyterLab, each with its own Jupyter configuration folder from the kit
(``jupyter/<role>/``, ahead of the shared ``jupyter/`` on ``JUPYTER_CONFIG_PATH``):

* **student**: nbgrader's *Assignments* only (fetch, submit, feedback); its formgrader,
  Create Assignment, Validate and course list are switched off, in the page and on the server;
* **instructor**: their own JupyterLab, like a student's; they open the formgrader logged
  in, from the hub's Services menu (their lab's token cannot reach it);
* **grader**: the formgrader service, run by the grader account in the course folder.
"""
from __future__ import annotations

import asyncio
import grp
import os
import pwd

from .settings import Settings

ROLES = ("student", "instructor", "grader")
#: how long copying the lessons may take before the start goes on without them (seconds)
HANDOUT_TIMEOUT = 60


def members(group: str) -> list[str]:
    """The accounts in a Unix group: listed members and those whose primary group it is."""
    try:
        g = grp.getgrnam(group)
    except KeyError:
        return []
    primary = [p.pw_name for p in pwd.getpwall() if p.pw_gid == g.gr_gid]
    return sorted(set(g.gr_mem) | set(primary))


def role(s: Settings, user: str) -> str:
    return "instructor" if user in members(s.instructors) else "student"


def environment(s: Settings, who: str) -> dict[str, str]:
    """What every JupyterLab of this role gets: the shared environment first on PATH, the
    role's Jupyter configuration, and the class's settings (its policy and nbgrader's)."""
    config = os.path.join(s.home, "jupyter")
    return {"PATH": f"{s.bin}:/usr/local/bin:/usr/bin:/bin",
            "JUPYTER_CONFIG_PATH": os.pathsep.join([os.path.join(config, who), config]),
            "PPLAB_CLASSROOM": str(s.path)}


async def hand_out_lessons(s: Settings, user: str, log=None) -> None:
    """Copy the lessons the student lacks into ``~/<lessons_folder>``, *as the student* (a
    link they planted is their own business, never root's), within HANDOUT_TIMEOUT."""
    account = pwd.getpwnam(user)
    dest = os.path.join(account.pw_dir, s.lessons_folder)
    proc = await asyncio.create_subprocess_exec(
        f"{s.bin}/python", "-m", "pplab.classroom.lessons", s.lessons, dest,
        user=account.pw_uid, group=account.pw_gid,
        extra_groups=os.getgrouplist(user, account.pw_gid), cwd=account.pw_dir,
        env={"HOME": account.pw_dir, "PATH": f"{s.bin}:/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), HANDOUT_TIMEOUT)
    except asyncio.TimeoutError:
        proc.kill()
        out = b"timed out"
    if log:
        log.info("lessons for %s: %s", user, out.decode(errors="replace").strip())


async def before_spawn(spawner) -> None:
    """JupyterHub's pre_spawn_hook: the role's environment, then the lessons."""
    s = Settings.load()
    user = spawner.user.name
    spawner.environment = {**spawner.environment, **environment(s, role(s, user))}
    await hand_out_lessons(s, user, spawner.log)
