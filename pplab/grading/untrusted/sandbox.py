"""One submission's sandbox: bubblewrap around the student's kernel (:mod:`.runner`).

What the kernel sees: the system's ``/usr`` and the Python install read-only, the student
edition of pplab (:mod:`.student_edition`) read-only, a private writable scratch folder
and ``/tmp`` (memory-backed, capped), a made-up ``/etc`` (passwd, hosts, nothing else) and
its own loopback network with nothing on it. It does not see the instructor's files, other
submissions, the source notebooks, hidden tests, the gradebook or the home directory.
Limits: address space, processes, CPU seconds, file size and open files (``Limits``); wall
time per request is the trusted side's ``timeout``. Run as root, the kernel drops to a uid
of its own (so the process limit counts only its processes); as an ordinary user,
bubblewrap makes an unprivileged user namespace.

Each sandbox also gets a cgroup of its own (:mod:`.cgroups`) before it runs anything: its
processes, its memory (all processes together) and its CPU weight are counted apart from
every other sandbox's, so no sandbox can starve another. Where no cgroup can be had the
rlimits above are all there is; :func:`limits_note` says in one line which promise is then
weaker (as an ordinary user the process limit is per user, shared by concurrent sandboxes).

Everything the kernel answers is read through :meth:`Sandbox.request`, which caps its
size and time and never trusts its content.
"""
from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import cgroups
from .wire import MAX_REPLY, read_reply

SCRATCH = "/scratch"
LIBRARY = "/opt/pplab"
INTERRUPT_GRACE = 10.0          # seconds a kernel has to stop after an interrupt
TMPFS_BYTES = 512 << 20         # each of the kernel's two writable folders (memory-backed)
SHM_BYTES = 64 << 20            # /dev/shm, capped too (bwrap's /dev is half the RAM)
ETC_FILES = {
    "passwd": "root:x:0:0:root:/root:/bin/sh\nstudent:x:{uid}:{uid}:student:/scratch:/bin/sh\n",
    "group": "root:x:0:\nstudent:x:{uid}:\n",
    "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
}


class SandboxError(RuntimeError):
    """The sandbox could not answer (timed out, died, said too much or nonsense)."""


@dataclass(frozen=True)
class Limits:
    memory: int = 3 << 30           # address space per process, bytes
    processes: int = 512            # tasks (processes and threads) of the sandbox's uid
    cpu_seconds: int = 1800         # per process
    file_size: int = 256 << 20      # largest file the kernel may write
    open_files: int = 1024
    sandbox_memory: int | None = None   # all its processes together (None: memory + 2 GiB)
    cpus: float | None = None           # CPU quota of the sandbox (None: an equal share only)

    def group_memory(self) -> int:
        """The sandbox's cgroup memory cap: room for one process at its address-space limit
        plus the memory-backed /tmp, scratch and /dev/shm it may fill."""
        return self.sandbox_memory or self.memory + (2 << 30)


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def unavailable() -> str | None:
    """Why no sandbox can be made here (None when one can): tried, not guessed."""
    if sys.platform != "linux":
        return "the sandbox needs Linux (bubblewrap and namespaces)"
    if bwrap_path() is None:
        return "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
    probe = subprocess.run(_bwrap_base() + ["--", sys.executable, "-c", "print('ok')"],
                           capture_output=True, text=True, timeout=60,
                           preexec_fn=_limits_fn(Limits(), _sandbox_uid(0)))
    if probe.returncode != 0 or probe.stdout.strip() != "ok":
        return ("bubblewrap cannot make a sandbox here: "
                + (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1])
    return None


def limits_note() -> str | None:
    """The one line to show when sandboxes get no cgroup, saying which promise is weaker
    (None when they get one). ``pplab grade`` prints it once per run."""
    why = cgroups.unavailable()
    if why is None:
        return None
    if os.geteuid() == 0:
        return (f"no cgroup available ({why}): memory and CPU are limited per process, not "
                "per sandbox; one submission can slow a concurrent one")
    return (f"no cgroup available ({why}): process limits are per user; one submission can "
            "starve a concurrent one")


