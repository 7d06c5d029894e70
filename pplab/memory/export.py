"""A planned layout in the words of the tool that will train it: a torchtitan TOML fragment or
Megatron-LM command-line arguments (``pplab plan --export torchtitan|megatron``).

Each tool runs only part of what the planner can price, so ``TOOLS`` narrows the search to
it (schedules, ZeRO stages) and ``cannot_run`` states the remaining rules; the export is the
fastest layout the tool can run. Names are the tools' own: torchtitan's ``JobConfig`` fields
(TOML sections ``[parallelism]``, ``[training]``, ``[activation_checkpoint]``; torchtitan
0.2, the last release configured by TOML) and Megatron-LM's ``megatron/training/
arguments.py`` flags. tests/core/test_plan_export.py feeds each export to the tool's own
config parser (torchtitan's ``ConfigManager``, Megatron Core's ``TransformerConfig``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..registry import TORCH_CLASSES, default_V
from ..partition import uneven_split
from .model_spec import ModelSpec
from .parallel import ParallelConfig


@dataclass(frozen=True)
class Tool:
    """What a training stack can run: the planner searches only these."""
    title: str
    schedules: tuple[str, ...]
    zero_stages: tuple[int, ...]
    zero_note: str                      # what its data parallelism offers, in its words
    zero3_regather: tuple[str, ...] = ("per_microbatch", "per_step")


TOOLS = {
    # torch.distributed.pipelining's schedules; FSDP2 (ZeRO-3, resharded after forward or
    # not) or DDP, which torchtitan applies only without TP and PP
    "torchtitan": Tool("torchtitan", ("1f1b", "interleaved", "zbv", "dualpipev", "gpipe"),
                       (0, 3), "torchtitan shards with FSDP (ZeRO-3) or replicates with DDP "
                       "(ZeRO-0); it has no ZeRO-1/2"),
    # Megatron-LM's 1F1B and interleaved 1F1B; DDP or its distributed optimizer (ZeRO-1)
    "megatron": Tool("Megatron-LM", ("1f1b", "interleaved"), (0, 1),
                     "this export covers Megatron-LM's DDP and distributed optimizer "
                     "(ZeRO-0/1), not its FSDP", ()),
}

#: torch's single-stage schedule classes: one stage per rank; the others want ≥ 2
SINGLE_STAGE = ("1F1B", "GPipe")


def torch_schedule_name(schedule: str) -> str:
    """The name torch's ``get_schedule_class`` (and torchtitan's config) takes: 1F1B,
    Interleaved1F1B, ZBVZeroBubble, DualPipeV, ..."""
    return TORCH_CLASSES[schedule].removeprefix("Schedule")


def cannot_run(tool: str, model: ModelSpec, cfg: ParallelConfig) -> str | None:
    """Why ``tool`` cannot run ``cfg`` (None: it can)."""
    t, V = TOOLS[tool], stages_per_rank(cfg)
    if cfg.pp > 1 and cfg.schedule not in t.schedules:
        return f"{t.title} has no {cfg.schedule} schedule"
    if cfg.zero not in t.zero_stages:
        return f"ZeRO-{cfg.zero}: {t.zero_note}"
    if tool == "megatron":
        return _megatron_split_rule(model, cfg, V)
    if tool == "torchtitan":
        if cfg.zero == 0 and cfg.dp > 1 and cfg.tp * cfg.pp * cfg.cp > 1:
            return "torchtitan's DDP (ZeRO-0) runs only without TP, CP and PP"
        if cfg.ep > 1 and cfg.zero != 3:
            return "torchtitan carves EP out of FSDP's shard degree: ZeRO-3 only"
        single = cfg.pp == 1 or torch_schedule_name(cfg.schedule) in SINGLE_STAGE
        if single != (V == 1):
            return f"torchtitan runs {cfg.schedule} with V = 1 only" if single else \
                f"torchtitan runs {cfg.schedule} with V ≥ 2 only"
        if cfg.pp > 1 and titan_split(model, cfg) is None:
            return (f"torchtitan cannot split the {model.layers} layers into pplab's "
                    f"{cfg.pp * V} stages ({_sizes_text(model, cfg)}) with its "
                    "first/last_stage_less_layers and layers_per_stage")
    return None


def stage_sizes(model: ModelSpec, cfg: ParallelConfig) -> list[int]:
    """Layers of every stage along the model, as pplab sizes them (``partition``)."""
    n = cfg.pp * stages_per_rank(cfg)
    return [len(r) for r in uneven_split(model.layers, n, cfg.first_layers, cfg.last_layers)]


def _sizes_text(model, cfg) -> str:
    sizes = stage_sizes(model, cfg)
    return ", ".join(map(str, sizes)) if len(sizes) <= 8 else \
        f"{sizes[0]}, {sizes[1]}, …, {sizes[-1]}"


def titan_sizes(stages: int, layers: int, less_first: int, less_last: int) -> list[int]:
    """The layers per stage torchtitan 0.2 builds (``generate_llm_fqn_per_model_part``): the
    embedding and the output each count as ``less_*`` layers, the total is split evenly with
    the remainder on the first stages, and the ends then give up those layers."""
    base, extra = divmod(layers + less_first + less_last, stages)
    sizes = [base + (i < extra) for i in range(stages)]
    sizes[0] -= less_first
    sizes[-1] -= less_last
    return sizes


def titan_split(model: ModelSpec, cfg: ParallelConfig) -> tuple[int, int, int | None] | None:
    """(first_stage_less_layers, last_stage_less_layers, layers_per_stage) with which
    torchtitan builds exactly pplab's stages, or None when no such values exist. torchtitan
    counts its stages as ceil((layers + less_first + less_last) / layers_per_stage) (None:
    not given, its default of 1 or 2 stages per rank), and each ``less`` may not exceed the
    layers per stage."""
    want = stage_sizes(model, cfg)
    n = len(want)
    top = max(want) + 1
    pairs = sorted(((a, b) for a in range(top + 1) for b in range(top + 1)),
                   key=lambda ab: (abs(ab[0] - ab[1]), sum(ab)))     # (1, 1) before (1, 0)
    default = 1 if torch_schedule_name(cfg.schedule) in SINGLE_STAGE else 2
    for a, b in pairs:
        eff = model.layers + a + b
        if max(a, b) > eff // n or titan_sizes(n, model.layers, a, b) != want:
            continue
        lps = -(-eff // n)
        if -(-eff // lps) == n:
            return a, b, lps
        if n == cfg.pp * default:      # without layers_per_stage: its default V
            return a, b, None
    return None


def _megatron_split_rule(model: ModelSpec, cfg: ParallelConfig, V: int) -> str | None:
    """Megatron-LM splits the layers evenly over the stages between fixed first/last ones."""
    if V > 1 and _ends_as_layers(model, cfg):
        return None
    ends = [n for n in (cfg.first_layers, cfg.last_layers) if n is not None]
    middle, rest = cfg.pp - len(ends), model.layers - sum(ends)
    if ends and middle and rest % middle:
        return f"Megatron-LM needs the middle stages' {rest} layers split evenly over {middle}"
    if V > 1 and model.layers % (cfg.pp * V):
        return f"Megatron-LM needs the {model.layers} layers in {cfg.pp * V} equal chunks"
    return None


def _ends_as_layers(model: ModelSpec, cfg: ParallelConfig) -> bool:
    """The embedding and the loss each take one layer's place in an even split (Megatron-LM's
    --account-for-embedding/loss-in-pipeline-split): the first and last chunks hold one layer
    fewer than the rest. Llama 3 405B's 126 layers on 16 × 8 chunks of 1 (§3.3.2)."""
    n = cfg.pp * stages_per_rank(cfg)
    k, rem = divmod(model.layers + 2, n)
    return rem == 0 and k >= 1 and cfg.first_layers == cfg.last_layers == k - 1


