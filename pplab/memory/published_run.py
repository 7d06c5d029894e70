"""Llama 3 405B's pre-training layout, taken apart with pplab's models (lesson 14).

The figures come from the Llama 3 paper (Dubey et al. 2024, "The Llama 3 Herd of Models",
§3.3 and Table 4); each one is named where it is used, and ``TABLE4_CHECKED`` says which could
be checked against a second public copy. Everything else is computed: the schedule by
``pplab.registry``, the bubble by ``pplab.sim``, memory by ``pplab.memory.accounting``,
bytes per axis by ``pplab.memory.comm`` and the step time by ``pplab.memory.planner``.
Pure Python, so the lesson also runs in the browser.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..closed_forms import bubble_both
from ..registry import make_schedule
from ..sim import Costs, simulate
from .accounting import memory_report
from .comm import comm_times, comm_volumes
from .parallel import ParallelConfig
from .planner import Hardware, _stage_scale, estimate
from .presets import get_preset

#: H100 SXM dense bf16 peak, FLOP/s (NVIDIA's datasheet: 1,979 with 2:4 sparsity, half dense)
PEAK_BF16 = 989e12
#: chunks per pipeline rank. The paper does not print V; §3.3.2 says that taking one layer off
#: the first and the last stage leaves the first chunk only the embedding and the last only the
#: output layer and loss, so a chunk is one layer: 126 + 2 = 128 chunks = 16 ranks × 8.
LLAMA3_V = 8


@dataclass(frozen=True)
class Row:
    """One row of the Llama 3 paper's Table 4 (405B pre-training configurations)."""
    gpus: int
    tp: int
    cp: int
    pp: int
    dp: int
    seq: int
    batch_per_dp: int        # sequences per data-parallel replica per step
    tokens: str              # as printed: "16M"
    tflops: float            # achieved TFLOPs per GPU
    mfu: float               # BF16 model FLOPs utilisation, as printed

    @property
    def sequences(self) -> int:
        return self.dp * self.batch_per_dp

    @property
    def tokens_per_step(self) -> int:
        return self.sequences * self.seq

    @property
    def label(self) -> str:
        return f"{self.gpus:,} GPUs, seq {self.seq:,}"


TABLE4 = (Row(8192, 8, 1, 16, 64, 8192, 32, "16M", 430, 0.43),
          Row(16384, 8, 1, 16, 128, 8192, 16, "16M", 400, 0.41),
          Row(16384, 8, 16, 16, 8, 131072, 16, "16M", 380, 0.38))
#: columns matched by a second public copy (Balaji's SC'24 slide, quoted at
#: glennklockwood.com/garden/llama-3.1): GPUs, TP, CP, PP, tokens/batch, TFLOPs/GPU. DP,
#: batch/DP and MFU come from text copies of the paper only; ``check_row`` shows they follow
#: from the rest.
TABLE4_CHECKED = ("gpus", "tp", "cp", "pp", "tokens", "tflops")
#: the CP row's DP in a text copy of an earlier arXiv version of the paper (a copy quoting v3
#: has 8): with 4, TP·CP·PP·DP is 8,192 GPUs and the batch 8M tokens, against the row's own
#: 16,384 and 16M
CP_ROW_DP_EARLIER = 4


def check_row(row: Row) -> list[str]:
    """The row's columns against each other: GPUs = TP·CP·PP·DP, DP × batch/DP × seq ≈ 16M
    tokens, MFU ≈ TFLOPs ÷ 989 (the TFLOPs column is rounded to 10)."""
    assert row.gpus == row.tp * row.cp * row.pp * row.dp
    assert row.tokens_per_step == 2 ** 24          # 16,777,216 tokens: "16M"
    assert abs(row.tflops * 1e12 / PEAK_BF16 - row.mfu) < 0.01
    return [f"{row.label}: TP·CP·PP·DP = {row.tp}·{row.cp}·{row.pp}·{row.dp} = "
            f"{row.tp * row.cp * row.pp * row.dp:,}",
            f"  {row.dp} replicas × {row.batch_per_dp} sequences × {row.seq:,} tokens = "
            f"{row.tokens_per_step:,} tokens ({row.sequences:,} sequences)",
            f"  {row.tflops:g} TFLOPs ÷ 989 = {row.tflops * 1e12 / PEAK_BF16:.1%} "
            f"(printed MFU {row.mfu:.0%})"]


