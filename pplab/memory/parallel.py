"""How the model is spread over GPUs: TP × PP × DP, ZeRO, recomputation, the pipeline schedule.

``validate`` checks the configuration against a model and says, in one line, which rule is
broken and what would be valid — the command line prints exactly that line.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir import Schedule
from ..partition import stage_layers
from ..registry import make_schedule
from .activations import ACTIVATION_MODELS
from .model_spec import ModelSpec

#: recomputation modes: the memory model predicts the first three; the runtime also runs
#: "stage" (GPipe's whole-stage re-materialization), measured but not in the parallel model
RECOMPUTE = ("none", "selective", "full")
RUNTIME_RECOMPUTE = RECOMPUTE + ("stage",)
#: when ZeRO-3/FSDP gathers a stage's parameters under PP with M microbatches (see
#: ``ParallelConfig``): again for every forward and backward, or once, kept for the whole step
ZERO3_REGATHER = ("per_microbatch", "per_step")
#: when ZeRO-2 reduce-scatters the gradients of M microbatches: after every microbatch's
#: backward into the sharded sum, or once, after the last, from a whole-size accumulator
ZERO2_REDUCE = ("per_microbatch", "per_step")


@dataclass(frozen=True)
class ParallelConfig:
    """One training layout. Bytes default to mixed-precision Adam: 2 + 2 + 12 per parameter
    (bf16 weights and gradients; fp32 master weights, momentum and variance — ZeRO paper §3.1).

    ``microbatch`` is b (sequences per microbatch), ``microbatches`` is M per step and per
    DP replica. ``virtual`` is V, the stages (chunks) per pipeline rank; None lets the
    schedule pick its default (2 for interleaved, bfs, zbv, dualpipev; 1 otherwise).
    ``gpus`` is the total; None means TP×PP×DP.

    ``zero3_regather`` (ZeRO-3 only): ``"per_microbatch"`` frees the gathered parameters after
    each use, as the ZeRO paper's stage 3 and FSDP's default ``reshard_after_forward=True`` do,
    so each forward and each backward of each microbatch all-gathers them again and each
    backward reduce-scatters its gradients; ``"per_step"`` keeps them gathered from the first
    forward to the last backward (FSDP2's ``reshard_after_forward=False``; torch's pipeline
    schedules then also keep the unsharded gradients until the last backward), so one gather
    and one reduce-scatter per step, but parameters and gradients are not sharded meanwhile.
    ``zero2_reduce`` (ZeRO-2 only): ``"per_microbatch"`` reduce-scatters each microbatch's
    gradients as its backward produces them (DeepSpeed's stage 2), so only a shard is
    accumulated but the gradients cross the DP group M times a step; ``"per_step"`` adds them
    up whole over the M microbatches and reduce-scatters once, so the DP traffic is ZeRO-1's
    and so are the gradient bytes held during the step.
    ``first_layers`` / ``last_layers`` fix the layer counts of the model's first and last
    pipeline stage (Megatron-LM's ``--decoder-first/last-pipeline-num-layers``).
    ``cp`` is context parallelism: each of CP ranks holds s/CP of every sequence's tokens
    (their activations and compute; ring attention passes the keys and values around), and
    keeps the parameters whole like a DP replica, so gradients are reduced and ZeRO shards
    over DP·CP (``shard``), as Megatron-LM and torchtitan do.
    ``activations`` says how a layer's kept activations are counted: ``"korthikanti"``
    (Korthikanti et al. 2022, Table 2: a GPT layer), ``"kept"`` (the tensors the model's
    own layer leaves for its backward, ``activations.kept_layer_bytes``; Llama-style only) or
    ``"fp8"`` (DeepSeek-V3's recipe, ``activations.moe_layer_bytes``).
    ``ep`` is expert parallelism: the routed experts of every MoE layer spread over EP ranks
    carved out of the DP·CP ranks (experts/EP whole experts each), so an expert's gradients
    are reduced and its ZeRO shards split over DP·CP/EP (``expert_shard``); each MoE layer
    sends every token to its experts and back, an all-to-all in the forward and the backward.
    """
    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: int = 0
    sp: bool = False
    recompute: str = "none"
    microbatch: int = 1
    microbatches: int = 1
    schedule: str = "1f1b"
    virtual: int | None = None
    gpus: int | None = None
    bytes_param: float = 2
    bytes_grad: float = 2
    bytes_optim: float = 12
    bytes_act: float = 2             # bytes per activation value (Korthikanti assumes 16-bit)
    zero3_regather: str = "per_microbatch"
    zero2_reduce: str = "per_microbatch"
    first_layers: int | None = None
    last_layers: int | None = None
    cp: int = 1
    activations: str = "korthikanti"
    ep: int = 1

    @property
    def expert_shard(self) -> int:
        """The ranks holding the same experts: DP·CP ÷ EP."""
        return self.shard // self.ep

    @property
    def num_gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def shard(self) -> int:
        """The ranks holding the same parameters: DP × CP (gradients reduced, ZeRO shards)."""
        return self.dp * self.cp

    def local_seq(self, seq: int) -> int:
        """Tokens of each sequence on one rank: s / CP."""
        return seq // self.cp

    def with_(self, **changes) -> "ParallelConfig":
        return replace(self, **changes)

    def stage_ranges(self, schedule: Schedule, layers: int) -> list[range]:
        """Layer range of every stage, with this layout's first/last stage counts."""
        return stage_layers(schedule, layers, self.first_layers, self.last_layers)

    def make_schedule(self) -> Schedule:
        """The pipeline schedule; make_schedule raises ValueError for invalid P/M/V combos."""
        return make_schedule(self.schedule, self.pp, self.microbatches, self.virtual)

    def validate(self, model: ModelSpec, schedule_fn=None) -> Schedule:
        """Raise ValueError (one clear line) for a layout the model cannot take.

        ``schedule_fn(name, P, M, V)`` replaces ``make_schedule`` (the planner passes a cached
        one)."""
        for name in ("tp", "cp", "pp", "dp", "microbatch", "microbatches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3 (3 = FSDP), got {self.zero}")
        if self.zero3_regather not in ZERO3_REGATHER:
            raise ValueError(f"zero3_regather must be one of {', '.join(ZERO3_REGATHER)}, "
                             f"got {self.zero3_regather!r}")
        if self.zero2_reduce not in ZERO2_REDUCE:
            raise ValueError(f"zero2_reduce must be one of {', '.join(ZERO2_REDUCE)}, "
                             f"got {self.zero2_reduce!r}")
        if self.activations not in ACTIVATION_MODELS:
            raise ValueError(f"activations must be one of {', '.join(ACTIVATION_MODELS)}, "
                             f"got {self.activations!r}")
        if self.activations != "korthikanti" and model.arch != "llama":
            raise ValueError(f"activations={self.activations!r} counts a Llama-style layer "
                             f"(RMSNorm, GQA, SwiGLU); {model.name} is {model.arch!r}: use "
                             "'korthikanti'")
        if self.activations == "korthikanti" and (model.moe or model.mla):
            raise ValueError(f"Korthikanti's count is a GPT layer's; {model.name} has experts "
                             "or latent attention: use activations 'kept' or 'fp8'")
        if self.activations == "fp8" and not (model.moe or model.mla):
            raise ValueError("activations='fp8' is DeepSeek-V3's recipe for a model with "
                             "experts or latent attention; use 'kept'")
        if self.ep < 1 or self.shard % self.ep:
            raise ValueError(f"EP={self.ep} must divide DP·CP = {self.shard}: expert-parallel "
                             "ranks are carved out of the data-parallel ones")
        if self.ep > 1 and (model.moe is None or model.moe.experts % self.ep):
            experts = model.moe.experts if model.moe else 0
            raise ValueError(f"EP={self.ep} needs a MoE model whose experts it divides; "
                             f"{model.name} has {experts}")
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, "
                             f"got {self.recompute!r}")
        if self.gpus is not None and self.gpus != self.num_gpus:
            cp = f"×{self.cp}" if self.cp > 1 else ""
            raise ValueError(f"{self.gpus} GPUs ≠ TP×{'CP×' if cp else ''}PP×DP = {self.tp}{cp}"
                             f"×{self.pp}×{self.dp} = {self.num_gpus}; choose degrees whose "
                             f"product is {self.gpus}")
        if model.seq % (2 * self.cp) and self.cp > 1:
            raise ValueError(f"CP={self.cp} needs the sequence ({model.seq}) in 2·CP equal "
                             "chunks (each rank takes one from each end, to balance the "
                             "causal attention)")
        if model.heads % self.tp:
            raise ValueError(f"TP={self.tp} does not divide the {model.heads} attention heads "
                             f"of {model.name}; use a TP degree that divides {model.heads}")
        if model.kv % self.tp:
            raise ValueError(f"TP={self.tp} does not divide the {model.kv} KV heads of "
                             f"{model.name}; use TP ≤ {model.kv} dividing it")
        if model.ffn % self.tp:
            raise ValueError(f"TP={self.tp} does not divide the FFN size {model.ffn}")
        if self.pp > model.layers:
            raise ValueError(f"PP={self.pp} > {model.layers} layers of {model.name}: every "
                             f"stage needs at least one layer; use PP ≤ {model.layers}")
        sched = (self.make_schedule() if schedule_fn is None else
                 schedule_fn(self.schedule, self.pp, self.microbatches, self.virtual))
        empty_ends = (self.first_layers == 0) + (self.last_layers == 0)
        if sched.stages_per_copy - empty_ends > model.layers:
            raise ValueError(f"{sched.name} with PP={self.pp}, V={sched.V} cuts the model into "
                             f"{sched.stages_per_copy} stages but {model.name} has only "
                             f"{model.layers} layers; lower PP or V")
        self.stage_ranges(sched, model.layers)          # raises for bad first/last counts
        return sched