def stages_per_rank(cfg: ParallelConfig) -> int:
    """V as the schedule runs it (a V shape has 2 even when ``cfg.virtual`` is None)."""
    return 1 if cfg.pp == 1 else (cfg.virtual or default_V(cfg.schedule))


def torchtitan_toml(model: ModelSpec, cfg: ParallelConfig, seq: int) -> str:
    """``cfg`` as torchtitan TOML sections (without the model's name and flavor, which name
    a model in torchtitan's own registry)."""
    why = cannot_run("torchtitan", model, cfg)
    if why:
        raise ValueError(f"cannot export to torchtitan: {why}")
    shard = cfg.dp if cfg.zero == 3 else 1
    replicate = 1 if cfg.zero == 3 else cfg.dp
    lines = ["[parallelism]",
             f"data_parallel_replicate_degree = {replicate}",
             f"data_parallel_shard_degree = {shard}"]
    if cfg.zero == 3:
        keep = "never" if cfg.zero3_regather == "per_step" else "always"
        lines.append(f'fsdp_reshard_after_forward = "{keep}"')
    lines += [f"tensor_parallel_degree = {cfg.tp}",
              f"context_parallel_degree = {cfg.cp}",
              f"pipeline_parallel_degree = {cfg.pp}"]
    if cfg.ep > 1:             # experts whole on each EP rank: no TP inside an expert
        lines += [f"expert_parallel_degree = {cfg.ep}", "expert_tensor_parallel_degree = 1"]
    if cfg.pp > 1:
        stages = cfg.pp * stages_per_rank(cfg)
        lines += [f'pipeline_parallel_schedule = "{torch_schedule_name(cfg.schedule)}"',
                  f"pipeline_parallel_microbatch_size = {cfg.microbatch}"]
        less_first, less_last, per_stage = titan_split(model, cfg)
        if per_stage is not None:
            lines.append(f"pipeline_parallel_layers_per_stage = {per_stage}")
        # the end stages' share as torchtitan weighs the embedding and the output layer
        lines += [f"pipeline_parallel_first_stage_less_layers = {less_first}",
                  f"pipeline_parallel_last_stage_less_layers = {less_last}"]
    # torchtitan's local batch is one forward's: under PP its schedule cuts it into
    # microbatches; without PP it accumulates global ÷ (local · DP) forwards, one per microbatch
    local = cfg.microbatches * cfg.microbatch if cfg.pp > 1 else cfg.microbatch
    lines += ["", "[training]",
              f"local_batch_size = {local}",
              f"global_batch_size = {cfg.microbatches * cfg.microbatch * cfg.dp}",
              f"seq_len = {seq}",
              "", "[activation_checkpoint]"]
    if cfg.recompute == "selective":      # torch's per-op selective checkpointing
        lines += ['mode = "selective"', 'selective_ac_option = "op"']
    else:
        lines.append(f'mode = "{cfg.recompute}"')
    return "\n".join(lines) + "\n"


