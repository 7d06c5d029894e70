"""The class policy: what a student's runs may ask of the cluster and of their own server.

An instructor sets it once, in the ``[limits]`` section of the class's settings file
(``pplab classroom init`` writes it; docs/classroom.md). That file is found at
``$PPLAB_CLASSROOM``, else at ``/etc/pplab/classroom.ini``; where neither exists there is no
class and nothing is limited (a laptop, ``make lab``).

The run panel's cluster mode, ``submit_run`` and ``pplab run`` ask :func:`limits` before they
start anything. A request past a limit gets one line saying which limit, its value, and who
sets it. These checks keep the course's own tools inside the class's share; a student who
writes their own ``sbatch`` script is held only by Slurm's own limits (partition and QOS
settings), which the docs show how to set to the same values.

Pure Python (configparser): the panel asks while it is built, without importing torch.
"""
from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path

SETTINGS_VAR = "PPLAB_CLASSROOM"
SYSTEM_PATH = Path("/etc/pplab/classroom.ini")


def settings_file() -> Path | None:
    """The class's settings file: ``$PPLAB_CLASSROOM``, else the system path; None if absent."""
    named = os.environ.get(SETTINGS_VAR)
    for path in ([Path(named)] if named else []) + [SYSTEM_PATH]:
        if path.is_file():
            return path
    return None


def read_settings(path: Path) -> configparser.ConfigParser:
    """The settings file as sections of strings (``#`` starts a comment, also after a value)."""
    parser = configparser.ConfigParser(inline_comment_prefixes=("#",), interpolation=None)
    with open(path) as f:
        parser.read_file(f)
    return parser


class PolicyError(ValueError):
    """A request past a limit of the class; the message is the one line a student sees."""


