"""Published training runs against pplab's models, row by row: whether pplab can state the
layout, its per-GPU memory and whether it fits where it ran, where the published layout
ranks among the planner's fitting layouts, and predicted ÷ published throughput. The table
in docs/memory.md ("Published runs") is ``markdown()``; a test regenerates and compares it.

Sources: Megatron-LM Table 1 (Narayanan et al. 2021, "Efficient Large-Scale Language Model
Training on GPU Clusters Using Megatron-LM"; ``megatron_table1``), "The Llama 3 Herd of
Models" Table 4 (``published_run``), the DeepSeek-V3 Technical Report §3.2 (arXiv
2412.19437; ``deepseek_layout``).
"""
from __future__ import annotations

from . import megatron_table1 as mt
from . import published_run as pr
import math

from .hardware import Hardware, hardware
from .parallel import ParallelConfig
from .planner import split_ends, estimate, plan, rank_among, sized
from .presets import get_preset

#: DeepSeek-V3 Technical Report (arXiv 2412.19437): 2,048 H800 GPUs, 8 a node (§3.1), NVLink
#: at 160 GB/s and InfiniBand at 50 GB/s per GPU (§3.2.2); 16-way PP, 64-way EP over 8 nodes
#: and ZeRO-1 DP, no TP (§3.2), DualPipe (§3.2.1); sequences of 4K and, after the ramp, a batch
#: of 15,360 sequences (§4.2); AdamW moments in BF16, master weights and accumulated gradients
#: in FP32 (§3.3.3): 2 + 4 + 8 bytes per parameter; activations by its recipe (``"fp8"``:
#: §3.2.3, §3.3.3). Not printed: the microbatch (one sequence here, so M = 15,360 ÷ DP 128 =
#: 120), nor how the 61 layers split: pplab splits them as its planner splits every layout
#: (``planner.split_ends``: on DualPipeV's 32 chunks, 1 + 30·2 + 0, the head alone on the last).
#: pplab runs DualPipe as DualPipeV (the V-shape placement: one copy of the parameters,
#: where DualPipe keeps two; ``dualpipe_as_run`` sizes the two copies) and leaves out the
#: multi-token-prediction module.
DEEPSEEK_GPUS, DEEPSEEK_BATCH, DEEPSEEK_DP = 2048, 15360, 128
H800 = hardware("h800-80gb")
#: "training DeepSeek-V3 on each trillion tokens requires only 180K H800 GPU hours" (§1)
DEEPSEEK_TOKENS_PER_GPU_S = 1e12 / (180e3 * 3600)
DEEPSEEK = "DeepSeek-V3 671B, 2,048 H800"
#: the EP degrees the planner tries against it: none, one node, the report's
DEEPSEEK_EPS = (1, 8, 64)


def deepseek_layout():
    """(model, ParallelConfig) of DeepSeek-V3's pre-training layout as the report states it."""
    model = get_preset("deepseek-v3")
    M = DEEPSEEK_BATCH // DEEPSEEK_DP
    first, last = split_ends(model, 16, "dualpipev", None, None, None, M)
    cfg = ParallelConfig(tp=1, pp=16, dp=DEEPSEEK_DP, zero=1, recompute="selective",
                         microbatches=M, schedule="dualpipev", ep=64, bytes_grad=4,
                         bytes_optim=8, activations="fp8", first_layers=first,
                         last_layers=last)
    cfg.validate(model)
    return model, cfg


def dualpipe_as_run():
    """(model, ParallelConfig) of the report's layout on DualPipe itself: two copies of the
    model, each rank holding stage r of one and stage 15 − r of the other (§3.2.1), so twice
    DualPipeV's layers per rank at the same PP 16; the split as the planner gives it."""
    model, cfg = deepseek_layout()
    first, last = split_ends(model, 16, "dualpipe", None, None, None, cfg.microbatches)
    cfg = cfg.with_(schedule="dualpipe", first_layers=first, last_layers=last)
    cfg.validate(model)
    return model, cfg


def deepseek_ratio(efficiency: float) -> float:
    """pplab's predicted ÷ the published tokens per GPU-second at ``efficiency``."""
    model, cfg = deepseek_layout()
    hw = Hardware(memory=H800.memory, efficiency=efficiency, network=H800.network)
    step = estimate(model, cfg, hw)["step_time"]
    tokens = cfg.microbatches * cfg.microbatch * cfg.dp * model.seq
    return tokens / (step * cfg.num_gpus) / DEEPSEEK_TOKENS_PER_GPU_S


def _deepseek(eff: float) -> dict:
    model, cfg = deepseek_layout()
    mine, _ = sized(model, cfg, H800)
    cands = [c for c in plan(model, cfg.num_gpus, H800, global_batch=DEEPSEEK_BATCH,
                             activations=cfg.activations, eps=DEEPSEEK_EPS,
                             bytes_grad=cfg.bytes_grad, bytes_optim=cfg.bytes_optim)
             if c.feasible]
    return {"run": DEEPSEEK, "source": "DeepSeek-V3 Technical Report, §3.2, §4.2",
            "layout": "PP=16 EP=64 DP=128 ZeRO-1 DualPipe", "expressible": True,
            "peak_gb": mine.peak_bytes / 1e9, "fits": mine.feasible,
            "rank": rank_among(mine, cands), "of": len(cands),
            "ratio": deepseek_ratio(0.4), "efficiency": 0.4, "fitted": deepseek_ratio(eff),
            "held_out": True}


