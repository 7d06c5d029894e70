"""``pplab grade --slurm``: one Slurm job per submission, submitted with submitit.

Each job runs :func:`.job.run` on a compute node, with the same sandbox as a local run (and
the same limits on the trusted job process, held by its parent: :mod:`.trusted_limits`);
the state folder (next to ``--out``) must be on a file system the nodes share, as
submitit's own job folder must. Results arrive as the jobs write them, so progress, the
ETA and ``--resume`` work as they do locally.
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from ..exercises.hidden import seed_digest
from .job import run, write_atomic


def _failure(spec: dict, job) -> dict:
    try:
        why = str(job.exception() or f"Slurm job {job.job_id} ended without a result")
    except Exception as e:                      # noqa: BLE001 — submitit's own errors
        why = f"Slurm job {job.job_id} failed: {e}"
    lines = [ln for ln in why.splitlines() if ln.strip()]
    result = {"ok": False, "why": f"the grading job failed on Slurm: {lines[-1][:300]}",
              "student": spec["student"], "assignment": spec["assignment"],
              "seed_digest": seed_digest(spec["seed"])}
    write_atomic(Path(spec["result"]), result)
    return result


def run_on_slurm(opts, specs: list[dict], progress) -> None:
    from ..runtime.submit import QueueExecutor
    if not specs:
        return
    folder = Path(specs[0]["workdir"]).parents[2] / "slurm"
    ex = QueueExecutor(folder=str(folder), python=sys.executable)
    ex.update_parameters(nodes=1, ntasks_per_node=1, cpus_per_task=1,
                         time=max(1, math.ceil(opts.timeout / 60)), job_name="pplab-grade",
                         **({"partition": opts.slurm_partition} if opts.slurm_partition
                            else {}))
    with ex.batch():
        jobs = [ex.submit(run, dict(spec, timeout=opts.timeout)) for spec in specs]
    pending = dict(zip(jobs, specs))
    while pending:
        for job in [j for j in pending if j.done()]:
            spec = pending.pop(job)
            path = Path(spec["result"])
            progress.step(json.loads(path.read_text()) if path.exists()
                          else _failure(spec, job))
        time.sleep(1.0)
