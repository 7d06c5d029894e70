"""Bytes per GPU, per pipeline rank: parameters, gradients, optimizer states, activations.

Why per rank: the first rank holds the embedding, the last the final norm and the output
layer, and the schedule decides how many microbatches' activations each rank keeps alive —
so the ranks of one pipeline really do differ, and the largest one decides what fits.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..ir import Schedule
from ..inflight import inflight_profile, inflight_walk, peak_inflight_of
from . import activations as act
from .model_spec import ModelSpec, Split
from .parallel import ParallelConfig


def model_states_bytes(psi: float, dp: int = 1, zero: int = 0, bytes_param: float = 2,
                       bytes_grad: float = 2, bytes_optim: float = 12,
                       regather: str = "per_microbatch", layer_psi: float = 0.0,
                       reduce: str = "per_microbatch", microbatches: int = 1
                       ) -> tuple[float, float, float]:
    """(parameters, gradients, optimizer) bytes on one GPU holding ``psi`` parameters.

    ZeRO paper (Rajbhandari et al. 2020) §5: stage 1 shards the optimizer states over the
    N_d data-parallel ranks, stage 2 also the gradients, stage 3 (= FSDP) also the parameters:
    16Ψ → 4Ψ + 12Ψ/N_d → 2Ψ + 14Ψ/N_d → 16Ψ/N_d for mixed-precision Adam.

    ZeRO-3 needs each layer whole while it runs. ``regather="per_microbatch"`` gathers one
    layer at a time and frees it after use, so on top of the shards one layer's parameters
    and its unreduced gradient are whole (``layer_psi`` parameters: the ZeRO paper's
    constant-size buffers). ``"per_step"`` keeps the stage gathered for the whole step, and
    its gradients unsharded until the last backward: parameters and gradients then cost what
    ZeRO-1 costs — only the optimizer states stay sharded.

    ZeRO-2 over ``microbatches`` > 1 (gradient accumulation, or a pipeline's M): ``reduce=
    "per_microbatch"`` reduce-scatters each microbatch's gradients one layer at a time, so on
    top of the shard one layer's gradient is whole (``layer_psi``); ``"per_step"`` sums them
    in a whole-size accumulator and reduce-scatters once: ZeRO-1's gradient bytes.
    """
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {zero}")
    p, g, o = psi * bytes_param, psi * bytes_grad, psi * bytes_optim
    if zero >= 1:
        o /= dp
    if zero == 2 and reduce == "per_step" and microbatches > 1:
        return p, g, o
    if zero >= 2:
        g /= dp
    if zero == 2:
        g += layer_psi * bytes_grad * (1 - 1 / dp)
    if zero >= 3 and regather == "per_step":
        return psi * bytes_param, psi * bytes_grad, o
    if zero >= 3:
        p = p / dp + layer_psi * bytes_param * (1 - 1 / dp)
        g = g + layer_psi * bytes_grad * (1 - 1 / dp)
    return p, g, o


def states_bytes(model: ModelSpec, psi: float, cfg: ParallelConfig, expert: float = 0.0
                 ) -> tuple[float, float, float]:
    """``model_states_bytes`` for one rank of ``cfg`` holding ``psi`` parameters, ``expert``
    of them routed experts, which ZeRO shards over ``cfg.expert_shard`` instead (one layer
    is ZeRO-3's gather unit and ZeRO-2's reduce unit)."""
    unit = model.layer_params().per_rank(cfg.tp, cfg.ep)
    rest = model_states_bytes(psi - expert, cfg.shard, cfg.zero, cfg.bytes_param,
                              cfg.bytes_grad, cfg.bytes_optim, cfg.zero3_regather, unit,
                              cfg.zero2_reduce, cfg.microbatches)
    if not expert:
        return rest
    ex = model_states_bytes(expert, cfg.expert_shard, cfg.zero, cfg.bytes_param,
                            cfg.bytes_grad, cfg.bytes_optim, cfg.zero3_regather, 0.0,
                            cfg.zero2_reduce, cfg.microbatches)
    return tuple(x + y for x, y in zip(rest, ex))


def stage_param_split(model: ModelSpec, schedule: Schedule, stage: int, layers: range,
                      rank_stages: list[int]) -> Split:
    """Parameters of one stage: its layers, plus the embedding (first) or norm + head (last).

    With tied embeddings and PP > 1 the last stage keeps its own copy of the word embedding
    (Megatron-LM does this and all-reduces the two gradients) unless the same rank also
    holds the first stage of that model copy, as in a V-shape placement.
    """
    total = model.layers_params(layers)
    if schedule.is_first(stage):
        total = total + model.embedding_params()
    if schedule.is_last(stage):
        total = total + model.final_norm_params() + model.head_params()
        if model.tied_embeddings:
            first = stage - schedule.position(stage)
            if first not in rank_stages:
                total = total + Split(model.vocab * model.hidden, 0)
    return total


@dataclass
class RankMemory:
    """One pipeline rank (every GPU in its TP×DP group looks the same)."""
    rank: int
    stages: list[int]
    layers: int
    params_count: float          # parameters on one GPU of this rank, before ZeRO sharding
    params: float
    grads: float
    optimizer: float
    activations: float
    inflight: float              # peak microbatches alive, in rank-share units (stage equivalents)
    experts_count: float = 0.0   # of params_count, the routed experts' (sharded by EP)

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations

    def to_dict(self) -> dict:
        return dict(asdict(self), total=self.total)


@dataclass
class MemoryReport:
    model: ModelSpec
    config: ParallelConfig
    schedule: Schedule
    per_rank: list[RankMemory] = field(default_factory=list)

    @property
    def peak_bytes(self) -> float:
        return max(r.total for r in self.per_rank)

    @property
    def peak_rank(self) -> int:
        return max(self.per_rank, key=lambda r: r.total).rank

    @property
    def gpus(self) -> int:
        return self.config.num_gpus

    def to_dict(self) -> dict:
        return {"model": asdict(self.model), "config": asdict(self.config),
                "schedule": self.schedule.name, "V": self.schedule.V, "gpus": self.gpus,
                "params_total": self.model.num_params(),
                "per_stage": [r.to_dict() for r in self.per_rank],
                "peak_bytes": self.peak_bytes, "peak_rank": self.peak_rank}


def layer_bytes(model: ModelSpec, cfg: ParallelConfig, seq: int | None = None,
                dense: bool = False) -> float:
    """Bytes one layer keeps for one microbatch, counted as ``cfg.activations`` says
    (``dense``: one of a MoE model's dense layers)."""
    full = seq or model.seq
    s, b, t = cfg.local_seq(full), cfg.microbatch, cfg.tp
    if model.moe or model.mla:
        return act.moe_layer_bytes(model, s, b, dense or model.moe is None, t, cfg.recompute,
                                   cfg.activations == "fp8", full)
    if cfg.activations == "kept":
        return act.kept_layer_bytes(s, b, model.hidden, model.heads, model.kv * model.head_dim,
                                    model.ffn, t, cfg.sp, cfg.recompute, cfg.bytes_act, full)
    return act.layer_activation_bytes(s, b, model.hidden, model.heads, t, cfg.sp,
                                      cfg.recompute, cfg.bytes_act, full)


def layer_units(model: ModelSpec, cfg: ParallelConfig, layers: range,
                seq: int | None = None) -> float:
    """The layers ``layers`` keep, in units of ``layer_bytes`` (their count, unless some are
    a MoE model's smaller dense layers)."""
    dense = sum(1 for i in layers if model.moe and model.is_dense(i))
    if not dense:
        return len(layers)
    return len(layers) - dense + dense * layer_bytes(model, cfg, seq, True) / \
        layer_bytes(model, cfg, seq)


def end_extra_bytes(model: ModelSpec, cfg: ParallelConfig, seq: int | None = None
                    ) -> tuple[float, float]:
    """(first stage, last stage) bytes beyond their layers for one microbatch. Korthikanti
    §4.3: the embedding's dropout mask; the final norm's and the output layer's inputs and the
    fp32 logits. Counted as ``"kept"``: no dropout, so nothing on the first stage; the final
    norm's output (the output layer's input) and the logits on the last."""
    s, b, t = cfg.local_seq(seq or model.seq), cfg.microbatch, cfg.tp
    last = act.last_stage_extra_bytes(s, b, model.hidden, model.vocab, t, cfg.sp,
                                      cfg.bytes_act)
    if cfg.activations == "kept":
        return 0.0, last - 2 * s * b * model.hidden * cfg.bytes_act / 2 / (t if cfg.sp else 1)
    return act.first_stage_extra_bytes(s, b, model.hidden, t, cfg.sp), last


def stage_activation_bytes(model: ModelSpec, cfg: ParallelConfig, schedule: Schedule,
                           stage: int, layers: range, seq: int | None = None) -> float:
    """Bytes one microbatch leaves alive on ``stage`` until its backward: layers + extras."""
    out = layer_units(model, cfg, layers, seq) * layer_bytes(model, cfg, seq)
    first, last = end_extra_bytes(model, cfg, seq)
    if schedule.is_first(stage):
        out += first
    if schedule.is_last(stage):
        out += last
    return out


def stage_w_pending_bytes(model: ModelSpec, cfg: ParallelConfig, schedule: Schedule,
                          stage: int, layers: range, seq: int | None = None) -> float:
    """Bytes a microbatch keeps on ``stage`` between its ``I`` and its ``W`` (split backwards
    only): what the weight gradients still need, well below the full activations."""
    s, b, t = cfg.local_seq(seq or model.seq), cfg.microbatch, cfg.tp
    # each part never more than what the whole microbatch keeps (under full recomputation a
    # pending W could re-run its forward from the kept input instead)
    layer = min(act.layer_w_pending_bytes(s, b, model.hidden, t, cfg.sp, cfg.bytes_act),
                layer_bytes(model, cfg, seq))
    out = len(layers) * layer
    if schedule.is_last(stage):
        out += min(act.last_stage_w_pending_bytes(s, b, model.hidden, model.vocab, t, cfg.sp,
                                                  cfg.bytes_act),
                   end_extra_bytes(model, cfg, seq)[1])
    return out


def split_profile(ops, full: dict[int, float], pending_w: dict[int, float]) -> list[tuple]:
    """Per part of each op of one rank's run order: (bytes alive, whole microbatches, pending
    Ws), by the timeline's in-flight rule: a forward leaves ``full[stage]`` alive; ``I``
    shrinks it to ``pending_w[stage]`` until its ``W``; a full ``B`` frees it."""
    walk = inflight_walk(ops, full, pending_w)
    return list(zip(walk.levels, walk.whole, walk.waiting))


def peak_split(schedule: Schedule, full: dict[int, float] | None = None,
               pending_w: dict[int, float] | None = None) -> list[tuple]:
    """Per rank at its peak: (weight alive, whole microbatches, pending Ws). By default a whole
    microbatch counts 1 and a pending W counts 0, so the counts are read at the peak of whole
    ones; pass bytes to find the peak in bytes."""
    full = full or {st: 1.0 for st in range(schedule.num_stages)}
    pending_w = pending_w or {st: 0.0 for st in range(schedule.num_stages)}
    return [max(split_profile(ops, full, pending_w), default=(0.0, 0, 0))
            for ops in schedule.ranks]


def peak_weighted(schedule: Schedule, weights: dict[int, float]) -> list[float]:
    """Per-rank peak of Σ weight(stage) over the (stage, microbatch) activations alive at once.

    The same walk over the run order as ``peak_inflight_of``; with weight = chunk_fraction
    it *is* ``peak_inflight_of(schedule, stage_equivalents=True)``.
    """
    return [max(inflight_profile(ops, weights), default=0.0) for ops in schedule.ranks]


def memory_report(model: ModelSpec, cfg: ParallelConfig, schedule: Schedule | None = None,
                  seq: int | None = None) -> MemoryReport:
    """Validate ``cfg`` against ``model`` and account every pipeline rank's bytes per GPU."""
    sched = cfg.validate(model) if schedule is None else schedule
    ranges = cfg.stage_ranges(sched, model.layers)
    act_w = {st: stage_activation_bytes(model, cfg, sched, st, ranges[st], seq)
             for st in range(sched.num_stages)}
    w_w = {st: stage_w_pending_bytes(model, cfg, sched, st, ranges[st], seq)
           for st in range(sched.num_stages)}
    act_peak = [p[0] for p in peak_split(sched, act_w, w_w)]    # a pending W at its own size
    equiv = peak_inflight_of(sched, stage_equivalents=True)
    report = MemoryReport(model, cfg, sched)
    for r in range(sched.P):
        stages = sched.stages_of_rank(r)
        split = Split()
        for st in stages:
            split = split + stage_param_split(model, sched, st, ranges[st], stages)
        psi = split.per_rank(cfg.tp, cfg.ep)
        expert = split.expert / cfg.ep
        p, g, o = states_bytes(model, psi, cfg, expert)
        report.per_rank.append(RankMemory(r, stages, sum(len(ranges[s]) for s in stages), psi,
                                          p, g, o, act_peak[r], equiv[r], expert))
    return report
