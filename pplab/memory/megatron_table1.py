"""Megatron-LM's Table 1 (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training
on GPU Clusters Using Megatron-LM"): ten GPT models from 1.7B to 1T parameters, each with the
TP × PP × DP layout the paper ran on DGX A100 80 GB nodes and the throughput it measured.

Facts cited from the paper: every model uses a vocabulary of 51,200 and a sequence length of
2048 (§5.1); the A100's bf16 peak is 312 TFLOP/s; the 1T model reached 163 TFLOP/s per GPU
(52% of peak), 502 PFLOP/s on 3072 GPUs; FLOPs per iteration are
96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) with activation recomputation (Eq. 3).

Table 1 does not list the schedule or the microbatch size; ``paper_config`` states what is
assumed: the paper's interleaved schedule (§2.2.2) with the fewest chunks per rank that split
the layers evenly, full activation recomputation (§3.5), microbatches of one sequence,
mixed-precision Adam, no ZeRO and no sequence parallelism (which came later).
"""
from __future__ import annotations

from dataclasses import dataclass

from .comm import Network
from .model_spec import ModelSpec
from .parallel import ParallelConfig
from .planner import Hardware, estimate, fast_memory, plan

VOCAB, SEQ, A100_PEAK = 51200, 2048, 312e12
#: one DGX A100 node: 8 GPUs on NVLink 3 (300 GB/s each way), 8 × 200 Gb/s HDR InfiniBand
A100_NETWORK = Network(intra_node=300e9, inter_node=25e9, gpus_per_node=8)
#: the share of peak the planner's matmuls are assumed to reach (one number for all rows)
EFFICIENCY = 0.5


@dataclass(frozen=True)
class Row:
    """One line of Table 1: shapes, layout, batch (sequences) and measured TFLOP/s per GPU."""
    params_b: float
    heads: int
    hidden: int
    layers: int
    tp: int
    pp: int
    gpus: int
    batch: int
    tflops: float

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    @property
    def name(self) -> str:
        return f"gpt-{self.params_b:g}b"


TABLE1 = (
    Row(1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    Row(3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    Row(7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    Row(18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    Row(39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    Row(76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    Row(145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    Row(310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    Row(529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    Row(1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
)


def model_of(row: Row) -> ModelSpec:
    """GPT-style, f = 4h, tied embeddings, learned positions (Megatron's GPT)."""
    return ModelSpec(row.name, layers=row.layers, hidden=row.hidden, heads=row.heads,
                     ffn=4 * row.hidden, vocab=VOCAB, seq=SEQ, tied_embeddings=True, arch="gpt")


def _chunks(row: Row) -> int:
    """Fewest interleaved chunks per rank (≥ 2) that split the layers evenly."""
    return next(v for v in range(2, row.layers + 1) if row.layers % (row.pp * v) == 0)


def paper_config(row: Row) -> ParallelConfig:
    """The paper's layout, with the settings the module docstring assumes."""
    interleaved = row.pp > 1
    return ParallelConfig(row.tp, row.pp, row.dp, zero=0, sp=False, recompute="full",
                          microbatch=1, microbatches=row.batch // row.dp,
                          schedule="interleaved" if interleaved else "1f1b",
                          virtual=_chunks(row) if interleaved else None)


def a100(efficiency: float = EFFICIENCY) -> Hardware:
    return Hardware(memory=80e9, flops=A100_PEAK, efficiency=efficiency, network=A100_NETWORK)


def paper_flops(row: Row) -> float:
    """FLOPs of one iteration by the paper's Eq. 3 (recomputation included)."""
    B, s, l, h = row.batch, SEQ, row.layers, row.hidden
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + VOCAB / (16 * l * h))


def reproduce(row: Row, efficiency: float = EFFICIENCY) -> dict:
    """Is the paper's layout feasible; where does it rank among the planner's layouts; and
    the planner's own first choice. The planner gets the paper's options: 1F1B or interleaved,
    no ZeRO, no SP, microbatch 1, no or full recomputation."""
    model, cfg, hw = model_of(row), paper_config(row), a100(efficiency)
    peak = fast_memory(model, cfg).peak_bytes
    mine = estimate(model, cfg, hw)["step_time"]
    cands = [c for c in plan(model, row.gpus, hw, global_batch=row.batch,
                             schedules=("1f1b", "interleaved"), virtual=(cfg.virtual or 2,),
                             zero_stages=(0,), recompute=("none", "full"), sp=False,
                             max_pp=row.layers) if c.feasible]
    top = cands[0]
    tflops = paper_flops(row) / (mine * row.gpus) / 1e12
    return {"row": row.name, "layout": f"TP={row.tp} PP={row.pp} DP={row.dp}",
            "feasible": peak <= hw.memory, "peak_gb": peak / 1e9,
            "rank": 1 + sum(c.step_time < mine * (1 - 1e-9) for c in cands),
            "of": len(cands), "step_time": mine, "top": top.describe().split(":")[0],
            "top_step_time": top.step_time, "tflops": tflops,
            "tflops_ratio": tflops / row.tflops}


def table1_report(rows=TABLE1, efficiency: float = EFFICIENCY, markdown: bool = False) -> str:
    """Every row of Table 1 reproduced, as text (lesson 09) or a markdown table (docs)."""
    head = ("model", "paper layout", "fits (peak GB)", "rank", "planner's first choice",
            "s/step: paper layout, first choice", "TFLOP/s/GPU: planner, paper", "÷ paper")
    out = []
    for r in rows:
        d = reproduce(r, efficiency)
        out.append((d["row"], d["layout"], f"{'yes' if d['feasible'] else 'no'} "
                    f"({d['peak_gb']:.1f})", f"{d['rank']} of {d['of']}", d["top"],
                    f"{d['step_time']:.2f}, {d['top_step_time']:.2f}",
                    f"{d['tflops']:.0f}, {r.tflops:g}", f"{d['tflops_ratio']:.2f}"))
    if markdown:
        return "\n".join("| " + " | ".join(c) + " |"
                         for c in [head, ("---",) * len(head)] + out)
    lines = [f"A100 80 GB, {A100_PEAK / 1e12:.0f} TFLOP/s × {efficiency:.0%}; rank = place of "
             "the paper's layout among the planner's feasible layouts"]
    for c in out:
        lines.append(f"{c[0]:<10} {c[1]:<16} fits {c[2]:<11} rank {c[3]:<8} "
                     f"{c[5]:>14} s  {c[6]:>8} TFLOP/s ({c[7]})\n"
                     f"{'':<10} first choice: {c[4]}")
    return "\n".join(lines)
