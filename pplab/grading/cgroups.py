"""Each sandbox's own control group: its processes, memory and CPU counted apart.

Without one, the process limit is per uid (``RLIMIT_NPROC``): as an ordinary user every
sandbox shares one count, so one student's fork bomb can make a classmate's run fail. A
cgroup per sandbox caps its tasks (``pids``), its memory (all its processes together,
tmpfs pages included) and gives it an equal CPU weight, so no sandbox can starve another.

Where the group comes from, in order:

* cgroup v2 (the unified hierarchy, ``/sys/fs/cgroup`` or ``/sys/fs/cgroup/unified``), under
  this process's own cgroup when that offers ``pids`` and ``memory``: as root, or as an
  ordinary user in a delegated subtree (``systemd-run --user --scope -p Delegate=yes ...``).
  If our own cgroup holds processes, v2 forbids enabling controllers for its children, so
  this process first moves itself into a leaf (``pplab-grader``) beside the sandboxes; a
  process in that leaf (the grading workers it starts) makes its sandboxes beside it too.
* cgroup v1, one folder per controller (``<root>/pids``, ``<root>/memory``, ``<root>/cpu``)
  under this process's own cgroup of that controller, where it may make folders.
* none: :func:`unavailable` says why, and the sandbox falls back to per-process rlimits.

``PPLAB_CGROUP_ROOT`` points the module at another root (tests use an empty folder).
"""
from __future__ import annotations

import errno
import itertools
import os
import signal
import time
from pathlib import Path, PurePosixPath

ROOT_ENV = "PPLAB_CGROUP_ROOT"
REQUIRED = ("pids", "memory")       # without these a group promises nothing
OPTIONAL = ("cpu",)                 # an equal CPU weight (and a quota when asked)
PREFIX = "pplab-sandbox-"
LEAF = "pplab-grader"               # where this process goes when v2 needs its cgroup empty
CPU_PERIOD_US = 100_000
KILL_WAIT = 10.0                    # seconds to empty and remove a group
_names = itertools.count()


class Unavailable(OSError):
    """No cgroup can be made here; the message says why in a few words."""


def top() -> Path:
    return Path(os.environ.get(ROOT_ENV) or "/sys/fs/cgroup")


def own_paths(text: str | None = None) -> dict[str, str]:
    """This process's cgroup per controller, from /proc/self/cgroup; "" is the v2 one."""
    if text is None:
        text = Path("/proc/self/cgroup").read_text()
    out = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            out[name] = path
    return out


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


class Group:
    """One sandbox's cgroup: one folder in v2, one folder per controller in v1."""

    def __init__(self, version: int, dirs: dict[str, Path]):
        self.version, self.dirs = version, dirs

    @property
    def folders(self) -> list[Path]:
        return sorted(set(self.dirs.values()))

    def add(self, pid: int) -> None:
        """Move ``pid`` (and so all it will start) into the group, in every folder."""
        for folder in self.folders:
            _write(folder / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        if "pids" not in self.dirs:         # a group closed half-made
            return []
        try:
            return [int(p) for p in _read(self.dirs["pids"] / "cgroup.procs").split()]
        except (OSError, ValueError):
            return []

    def read(self, controller: str, name: str) -> str:
        """One of the group's files, e.g. ``read("pids", "pids.peak")``."""
        return _read(self.dirs[controller] / name)

    def close(self) -> list[Path]:
        """Kill what is left in the group, then remove it; the folders that would not go
        (normally none)."""
        deadline = time.monotonic() + KILL_WAIT
        self._kill_all(deadline)
        left = []
        for folder in self.folders:
            if not _rmdir(folder, deadline):
                left.append(folder)
        return left

    def _kill_all(self, deadline: float) -> None:
        kill_file = self.dirs.get("pids", Path("/nonexistent")) / "cgroup.kill"
        if self.version == 2 and kill_file.exists():        # Linux 5.14 on
            try:
                _write(kill_file, "1")
            except OSError:
                pass
        while time.monotonic() < deadline:
            pids = self.pids()
            if not pids:
                return
            for pid in pids:        # a forking task may add more: loop until none is left
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)


def _rmdir(folder: Path, deadline: float) -> bool:
    while True:
        try:
            folder.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def make(processes: int, memory: int, cpus: float | None = None,
         prefix: str = PREFIX) -> Group:
    """A new, empty group with these limits (``cpus``: a quota in CPUs, None for only an
    equal weight), named ``<prefix><this pid>-<n>``. Raises :class:`Unavailable` with the
    reason when none can be made."""
    name = f"{prefix}{os.getpid()}-{next(_names)}"
    reasons = []
    for build in (_make_v2, _make_v1):
        try:
            return build(name, processes, memory, cpus)
        except Unavailable as e:
            reasons.append(str(e))
    raise Unavailable("; ".join(reasons))


