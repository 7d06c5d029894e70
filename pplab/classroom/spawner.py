"""The spawner of the kit's shared server: JupyterHub's LocalProcessSpawner with each
JupyterLab in a cgroup of its own, limited as the class's settings file says.

The server and everything it starts (kernels, runs, terminals) share the class's ``[hub]
server_memory``, ``server_cpus`` (a CPU quota) and ``server_processes`` (tasks: processes
and threads), so one student's runaway code meets its own limits, never a classmate's. The
kernel enforces them from outside the student's processes (``pplab/grading/cgroups.py``:
cgroup v2, else v1). Where no cgroup can be had the server does not start, and the hub's
log and the student's spawn page say why.
"""
from __future__ import annotations

import os
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.traitlets import ByteSpecification

from ..grading import cgroups
from .settings import Settings


def server_limits(s: Settings) -> dict:
    """The class's limits as :func:`cgroups.make` takes them."""
    return {"processes": int(s.server_processes),
            "memory": ByteSpecification().validate(None, s.server_memory),
            "cpus": float(s.server_cpus)}


class LimitedSpawner(LocalProcessSpawner):
    """LocalProcessSpawner whose server joins its own cgroup before it becomes the user."""

    group: cgroups.Group | None = None

    async def start(self):
        try:
            self.group = cgroups.make(**server_limits(Settings.load()),
                                      prefix=f"pplab-server-{self.user.name}-")
        except cgroups.Unavailable as e:
            raise RuntimeError(f"the class's limits cannot be set here, so no server "
                               f"starts: {e}") from None
        try:
            return await super().start()
        except BaseException:
            self.close_group()
            raise

    def make_preexec_fn(self, name):
        """Join the group while still root, then become the user (JupyterHub's own step)."""
        become, group = super().make_preexec_fn(name), self.group

        def preexec():
            group.add(os.getpid())
            become()
        return preexec

    async def stop(self, now=False):
        """The server as JupyterHub stops it, then whatever it left (kernels, children)."""
        try:
            await super().stop(now)
        finally:
            self.close_group()

    def close_group(self) -> None:
        if self.group is not None:
            left = self.group.close()
            if left:
                self.log.warning("cgroup folders of %s left: %s", self.user.name, left)
            self.group = None

    # a hub restarted while servers run (cleanup_servers off) still finds their groups
    def get_state(self):
        state = super().get_state()
        if self.group is not None:
            state["cgroup"] = {"version": self.group.version,
                               "dirs": {c: str(d) for c, d in self.group.dirs.items()}}
        return state

    def load_state(self, state):
        super().load_state(state)
        saved = state.get("cgroup")
        if saved:
            self.group = cgroups.Group(saved["version"],
                                       {c: Path(d) for c, d in saved["dirs"].items()})