#: Llama 3 405B as it ran, where ``published_run.layout``'s defaults (lesson 14 takes them
#: apart) put it over 80 GB. "The Llama 3 Herd of Models" §3.3.2: FSDP "shards optimizer
#: states and gradients" and reduce-scatters them in FP32, so the fp32 gradients are a shard,
#: reduced as each microbatch's backward produces them, not a whole-size accumulator; and
#: "based on detailed memory allocation profiling, we proactively deallocate tensors that will
#: not be used for future computation", so a layer keeps what its own backward needs
#: (``activations.kept_layer_bytes``: 27.75·s·b·h/t for 405B's GQA and SwiGLU) and not
#: Korthikanti's GPT layer (34·s·b·h/t: LayerNorm inputs, dropout masks, full-width K and V).
LLAMA3_AS_RUN = {"zero2_reduce": "per_microbatch", "activations": "kept"}

#: the runs the one efficiency is fitted to; every other row is held out
FIT_ON = ("GPT 145.6B, 1,536 A100", "Llama 3 405B, 8,192 H100, seq 8,192")


def _name(row) -> str:
    if isinstance(row, mt.Row):
        return f"GPT {row.params_b:g}B, {row.gpus:,} A100"
    return f"Llama 3 405B, {row.gpus:,} H100, seq {row.seq:,}"


def throughput_ratio(row, efficiency: float) -> float:
    """pplab's predicted ÷ the published throughput of ``row``'s own layout at
    ``efficiency`` (the share of peak the matmuls reach), on the row's GPU."""
    if isinstance(row, mt.Row):
        step = estimate(mt.model_of(row), mt.paper_config(row), mt.a100(efficiency))
        return mt.paper_flops(row) / (step["step_time"] * row.gpus) / 1e12 / row.tflops
    model, cfg = llama3_layout(row)
    step = estimate(model, cfg, Hardware(efficiency=efficiency))["step_time"]
    return pr.implied_step_time(row) / step


def _runs() -> list:
    return list(mt.TABLE1[-4:]) + list(pr.TABLE4)


def fitted_efficiency() -> float:
    """The one efficiency at which the ``FIT_ON`` runs' throughput ratios have a geometric
    mean of 1 (bisection: the ratio rises with efficiency), then held fixed for every row."""
    fit = [r for r in _runs() if _name(r) in FIT_ON]
    lo, hi = 0.05, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if sum(math.log(throughput_ratio(r, mid)) for r in fit) < 0:
            lo = mid
        else:
            hi = mid
    return round((lo + hi) / 2, 4)


def _megatron(row: mt.Row) -> dict:
    d = mt.reproduce(row)
    return {"run": f"GPT {row.params_b:g}B, {row.gpus:,} A100",
            "source": "Narayanan et al. 2021, §5.1, Table 1", "layout": d["layout"],
            "expressible": True, "peak_gb": d["peak_gb"], "fits": d["feasible"],
            "rank": d["rank"], "of": d["of"], "ratio": d["tflops_ratio"],
            "efficiency": mt.EFFICIENCY}


def llama3_layout(row: pr.Row):
    """(model, ParallelConfig) of a Table 4 row as it ran (``LLAMA3_AS_RUN``), the CP row
    with CP = 16 and ``published_run.layout``'s other settings."""
    if row.cp == 1:
        return pr.layout(row, **LLAMA3_AS_RUN)
    base = get_preset("llama3-405b").with_(seq=row.seq)
    k = pr.end_layers(row.pp, pr.LLAMA3_V)
    cfg = ParallelConfig(row.tp, row.pp, row.dp, zero=2, bytes_grad=4, sp=True,
                         recompute="selective", microbatches=row.batch_per_dp,
                         schedule="interleaved", virtual=pr.LLAMA3_V, first_layers=k,
                         last_layers=k, cp=row.cp, **LLAMA3_AS_RUN)
    cfg.validate(base)
    return base, cfg


def _llama(row: pr.Row) -> dict:
    model, cfg = llama3_layout(row)
    mine, _ = sized(model, cfg)
    cands = [c for c in plan(model, row.gpus, global_batch=row.sequences,
                             cps=(1, row.cp) if row.cp > 1 else (1,),
                             activations=cfg.activations, bytes_grad=cfg.bytes_grad,
                             bytes_optim=cfg.bytes_optim, virtual=(2, 4, pr.LLAMA3_V))
             if c.feasible]
    cp = f" CP={row.cp}" if row.cp > 1 else ""
    return {"run": f"Llama 3 405B, {row.gpus:,} H100, seq {row.seq:,}",
            "source": "Llama 3 Herd of Models, §3.3.2, Table 4",
            "layout": f"TP={row.tp}{cp} PP={row.pp} DP={row.dp}", "expressible": True,
            "peak_gb": mine.peak_bytes / 1e9, "fits": mine.feasible,
            "rank": rank_among(mine, cands), "of": len(cands),
            "ratio": pr.implied_step_time(row) / mine.step_time, "efficiency": 0.4}


def rows() -> list[dict]:
    """Every published run: Megatron-LM's four largest, Llama 3's three, DeepSeek-V3."""
    eff = fitted_efficiency()
    out = [(_megatron(r) if isinstance(r, mt.Row) else _llama(r)) |
           {"fitted": throughput_ratio(r, eff), "held_out": _name(r) not in FIT_ON}
           for r in _runs()]
    return out + [_deepseek(eff)]


def markdown() -> str:
    eff = fitted_efficiency()
    head = ("run", "source", "published layout", "expressible", "peak per GPU (fits)",
            "rank of the published layout", "predicted ÷ published throughput",
            f"the same at the fitted {eff:.1%}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in rows():
        cells = (d["run"], d["source"], d["layout"], "yes",
                 f"{d['peak_gb']:.1f} GB ({'yes' if d['fits'] else 'no'})",
                 f"{d['rank']} of {d['of']}",
                 f"{d['ratio']:.2f} (efficiency {d['efficiency']:.0%})",
                 f"{d['fitted']:.2f} ({'held out' if d['held_out'] else 'fitted on'})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