def sweep(pid: int) -> list[Path]:
    """Kill and remove the groups the process ``pid`` made and did not close (it was killed);
    the folders that would not go (normally none)."""
    pattern, left = f"{PREFIX}{pid}-*", []
    try:
        v2 = _v2_parent()
    except (Unavailable, OSError):
        v2 = None
    for folder in sorted(v2.glob(pattern)) if v2 is not None and v2.is_dir() else []:
        left += Group(2, {c: folder for c in REQUIRED + OPTIONAL}).close()
    own, found = own_paths(), {}
    for controller in REQUIRED + OPTIONAL:
        base = top() / controller / own.get(controller, "/").lstrip("/")
        for folder in sorted(base.glob(pattern)) if base.is_dir() else []:
            found.setdefault(folder.name, {})[controller] = folder
    for dirs in found.values():
        left += Group(1, dirs).close()
    return left


def unavailable() -> str | None:
    """Why no sandbox can have a cgroup here (None when one can): tried, not guessed."""
    try:
        group = make(processes=16, memory=64 << 20)
    except Unavailable as e:
        return str(e)
    group.close()
    return None


# ---- cgroup v2 --------------------------------------------------------------------------
def _v2_parent() -> Path:
    root = top()
    unified = root if (root / "cgroup.controllers").exists() else root / "unified"
    if not (unified / "cgroup.controllers").exists():
        raise Unavailable(f"no cgroup v2 hierarchy under {root}")
    own = own_paths().get("")
    if own is None:
        raise Unavailable("this process is in no cgroup v2")
    base = PurePosixPath(own)
    if base.name == LEAF:       # moved there by _v2_enable (or forked from one that was)
        base = base.parent
    return unified / str(base).lstrip("/")


def _v2_enable(parent: Path) -> None:
    """Turn on the controllers for the parent's children (moving this process into a leaf
    if v2's rule, no processes in a cgroup whose children have controllers, asks it)."""
    available = set(_read(parent / "cgroup.controllers").split())
    missing = [c for c in REQUIRED if c not in available]
    if missing:
        raise Unavailable(f"cgroup v2 at {parent} offers no {', '.join(missing)} controller "
                          "(not delegated to this user?)")
    enabled = set(_read(parent / "cgroup.subtree_control").split())
    wanted = [c for c in REQUIRED + OPTIONAL if c in available and c not in enabled]
    if not wanted:
        return
    change = " ".join(f"+{c}" for c in wanted)
    try:
        _write(parent / "cgroup.subtree_control", change)
    except OSError as e:
        if e.errno != errno.EBUSY:
            raise Unavailable(f"cannot enable {change} in {parent}: {e.strerror}")
        leaf = parent / LEAF
        leaf.mkdir(exist_ok=True)
        _write(leaf / "cgroup.procs", str(os.getpid()))
        _write(parent / "cgroup.subtree_control", change)


def _make_v2(name: str, processes: int, memory: int, cpus: float | None) -> Group:
    parent = _v2_parent()
    try:
        _v2_enable(parent)
        folder = parent / name
        folder.mkdir()
    except Unavailable:
        raise
    except OSError as e:
        raise Unavailable(f"cannot make a cgroup v2 under {parent}: {e.strerror}")
    group = Group(2, {c: folder for c in REQUIRED + OPTIONAL})
    try:
        _write(folder / "pids.max", str(processes))
        _write(folder / "memory.max", str(memory))
        _write_if_there(folder / "memory.swap.max", "0")    # the cap is not dodged by swap
        _write_if_there(folder / "cpu.weight", "100")       # equal among sandboxes
        if cpus is not None:
            _write_if_there(folder / "cpu.max", f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
    except OSError as e:
        group.close()
        raise Unavailable(f"cannot set the limits of {folder}: {e.strerror}")
    return group


def _write_if_there(path: Path, value: str) -> None:
    if path.exists():
        _write(path, value)


# ---- cgroup v1 --------------------------------------------------------------------------
def _make_v1(name: str, processes: int, memory: int, cpus: float | None) -> Group:
    own, dirs = own_paths(), {}
    group = Group(1, dirs)
    for controller in REQUIRED + OPTIONAL:
        mount = top() / controller
        folder = mount / own.get(controller, "/").lstrip("/") / name
        try:
            if not (mount / "cgroup.procs").exists():
                raise Unavailable(f"no cgroup v1 {controller} controller at {mount}")
            folder.mkdir()
        except (Unavailable, OSError) as e:
            if controller in OPTIONAL:
                continue
            group.close()
            why = e if isinstance(e, Unavailable) else f"cannot make {folder}: {e.strerror}"
            raise Unavailable(str(why))
        dirs[controller] = folder
    try:
        _write(dirs["pids"] / "pids.max", str(processes))
        _write(dirs["memory"] / "memory.limit_in_bytes", str(memory))
        _write_if_there(dirs["memory"] / "memory.memsw.limit_in_bytes", str(memory))  # no swap
        if "cpu" in dirs:
            _write_if_there(dirs["cpu"] / "cpu.shares", "1024")     # equal among sandboxes
            if cpus is not None:
                _write(dirs["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                _write(dirs["cpu"] / "cpu.cfs_quota_us", str(int(cpus * CPU_PERIOD_US)))
    except OSError as e:
        group.close()
        raise Unavailable(f"cannot set the limits of {name}: {e.strerror}")
    return group
