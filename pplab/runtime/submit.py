"""Submit a pplab run to Slurm from Python through submitit: the run panel's cluster mode.

The job is what ``srun pplab run`` starts: one task per node, each starting P/N ranks, with
the node count, node rank and rendezvous read from Slurm (``cluster.resolve_nodes``). Queue
state comes from ``squeue``, not from submitit's default ``sacct``: sacct needs Slurm's
accounting database, which many class clusters do not run, and without it submitit never
learns that a cancelled job has ended.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Callable

import submitit
from submitit.slurm import slurm as _slurm

from ..probe.policy import limits
from ..probe.slurm import unavailable_reason
from . import cluster

FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                "PREEMPTED", "BOOT_FAIL", "DEADLINE")


class QueueWatcher(_slurm.SlurmInfoWatcher):
    """submitit's watcher, asking ``squeue --states=all`` (finished jobs stay visible for
    Slurm's MinJobAge, 5 minutes by default) instead of sacct."""

    def _make_command(self):
        ids = sorted({x.split("_")[0] for x in self._registered - self._finished})
        if not ids:
            return None
        return ["squeue", "--states=all", "--noheader", "--format=%i|%T|%N|%r",
                "--jobs=" + ",".join(ids)]

    def read_info(self, string) -> dict:
        text = string.decode() if isinstance(string, bytes) else string
        info = {}
        for line in text.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 4:
                info[parts[0]] = dict(zip(("JobID", "State", "NodeList", "Reason"), parts))
        return info


class QueueJob(_slurm.SlurmJob):
    watcher = QueueWatcher(delay_s=2)


class QueueExecutor(_slurm.SlurmExecutor):
    job_class = QueueJob


def _append(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line.rstrip("\n") + "\n")


def run_on_node(run_kw: dict, folder: str):
    """What every task of the job runs: this node's share of the ranks. Node 0 writes the
    run's progress lines; a node that fails writes its cause for the submitter to show."""
    from .launcher import run_schedule
    node_rank = 0
    try:
        nnodes, node_rank, endpoint = cluster.resolve_nodes(None, None, None)
        progress = ((lambda m: _append(os.path.join(folder, "progress.log"), m))
                    if node_rank == 0 else None)
        return run_schedule(**run_kw, nnodes=nnodes, node_rank=node_rank,
                            rdzv_endpoint=endpoint, progress=progress)
    except Exception as e:
        _append(os.path.join(folder, f"cause-node{node_rank}.txt"), f"{type(e).__name__}: {e}")
        raise