def _group(limits: Limits) -> cgroups.Group | None:
    """The sandbox's own cgroup, or None (then only the rlimits hold: see limits_note)."""
    try:
        return cgroups.make(limits.processes, limits.group_memory(), limits.cpus)
    except cgroups.Unavailable:
        return None


def _sandbox_uid(slot: int) -> int | None:
    """As root, each concurrent sandbox runs as its own uid (the process limit is per uid)."""
    return 200_000 + slot % 100_000 if os.geteuid() == 0 else None


def _python_dirs() -> list[str]:
    dirs = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    return sorted(d for d in dirs if not d.startswith("/usr/"))


def _bwrap_base(etc: Path | None = None) -> list[str]:
    root = os.geteuid() == 0
    cmd = [bwrap_path(), "--die-with-parent", "--new-session",
           "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
           "--unshare-cgroup-try", "--hostname", "sandbox"]
    if not root:
        cmd += ["--unshare-user"]
    cmd += ["--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = os.readlink(f"/{link}") if os.path.islink(f"/{link}") else None
        if target:
            cmd += ["--symlink", target, f"/{link}"]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--dir", "/etc"]
    for where, size in (("/tmp", TMPFS_BYTES), (SCRATCH, TMPFS_BYTES), ("/dev/shm", SHM_BYTES)):
        cmd += ["--perms", "1777", "--size", str(size), "--tmpfs", where]
    cmd += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
            "--ro-bind-try", "/etc/localtime", "/etc/localtime"]
    if etc is not None:
        for name in ETC_FILES:
            cmd += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    for d in _python_dirs():
        cmd += _parents(d) + ["--ro-bind", d, d]
    return cmd


def _parents(path: str) -> list[str]:
    """Make ``path``'s missing parent folders traversable (bwrap makes them 0700, which a
    uid dropped to later cannot enter)."""
    out, parts = [], Path(path).parts[1:-1]
    for i in range(len(parts)):
        d = "/" + "/".join(parts[:i + 1])
        if d not in ("/usr", "/etc", "/tmp", "/proc", "/dev") and not d.startswith("/usr/"):
            out += ["--perms", "0755", "--dir", d]
    return out


def _limits_fn(limits: Limits, uid: int | None, group: cgroups.Group | None = None):
    """What the child sets before it becomes bwrap: its cgroup and limits first, then the uid
    (as root, bwrap itself keeps root to mount; the kernel drops it: see ``_drop``)."""
    def apply():
        os.setsid()
        if group is not None:       # before bwrap: everything the kernel starts is counted
            group.add(os.getpid())
        for res, value in ((resource.RLIMIT_AS, limits.memory),
                           (resource.RLIMIT_CPU, limits.cpu_seconds),
                           (resource.RLIMIT_FSIZE, limits.file_size),
                           (resource.RLIMIT_NOFILE, limits.open_files),
                           (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(res, (value, value))
        if group is not None:
            return          # the group counts its tasks; a per-uid count could be shared
        if uid is not None:     # root: a uid per sandbox, so the count is its own
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        else:                   # unprivileged: the limit counts the user's own processes too
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes + _my_tasks(),) * 2)
    return apply


def _my_tasks() -> int:
    uid, n = os.getuid(), 0
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == uid:
                n += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return n


def _drop(uid: int | None) -> list[str]:
    if uid is None:
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]


