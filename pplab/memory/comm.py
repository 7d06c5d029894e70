"""Bytes each GPU sends per training step, by parallelism axis, and rough times for them.

Volumes are per GPU (the busiest pipeline rank), counting a ring all-reduce of n bytes over
k ranks as 2(k−1)/k·n sent (reduce-scatter + all-gather, each (k−1)/k·n).

* TP (Megatron-LM, Narayanan et al. 2021 §3): 2 all-reduces of the s·b·h activation in each
  layer's forward and 2 in its backward (+2 more when full recomputation reruns the
  forward). Sequence parallelism swaps each all-reduce for an all-gather + reduce-scatter of
  the same total volume (Korthikanti §4.2.2). The vocab-parallel embedding/loss reductions
  are left out (small next to L layers).
* PP: one activation forward and one gradient backward per stage boundary per microbatch,
  s·b·h/t values each (Megatron's scatter/gather optimisation; with SP it is already
  sharded). Interleaving multiplies hops by V; V-shapes skip the same-rank turn.
* DP (ZeRO paper §7): all-reduce of the gradients, 2Ψ per step; ZeRO-1/2 the same
  (reduce-scatter of the gradients + all-gather of the updated parameters, each at its own
  width) — ZeRO-2 only when it sums the M microbatches' gradients whole and reduce-scatters
  once (``zero2_reduce="per_step"``); reduce-scattering after every microbatch
  (``"per_microbatch"``, what keeps only a shard) sends the gradients M times. ZeRO-3/FSDP
  moves 3Ψ per pass through the model: the parameters gathered for the forward and again
  for the backward, the gradients reduce-scattered. Under PP (or gradient accumulation)
  with M microbatches that is per microbatch when parameters are freed after use
  (``zero3_regather="per_microbatch"``, 3MΨ), and Ψ + Ψ per step when they stay gathered
  (``"per_step"``: one gather, one reduce-scatter of the accumulated gradients) — the memory
  model charges each mode its matching bytes (``accounting.model_states_bytes``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Schedule
from .model_spec import ModelSpec
from .parallel import ParallelConfig


@dataclass(frozen=True)
class Network:
    """Per-GPU bandwidths in bytes/s. Defaults: NVLink-class inside a node (H100: 450 GB/s
    each way), InfiniBand-class between nodes (400 Gb/s NIC per GPU = 50 GB/s).

    ``latency``: seconds each message costs on top of its bytes (a ring collective over k
    ranks sends 2(k − 1) of them in turn, a pipeline hop one); 0 leaves it out. ``pod_gpus``
    and ``oversubscription``: an axis that spans more than a pod of GPUs shares the links
    above it, so it gets inter_node ÷ oversubscription (Llama 3's 1:7 above a pod, "The
    Llama 3 Herd of Models" §3.3.1); None leaves it out."""
    intra_node: float = 450e9
    inter_node: float = 50e9
    gpus_per_node: int = 8
    latency: float = 0.0
    pod_gpus: int | None = None
    oversubscription: float = 1.0


def ring_allreduce_sent(nbytes: float, k: int) -> float:
    return 0.0 if k <= 1 else 2 * (k - 1) / k * nbytes


def comm_volumes(model: ModelSpec, cfg: ParallelConfig, schedule: Schedule,
                 seq: int | None = None) -> dict[str, float]:
    """Bytes sent per step by one GPU of the busiest rank on each axis: tp, pp, dp, cp
    under context parallelism (``cp_layer_bytes`` per layer and microbatch) and ep under
    expert parallelism (``ep_layer_bytes`` per MoE layer and microbatch)."""
    s, b, t = cfg.local_seq(seq or model.seq), cfg.microbatch, cfg.tp
    act = s * b * model.hidden * cfg.bytes_act
    ranges = cfg.stage_ranges(schedule, model.layers)
    per_mb = schedule.microbatches_per_copy
    n_ar = 4 + (2 if cfg.recompute == "full" else 0)
    tp, pp, cp, ep = [], [], [], []
    for r in range(schedule.P):
        stages = schedule.stages_of_rank(r)
        layers = sum(len(ranges[st]) for st in stages)
        tp.append(layers * per_mb * n_ar * ring_allreduce_sent(act, t))
        cp.append(layers * per_mb * cp_layer_bytes(model, cfg, seq))
        moe = sum(1 for st in stages for i in ranges[st] if not model.is_dense(i))
        ep.append(moe * per_mb * ep_layer_bytes(model, cfg, seq))
        hops = 0
        for st in stages:
            if not schedule.is_last(st) and schedule.stage_to_rank[st + 1] != r:
                hops += per_mb                                     # activations forward
            if not schedule.is_first(st) and schedule.stage_to_rank[st - 1] != r:
                hops += per_mb                                     # gradients backward
        pp.append(hops * act / t)
    dp = dp_volume(_max_params(model, cfg, schedule), cfg, per_mb)
    return ({"tp": max(tp), "pp": max(pp), "dp": dp} | ({"cp": max(cp)} if cfg.cp > 1 else {})
            | ({"ep": max(ep)} if cfg.ep > 1 else {}))


def cp_layer_bytes(model: ModelSpec, cfg: ParallelConfig, seq: int | None = None) -> float:
    """Bytes one GPU sends for one layer and one microbatch under context parallelism (ring
    attention): its s/CP tokens' keys and values (kv_heads·head_dim each, ÷TP) passed on CP − 1
    times in the forward, and again in the backward with their gradients coming back: 3×.
    Megatron-LM's and torchtitan's ring overlaps these with the attention blocks they feed;
    here they count like TP's all-reduces (see ``LEAVES_OUT``)."""
    if cfg.cp == 1:
        return 0.0
    s = cfg.local_seq(seq or model.seq)
    kv = 2 * s * cfg.microbatch * model.kv * model.head_dim / cfg.tp * cfg.bytes_act
    return 3 * (cfg.cp - 1) * kv


def ep_layer_bytes(model: ModelSpec, cfg: ParallelConfig, seq: int | None = None) -> float:
    """Bytes one GPU sends for one MoE layer and one microbatch under expert parallelism,
    forward and backward: each of its s·b/TP tokens goes to ``top_k`` experts (dispatch) and
    comes back (combine), the share (EP − 1)/EP to other ranks; the backward sends the
    gradients the same ways. The dispatch in FP8 and the combine in BF16 with
    ``activations="fp8"`` (DeepSeek-V3 §3.3.3), both at ``bytes_act`` otherwise."""
    if cfg.ep == 1 or model.moe is None:
        return 0.0
    tokens = cfg.local_seq(seq or model.seq) * cfg.microbatch / cfg.tp
    dispatch = 1 if cfg.activations == "fp8" else cfg.bytes_act
    one_way = tokens * model.moe.top_k * model.hidden * (cfg.ep - 1) / cfg.ep
    return 2 * one_way * (dispatch + cfg.bytes_act)


def dp_volume(psi: float, cfg: ParallelConfig, passes: int | None = None) -> float:
    """Bytes per step, times (d−1)/d: 2Ψ of gradients (all-reduce); ZeRO-1/2 Ψ of gradients
    reduce-scattered + Ψ of parameters all-gathered, the gradients once per microbatch
    (``passes`` of them: M, or M per copy for DualPipe) when ZeRO-2 reduces per microbatch;
    ZeRO-3 3Ψ per microbatch when it re-gathers per microbatch, Ψ + Ψ when it keeps the
    parameters gathered for the step."""
    d = cfg.shard
    if d <= 1:
        return 0.0
    n = cfg.microbatches if passes is None else passes
    if cfg.zero >= 3:
        gather, scatter = zero3_bytes(psi, cfg, n)
        return (d - 1) / d * (gather + scatter)
    if cfg.zero == 0:
        return 2 * (d - 1) / d * psi * cfg.bytes_grad
    return (d - 1) / d * psi * (zero12_scatters(cfg, n) * cfg.bytes_grad + cfg.bytes_param)


def zero12_scatters(cfg: ParallelConfig, passes: int) -> int:
    """How many times a step ZeRO-1/2 reduce-scatters a rank's gradients: once, or once per
    microbatch pass when ZeRO-2 reduces per microbatch."""
    return passes if cfg.zero == 2 and cfg.zero2_reduce == "per_microbatch" else 1


def zero3_bytes(psi: float, cfg: ParallelConfig, passes: int) -> tuple[float, float]:
    """ZeRO-3's (all-gathered, reduce-scattered) full-size bytes per step for ``psi``
    parameters: a ring moves (d−1)/d of each to every GPU."""
    if cfg.zero3_regather == "per_step":
        return psi * cfg.bytes_param, psi * cfg.bytes_grad
    return 2 * passes * psi * cfg.bytes_param, passes * psi * cfg.bytes_grad


def _max_params(model, cfg, schedule) -> float:
    from .accounting import stage_param_split
    ranges = cfg.stage_ranges(schedule, model.layers)
    best = 0.0
    for r in range(schedule.P):
        stages = schedule.stages_of_rank(r)
        tot = sum((stage_param_split(model, schedule, st, ranges[st], stages).per_rank(cfg.tp)
                   for st in stages), 0.0)
        best = max(best, tot)
    return best


def axis_bandwidths(cfg: ParallelConfig, net: Network) -> dict[str, float]:
    """Rank order TP (innermost), CP, DP, PP (outermost), Megatron's default: an axis stays
    inside a node while the product of it and the axes inside it fits in one node, and
    shares the oversubscribed links above a pod once that product outgrows a pod."""
    n = net.gpus_per_node
    inside = {"tp": cfg.tp, "cp": cfg.tp * cfg.cp, "ep": cfg.tp * cfg.cp * cfg.ep,
              "dp": cfg.tp * cfg.cp * cfg.dp, "pp": cfg.num_gpus}
    above = net.inter_node / net.oversubscription
    return {k: net.intra_node if v <= n else
            above if net.pod_gpus and v > net.pod_gpus else net.inter_node
            for k, v in inside.items()}


def comm_times(volumes: dict[str, float], cfg: ParallelConfig,
               net: Network | None = None) -> dict[str, float]:
    """Seconds per step if nothing overlapped: volume / the axis's per-GPU bandwidth."""
    bw = axis_bandwidths(cfg, net or Network())
    return {k: v / bw[k] for k, v in volumes.items()}
