"""pplab's runtime against torch.distributed.pipelining: same model, P, M, schedule, data.

    .venv/bin/python benchmarks/bench_runtime_vs_torch.py                 # every schedule, P=2, M=8
    .venv/bin/python benchmarks/bench_runtime_vs_torch.py --schedule 1f1b -P 4 --steps 6

Prints the median step time of each (after one warm-up step), the ratio pplab ÷ torch, the
gradient error of each against the single-process reference, and where torch's per-rank order
for the same (P, M, V) differs from pplab's (torch schedules expose ``pipeline_order``).
The torch side runs as ``torchrun benchmarks/bench_runtime_vs_torch.py --torch-worker JOB``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pplab.registry import TORCH_CLASSES  # noqa: E402
from scratch import scratch_tmpdir  # noqa: E402  (benchmarks/scratch.py, next to this file)


def torch_worker(job_path: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S

    from pplab.runtime.model import (TinyConfig, TinyGPT, build_stage_modules, make_batch,
                                     make_optimizer)
    from pplab.registry import make_schedule

    job = json.load(open(job_path))
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, P = dist.get_rank(), dist.get_world_size()
    cfg = TinyConfig()
    sched = make_schedule(job["schedule"], P, job["M"], job["V"])
    my = sched.stages_of_rank(rank)
    mods = build_stage_modules(sched, cfg, 0, my)
    dev = torch.device("cpu")
    stages = [PipelineStage(mods[s], s, sched.num_stages, dev) for s in my]

    def loss_fn(logits, tgt):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), tgt.reshape(-1))

    cls = getattr(S, TORCH_CLASSES[job["schedule"]])
    multi = issubclass(cls, S.PipelineScheduleMulti)
    pipe = cls(stages if multi else stages[0], n_microbatches=job["M"], loss_fn=loss_fn)
    # the same work as a pplab step: a new batch each step, then SGD with momentum (pplab's
    # default optimizer), inside the timed region on both sides
    opt = make_optimizer([p for m in mods.values() for p in m.parameters()])
    times = []
    grads = {}
    for step in range(job["steps"]):
        inputs, targets = make_batch(cfg, job["M"], 0, step)
        dist.barrier()
        t0 = time.perf_counter()
        first = any(sched.is_first(s) for s in my)
        last = any(sched.is_last(s) for s in my)
        kw = {}
        if last:
            kw = {"target": targets, "losses": []}
        if first:
            pipe.step(inputs, **kw)
        else:
            pipe.step(**kw)
        if step == 0:       # checked against one process, before the optimizer moves weights
            grads = {n: p.grad.clone() for m in mods.values() for n, p in m.named_parameters()}
        opt.step()
        opt.zero_grad(set_to_none=True)
        dist.barrier()
        times.append(time.perf_counter() - t0)
    order = getattr(pipe, "pipeline_order", None) or None   # filled in by the first step
    if not order or not any(order.values()):
        # runtime classes keep the lowered order (with SEND/RECV actions) here
        order = getattr(pipe, "pipeline_order_with_comms", None)
    gathered = [None] * P if rank == 0 else None
    dist.gather_object(grads, gathered, dst=0)
    if rank == 0:
        full = TinyGPT(cfg, 0)
        inputs, targets = make_batch(cfg, job["M"], 0, 0)
        full(inputs, targets).backward()
        merged = {}
        for g in gathered:
            merged.update(g)
        err = max(float((merged[n] - p.grad).norm() / p.grad.norm())
                  for n, p in full.named_parameters())
        txt = None
        if order is not None:
            import re
            keep = re.compile(r"^(\d+[FBIW]\d+|\(.*\))$")
            # an overlapped pair prints as "(0F3;3B1)OVERLAP_F_B": keep pplab's "(0F3;3B1)"
            names = {r: [re.sub(r"\)[A-Z_]+$", ")", str(a)) for a in acts if a is not None]
                     for r, acts in order.items()}
            txt = {int(r): [t for t in ts if keep.match(t)] for r, ts in names.items()}
        json.dump({"times": times, "grad_err": err, "order": txt}, open(job["out"], "w"))
    dist.destroy_process_group()


def run_torch(schedule: str, P: int, M: int, V: int | None, steps: int) -> dict:
    tmp = tempfile.mkdtemp(prefix="torch-run-")      # inside main's scratch folder
    job = {"schedule": schedule, "M": M, "V": V, "steps": steps,
           "out": os.path.join(tmp, "out.json")}
    path = os.path.join(tmp, "job.json")
    json.dump(job, open(path, "w"))
    from pplab.runtime.launcher import _free_port
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={P}",
           "--master-addr=127.0.0.1", f"--master-port={_free_port()}",
           f"--log-dir={os.path.join(tmp, 'logs')}", os.path.abspath(__file__),
           "--torch-worker", path]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env,
                         start_new_session=True)
    if out.returncode != 0:
        raise SystemExit(f"torch.distributed.pipelining run failed:\n{out.stdout[-3000:]}"
                         f"\n{out.stderr[-3000:]}")
    return json.load(open(job["out"]))


def recompute_overhead(M: int = 8, repeats: int = 7) -> None:
    """In one process: forward + backward of the whole model over M microbatches with each
    recomputation mode; saved-for-backward peak (all M alive, as GPipe holds them) and time."""
    import torch

    from pplab.runtime.model import TinyConfig, _Tracked, build_stage_modules, make_batch
    from pplab.runtime.worker import SavedTensorTracker
    from pplab.registry import make_schedule

    torch.set_num_threads(1)
    cfg = TinyConfig()
    sched = make_schedule("gpipe", 1, M)
    rows = {}
    for mode in ("none", "full", "selective", "stage"):
        mod = build_stage_modules(sched, cfg, 0, [0], mode)[0]
        inputs, targets = make_batch(cfg, M, 0, 0)
        times, peak = [], 0
        for _ in range(repeats):
            tr = SavedTensorTracker()
            tr.exclude = {p.untyped_storage().data_ptr() for p in mod.parameters()}
            _Tracked.track = tr.track
            t0 = time.perf_counter()
            losses = []
            with tr.hooks():
                for i in range(M):
                    n = cfg.microbatch_size
                    losses.append(mod(inputs[i * n:(i + 1) * n], targets[i * n:(i + 1) * n]) / M)
            for loss in losses:
                loss.backward()
            times.append(time.perf_counter() - t0)
            _Tracked.track = None
            peak = tr.peak
            mod.zero_grad(set_to_none=True)
        rows[mode] = (statistics.median(times), peak)
    base_t, base_b = rows["none"]
    print(f"recomputation, whole model, M={M} microbatches alive (GPipe-like), 1 thread:")
    for mode, (t, b) in rows.items():
        print(f"  {mode:9s} step {t * 1e3:7.1f} ms ({(t / base_t - 1) * 100:+5.1f} %)   saved "
              f"{b / 1e6:6.2f} MB ({(b / base_b - 1) * 100:+5.1f} %)")


def compare(name: str, P: int, M: int, V, steps: int, repeats: int):
    """Run one schedule under both runtimes ``repeats`` times, alternating which goes first
    (drift on a shared machine hits both alike); print medians, the median of the per-repeat
    ratios, gradient errors and order differences."""
    from pplab.runtime import run_schedule
    from pplab.registry import make_schedule
    sched = make_schedule(name, P, M, V)
    pp_times, to_times, ratios = [], [], []
    for k in range(repeats):
        runs = {}
        for side in (("pplab", "torch") if k % 2 == 0 else ("torch", "pplab")):
            if side == "pplab":   # both sides time the pipeline step plus one SGD step
                runs[side] = run_schedule(sched, steps=steps, timeout=600)
            else:
                runs[side] = run_torch(name, P, M, V, steps)
        res, tor = runs["pplab"], runs["torch"]
        t_pp = res.step_time_s
        t_to = statistics.median(tor["times"][1:] if len(tor["times"]) > 1 else tor["times"])
        pp_times.append(t_pp)
        to_times.append(t_to)
        ratios.append(t_pp / t_to)
    t_pp, t_to, ratio = (statistics.median(x) for x in (pp_times, to_times, ratios))
    print(f"\nschedule {name} P={P} M={M} V={sched.V} ({res.backend}, {res.device}), "
          f"{repeats} alternating repeats of {steps} steps")
    print(f"pplab  median step {t_pp * 1e3:8.2f} ms   grad max rel error {res.grad_max_rel_error:.2e}")
    print(f"torch  median step {t_to * 1e3:8.2f} ms   grad max rel error {tor['grad_err']:.2e}")
    print(f"ratio pplab / torch = {ratio:.2f} (median of {', '.join(f'{r:.2f}' for r in ratios)})")
    same = res.grad_max_rel_error <= 1e-5 and tor["grad_err"] <= 1e-5
    print(f"both match the single-process gradients: {same}")
    if not tor["order"] or not any(tor["order"].values()):
        print("torch exposes no pipeline_order for this (single-stage) schedule class")
    else:
        for r in range(P):
            mine = sched.rank_texts()[r]
            theirs = tor["order"].get(str(r), [])  # JSON keys are strings
            if mine == theirs:
                print(f"rank {r}: same order")
            else:
                print(f"rank {r}: pplab {' '.join(mine)}")
                print(f"rank {r}: torch {' '.join(theirs)}")
    return name, t_pp, t_to, ratio, same


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedule", default="all", choices=["all", *sorted(TORCH_CLASSES)],
                    help="one schedule, or all that torch provides (default)")
    ap.add_argument("-P", type=int, default=2)
    ap.add_argument("-M", type=int, default=8)
    ap.add_argument("-V", type=int, default=None)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3,
                    help="alternating pplab/torch launches per schedule; the ratio is their median")
    ap.add_argument("--torch-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--recompute-overhead", action="store_true",
                    help="only measure activation recomputation (in one process) and exit")
    a = ap.parse_args()
    if a.recompute_overhead:
        recompute_overhead(a.M)
        return 0
    if a.torch_worker:
        torch_worker(a.torch_worker)
        return 0
    names = sorted(TORCH_CLASSES) if a.schedule == "all" else [a.schedule]
    with scratch_tmpdir():       # every folder pplab or torch makes goes, failures included
        summary = [compare(name, a.P, a.M, a.V, a.steps, a.repeats) for name in names]
    if len(summary) > 1:
        print("\nschedule      pplab ms   torch ms   pplab/torch   same gradients")
        for name, t_pp, t_to, ratio, same in summary:
            print(f"{name:12s} {t_pp * 1e3:9.1f} {t_to * 1e3:10.1f} {ratio:13.2f}   {same}")
        ratios = sorted(ratio for _, _, _, ratio, _ in summary)
        print(f"median ratio {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