def end_layers(P: int, V: int, layers: int = 126) -> int:
    """Layers on the first and on the last chunk, Llama 3's way: every chunk would hold
    k = (layers + 2) / (P·V) layers, and the two ends give one up each for the embedding and
    the output layer (k − 1; 0 at Llama 3's V = 8)."""
    k, rem = divmod(layers + 2, P * V)
    if rem or k < 1:
        raise ValueError(f"{layers} + 2 layers do not fill {P}×{V} chunks evenly; use a V "
                         f"with P·V dividing {layers + 2}, e.g. V={LLAMA3_V} at P=16")
    return k - 1


def layout(row: Row, V: int = LLAMA3_V, microbatch: int = 1, zero: int = 2,
           bytes_grad: float = 4, recompute: str = "selective", zero2_reduce: str = "per_step",
           activations: str = "korthikanti"):
    """(model, ParallelConfig) for a Table 4 row as the paper describes it (§3.3.2).

    Interleaved 1F1B, the first and last chunks one layer lighter (``end_layers``),
    M = batch/DP ÷ microbatch, SP on (Megatron-style TP). FSDP "shards optimizer states and
    gradients" but does not reshard the parameters after the forward: ZeRO-2's sharding.
    The gradients are accumulated in fp32 over the microbatches and reduce-scattered in fp32
    (4-byte gradients); ``zero2_reduce`` says when: once a step from a whole-size
    accumulator (the default), or after every microbatch (``gradient_ways`` compares them).
    No activation checkpointing at 8K tokens: pplab's ``"selective"`` row is the nearest, the
    attention scores not kept (FlashAttention recomputes them in the backward) and nothing
    else re-run. ``activations``: how a layer's kept tensors are counted
    (``ParallelConfig.activations``; ``published_runs.LLAMA3_AS_RUN`` says why the published
    runs table counts them ``"kept"`` and reduces every microbatch)."""
    if row.cp != 1:
        raise ValueError(f"pplab models no context parallelism (CP={row.cp}); use a CP=1 row")
    if row.batch_per_dp % microbatch:
        raise ValueError(f"microbatch {microbatch} does not divide the {row.batch_per_dp} "
                         f"sequences per replica; use a divisor of {row.batch_per_dp}")
    model = get_preset("llama3-405b").with_(seq=row.seq)
    k = end_layers(row.pp, V)
    cfg = ParallelConfig(tp=row.tp, pp=row.pp, dp=row.dp, zero=zero, bytes_grad=bytes_grad,
                         zero2_reduce=zero2_reduce, sp=True, recompute=recompute,
                         microbatch=microbatch, microbatches=row.batch_per_dp // microbatch,
                         schedule="interleaved", virtual=V, first_layers=k, last_layers=k,
                         activations=activations)
    cfg.validate(model)
    return model, cfg


def chunk_scales(P: int, M: int, V: int) -> tuple:
    """Each chunk's forward FLOPs over the average chunk's, the ends one layer lighter
    (``end_layers``): at V = 8 the first holds the embedding alone (no matmul) and the last
    the output layer and loss alone."""
    k = end_layers(P, V)
    return _stage_scale(get_preset("llama3-405b"), "interleaved", P, M, V, k, k, None)


def bubble(P: int, M: int, V: int = LLAMA3_V, uneven: bool = True) -> dict:
    """The simulated bubble in both denominators, and the closed forms beside it.

    ``uneven``: the first and last chunks as Llama 3 made them (``chunk_scales``); otherwise
    every chunk equal, where the simulator gives the closed forms exactly."""
    scale = chunk_scales(P, M, V) if uneven else None
    tl = simulate(make_schedule("interleaved", P, M, V), Costs(tf=1, tb=2, stage_scale=scale))
    frac, ratio = bubble_both(P, M, V)
    return {"P": P, "M": M, "V": V, "fraction": tl.bubble_fraction, "ratio": tl.bubble_ratio,
            "closed_fraction": frac, "closed_ratio": ratio, "timeline": tl}


