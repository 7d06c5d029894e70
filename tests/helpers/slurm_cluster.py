"""A real Slurm for tests: Debian's slurmctld, two slurmd and munged, each node in its own
network namespace (``netns_lan.Lan``), the controller on the switch at 10.77.0.254.

Everything is private to one temp folder: munge key and socket, slurm.conf (the clients find
it through SLURM_CONF), state, spool, logs. Settings that work in a container without systemd:
proctrack/linuxproc, task/none, and a cgroup.conf naming cgroup/v1 with CgroupAutomount=no
(slurmd refuses to start without one). ``close`` cancels every job, stops the daemons,
deletes the namespaces and the folder.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

from netns_lan import SWITCH_ADDR, Lan
import netns_lan

DAEMONS = ("slurmctld", "slurmd", "munged", "srun", "sbatch", "squeue", "scontrol", "scancel")
NODES = ("pn0", "pn1")


def skip_reason() -> str | None:
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        return (f"needs Slurm and munge ({', '.join(missing)} missing): apt-get install "
                "slurmctld slurmd slurm-client munge (.ci/run does it as root)")
    return netns_lan.skip_reason()


SLURM_CONF = """\
ClusterName=pplabtest
SlurmctldHost={host}({ctl})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={w}/munge.sock
StateSaveLocation={w}/state
SlurmdSpoolDir={w}/spool/%n
SlurmctldPidFile={w}/slurmctld.pid
SlurmdPidFile={w}/slurmd-%n.pid
SlurmctldLogFile={w}/slurmctld.log
SlurmdLogFile={w}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SlurmdTimeout=15
KillWait=5
InactiveLimit=0
{nodes}
PartitionName=class Nodes={names} Default=YES MaxTime=10 State=UP
"""


def command_name(pid: int) -> str:
    """The process's command name ('' once it is gone)."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class SlurmCluster:
    """Start with ``SlurmCluster()``; ``run(cmd)`` runs a client where the controller is."""

    def __init__(self, cpus: int = 2):
        self.dir = tempfile.mkdtemp(prefix="pplab-slurm-")
        os.chmod(self.dir, 0o711)            # munged wants its socket's folder searchable
        self.procs: list[subprocess.Popen] = []
        self.lan = None
        try:
            self.lan = Lan(list(NODES))
            self._write_config(cpus)
            self._start()
        except BaseException:
            self.close()
            raise

    @property
    def env(self) -> dict:
        return dict(os.environ, SLURM_CONF=os.path.join(self.dir, "slurm.conf"),
                    TMPDIR=self.tmp)

    def _write_config(self, cpus: int) -> None:
        w = self.dir
        for d in ("state", "spool", "tmp", "jobs"):
            os.makedirs(os.path.join(w, d))
        self.tmp = os.path.join(w, "tmp")
        with open(os.path.join(w, "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(w, "munge.key"), 0o400)
        nodes = "\n".join(f"NodeName={n} NodeAddr={self.lan.addr[n]} CPUs={cpus} State=UNKNOWN"
                          for n in NODES)
        with open(os.path.join(w, "slurm.conf"), "w") as f:
            f.write(SLURM_CONF.format(host=socket.gethostname(), ctl=SWITCH_ADDR, w=w,
                                      nodes=nodes, names=",".join(NODES)))
        with open(os.path.join(w, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")

    def _spawn(self, cmd: list[str], log: str) -> None:
        with open(os.path.join(self.dir, log), "w") as out:
            self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                               env=self.env, start_new_session=True))

    def _start(self) -> None:
        w, conf = self.dir, os.path.join(self.dir, "slurm.conf")
        self._spawn(["munged", "-F", "-f", f"--key-file={w}/munge.key",
                     f"--socket={w}/munge.sock", f"--pid-file={w}/munged.pid",
                     f"--log-file={w}/munged.log", f"--seed-file={w}/munged.seed"], "munged.out")
        self._wait_for(lambda: os.path.exists(f"{w}/munge.sock"), 60, "munged's socket")
        self._spawn(self.lan.exec(None, ["slurmctld", "-D", "-i", "-f", conf]), "slurmctld.out")
        for n in NODES:
            self._start_node(n)
        self._wait_for(lambda: self.idle_nodes() == len(NODES), 120, "two idle nodes")

    def _start_node(self, node: str) -> None:
        conf = os.path.join(self.dir, "slurm.conf")
        self._spawn(self.lan.exec(node, ["slurmd", "-D", "-N", node, "-f", conf]),
                    f"{node}.out")

    def restore(self) -> None:
        """Leave the cluster as a test found it: no job, and every node up and idle (a node
        whose power a test cut gets its slurmd back; ReturnToService=2 lets it rejoin)."""
        self.run(["scancel", "--full", "--user=root"], timeout=60)
        lost = {n: self._slurmd_started(n) for n in NODES
                if "slurmd" not in map(command_name, Lan.pids(self.lan.ns[n]))}
        for n in lost:
            self._start_node(n)
        self._wait_for(lambda: all(self._slurmd_started(n) != was for n, was in lost.items()),
                       120, "restarted slurmd registered")
        self._wait_for(lambda: not self.queue(), 120, "empty queue")
        self._wait_for(lambda: self.idle_nodes() == len(NODES), 180, "two idle nodes")

    def _slurmd_started(self, node: str) -> str:
        """When the controller last heard this node's slurmd register."""
        r = self.run(["scontrol", "show", "node", node], timeout=15)
        return next((w for w in r.stdout.split() if w.startswith("SlurmdStartTime=")), "")

    def _wait_for(self, ok, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            if time.monotonic() > deadline:
                raise RuntimeError(f"Slurm test cluster: no {what} after {timeout:g} s; "
                                   f"logs in {self.dir}: {self.logs()}")
            time.sleep(0.3)

    def logs(self) -> str:
        tails = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith((".log", ".out")):
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    tails.append(f"[{name}] " + " | ".join(f.read().splitlines()[-4:]))
        return " ".join(tails)

    def run(self, cmd: list[str], timeout: float = 120, env: dict | None = None,
            host: str | None = None) -> subprocess.CompletedProcess:
        """Run ``cmd`` in the controller's namespace (or ``host``'s), output captured."""
        return subprocess.run(self.lan.exec(host, cmd), capture_output=True, text=True,
                              timeout=timeout, env=env or self.env)

    def popen(self, cmd: list[str], env: dict | None = None) -> subprocess.Popen:
        return subprocess.Popen(self.lan.exec(None, cmd), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env or self.env)

    def idle_nodes(self) -> int:
        r = self.run(["sinfo", "--noheader", "--format=%T %D"], timeout=15)
        return sum(int(n) for s, n in (ln.split() for ln in r.stdout.splitlines())
                   if s == "idle")

    def queue(self) -> list[str]:
        """Jobs Slurm still holds, finished or not, as 'id state' lines."""
        r = self.run(["squeue", "--noheader", "--format=%i %T"], timeout=15)
        return r.stdout.split("\n") if r.stdout.strip() else []

    def wait_job(self, job_id: str, timeout: float = 180) -> str:
        """Poll (0.3 s) until the job reaches a final state; that state. ``sbatch --wait``
        backs off to 32 s between checks, which would hide how long a job really takes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.run(["squeue", "--states=all", "--noheader", "--format=%T",
                          f"--jobs={job_id}"], timeout=15)
            state = r.stdout.strip()
            if state and state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
                return state
            time.sleep(0.3)
        raise TimeoutError(f"job {job_id} not finished after {timeout:g} s: {self.queue()}")

    def wait_queue_empty(self, timeout: float = 60) -> list[str]:
        deadline = time.monotonic() + timeout
        while self.queue() and time.monotonic() < deadline:
            time.sleep(0.5)
        return self.queue()

    def close(self) -> None:
        try:
            if self.lan and self.procs:
                self.run(["scancel", "--full", "--user=root"], timeout=15)
        except (subprocess.SubprocessError, OSError):
            pass
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, 15)
            except ProcessLookupError:
                pass
        for p in reversed(self.procs):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait(timeout=5)
        if self.lan:
            self.lan.close()
        shutil.rmtree(self.dir, ignore_errors=True)
