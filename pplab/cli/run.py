"""``pplab run``: run a schedule for real across torchrun processes and report what happened."""
from __future__ import annotations

import json
import sys

from . import add_cost_arguments, cost_values
from .checks import add_pmv, checkpoint_folder, writable_file, writable_folder

#: processes one node starts: a node has at most a few dozen cores or 8–16 GPUs
MAX_LOCAL_RANKS = 64


MODEL_FLAGS = {"layers": "transformer blocks (default: 8)",
               "hidden": "hidden size (default: 64)", "heads": "attention heads (default: 4)",
               "ffn": "MLP width (default: 256)", "seq": "sequence length (default: 32)",
               "mbs": "microbatch size (default: 2)", "vocab": "vocabulary (default: 256)",
               "dtype": "float32 | bfloat16 | float16 | float64 (default: float32)"}


def model_config(args):
    """TinyConfig from the model flags given, the defaults for the rest (always a config:
    run_schedule sets exactly the fields it is handed, so None would mean no model)."""
    given = {k: getattr(args, k) for k in MODEL_FLAGS if getattr(args, k) is not None}
    from ..runtime.model import TinyConfig
    if "mbs" in given:
        given["microbatch_size"] = given.pop("mbs")
    return TinyConfig(**given)          # ValueError names the bad field


