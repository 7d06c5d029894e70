"""Submit from Python the way a notebook does, from the Slurm test cluster's controller
namespace (tests/cluster/test_cluster_slurm.py runs ``python cluster_submit_driver.py CASE
FOLDER``).
Prints one JSON object: what the test checks."""
import json
import os
import sys
import time

from pplab.runtime import RunError
from pplab.runtime.submit import submit_run


def _wait_for_step(job, timeout: float = 150) -> None:
    deadline = time.monotonic() + timeout
    while not any("step 1/" in ln for ln in job.progress()):
        if time.monotonic() > deadline or job.done():
            raise SystemExit(f"job never reached step 1: {job.status()}")
        time.sleep(0.3)


def cancelled(folder: str) -> dict:
    job = submit_run("1f1b", 4, 8, nodes=2, folder=folder, steps=60, timeout=300,
                     emulate={"tf": 0.1, "tb": 0.2})
    _wait_for_step(job)
    job.cancel()
    try:
        job.wait(90)
    except RunError as e:
        return {"cause": str(e), "state": job.state()}
    return {"cause": None}


def failed(folder: str) -> dict:
    job = submit_run("1f1b", 4, 4, nodes=2, folder=folder, steps=1, timeout=90,
                     fault={"rank": 3, "op": 1, "kind": "raise"})
    try:
        job.wait(180)
    except RunError as e:
        return {"cause": str(e), "state": job.state()}
    return {"cause": None}


def panel(folder: str) -> dict:
    """The run panel in cluster mode: submitit's job through ``submit_run``, as a notebook
    submits one (the panel waits for the job, then removes its folder)."""
    from pplab.canvases.runs import run_panel
    t0 = time.monotonic()
    p = run_panel("1f1b", P=4, M=8, emulate=True, tf=0.02, tb=0.04)
    p.cluster.folder = folder
    p.cluster.mode.value = "cluster"
    p.click()
    p.join(300)
    r = p.result
    job = p.cluster.job
    return {"message": p.result_message, "progress": p.progress_lines,
            "figure": p.figure is not None, "image_bytes": len(p.image.value or b""),
            "nnodes": r.nnodes if r else None, "grad": r.grad_max_rel_error if r else None,
            "placement": r.placement if r else None, "seconds": time.monotonic() - t0,
            "folder_left": job is None or os.path.exists(job.folder),
            "errors": [e for _, e in p.errors]}


if __name__ == "__main__":
    case, where = sys.argv[1], sys.argv[2]
    print(json.dumps(globals()[case](where)), flush=True)
