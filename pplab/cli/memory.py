"""``pplab memory``: per-stage memory, bubble and communication for one TP×PP×DP layout, and
a one-line warning when it does not fit the GPU. Sizes in the unit that fits them
(kB … TB, 10³ steps). ``--plan`` is ``pplab plan``'s old spelling and runs it."""
from __future__ import annotations

import argparse
import json
import sys

from ..memory import ParallelConfig, memory_report
from ..memory.comm import comm_times, comm_volumes
from ..memory.parallel import RECOMPUTE, ZERO2_REDUCE, ZERO3_REGATHER
from ..memory.planner import LEAVES_OUT, estimate, explain
from ..memory.units import fmt_bytes, fmt_count, fmt_seconds
from .checks import add_pmv
from .plan import add_activations_argument, add_plan_arguments
from .sizing import add_hardware_arguments, add_model_arguments, hardware_from_args, \
    model_flags, model_from_args


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    g = p.add_argument_group("layout")
    g.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (default: 1)")
    g.add_argument("--pp", type=int, default=1, help="pipeline ranks (default: 1)")
    g.add_argument("--dp", type=int, default=1, help="data-parallel replicas (default: 1)")
    g.add_argument("--cp", type=int, default=1,
                   help="context-parallel ranks, each with s/CP of every sequence (default: 1)")
    g.add_argument("--ep", type=int, default=1,
                   help="expert-parallel ranks among the DP·CP ones, each with experts/EP of "
                        "every MoE layer's routed experts (default: 1)")
    g.add_argument("--gpus", type=int, default=None,
                   help="total GPUs, must equal TP×PP×DP (default: TP×PP×DP)")
    g.add_argument("--zero", type=int, default=0, choices=range(4), metavar="{0,1,2,3}",
                   help="ZeRO stage, 3 = FSDP (default: 0)")
    g.add_argument("--zero3-regather", default="per_microbatch", choices=ZERO3_REGATHER,
                   help="ZeRO-3 under PP: gather again for every forward and backward, or keep "
                        "gathered for the step, FSDP reshard_after_forward=False "
                        "(default: %(default)s)")
    g.add_argument("--zero2-reduce", default="per_microbatch", choices=ZERO2_REDUCE,
                   help="ZeRO-2 over M microbatches: reduce-scatter after every backward (only "
                        "a shard kept), or sum whole and reduce once a step "
                        "(default: %(default)s)")
    g.add_argument("--first-layers", type=int, default=None, help="layers on the first "
                   "pipeline stage, Megatron's --decoder-first-pipeline-num-layers (default: "
                   "an even split)")
    g.add_argument("--last-layers", type=int, default=None,
                   help="layers on the last pipeline stage (default: an even split)")
    g.add_argument("--sp", action="store_true", help="sequence parallelism (default: off)")
    g.add_argument("--recompute", default="none", choices=RECOMPUTE,
                   help="activation recomputation (default: %(default)s)")
    g.add_argument("--schedule", "-s", default="1f1b", metavar="NAME",
                   help="pipeline schedule (default: %(default)s)")
    add_activations_argument(g)
    add_pmv(g, P=None)
    g.add_argument("--mbs", type=int, default=1,
                   help="microbatch size in sequences (default: 1)")
    add_hardware_arguments(p)
    p.add_argument("--explain", action="store_true", help="the step time term by term")
    p.add_argument("--plan", action="store_true",
                   help="rank every layout for --gpus GPUs: the same as pplab plan")
    add_plan_arguments(p, "with --plan: ")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")


def main(a) -> int:
    if a.plan:
        from . import plan
        return plan.run_plan(a)
    model = model_from_args(a)
    hw = hardware_from_args(a)
    if a.explain and a.json:
        raise ValueError("--explain and --json do not combine: --json already carries the "
                         "step time's terms; drop one")
    if a.sp and a.tp == 1:
        raise ValueError("--sp needs --tp ≥ 2: sequence parallelism splits what the TP ranks "
                         "would each hold whole")
    cfg = ParallelConfig(a.tp, a.pp, a.dp, a.zero, a.sp, a.recompute, a.mbs, a.M,
                         a.schedule, a.V, a.gpus, zero3_regather=a.zero3_regather,
                         zero2_reduce=a.zero2_reduce,
                         first_layers=a.first_layers, last_layers=a.last_layers, cp=a.cp,
                         activations=a.activations, ep=a.ep)
    rep = memory_report(model, cfg)
    vol = comm_volumes(model, cfg, rep.schedule)
    est = estimate(model, cfg, hw)
    if rep.peak_bytes > hw.memory:
        print(f"pplab: warning: does not fit: needs {fmt_bytes(rep.peak_bytes)} on rank "
              f"{rep.peak_rank}, {fmt_bytes(rep.peak_bytes - hw.memory)} over the "
              f"{fmt_bytes(hw.memory, exact=True)} GPU (--gpu {a.gpu}); pplab plan "
              f"{model_flags(a)} --gpus {rep.gpus} lists layouts that fit", file=sys.stderr)
    if a.json:
        d = rep.to_dict()
        d.update(bubble_fraction=est["bubble_fraction"], step_time_estimate=est["step_time"],
                 exposed_comm=est["exposed_comm"], gpu_memory_bytes=hw.memory,
                 fits=rep.peak_bytes <= hw.memory, time_model_leaves_out=list(LEAVES_OUT),
                 comm_bytes_per_step=vol, comm_seconds_per_step=comm_times(vol, cfg,
                                                                           hw.network))
        print(json.dumps(d))
        return 0
    _print_report(a, model, cfg, rep, vol, est, hw)
    return 0


def _print_report(a, model, cfg, rep, vol, est, hw) -> None:
    print(f"{model.name} ({fmt_count(model.num_params())} parameters) TP={cfg.tp} PP={cfg.pp} "
          f"DP={cfg.dp} ZeRO-{cfg.zero}{' SP' if cfg.sp else ''} recompute={cfg.recompute} "
          f"{rep.schedule.name} V={rep.schedule.V} M={cfg.microbatches} b={cfg.microbatch} "
          f"s={model.seq}; per GPU")
    print(f"{'rank':>4} {'layers':>6} {'in-flight':>9} {'params':>9} {'grads':>9} "
          f"{'optim':>9} {'activ':>9} {'total':>9}")
    for r in rep.per_rank:
        print(f"{r.rank:>4} {r.layers:>6} {r.inflight:>9.2f} " + " ".join(
            f"{fmt_bytes(x):>9}" for x in (r.params, r.grads, r.optimizer, r.activations,
                                          r.total)))
    spare = hw.memory - rep.peak_bytes
    fit = f"fits, {fmt_bytes(spare)} to spare" if spare >= 0 else \
        f"does not fit, {fmt_bytes(-spare)} over"
    print(f"peak {fmt_bytes(rep.peak_bytes)} on rank {rep.peak_rank} of the "
          f"{fmt_bytes(hw.memory, exact=True)} GPU: {fit}; {rep.gpus} GPUs")
    print(f"step ≈ {fmt_seconds(est['step_time'])}: pipeline bubble "
          f"{est['bubble_fraction']:.1%} of its makespan, exposed communication "
          f"{fmt_seconds(est['exposed_comm'])}")
    print("communication per GPU per step: " + ", ".join(
        f"{k.upper()} {fmt_bytes(v)}" for k, v in vol.items()))
    if a.explain:
        for term, text in explain(model, cfg, hw):
            print(f"  {term:<22} {text}")
    else:
        print("the time model leaves out: " + "; ".join(LEAVES_OUT[:3]) + "; … (--explain)")