def sweep(pid: int) -> None:
    """Remove what the sandboxes of the process ``pid``, killed, could not: their folders and
    cgroups, both named after it (its sandboxes' processes die with it: --die-with-parent)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{cgroups.PREFIX}{pid}-*"):
        shutil.rmtree(folder, ignore_errors=True)
    cgroups.sweep(pid)


class Sandbox:
    """A running student kernel; ``request`` sends it one op and reads one capped reply."""

    def __init__(self, library: Path, limits: Limits = Limits(), slot: int | None = None,
                 isolate: bool = True):
        slot = os.getpid() if slot is None else slot
        self.limits, self.uid = limits, (_sandbox_uid(slot) if isolate else None)
        self.dir = Path(tempfile.mkdtemp(prefix=f"{cgroups.PREFIX}{os.getpid()}-"))
        etc = self.dir / "etc"
        etc.mkdir()
        for name, text in ETC_FILES.items():
            (etc / name).write_text(text.format(uid=self.uid if self.uid is not None else 1000))
        os.chmod(self.dir, 0o755)
        self.group = _group(limits)
        env = {"PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
               "HOME": SCRATCH, "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONPATH": LIBRARY,
               "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/mpl",
               "PYTHONDONTWRITEBYTECODE": "1", "PPLAB_SANDBOX": "1"}
        runner = [sys.executable, "-m", "pplab.grading.untrusted.runner"]
        if isolate:
            cmd = (_bwrap_base(etc) + _parents(LIBRARY)
                   + ["--ro-bind", str(library), LIBRARY, "--chdir", SCRATCH,
                                       "--clearenv"]
                   + [a for k, v in env.items() for a in ("--setenv", k, v)]
                   + ["--"] + _drop(self.uid) + runner)
            env, cwd = {}, None
        else:       # --no-sandbox: a plain child, still with the student edition only
            cwd = self.dir / "scratch"
            cwd.mkdir()
            cmd, env = runner, dict(env, HOME=str(cwd), TMPDIR=str(cwd),
                                    PYTHONPATH=str(library))
        self.errors = self.dir / "kernel-start.err"     # bwrap's and Python's start-up errors
        try:
            with open(self.errors, "wb") as err:
                self.proc = subprocess.Popen(
                    cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                    cwd=cwd, preexec_fn=_limits_fn(limits, self.uid, self.group))
        except BaseException:
            if self.group is not None:
                self.group.close()
            raise
        self._buf = b""

    def request(self, req: dict, timeout: float) -> dict:
        """Send one op; the reply as a dict. Raises SandboxError (and stops the sandbox)
        when the kernel is too slow, too talkative, dead, or answers nonsense."""
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._fail("the sandboxed kernel has stopped (crashed, or was killed by a "
                             "resource limit)")
        try:
            line = self._read_line(timeout)
            late = False
        except TimeoutError:
            self.interrupt()                    # like Jupyter: interrupt, then go on
            try:
                line, late = self._read_line(INTERRUPT_GRACE), True
            except TimeoutError:
                raise self._fail(f"it ran past {timeout:g} s and did not stop when "
                                 "interrupted")
        try:
            reply = read_reply(line)    # nesting past the JSON reader: a refused answer
        except ValueError:
            raise self._fail("the sandboxed kernel answered something that is not data")
        reply.pop("timed_out", None)        # the trusted side's to say, never the kernel's
        if late:
            reply["timed_out"] = timeout
        return reply

    def interrupt(self) -> None:
        """SIGINT to the kernel (KeyboardInterrupt in the running cell)."""
        import psutil
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return
        for kid in kids:
            try:
                if "pplab.grading.untrusted.runner" in " ".join(kid.cmdline()):
                    kid.send_signal(signal.SIGINT)
            except psutil.Error:
                continue

    def _read_line(self, timeout: float) -> bytes:
        deadline, fd = time.monotonic() + timeout, self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise self._fail("the sandboxed kernel has stopped (crashed, or was killed by "
                                 "a resource limit)")
            self._buf += chunk
            if len(self._buf) > MAX_REPLY:
                raise self._fail(f"its answer was over {MAX_REPLY >> 20} MB and was cut")
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _fail(self, why: str) -> SandboxError:
        try:
            tail = self.errors.read_bytes()[-300:].decode(errors="replace").strip()
        except OSError:
            tail = ""
        self.close()
        return SandboxError(f"{why} ({tail.splitlines()[-1]})" if tail else why)

    def close(self) -> None:
        """Stop the kernel and everything it started (its PID namespace dies with it; its
        cgroup is emptied and removed)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.group is not None:
            self.group.close()
            self.group = None
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