def lecture_claims() -> list[dict]:
    """The figures for 405B's bubble on the CS336 lecture 8 lesson page (*Parallelism II:
    Pipeline & FSDP*, engineeringmaxxing.com), each input set against Table 4."""
    lo, hi = TABLE4[0], TABLE4[1]
    true_hi, true_lo = bubble(16, hi.batch_per_dp), bubble(16, lo.batch_per_dp)
    return [
        {"claim": "TP8 × PP16 × DP16 = 2,048 GPUs", "table": f"{lo.gpus:,} or {hi.gpus:,} "
         f"GPUs, DP {lo.dp} or {hi.dp}", "ok": lo.dp == 16 or hi.dp == 16},
        {"claim": "batch 16,384 sequences × 8,192 tokens", "table": f"{lo.sequences:,} "
         f"sequences × {lo.seq:,} = 16M tokens", "ok": lo.sequences == 16384},
        {"claim": "128 microbatches per pipeline (and 64 in a second example)",
         "table": f"{lo.batch_per_dp} or {hi.batch_per_dp} sequences per replica "
         f"(128 = {lo.sequences:,} ÷ a DP of 16)",
         "ok": {128, 64} & {lo.batch_per_dp, hi.batch_per_dp} != set()},
        {"claim": "(P−1)/(M+P−1): 15/143 = 10.5%, 15/79 = 19.0%",
         "table": f"interleaved V={LLAMA3_V}: ÷total {true_lo['closed_fraction']:.1%} / "
         f"{true_hi['closed_fraction']:.1%}, ÷busy {true_lo['closed_ratio']:.1%} / "
         f"{true_hi['closed_ratio']:.1%} (M = {lo.batch_per_dp} / {hi.batch_per_dp})",
         "ok": False},
        {"claim": "MFU ~38% for this layout", "table": f"{TABLE4[2].mfu:.0%} is the CP16 row "
         f"(seq {TABLE4[2].seq:,}); seq 8,192 rows: {lo.mfu:.0%}, {hi.mfu:.0%}",
         "ok": False},
    ]


def memory_table(row: Row, **kw) -> list[str]:
    """Per-rank bytes (GB) of ``layout(row, **kw)``: weights, grads, optimizer, activations."""
    model, cfg = layout(row, **kw)
    rep = memory_report(model, cfg)
    lines = ["rank layers  weights  grads  optim  activ (in flight)  total GB"]
    for r in rep.per_rank:
        lines.append(f"{r.rank:4d} {r.layers:6d} {r.params / 1e9:8.2f} {r.grads / 1e9:6.2f} "
                     f"{r.optimizer / 1e9:6.2f} {r.activations / 1e9:6.1f} ({r.inflight:6.3f})"
                     f" {r.total / 1e9:9.1f}")
    return lines


def gradient_ways(row: Row, hbm: float = 80e9, **kw) -> list[dict]:
    """The two ways to accumulate the fp32 gradients of the row's M microbatches under ZeRO-2
    (``ParallelConfig.zero2_reduce``), each with what it costs: the worst rank's bytes (and
    its gradient bytes), whether that fits ``hbm``, and the DP bytes one GPU of the busiest
    rank sends per step (and seconds at 50 GB/s if nothing overlapped)."""
    out = []
    for mode in ("per_step", "per_microbatch"):
        model, cfg = layout(row, zero2_reduce=mode, **kw)
        worst = max(memory_report(model, cfg).per_rank, key=lambda r: r.total)
        sent = axis_bytes(row, zero2_reduce=mode, **kw)
        out.append({"mode": mode, "rank": worst.rank, "total": worst.total,
                    "grads": worst.grads, "fits": worst.total <= hbm,
                    "dp_bytes": sent["bytes"]["dp"], "dp_seconds": sent["seconds"]["dp"]})
    return out


