"""Start a pipeline run with torchrun and turn what the ranks wrote into a RunResult.

``run_schedule`` writes the job (schedule as rank texts + placement, model, options) to a JSON
file, starts ``python -m torch.distributed.run ... -m pplab.runtime.worker JOB.json`` in its own
process session, waits with a whole-job timeout, and on any failure names the failing rank and
its cause (each rank writes its error to ``rank{r}.json`` in a temp dir). Afterwards no child
process is left: ``supervise.py`` kills the session as a group and checks it through psutil.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Sequence

from ..ir import Schedule
from ..registry import make_schedule
from ..timeline import Timeline
from ..validate import problems
from . import cluster
from .config import RunConfig, RunSpec, simulated_twin
from .model import TinyConfig, check_model_fits
from .supervise import diagnose, supervise


class RunError(RuntimeError):
    """A run failed; the message names the rank(s) and the cause."""


@dataclass
class RunResult:
    """What a real run measured: ``timeline`` its last step, ``fastest`` its quickest timed one."""
    schedule: Schedule
    timeline: Timeline
    loss: float
    reference_loss: float | None
    grad_max_rel_error: float | None
    step_time_s: float
    backend: str
    device: str
    peak_saved_bytes: list[int]
    cuda_peak_bytes: list[int] | None
    peak_inflight: list[int]
    simulated: Timeline | None = None
    note: str = ""
    losses: list[float] = field(default_factory=list)
    reference_losses: list[float] = field(default_factory=list)
    grad_errors: list[float] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)
    worst_parameter: str = ""
    wall_s: float = 0.0
    nnodes: int = 1
    placement: list[dict] = field(default_factory=list)   # per rank: node_rank, host, node
    fastest: Timeline | None = None

    @property
    def bubble_fraction(self) -> float:
        return self.timeline.bubble_fraction

    @property
    def executed(self) -> list[list[str]]:
        return [self.timeline.rank_order(r) for r in range(self.timeline.num_ranks)]

    def to_dict(self) -> dict:
        s = self.schedule
        d = {"schedule": s.name, "P": s.P, "M": s.M, "V": s.V, "backend": self.backend,
             "device": self.device, "note": self.note, "loss": self.loss,
             "reference_loss": self.reference_loss, "losses": self.losses,
             "reference_losses": self.reference_losses,
             "grad_max_rel_error": self.grad_max_rel_error, "grad_errors": self.grad_errors,
             "step_time_s": self.step_time_s, "step_times": self.step_times,
             "bubble_fraction": self.bubble_fraction, "peak_inflight": self.peak_inflight,
             "peak_saved_bytes": self.peak_saved_bytes, "cuda_peak_bytes": self.cuda_peak_bytes,
             "ranks": self.executed, "nnodes": self.nnodes, "placement": self.placement,
             "events": self.timeline.to_dict()["events"]}
        if self.simulated is not None:
            d["simulated_bubble_fraction"] = self.simulated.bubble_fraction
            d["simulated_makespan"] = self.simulated.makespan
            d["measured_makespan"] = self.timeline.makespan
        return d


# ---- helpers -------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resolve_schedule(schedule_or_name, P: int | None, M: int | None, V: int | None) -> Schedule:
    if isinstance(schedule_or_name, Schedule):
        return schedule_or_name
    if not isinstance(schedule_or_name, str):
        raise ValueError("schedule must be a name (e.g. '1f1b') or a pplab Schedule")
    if P is None or M is None:
        raise ValueError("give P and M with a schedule name")
    return make_schedule(schedule_or_name, P, M, V)


def _check(schedule: Schedule, cfg: RunConfig) -> None:
    cfg.validate()
    found = problems(schedule)
    if found:  # structure only; deadlocks are left for the runtime to catch and explain
        raise ValueError(f"schedule {schedule.name!r} cannot run: {found[0]}")
    check_model_fits(schedule, cfg.model)


def check_nodes(P: int, nnodes: int, node_rank: int, rdzv_endpoint: str | None) -> None:
    """Multi-node arguments: every node starts P / nnodes ranks and meets at node 0's endpoint."""
    if nnodes < 1:
        raise ValueError(f"nnodes must be ≥ 1, got {nnodes}")
    if not 0 <= node_rank < nnodes:
        raise ValueError(f"node_rank must be in 0..{nnodes - 1} for nnodes={nnodes}, "
                         f"got {node_rank}")
    if P % nnodes:
        raise ValueError(f"P={P} ranks cannot be split evenly over {nnodes} nodes; "
                         f"use a P that is a multiple of {nnodes}")
    if nnodes == 1:
        return
    host, _, port = (rdzv_endpoint or "").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("multi-node runs need rdzv_endpoint HOST:PORT on node 0, reachable by "
                         f"all nodes (e.g. 10.0.0.1:29500), got {rdzv_endpoint!r}")