def megatron_args(model: ModelSpec, cfg: ParallelConfig, seq: int) -> list[str]:
    """``cfg`` and the model's shapes as Megatron-LM's pretrain_gpt.py arguments (DP is what
    is left of the world size: Megatron derives it)."""
    why = cannot_run("megatron", model, cfg)
    if why:
        raise ValueError(f"cannot export to Megatron-LM: {why}")
    a = ["--num-layers", model.layers, "--hidden-size", model.hidden,
         "--ffn-hidden-size", model.ffn, "--num-attention-heads", model.heads]
    if model.kv < model.heads:
        a += ["--group-query-attention", "--num-query-groups", model.kv]
    a += ["--seq-length", seq, "--max-position-embeddings", seq]
    if model.arch == "llama":
        a += ["--swiglu", "--normalization", "RMSNorm", "--position-embedding-type", "rope",
              "--disable-bias-linear"]
    if not model.tied_embeddings:
        a.append("--untie-embeddings-and-output-weights")
    if model.mla:
        m = model.mla
        a += ["--multi-latent-attention", "--q-lora-rank", m.q_rank, "--kv-lora-rank",
              m.kv_rank, "--qk-head-dim", m.nope_dim, "--qk-pos-emb-head-dim", m.rope_dim,
              "--v-head-dim", m.v_dim]
    if model.moe:
        x = model.moe
        freq = f"([0]*{x.dense_layers}+[1]*{model.layers - x.dense_layers})"
        a += ["--num-experts", x.experts, "--moe-router-topk", x.top_k,
              "--moe-ffn-hidden-size", x.ffn, "--moe-layer-freq", freq,
              "--expert-model-parallel-size", cfg.ep]
        if x.shared:
            a += ["--moe-shared-expert-intermediate-size", x.shared * x.ffn]
        # the router in fp32: DeepSeek-V3 keeps its MoE gating in higher precision (§3.3), and
        # Megatron Core warns that many experts without it are numerically unstable
        a += ["--moe-router-dtype", "fp32"]
    a += ["--bf16", "--tensor-model-parallel-size", cfg.tp,
          "--pipeline-model-parallel-size", cfg.pp]
    if cfg.cp > 1:
        a += ["--context-parallel-size", cfg.cp]
    V = stages_per_rank(cfg)
    if V > 1 and _ends_as_layers(model, cfg):
        a += ["--num-virtual-stages-per-pipeline-rank", V,
              "--account-for-embedding-in-pipeline-split",
              "--account-for-loss-in-pipeline-split"]
    elif V > 1:
        a += ["--num-layers-per-virtual-pipeline-stage", model.layers // (cfg.pp * V)]
    if cfg.first_layers is not None and not (V > 1 and _ends_as_layers(model, cfg)):
        a += ["--decoder-first-pipeline-num-layers", cfg.first_layers]
    if cfg.last_layers is not None and not (V > 1 and _ends_as_layers(model, cfg)):
        a += ["--decoder-last-pipeline-num-layers", cfg.last_layers]
    if cfg.sp and cfg.tp > 1:
        a.append("--sequence-parallel")
    a += ["--micro-batch-size", cfg.microbatch,
          "--global-batch-size", cfg.microbatches * cfg.microbatch * cfg.dp]
    if cfg.recompute == "selective":          # Megatron's default: the attention core
        a += ["--recompute-granularity", "selective"]
    elif cfg.recompute == "full":
        a += ["--recompute-granularity", "full", "--recompute-method", "uniform",
              "--recompute-num-layers", 1]
    if cfg.zero == 1:
        a.append("--use-distributed-optimizer")
    return [str(x) for x in a]


def megatron_text(model: ModelSpec, cfg: ParallelConfig, seq: int) -> str:
    """``megatron_args`` one flag per line, joined by shell line continuations."""
    args, lines = megatron_args(model, cfg, seq), []
    for x in args:
        if x.startswith("--") or not lines:
            lines.append(x)
        else:
            lines[-1] += f" {x}"
    return " \\\n".join(lines) + "\n"