def activation_budget(row: Row, hbm: float = 80e9, **kw) -> dict:
    """What would let the worst rank fit in ``hbm``: the rank-shares of activations it could
    keep in flight at pplab's bytes per layer, or the bytes per layer (in units of s·b·h/t,
    Korthikanti's 34 with SP) at the schedule's depth."""
    model, cfg = layout(row, **kw)
    rep = memory_report(model, cfg)
    worst = max(rep.per_rank, key=lambda r: r.total)
    states = worst.params + worst.grads + worst.optimizer
    share = worst.activations / worst.inflight                  # one rank-share in flight
    sbh_t = row.seq * cfg.microbatch * model.hidden / cfg.tp
    per_layer = worst.activations / (worst.inflight * worst.layers) / sbh_t
    return {"rank": worst.rank, "total": worst.total, "states": states,
            "inflight": worst.inflight, "fits_inflight": (hbm - states) / share,
            "per_layer_sbh_t": per_layer,
            "fits_per_layer_sbh_t": per_layer * (hbm - states) / worst.activations}


def axis_bytes(row: Row, **kw) -> dict:
    """Bytes one GPU of the busiest rank sends per step on each axis, and seconds at
    NVLink (TP) / 50 GB/s (PP, DP) if nothing overlapped (``pplab.memory.comm``).

    DP below ZeRO-3: the gradients reduce-scattered (fp32 in the paper; once a step, or
    once a microbatch with ``zero2_reduce="per_microbatch"``) and the parameters all-gathered
    (bf16) once a step."""
    model, cfg = layout(row, **kw)
    vol = comm_volumes(model, cfg, cfg.make_schedule())
    return {"bytes": vol, "seconds": comm_times(vol, cfg)}


def flops_per_token(seq: int, attention: bool = True) -> float:
    """Training FLOPs per token as MFU counts them: PaLM's 6N + 12·L·H·Q·T (Chowdhery et al.
    2022, the MFU the Llama 3 paper reports; H·Q = h, T = s) with N the parameters a token
    multiplies through (every layer and the output layer; the embedding is a lookup), or
    6N alone with N the whole model's parameters."""
    m = get_preset("llama3-405b").with_(seq=seq)
    return m.train_flops_per_token() if attention else 6 * m.num_params()


def implied_step_time(row: Row, attention: bool = True) -> float:
    """Seconds per step at the row's TFLOPs per GPU, FLOPs counted one way or the other."""
    return row.tokens_per_step * flops_per_token(row.seq, attention) / (row.gpus * row.tflops
                                                                          * 1e12)


def fit_efficiency(row: Row, attention: bool = True, **kw) -> tuple[float, dict]:
    """The matmul efficiency (share of 989 TFLOPs while computing) at which pplab's step-time
    model (``planner.estimate``: compute, bubble, TP all-reduces, hops, exposed DP traffic)
    takes as long as the row's reported throughput implies. Bisection; step time falls as
    efficiency rises."""
    model, cfg = layout(row, **kw)
    target = implied_step_time(row, attention)
    lo, hi = 0.05, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if estimate(model, cfg, Hardware(efficiency=mid))["step_time"] > target:
            lo = mid
        else:
            hi = mid
    return hi, estimate(model, cfg, Hardware(efficiency=hi))


def mfu_budget(row: Row) -> dict:
    """Where the 989 TFLOPs go, in shares of peak: the reported MFU, the bubble (simulated,
    ÷ total, with Llama 3's chunks) and the rest, lost while the ranks are busy (matmuls below
    peak, exposed communication, anything else)."""
    b = bubble(row.pp, row.batch_per_dp)
    mfu = row.tflops * 1e12 / PEAK_BF16
    busy = mfu / (1 - b["fraction"])            # utilisation while the ranks compute
    return {"mfu": mfu, "bubble_fraction": b["fraction"], "busy": busy,
            "bubble_points": busy - mfu, "rest_points": 1 - busy}
