"""One small job under torchrun on this machine: a module's worker reads ``job.json`` and
rank 0 writes ``out.json`` (the FSDP2 + PP probe, torch's own CSV runtime)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_module_job(module: str, nproc: int, job: dict, what: str, timeout: float) -> dict:
    """Run ``python -m module JOB.json`` on ``nproc`` local ranks; rank 0's ``out.json``.
    ``job`` may name files in the job folder as ``{dir}``. A failed or stuck job raises
    RuntimeError with the tail of torch's output, naming ``what`` ran."""
    from .launcher import _free_port
    tmp = tempfile.mkdtemp(prefix="pplab-job-")
    job = {k: v.format(dir=tmp) if isinstance(v, str) else v for k, v in job.items()}
    job["out"] = os.path.join(tmp, "out.json")
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(job, f)
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
           "--master-addr=127.0.0.1", f"--master-port={_free_port()}", "-m", module, path]
    # torch's own folders (torchelastic_*) land in the job folder, removed with it
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=tmp,
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"{what} failed: " + (out.stderr or out.stdout)[-2000:])
        with open(job["out"]) as f:
            return json.load(f)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what} did not finish in {timeout:.0f} s") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