def add_arguments(p) -> None:
    p.add_argument("--schedule", "-s", required=True, metavar="NAME",
                   help="schedule name, e.g. 1f1b, zbv, dualpipe, or torch's class name "
                        "(required)")
    add_pmv(p, P_help="pipeline ranks (processes)")
    p.add_argument("--steps", type=int, default=2, help="optimizer steps (default: 2)")
    p.add_argument("--emulate", action="store_true",
                   help="add emulated durations per op (seconds per chunk: --tf --tb --tw --tfb)")
    add_cost_arguments(p, "emulated seconds per chunk", tf=0.02, tb=0.04, tw=0.0, tfb=None)
    p.add_argument("--recompute", choices=["none", "full", "selective", "stage"], default="none",
                   help="full: every block; selective: attention core; stage: a stage's blocks "
                        "as one region, GPipe's re-materialization (default: none)")
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd",
                   help="optimizer of the training step (default: sgd)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: a GPU per local rank if there are enough, else CPU "
                        "(default: auto)")
    p.add_argument("--seed", type=int, default=0, help="model and data seed (default: 0)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="whole-job timeout, seconds (default: 120)")
    p.add_argument("--comm-timeout", type=float, default=None,
                   help="seconds a rank may wait on one receive before it is declared stuck "
                        "(default: a third of --timeout, within 5..60)")
    p.add_argument("--nnodes", type=int, default=None,
                   help="nodes; run the same command on each, P/nnodes ranks per node "
                        "(default: 1, or under srun the step's nodes, with node rank and "
                        "endpoint from Slurm)")
    p.add_argument("--node-rank", type=int, default=None,
                   help="this node's index, 0..nnodes-1 (default: 0, or Slurm's)")
    p.add_argument("--rdzv-endpoint", default=None,
                   help="node 0's HOST:PORT, reachable by all nodes (default: this host, or "
                        "Slurm's first node)")
    p.add_argument("--socket-ifname", default=None, metavar="IFACE",
                   help="network interface the ranks talk over (default: the one that routes to "
                        "the rendezvous host; sets GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME)")
    p.add_argument("--comm", choices=["auto", "up-front", "in-order", "front-loaded",
                                      "just-in-time"], default="auto",
                   help="message posting: up-front (gloo's default), in-order (NCCL's), or "
                        "front-loaded / just-in-time (blocking receives, torch#188833); "
                        "auto picks by backend (default: auto)")
    m = p.add_argument_group("model shape (defaults: the tiny CPU model)")
    for name, help_ in MODEL_FLAGS.items():
        m.add_argument(f"--{name}", type=str if name == "dtype" else int, default=None,
                       help=help_)
    p.add_argument("--save-checkpoint", default=None, metavar="DIR",
                   help="save parameters and optimizer state after the run (default: none)")
    p.add_argument("--load-checkpoint", default=None, metavar="DIR",
                   help="start from a --save-checkpoint folder, any P (default: none)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="draw the measured timeline (default: none)")
    p.add_argument("--trace", default=None, metavar="JSON",
                   help="write a Chrome trace (default: none)")


def _check(args) -> None:
    if args.P < 1 or args.M < 1:
        raise ValueError(f"-P and -M must be ≥ 1, got P={args.P}, M={args.M}")
    if args.steps < 1:
        raise ValueError(f"--steps must be ≥ 1, got {args.steps}")
    if args.timeout <= 0:
        raise ValueError(f"--timeout must be > 0 seconds, got {args.timeout}")
    local = args.P // max(1, args.nnodes or 1)
    if local > MAX_LOCAL_RANKS:
        raise ValueError(f"-P {args.P} starts {local} processes on this node, more than "
                         f"{MAX_LOCAL_RANKS}; use --nnodes to spread them")
    writable_file("--plot", args.plot)
    writable_file("--trace", args.trace)
    writable_folder("--save-checkpoint", args.save_checkpoint)
    checkpoint_folder("--load-checkpoint", args.load_checkpoint)
    if not args.emulate and any(getattr(args, k) != d for k, d in
                                (("tf", 0.02), ("tb", 0.04), ("tw", 0.0), ("tfb", None))):
        raise ValueError("--tf/--tb/--tw/--tfb only make sense with --emulate")


def _check_class_limits(P: int, nnodes: int | None, timeout: float) -> None:
    """In a class (pplab.probe.policy), the run panel's limits: a cluster run's nodes,
    processes per node, partition, account/QOS and minutes (its ``--timeout``, and its
    Slurm job's time limit); a run on one node within the server's cores. PolicyError (a
    ValueError: one line, which limit and who sets it) if not."""
    from ..probe.policy import limits, slurm_job
    policy, nnodes = limits(), nnodes or 1
    if policy is not None:         # (a one-node run needs nothing of Slurm: squeue not asked)
        policy.check_run(P, nnodes, timeout, slurm_job() if nnodes > 1 else None)


def main(args) -> int:
    _check(args)
    from ..runtime import RunError, run_schedule   # imports torch only for this command
    emulate = None
    if args.emulate:
        emulate = cost_values(args, "tf", "tb", "tw", "tfb")
    progress = None if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    from ..runtime.cluster import resolve_nodes    # flags, else a multi-node srun step's
    nnodes, node_rank, endpoint = resolve_nodes(args.nnodes, args.node_rank, args.rdzv_endpoint)
    _check_class_limits(args.P, nnodes, args.timeout)
    try:
        res = run_schedule(args.schedule, P=args.P, M=args.M, V=args.V, steps=args.steps,
                           emulate=emulate, recompute=args.recompute, timeout=args.timeout,
                           progress=progress, device=args.device, comm_timeout=args.comm_timeout,
                           optimizer=args.optimizer, seed=args.seed, nnodes=nnodes,
                           node_rank=node_rank, rdzv_endpoint=endpoint,
                           socket_ifname=args.socket_ifname,
                           save_checkpoint=args.save_checkpoint,
                           load_checkpoint=args.load_checkpoint, model=model_config(args),
                           comm=args.comm)
    except RunError as e:
        print(f"pplab: run failed: {e}", file=sys.stderr)
        return 1
    if args.plot:
        try:
            from ..draw import draw_timeline
        except ImportError as e:
            raise ValueError(f"--plot needs pplab.draw (matplotlib): {e}") from None
        fig = draw_timeline(res.timeline, overlay=res.simulated,
                            title=f"{res.schedule.name} measured (P={args.P}, M={args.M})")
        fig.savefig(args.plot, dpi=120, bbox_inches="tight")
    if args.trace:
        try:
            from ..trace import write_chrome_trace
        except ImportError as e:
            raise ValueError(f"--trace needs pplab.trace: {e}") from None
        write_chrome_trace(res.timeline, args.trace)
    d = res.to_dict()
    if args.json:
        print(json.dumps(d))
        return 0
    print(f"{d['schedule']}: P={d['P']} M={d['M']} V={d['V']} on {d['backend']}/{d['device']}"
          + (f" ({d['note']})" if d["note"] else ""))
    dtype = getattr(args, "dtype", None) or "float32"
    import torch
    eps = torch.finfo(getattr(torch, dtype)).eps
    print(f"loss {d['loss']:.6f} (reference {d['reference_loss']:.6f}), max relative gradient "
          f"error {d['grad_max_rel_error']:.2e} ({dtype} round-off unit: {eps:.1e})")
    print(f"step time {d['step_time_s'] * 1e3:.1f} ms (median after warm-up), bubble fraction "
          f"{d['bubble_fraction']:.3f}" + (f" (simulated {d['simulated_bubble_fraction']:.3f})"
                                           if "simulated_bubble_fraction" in d else ""))
    print(f"peak in-flight microbatches per rank {d['peak_inflight']}, saved-for-backward peak "
          f"bytes per rank {d['peak_saved_bytes']}")
    if d["cuda_peak_bytes"]:
        print("CUDA peak allocated per rank: "
              + ", ".join(f"{b / 1e9:.3f} GB" for b in d["cuda_peak_bytes"]))
    if d["nnodes"] > 1:
        from ..runtime.cluster import nodes_line
        print(nodes_line(d["placement"]))
    for r, row in enumerate(d["ranks"]):
        print(f"rank {r}: " + " ".join(row))
    return 0