class _PortTaken(RunError):
    pass


def _launch(*args, **kw) -> tuple[dict, list[dict]]:
    """Launch; if the free port we picked was taken by someone else meanwhile, try again."""
    for attempt in range(3):
        try:
            return _launch_once(*args, **kw)
        except _PortTaken:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _launch_once(P: int, runs: list[RunSpec], *, timeout: float, comm_timeout: float,
                 device: str, progress: Callable[[str], None] | None, nnodes: int = 1,
                 node_rank: int = 0, rdzv_endpoint: str | None = None,
                 keep_dir: str | None = None, schedule: Schedule | None = None,
                 socket_ifname: str | None = None) -> tuple[dict, list[dict]]:
    """One torchrun launch of P / nnodes local ranks (the node arguments were checked by
    ``check_nodes`` before anything was written)."""
    tmp = keep_dir or tempfile.mkdtemp(prefix="pplab-run-")
    os.makedirs(tmp, exist_ok=True)
    runs = [replace(run, result=os.path.join(tmp, f"result{i}.json"))
            for i, run in enumerate(runs)]
    job = _write_job(tmp, runs, comm_timeout, device)
    cmd = _torchrun_command(P, job["path"], nnodes, node_rank, rdzv_endpoint, tmp)
    if progress:
        progress(f"starting torchrun with {P} ranks")
    peers_env = cluster.node_env(nnodes, rdzv_endpoint, socket_ifname)   # interface to peers
    returncode, timed_out, output, left = supervise(cmd, tmp, job["progress"], timeout,
                                                    progress, peers_env)
    if timed_out or returncode != 0:
        raise _failure(tmp, job, output, left, schedule, timed_out, timeout, nnodes, node_rank,
                       rdzv_endpoint, P)
    info = _read_json(job["info"]) if os.path.exists(job["info"]) else {}
    results = [_read_json(run.result) for run in runs]
    if keep_dir is None:
        shutil.rmtree(tmp, ignore_errors=True)
    return info, results


def _read_json(path: str):
    with open(path) as f:
        return json.load(f)


def _write_job(tmp: str, runs: list[RunSpec], comm_timeout: float, device: str) -> dict:
    """The job file every rank reads: the runs (``RunSpec.to_dict``, each given the file its
    result goes to) and where to report."""
    job = {"runs": [run.to_dict() for run in runs], "err_dir": tmp,
           "comm_timeout": comm_timeout, "device": device,
           "progress": os.path.join(tmp, "progress.log"), "info": os.path.join(tmp, "info.json"),
           "path": os.path.join(tmp, "job.json")}
    with open(job["path"], "w") as f:
        json.dump(job, f)
    return job


def _torchrun_command(P: int, job_path: str, nnodes: int, node_rank: int,
                      rdzv_endpoint: str | None, log_dir: str) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={P // nnodes}",
           f"--nnodes={nnodes}", "--max-restarts=0", "--monitor-interval=0.1"]
    if nnodes > 1:
        # static rendezvous: --node-rank is honoured (c10d would rank nodes by arrival), so
        # global rank = node_rank * (P / nnodes) + local rank and stage 0 lives on node 0
        cmd += ["--rdzv-backend=static", f"--rdzv-endpoint={rdzv_endpoint}",
                f"--node-rank={node_rank}"]
    else:
        cmd += ["--master-addr=127.0.0.1", f"--master-port={_free_port()}"]
    cmd += cluster.torchrun_log_args(log_dir)     # torchrun's logs live in our run folder
    return cmd + ["-m", "pplab.runtime.worker", job_path]