class ClusterRun:
    """One submitted job: queue state, progress lines, then the result or why there is none."""

    def __init__(self, job: QueueJob, folder: str, nodes: int, time_min: int):
        self.job, self.folder, self.nodes, self.time_min = job, folder, nodes, time_min
        self.submitted_at = time.monotonic()
        self.finished_at: float | None = None
        self.cancelled = False               # cancelled from here (the panel, a test)

    @property
    def job_id(self) -> str:
        return str(self.job.job_id)

    def info(self) -> dict:
        return self.job.watcher.get_info(self.job_id)

    def state(self) -> str:
        return (self.info().get("State") or "SUBMITTED").split()[0]

    def status(self) -> str:
        """One line for the panel: ``job 12: PENDING (Resources)`` / ``RUNNING on n[0-1]``."""
        i = self.info()
        s = f"job {self.job_id}: {self.state()}"
        if i.get("Reason") and i["Reason"] not in ("None", "(null)"):
            s += f" ({i['Reason']})"
        if i.get("NodeList") and i.get("State") != "PENDING":
            s += f" on {i['NodeList']}"
        return s

    def progress(self) -> list[str]:
        try:
            with open(os.path.join(self.folder, "progress.log")) as f:
                return f.read().splitlines()
        except OSError:
            return []

    def done(self) -> bool:
        finished = self.job.done() or self.state() in FINAL_STATES
        if finished and self.finished_at is None:
            self.finished_at = time.monotonic()
        return finished

    def final_state(self, settle: float = 15.0) -> str:
        """Slurm's state once it leaves COMPLETING (tasks end before the job does)."""
        deadline = time.monotonic() + settle
        while self.state() not in FINAL_STATES and time.monotonic() < deadline:
            time.sleep(0.5)
            self.job.watcher.update()
        return self.state()

    def cause(self) -> str:
        """Why the job gave no result: a cancellation as such; else a node's own error
        (what pplab run printed there); else Slurm's state and the job's last stderr lines."""
        state = self.final_state()
        if self.cancelled or state == "CANCELLED":
            return f"job {self.job_id} was cancelled (scancel) before it produced a result"
        notes = []
        for name in sorted(os.listdir(self.folder)):
            if name.startswith("cause-node"):
                with open(os.path.join(self.folder, name)) as f:
                    notes.append(f"node {name[10:-4]}: {f.read().strip()}")
        if notes:
            return f"job {self.job_id} {state.lower()}: " + "; ".join(notes)
        if state == "TIMEOUT":
            return f"job {self.job_id} reached its time limit of {self.time_min} min"
        tail = " | ".join((self.job.stderr() or "").strip().splitlines()[-3:])
        return f"job {self.job_id} ended {state} without a result" + (f": {tail}" if tail else "")

    def result(self):
        """The RunResult once done; RunError with the cause otherwise."""
        from .launcher import RunError
        try:
            return self.job.task(0).result()
        except (submitit.core.utils.FailedJobError,
                submitit.core.utils.UncompletedJobError) as e:
            raise RunError(self.cause()) from e

    def wait(self, timeout: float, poll: float = 1.0,
             on_poll: Callable[["ClusterRun"], None] | None = None):
        """Poll until done (``on_poll`` each time); after ``timeout`` s cancel and raise."""
        from .launcher import RunError
        deadline = time.monotonic() + timeout
        while not self.done():
            if on_poll:
                on_poll(self)
            if time.monotonic() > deadline:
                self.cancel()
                raise RunError(f"job {self.job_id} did not finish within {timeout:g} s "
                               f"({self.status()}); it was cancelled")
            time.sleep(poll)
        return self.result()

    def cancel(self) -> None:
        """scancel, whatever the state: nothing of this run stays in the queue."""
        if self.job.watcher.is_done(self.job_id, mode="cache"):
            return
        self.cancelled = True
        self.job.cancel(check=False)

    def remove_folder(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def default_folder() -> str:
    """Where job files go: must be on a file system the compute nodes share (home, usually)."""
    return os.environ.get("PPLAB_SLURM_DIR") or os.path.expanduser("~/.pplab/slurm")


def _class_options(nodes: int, per_node: int, partition: str | None, time_min: int,
                   account: str | None, qos: str | None) -> dict:
    """sbatch options the class's policy sets (its default partition, account, QOS);
    ``policy.PolicyError`` (a ValueError) for a request past one of its limits."""
    policy = limits()
    if policy is None:
        return {k: v for k, v in (("partition", partition), ("account", account),
                                  ("qos", qos)) if v}
    policy.check_cluster(nodes, per_node, partition, time_min)
    policy.check_account(account, qos)
    partition = partition or (policy.partitions[0] if policy.partitions else None)
    return dict(policy.slurm_options(), **({"partition": partition} if partition else {}))


def submit_run(schedule, P: int | None = 4, M: int | None = 8, V: int | None = None, *,
               nodes: int = 2, partition: str | None = None, gpus_per_node: int = 0,
               time_min: int = 10, folder: str | None = None, account: str | None = None,
               qos: str | None = None, **run_kw) -> ClusterRun:
    """Submit ``run_schedule(schedule, P=P, M=M, V=V, **run_kw)`` as one Slurm job over ``nodes``
    nodes (one task per node, P/nodes ranks each). ValueError for what cannot run, or what
    the class's policy does not allow."""
    reason = unavailable_reason()
    if reason:
        raise ValueError(reason)
    from .launcher import resolve_schedule
    s = resolve_schedule(schedule, P, M, V)
    if nodes < 1 or s.P % nodes:
        raise ValueError(f"P={s.P} ranks cannot be split evenly over {nodes} nodes; "
                         f"use a P that is a multiple of {nodes}")
    options = _class_options(nodes, s.P // nodes, partition, time_min, account, qos)
    base = folder or default_folder()
    os.makedirs(base, exist_ok=True)
    job_dir = tempfile.mkdtemp(prefix="job-", dir=base)
    ex = QueueExecutor(folder=job_dir)
    # --export=ALL to sbatch and srun: submitted from inside a Slurm job (a JupyterLab that
    # batchspawner started with --export=<list>), both would take that job's SLURM_EXPORT_ENV
    # and drop what submitit's script exports (SUBMITIT_EXECUTOR): the tasks could not start
    ex.update_parameters(nodes=nodes, ntasks_per_node=1, cpus_per_task=s.P // nodes,
                         time=time_min, job_name=f"pplab-{s.name}", signal_delay_s=5,
                         additional_parameters={"export": "ALL"}, srun_args=["--export=ALL"],
                         **options,
                         **({"gpus_per_node": gpus_per_node} if gpus_per_node else {}))
    try:
        job = ex.submit(run_on_node, dict(run_kw, schedule_or_name=s), job_dir)
    except (submitit.core.utils.FailedJobError, OSError) as e:
        shutil.rmtree(job_dir, ignore_errors=True)
        from .launcher import RunError
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        raise RunError(f"sbatch refused the job: {lines[-1] if lines else e}") from None
    return ClusterRun(job, job_dir, nodes, time_min)
