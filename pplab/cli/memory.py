"""``pplab memory``: per-stage memory, bubble and communication for one TP×PP×DP layout,
or ``--plan`` to rank every layout that fits. Sizes print in GB = 1e9 bytes."""
from __future__ import annotations

import argparse
import json

from ..memory import ModelSpec, ParallelConfig, get_preset, memory_report
from ..memory.comm import Network, comm_times, comm_volumes
from ..memory.planner import LEAVES_OUT, Hardware, estimate, explain, plan

SHAPES = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", help="tiny, llama3-8b, llama3-70b, llama3-405b, gpt3-175b")
    for name in SHAPES:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name)
    p.add_argument("--arch", choices=("gpt", "llama"), help="layer style for explicit shapes")
    p.add_argument("--tied", action="store_true", help="tie embedding and output weights")
    p.add_argument("--seq", type=int, help="sequence length (default: the preset's)")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--dp", type=int, default=1)
    p.add_argument("--gpus", type=int, help="total GPUs; must equal TP×PP×DP")
    p.add_argument("--zero", type=int, default=0, help="ZeRO stage 0-3 (3 = FSDP)")
    p.add_argument("--zero3-regather", default="per_microbatch",
                   help="ZeRO-3 under PP: per_microbatch (gather again for every forward and "
                        "backward) or per_step (keep gathered; FSDP reshard_after_forward=False)")
    p.add_argument("--first-layers", type=int, help="layers on the first pipeline stage "
                   "(Megatron --decoder-first-pipeline-num-layers)")
    p.add_argument("--last-layers", type=int, help="layers on the last pipeline stage")
    p.add_argument("--sp", action="store_true", help="sequence parallelism")
    p.add_argument("--recompute", default="none", choices=("none", "selective", "full"))
    p.add_argument("--schedule", default="1f1b")
    p.add_argument("-V", "--virtual", type=int)
    p.add_argument("-M", "--microbatches", type=int, default=1)
    p.add_argument("--mbs", type=int, default=1, help="microbatch size (sequences)")
    p.add_argument("--gpu-memory", type=float, default=80, help="GB per GPU (planner)")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--intra-bw", type=float, default=450, help="GB/s per GPU inside a node")
    p.add_argument("--inter-bw", type=float, default=50, help="GB/s per GPU between nodes")
    p.add_argument("--gpu-flops", type=float, default=989,
                   help="peak TFLOP/s per GPU (989 = H100 dense bf16)")
    p.add_argument("--efficiency", type=float, default=0.4, help="share of peak reached")
    p.add_argument("--max-pp", type=int, default=16, help="deepest pipeline the planner tries")
    p.add_argument("--explain", action="store_true", help="the step time term by term")
    p.add_argument("--plan", action="store_true", help="rank all layouts for --gpus GPUs")
    p.add_argument("--global-batch", type=int, help="sequences per step (planner)")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--json", action="store_true")


def model_from_args(a) -> ModelSpec:
    given = {k: getattr(a, k) for k in SHAPES if getattr(a, k) is not None}
    if a.preset:
        m = get_preset(a.preset)
        if given:
            m = m.with_(**given)
    else:
        missing = [k for k in SHAPES if k != "kv_heads" and k not in given]
        if missing:
            raise ValueError("give --preset or all of --layers --hidden --heads --ffn --vocab "
                             f"(missing: {', '.join('--' + k for k in missing)})")
        m = ModelSpec("custom", seq=a.seq or 2048, tied_embeddings=a.tied,
                      arch=a.arch or "gpt", **given)
    if a.seq:
        m = m.with_(seq=a.seq)
    if a.tied:
        m = m.with_(tied_embeddings=True)
    return m


def main(a) -> int:
    model = model_from_args(a)
    net = Network(a.intra_bw * 1e9, a.inter_bw * 1e9, a.gpus_per_node)
    if a.gpu_flops <= 0 or not 0 < a.efficiency <= 1:
        raise ValueError(f"--gpu-flops must be > 0 and --efficiency in (0, 1], got "
                         f"{a.gpu_flops} and {a.efficiency}")
    hw = Hardware(memory=a.gpu_memory * 1e9, flops=a.gpu_flops * 1e12,
                  efficiency=a.efficiency, network=net)
    if a.plan:
        gpus = a.gpus or a.tp * a.pp * a.dp
        cands = plan(model, gpus, hw, global_batch=a.global_batch, micro_batches=(a.mbs,),
                     max_pp=a.max_pp, first_layers=a.first_layers, last_layers=a.last_layers)
        if a.json:
            print(json.dumps([{"config": c.describe(), "feasible": c.feasible,
                               "reason": c.reason, "step_time": c.step_time if c.feasible
                               else None, "peak_bytes": c.peak_bytes} for c in cands]))
            return 0
        ok = [c for c in cands if c.feasible]
        print(f"{model.name} on {gpus} GPUs × {a.gpu_memory:g} GB: {len(ok)} of {len(cands)} "
              f"layouts fit (GB = 1e9 bytes)")
        for c in ok[:a.top]:
            print("  " + c.describe())
        bad = [c for c in cands if not c.feasible]
        if bad:
            print("some that do not fit:")
            for c in bad[:: max(1, len(bad) // 5)][:5]:
                print("  " + c.describe())
        return 0
    cfg = ParallelConfig(a.tp, a.pp, a.dp, a.zero, a.sp, a.recompute, a.mbs, a.microbatches,
                         a.schedule, a.virtual, a.gpus, zero3_regather=a.zero3_regather,
                         first_layers=a.first_layers, last_layers=a.last_layers)
    rep = memory_report(model, cfg)
    vol = comm_volumes(model, cfg, rep.schedule)
    est = estimate(model, cfg, hw)
    if a.json:
        d = rep.to_dict()
        d.update(bubble_fraction=est["bubble_fraction"], step_time_estimate=est["step_time"],
                 time_model_leaves_out=list(LEAVES_OUT),
                 comm_bytes_per_step=vol, comm_seconds_per_step=comm_times(vol, cfg, net))
        print(json.dumps(d))
        return 0
    gb = 1e9
    print(f"{model.name} ({model.num_params() / 1e9:.2f}B params) TP={a.tp} PP={a.pp} "
          f"DP={a.dp} ZeRO-{a.zero}{' SP' if a.sp else ''} recompute={a.recompute} "
          f"{rep.schedule.name} V={rep.schedule.V} M={a.microbatches} b={a.mbs} "
          f"s={model.seq} — per GPU, GB = 1e9 bytes")
    print(f"{'rank':>4} {'layers':>6} {'in-flight':>9} {'params':>8} {'grads':>8} "
          f"{'optim':>8} {'activ':>8} {'total':>8}")
    for r in rep.per_rank:
        print(f"{r.rank:>4} {r.layers:>6} {r.inflight:>9.2f} {r.params / gb:>8.2f} "
              f"{r.grads / gb:>8.2f} {r.optimizer / gb:>8.2f} {r.activations / gb:>8.2f} "
              f"{r.total / gb:>8.2f}")
    print(f"peak {rep.peak_bytes / gb:.2f} GB on rank {rep.peak_rank}; {rep.gpus} GPUs; "
          f"bubble {est['bubble_fraction']:.1%} of the step (simulated)")
    print("communication per GPU per step: " + ", ".join(
        f"{k.upper()} {v / gb:.2f} GB" for k, v in vol.items()))
    if a.explain:
        for term, text in explain(model, cfg, hw):
            print(f"  {term:<22} {text}")
    else:
        print("the time model leaves out: " + "; ".join(LEAVES_OUT[:3]) + "; … (--explain)")
    return 0