@dataclass(frozen=True)
class Limits:
    """The ``[limits]`` section. ``None`` (an empty value) leaves that limit off."""
    source: str = ""                    # the file they came from, named in every refusal
    nodes: int | None = None            # nodes one run may span
    procs_per_node: int | None = None   # ranks (processes) per node
    partitions: tuple[str, ...] = ()    # partitions students may use; the first is the default
    account: str = ""                   # Slurm account every job is charged to
    qos: str = ""                       # Slurm QOS every job runs under
    minutes: int | None = None          # longest time limit of one job
    local_procs: str = ""               # "cores" (the server's cores), a number, or "" (none)

    def refusal(self, asked: str, allowed: str, name: str) -> PolicyError:
        return PolicyError(f"{asked} asked; this class allows {allowed} ({name} in "
                           f"{self.source}, set by your instructor)")

    def check_cluster(self, nodes: int, procs_per_node: int, partition: str | None,
                      minutes: int) -> None:
        """A Slurm run: PolicyError naming the first limit it is past."""
        if self.nodes is not None and nodes > self.nodes:
            raise self.refusal(f"{nodes} nodes", f"at most {self.nodes}", "nodes")
        if self.procs_per_node is not None and procs_per_node > self.procs_per_node:
            raise self.refusal(f"{procs_per_node} processes per node",
                               f"at most {self.procs_per_node}", "procs_per_node")
        if self.partitions and (partition or self.partitions[0]) not in self.partitions:
            raise self.refusal(f"partition {partition!r}",
                               "only " + ", ".join(self.partitions), "partitions")
        if self.minutes is not None and minutes > self.minutes:
            raise self.refusal(f"a {minutes}-minute job", f"at most {self.minutes} minutes",
                               "minutes")

    def check_account(self, account: str | None, qos: str | None) -> None:
        """Students do not pick the account or QOS: the class's are used, others refused."""
        for name, asked, fixed in (("account", account, self.account), ("qos", qos, self.qos)):
            if asked and asked != fixed:
                raise self.refusal(f"{name} {asked!r}",
                                   f"only {fixed!r}" if fixed else f"no {name} of your own",
                                   name)

    def check_charged(self, account: str | None, qos: str | None) -> None:
        """A job already running (``pplab run`` under srun): charged to the class's account
        and QOS where the class sets them (Slurm gives every job some account and QOS)."""
        for name, asked, fixed in (("account", account, self.account), ("qos", qos, self.qos)):
            if fixed and asked and asked != fixed:
                raise self.refusal(f"{name} {asked!r}", f"only {fixed!r}", name)

    def check_run(self, P: int, nnodes: int, timeout: float, job: "SlurmJob | None") -> None:
        """``pplab run`` of P processes on ``nnodes`` nodes, checked as the run panel is: a run
        on more than one node (``srun -N2 pplab run``) within the nodes, processes per node,
        partition, account/QOS and minutes (the longer of its ``timeout`` and its Slurm job's
        limit); a run on one node within its cores. (One node inside a Slurm job is a local
        run: a student's JupyterLab may itself be a Slurm job, on the hub's partition.)"""
        if nnodes <= 1:
            self.check_local(P)
            return
        minutes = max(whole_minutes(timeout), job.minutes if job else 0)
        self.check_cluster(nnodes, -(-P // nnodes), job.partition if job else None, minutes)
        if job is not None:
            self.check_charged(job.account, job.qos)

    def local_cap(self) -> int | None:
        """Most processes a run on the student's own server may start (None: no cap)."""
        if self.local_procs == "cores":
            return server_cores()
        return int(self.local_procs) if self.local_procs else None

    def check_local(self, procs: int) -> None:
        cap = self.local_cap()
        if cap is not None and procs > cap:
            where = f"at most {cap}" + (f", the cores your server has"
                                        if self.local_procs == "cores" else "")
            raise self.refusal(f"{procs} local processes", where, "local_procs")

    def slurm_options(self) -> dict:
        """What every job of the class carries: its account and QOS, when set."""
        return {k: v for k, v in (("account", self.account), ("qos", self.qos)) if v}


@dataclass(frozen=True)
class SlurmJob:
    """What Slurm tells a job's steps about it (``srun pplab run``)."""
    partition: str | None
    account: str | None
    qos: str | None
    minutes: int                        # its time limit (0: Slurm did not say)


def whole_minutes(seconds: float) -> int:
    return max(1, int(-(-seconds // 60)))


def slurm_minutes(text: str) -> int:
    """Slurm's time limit text (``10:00``, ``1:30:00``, ``1-00:00:00``) in whole minutes;
    0 where it is none of those (``UNLIMITED``, empty)."""
    days, _, clock = text.strip().rpartition("-")
    parts = clock.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3 or \
            (days and not days.isdigit()):
        return 0
    nums = [int(p) for p in parts] if len(parts) > 1 else [int(parts[0]), 0]   # MM alone
    h, m, sec = ([0] + nums)[-3:]
    return whole_minutes((int(days or 0) * 24 * 60 + h * 60 + m) * 60 + sec)


def job_time_limit(job_id: str) -> str:
    """The job's time limit as squeue prints it ("" where squeue cannot say)."""
    import subprocess
    try:
        r = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%l"], capture_output=True,
                           text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def slurm_job(env=None, ask=job_time_limit) -> SlurmJob | None:
    """The Slurm job this process runs in, from its environment; None outside Slurm. Its
    time limit: ``SLURM_JOB_END_TIME`` − ``SLURM_JOB_START_TIME`` (Slurm ≥ 23.02), else
    what ``ask`` (squeue) says for the job; 0 where neither says."""
    env = os.environ if env is None else env
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        return None
    try:
        minutes = whole_minutes(int(env["SLURM_JOB_END_TIME"]) -
                                int(env["SLURM_JOB_START_TIME"]))
    except (KeyError, ValueError):
        minutes = slurm_minutes(ask(job_id))
    return SlurmJob(partition=env.get("SLURM_JOB_PARTITION") or None,
                    account=env.get("SLURM_JOB_ACCOUNT") or None,
                    qos=env.get("SLURM_JOB_QOS") or None, minutes=minutes)


def server_cores() -> int:
    """The cores this server may use: its CPU affinity, within a Slurm job's CPUs and
    JupyterHub's ``cpu_limit`` (``CPU_LIMIT``) where those are set."""
    cores = len(os.sched_getaffinity(0))
    for var in ("SLURM_CPUS_ON_NODE", "CPU_LIMIT"):
        try:
            cores = min(cores, max(1, int(float(os.environ[var]))))
        except (KeyError, ValueError):
            pass
    return cores


def _number(section, key: str, where: str) -> int | None:
    text = section.get(key, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{where}: [limits] {key} must be a whole number ≥ 1, got {text!r}")
    return int(text)


def limits(path: Path | None = None) -> Limits | None:
    """The class's limits, or None where there is no class settings file (nothing limited).
    ValueError, naming the file and key, for a value that is not a limit."""
    path = path or settings_file()
    if path is None:
        return None
    parser = read_settings(path)
    if not parser.has_section("limits"):
        return Limits(source=str(path))
    s = parser["limits"]
    local = s.get("local_procs", "").strip()
    if local and local != "cores":
        _number(s, "local_procs", str(path))
    return Limits(source=str(path), nodes=_number(s, "nodes", str(path)),
                  procs_per_node=_number(s, "procs_per_node", str(path)),
                  partitions=tuple(p.strip() for p in s.get("partitions", "").split(",")
                                   if p.strip()),
                  account=s.get("account", "").strip(), qos=s.get("qos", "").strip(),
                  minutes=_number(s, "minutes", str(path)), local_procs=local)