def _failure(tmp, job, output, left, schedule, timed_out, timeout, nnodes, node_rank,
             rdzv_endpoint, P) -> RunError:
    """The RunError for a failed launch, naming ranks and causes (and other nodes' part)."""
    started = any(n.startswith("rank") for n in os.listdir(tmp)) or os.path.exists(job["info"])
    if nnodes == 1 and not timed_out and not started \
            and "address already in use" in output.lower():
        return _PortTaken("the rendezvous port was taken")
    msg = diagnose(tmp, output, schedule, timed_out, timeout)
    if nnodes > 1 and timed_out and not started:
        others = ", ".join(str(k) for k in range(nnodes) if k != node_rank)
        msg = (f"no rank started within the {timeout:g} s timeout: torchrun on this node waited "
               f"at the rendezvous {rdzv_endpoint} for the other node(s). Start the same "
               f"command with --node-rank {others} there, and check that {rdzv_endpoint} "
               "is node 0's address and reachable from every node")
    elif nnodes > 1:
        msg += cluster.lost_node_note(tmp, node_rank)
        msg += (f"; this is node {node_rank} of {nnodes} (ranks {node_rank * (P // nnodes)}–"
                f"{(node_rank + 1) * (P // nnodes) - 1}): a rank on another node reports "
                "its own cause in that node's output")
    if left:
        msg += f"; processes still alive after cleanup: {left}"
    return RunError(msg + f" (logs: {tmp})")


def _result(schedule: Schedule, cfg: RunConfig, info: dict, r: dict, wall: float) -> RunResult:
    meta = {"schedule": schedule.name, "P": schedule.P, "M": schedule.M, "V": schedule.V,
            "backend": info.get("backend"), "device": info.get("device"),
            "recompute": cfg.recompute, "emulate": cfg.emulate}
    tl = Timeline.measured(schedule, r["events"], meta)
    fastest = (Timeline.measured(schedule, r["fastest_events"],
                                 dict(meta, step=r["fastest_step"]))
               if r.get("fastest_events") else None)
    sim = simulated_twin(schedule, cfg)
    errs = r.get("grad_errors") or []
    refs = r.get("reference_losses") or []
    return RunResult(
        schedule=schedule, timeline=tl, loss=r["losses"][-1],
        reference_loss=refs[-1] if refs else None,
        grad_max_rel_error=max(errs) if errs else None,
        step_time_s=r["step_time_s"], backend=info.get("backend", "?"),
        device=info.get("device", "?"), peak_saved_bytes=r["peak_saved_bytes"],
        cuda_peak_bytes=r["cuda_peak_bytes"], peak_inflight=tl.peak_inflight, simulated=sim,
        note=info.get("note", ""), losses=r["losses"], reference_losses=refs, grad_errors=errs,
        step_times=r["step_times"],
        worst_parameter=(r.get("worst_parameter") or [""])[-1] if errs else "", wall_s=wall,
        nnodes=len({p["node_rank"] for p in info.get("placement", [])}) or 1,
        placement=info.get("placement", []), fastest=fastest)


# ---- public API ----------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Launch:
    """How a run is started, apart from what it computes (RunConfig): the job's time limit,
    the ranks' wait for a message (``comm_timeout``, default timeout / 3 within 5..60 s),
    progress lines, and the nodes. Several nodes: every node gets the same arguments with
    its own ``node_rank`` and node 0's ``rdzv_endpoint`` (HOST:PORT); ranks talk over the
    interface that routes there, or ``socket_ifname`` (see ``cluster.choose_interface``)."""
    timeout: float = 120.0
    comm_timeout: float | None = None
    progress: Callable[[str], None] | None = None
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    socket_ifname: str | None = None


_CONFIG_FIELDS = tuple(f.name for f in fields(RunConfig))
_LAUNCH_FIELDS = tuple(f.name for f in fields(Launch))


def _options(config: RunConfig | None, launch: Launch | None,
             options: dict) -> tuple[RunConfig, Launch]:
    """``config`` and ``launch`` with the keywords the caller named set on top (only those:
    a default never overwrites what the caller set); ValueError for a keyword neither has."""
    unknown = sorted(set(options) - set(_CONFIG_FIELDS) - set(_LAUNCH_FIELDS))
    if unknown:
        raise ValueError(f"run_schedule does not take {', '.join(unknown)}; it takes P, M, V, "
                         f"RunConfig's {', '.join(_CONFIG_FIELDS)} and Launch's "
                         f"{', '.join(_LAUNCH_FIELDS)}")
    cfg = replace(config or RunConfig(),
                  **{k: v for k, v in options.items() if k in _CONFIG_FIELDS})
    how = replace(launch or Launch(), **{k: v for k, v in options.items() if k in _LAUNCH_FIELDS})
    return cfg, how


def run_schedule(schedule_or_name, config: RunConfig | None = None, launch: Launch | None = None,
                 *, P: int | None = 4, M: int | None = 8, V: int | None = None,
                 **options) -> RunResult:
    """Run a schedule for real on P torchrun processes and measure it.

    ``schedule_or_name`` is a name (with P, M, V) or a Schedule (a student's own);
    ``config`` what the run computes, ``launch`` how it is started. Keywords named after a
    RunConfig or Launch field (``steps=1``, ``emulate=...``, ``timeout=60``) set that field
    on top of them, and only that one. Raises ValueError for bad arguments and RunError
    naming the rank and cause when a run fails, deadlocks or exceeds the timeout. Every node
    of a multi-node run gets the same RunResult back.
    """
    schedule = resolve_schedule(schedule_or_name, P, M, V)
    cfg, how = _options(config, launch, options)
    check_nodes(schedule.P, how.nnodes, how.node_rank, how.rdzv_endpoint)
    if how.nnodes <= 1:     # in a class, the run panel's rule for a local run, for every caller
        from ..probe.policy import limits
        policy = limits()
        if policy is not None:
            policy.check_local(schedule.P)      # PolicyError (a ValueError): one line
    if how.socket_ifname:
        cluster.address_of(how.socket_ifname)  # ValueError naming the interfaces there are
    _check(schedule, cfg)
    comm_timeout = how.comm_timeout
    if comm_timeout is None:
        comm_timeout = max(5.0, min(60.0, how.timeout / 3))
    t0 = time.monotonic()
    info, [r] = _launch(schedule.P, [RunSpec(schedule, cfg)], timeout=how.timeout,
                        comm_timeout=comm_timeout, device=cfg.device, progress=how.progress,
                        nnodes=how.nnodes, node_rank=how.node_rank,
                        rdzv_endpoint=how.rdzv_endpoint, schedule=schedule,
                        socket_ifname=how.socket_ifname)
    return _result(schedule, cfg, info, r, time.monotonic() - t0)


def run_many(items: Sequence[tuple[Schedule | str, dict]], P: int, *, timeout: float = 300.0,
             comm_timeout: float = 30.0, device: str = "auto",
             progress: Callable[[str], None] | None = None) -> list[RunResult]:
    """Several runs with the same P in ONE torchrun launch (saves the start-up cost).

    ``items``: (schedule or name, options) where options may hold M, V and RunConfig fields.
    """
    scheds, cfgs, runs = [], [], []
    for sched, opts in items:
        opts = dict(opts)
        M, V = opts.pop("M", 8), opts.pop("V", None)
        s = resolve_schedule(sched, P, M, V)
        if s.P != P:
            raise ValueError(f"run_many: {s.name} has P={s.P}, expected {P}")
        cfg = RunConfig(**opts)
        _check(s, cfg)
        scheds.append(s)
        cfgs.append(cfg)
        runs.append(RunSpec(s, cfg))
    t0 = time.monotonic()
    info, results = _launch(P, runs, timeout=timeout, comm_timeout=comm_timeout, device=device,
                            progress=progress)
    wall = time.monotonic() - t0
    return [_result(s, c, info, r, wall) for s, c, r in zip(scheds, cfgs, results)]
