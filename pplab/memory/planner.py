"""Pick a layout: enumerate TP × PP × DP, schedule, V, ZeRO and recomputation, keep those
that fit in GPU memory, and rank them by an estimated step time.

Step time = the simulated pipeline makespan (``pplab.simulate``: compute, bubble and the
point-to-point hops on the critical path) + the part of the DP gradient traffic that the
last backward cannot hide. TP traffic is added to every forward/backward: it sits on the
critical path of each layer. Compute per microbatch per rank is
FLOPs/token × tokens / (PP·TP) / (peak FLOP/s × efficiency), backward = 2 × forward; each
stage is scaled by its own FLOPs (the LM head on the last stage, uneven first/last layer
counts), so the slowest stage paces the pipeline. ZeRO-3 comes in two modes
(``ParallelConfig.zero3_regather``): re-gathered per microbatch its traffic stretches each
F and B it outlasts; kept gathered for the step it is priced like ZeRO-1.

Pruning keeps it quick: TP is a power of two inside one node, PP any divisor of the layers,
DP = GPUs / (TP·PP); M follows from the global batch. Pipelines with many microbatches are
simulated at two smaller M and extrapolated (makespan and peak memory are affine in M once
the pipeline is in steady state; ``extrapolate.py``). Dominated recompute/ZeRO choices are
not evaluated (``_evaluate``). Its speed, and what made it so: docs/memory.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from ..registry import SPECS, names, spec
from ..partition import stage_layers
from .comm import Network, axis_bandwidths, zero3_bytes
from .extrapolate import cached_schedule, makespan_unit
from .rank_memory import fast_memory, rank_params, small_key
from .model_spec import ModelSpec
from .accounting import states_bytes
from .parallel import ParallelConfig

SPLIT_BACKWARD = set(names(split_backward=True))
PERIOD_2 = {s.name for s in SPECS if s.planner and s.planner.period_2}


@dataclass(frozen=True)
class Hardware:
    """One GPU type and its network. Defaults: H100 SXM 80 GB, 989 TFLOP/s dense bf16,
    40% of peak reached by the matmuls; NVLink 450 GB/s, InfiniBand 50 GB/s per GPU."""
    memory: float = 80e9
    flops: float = 989e12
    efficiency: float = 0.4
    network: Network = field(default_factory=Network)


@dataclass
class Candidate:
    config: ParallelConfig
    feasible: bool
    reason: str = ""
    peak_bytes: float = 0.0
    peak_rank: int = 0
    step_time: float = math.inf
    bubble_fraction: float = 0.0
    breakdown: dict = field(default_factory=dict)

    def describe(self) -> str:
        c = self.config
        v = f" V={c.virtual}" if c.virtual and c.virtual > 1 else ""
        head = (f"TP={c.tp} PP={c.pp} DP={c.dp} {c.schedule}{v} M={c.microbatches} "
                f"b={c.microbatch} ZeRO-{c.zero}"
                f"{' kept' if c.zero == 3 and c.zero3_regather == 'per_step' else ''} "
                f"recompute={c.recompute}"
                f"{' SP' if c.sp else ''}")
        if not self.feasible:
            return f"{head}: {self.reason}"
        return (f"{head}: {self.step_time:.3f} s/step, bubble {self.bubble_fraction:.1%}, "
                f"peak {self.peak_bytes / 1e9:.1f} GB on rank {self.peak_rank}")


def compute_costs(model: ModelSpec, cfg: ParallelConfig, hw: Hardware,
                  seq: int | None = None) -> tuple[float, float]:
    """(tf, tb) seconds of pure compute for one microbatch through one rank's L/P layers."""
    s = seq or model.seq
    per_token = model.train_flops_per_token(cfg.recompute) if seq is None else \
        model.with_(seq=s).train_flops_per_token(cfg.recompute)
    base = model.with_(seq=s).train_flops_per_token("none")
    fwd = base / 3 * s * cfg.microbatch / (cfg.pp * cfg.tp) / (hw.flops * hw.efficiency)
    extra = (per_token - base) * s * cfg.microbatch / (cfg.pp * cfg.tp) / (hw.flops * hw.efficiency)
    return fwd, 2 * fwd + extra


@lru_cache(maxsize=4096)
def _stage_scale(model: ModelSpec, name, P, M, V, first, last, seq) -> tuple | None:
    """Each stage's forward FLOPs over the average stage's (None when all are equal): the
    last stage also runs the LM head (2·V·h FLOPs per token, about 1.2 Llama-3-70B layers),
    and ``first``/``last`` layer counts move layers off the ends. The slowest stage then sets
    the pipeline's pace in the simulation (``Costs.stage_scale``)."""
    sch = cached_schedule(name, P, M, V)
    ranges = stage_layers(sch, model.layers, first, last)
    s = seq or model.seq
    layer = 2 * model.layer_params().total + 4 * model.hidden * s
    head = 2 * model.vocab * model.hidden
    mean = (model.layers * layer + head) / sch.stages_per_copy
    out = tuple(round((len(ranges[st]) * layer + (head if sch.is_last(st) else 0)) / mean, 2)
                for st in range(sch.num_stages))
    return None if len(set(out)) == 1 else out


def estimate(model: ModelSpec, cfg: ParallelConfig, hw: Hardware | None = None,
             seq: int | None = None) -> dict:
    """Step-time estimate for a valid ``cfg``: compute + bubble + exposed communication."""
    hw = hw or Hardware()
    s = seq or model.seq
    tf, tb = compute_costs(model, cfg, hw, seq)
    bw = axis_bandwidths(cfg, hw.network)
    t = cfg.tp
    act = s * cfg.microbatch * model.hidden * cfg.bytes_act
    ar = 0.0 if t == 1 else 2 * (t - 1) / t * act / bw["tp"]     # one TP all-reduce
    layers_per_rank = model.layers / cfg.pp
    n_ar = 4 + (2 if cfg.recompute == "full" else 0)      # TP all-reduces per layer, F+B
    scale = 1 + n_ar * layers_per_rank * ar / (tf + tb)   # TP traffic stretches every op
    tf_all, tb_all = tf * scale, tb * scale
    p2p = act / t / bw["pp"] if cfg.pp > 1 else 0.0
    key = small_key(cfg)
    stage_scale = _stage_scale(model, *key, cfg.first_layers, cfg.last_layers, seq)
    z3 = _zero3_times(model, cfg, bw["dp"], tf_all, tb_all)
    tf_run, tb_run = z3["tf_run"], z3["tb_run"]

    def makespan_at(tf_, tb_):
        # W ≈ one forward's matmuls (Zero Bubble §2); only schedules that split B use it.
        # Ratios rounded so similar layouts share one (scale-free) simulation.
        tw = 1.0 if cfg.schedule in SPLIT_BACKWARD else 0.0
        return tf_ * makespan_unit(cfg.schedule, cfg.pp, cfg.microbatches, cfg.virtual,
                                    round(tb_ / tf_, 1), min(tw, round(tb_ / tf_, 1)),
                                    round(p2p / tf_, 2), stage_scale)
    makespan = makespan_at(tf_run, tb_run)
    # Every rank runs each microbatch once through its L/P layers, whatever the placement:
    # V chunks of 1/V each, or DualPipe's two copies fed M/2 microbatches each. (Counting
    # stages × chunk share instead counted DualPipe's two directions twice and clamped to 0.)
    # (in the cost ratio the simulation ran with: tb/tf unrounded here put 0.8 points of
    # rounding into the bubble of a 70B layout; bubble_breakdown shows where the rest comes from)
    busy = cfg.microbatches * tf_all * (1 + round(tb_all / tf_all, 1))
    bubble = max(0.0, 1 - busy / makespan) if makespan > 0 else 0.0
    inside = cfg.zero >= 3 and cfg.zero3_regather == "per_microbatch"   # in the makespan
    if cfg.zero >= 3:
        dp_time, dp_exposed = z3["dp_time"], z3["exposed"]
        if (tf_run, tb_run) != (tf_all, tb_all):     # gathers longer than compute stretch ops
            dp_exposed = makespan - makespan_at(tf_all, tb_all)
    else:
        dp_time = _dp_bytes(model, cfg, seq) / bw["dp"]
        dp_exposed = max(0.0, dp_time - tb_all)       # the last backward hides some of it
    return {"step_time": makespan + (0.0 if inside else dp_exposed),
            "makespan": makespan, "bubble_fraction": bubble, "tf": tf_all, "tb": tb_all,
            "p2p": p2p, "dp_time": dp_time, "dp_exposed": dp_exposed,
            "tp_time_per_allreduce": ar, "stage_scale": stage_scale}


def bubble_breakdown(model: ModelSpec, cfg: ParallelConfig, hw: Hardware | None = None,
                     seq: int | None = None) -> dict:
    """Where ``estimate``'s bubble comes from, each step ÷ total (1 − the average stage's busy
    time ÷ the makespan): the schedule alone with equal stages and free hops; then with the
    stages as they are (the one that also runs the LM head is slower and paces the rest);
    then with the point-to-point hops too: ``estimate``'s ``bubble_fraction`` (below ZeRO-3).
    Each value also ÷ ideal: idle ÷ the average stage's busy time."""
    e = estimate(model, cfg, hw, seq)
    tf, tb = e["tf"], e["tb"]
    ratio = round(tb / tf, 1)
    tw = min(1.0 if cfg.schedule in SPLIT_BACKWARD else 0.0, ratio)
    busy = cfg.microbatches * tf * (1 + ratio)           # the cost ratio the simulation uses

    def both(scale, comm):
        ms = tf * makespan_unit(cfg.schedule, cfg.pp, cfg.microbatches, cfg.virtual, ratio, tw,
                                comm, scale)
        return max(0.0, 1 - busy / ms), max(0.0, ms / busy - 1)
    return {"schedule": both(None, 0.0), "stages": both(e["stage_scale"], 0.0),
            "hops": both(e["stage_scale"], round(e["p2p"] / tf, 2))}


def _zero3_times(model, cfg, bw_dp, tf, tb) -> dict:
    """How ZeRO-3's traffic meets the pipeline (seconds; nothing to do below ZeRO-3).

    Per microbatch: every forward gathers the rank's parameters and every backward gathers
    them again and reduce-scatters its gradients. FSDP prefetches the next layer's gather
    while this one computes, so an op lasts the longer of its compute and its traffic
    (``tf_run``, ``tb_run``). Per step: one gather and one reduce-scatter, Ψ + Ψ like
    ZeRO-1's reduce-scatter + all-gather, and priced the same way (the last backward hides
    part of it) so that the two, equal in bytes moved and held, also rank equal."""
    out = {"tf_run": tf, "tb_run": tb, "dp_time": 0.0, "exposed": 0.0}
    if cfg.zero < 3 or cfg.dp <= 1:
        return out
    key = small_key(cfg)
    psi = max(p for _, _, p in rank_params(model, cfg.tp, *key, cfg.first_layers,
                                            cfg.last_layers))
    copies = cached_schedule(*key).copies
    f = (cfg.dp - 1) / cfg.dp / bw_dp
    if cfg.zero3_regather == "per_step":
        g, r = (x * f for x in zero3_bytes(psi, cfg, 1))
        return dict(out, dp_time=g + r, exposed=max(0.0, g + r - tb))
    g, r = (x * f for x in zero3_bytes(psi / copies, cfg, 1))   # one pass: 2 gathers + 1 RS
    passes = cfg.microbatches // copies * copies
    return {"tf_run": max(tf, g / 2), "tb_run": max(tb, g / 2 + r),
            "dp_time": passes * (g + r), "exposed": 0.0}


def _dp_bytes(model, cfg, seq):
    from .comm import dp_volume
    psi = max(p for _, _, p in rank_params(model, cfg.tp, *small_key(cfg), cfg.first_layers,
                                            cfg.last_layers))
    return dp_volume(psi, cfg)


def _pp_choices(layers: int, limit: int) -> list[int]:
    """Every pipeline depth that splits the layers evenly, up to ``limit`` (PP = 35 for a
    105-layer model, as Megatron-LM's Table 1 runs the 530B model)."""
    return [p for p in range(1, min(layers, limit) + 1) if layers % p == 0]


def _pow2_upto(n: int) -> list[int]:
    out, k = [], 1
    while k <= n:
        out.append(k)
        k *= 2
    return out


def plan(model: ModelSpec, gpus: int, hw: Hardware | None = None, global_batch: int | None = None,
         seq: int | None = None, micro_batches: tuple[int, ...] = (1,),
         schedules: tuple[str, ...] = ("1f1b", "interleaved", "zb-h1", "zbv", "dualpipev",
                                       "gpipe"),
         virtual: tuple[int, ...] = (2, 4), zero_stages: tuple[int, ...] = (0, 1, 2, 3),
         recompute: tuple[str, ...] = ("none", "selective", "full"),
         sp: bool = True, max_pp: int = 16,
         zero3_regather: tuple[str, ...] = ("per_microbatch", "per_step"),
         first_layers: int | None = None, last_layers: int | None = None) -> list[Candidate]:
    """All candidate layouts, feasible ones first, fastest first; infeasible ones say why.

    ``global_batch`` counts sequences per step (default 8 per GPU); M = global_batch/(DP·b).
    ``max_pp`` caps the pipeline depth (Llama 3 405B trained with PP = 16, Llama 3 §3.3.1).
    ``zero3_regather``: the ZeRO-3 modes to consider (``ParallelConfig.zero3_regather``).
    ``first_layers``/``last_layers``: fixed layer counts of the first/last stage when PP > 1.
    """
    hw = hw or Hardware()
    if gpus < 1:
        raise ValueError(f"need at least one GPU, got {gpus}")
    gb = global_batch or 8 * gpus
    out: list[Candidate] = []
    tps = [t for t in _pow2_upto(min(hw.network.gpus_per_node, gpus))
           if model.heads % t == 0 and model.kv % t == 0 and model.ffn % t == 0]
    for t in tps:
        for p in _pp_choices(model.layers, min(gpus // t, max_pp)):
            if gpus % (t * p):
                continue
            d = gpus // (t * p)
            for b in micro_batches:
                if gb % (d * b):
                    out.append(Candidate(ParallelConfig(t, p, d, microbatch=b), False,
                                         f"global batch {gb} is not a multiple of DP×b = {d * b}"))
                    continue
                M = gb // (d * b)
                ends = (first_layers, last_layers) if p > 1 else (None, None)
                zeros = _zero_options(zero_stages, zero3_regather, d)
                for name in (schedules if p > 1 else ("1f1b",)):
                    for V in (virtual if spec(name).stages_per_rank == "any" else (None,)):
                        out.extend(_evaluate(model, t, p, d, b, M, name, V, tuple(recompute),
                                             sp and t > 1, zeros, hw, seq, ends))
    out.sort(key=lambda c: (not c.feasible, c.step_time if c.feasible else c.peak_bytes))
    return out


RC_ORDER = ("none", "selective", "full")      # cheapest in FLOPs first, most memory first


def _zero_options(stages, regathers, d) -> list[tuple[int, str]]:
    """(ZeRO stage, ZeRO-3 mode) pairs worth trying; ZeRO over one replica changes nothing."""
    out = []
    for z in stages:
        if z > 0 and d == 1:
            continue
        out.extend((z, m) for m in (regathers if z == 3 else ("per_microbatch",)))
    return out


def _cheap(z, mode) -> bool:
    """ZeRO-0/1/2, and ZeRO-3 kept gathered for the step: 2Ψ of traffic, the least there is."""
    return z < 3 or mode == "per_step"


def _evaluate(model, t, p, d, b, M, name, V, rcs, sp, zeros, hw, seq,
              ends=(None, None)) -> list[Candidate]:
    """Every recomputation × ZeRO choice for one (TP, PP, DP, b, M, schedule, V).

    Pruning by dominance (skipped candidates are not listed — they can never rank higher):
    recomputation only trades FLOPs for memory, so for one layout "none" is never slower than
    "selective", which is never slower than "full"; and ZeRO-0/1/2 move the same 2Ψ per step
    (same time) while ZeRO-3 re-gathering per microbatch moves 3MΨ (never faster); ZeRO-3 kept
    gathered for the step moves 2Ψ and needs ZeRO-1's bytes, so it counts with the cheap ones.
    So once a mode fits with a cheap choice, every more expensive mode is dominated; once it
    fits only with per-microbatch ZeRO-3, more expensive modes are tried only with cheap ones
    — unless that ZeRO-3 layout hides all its DP traffic (its step time is then the makespan,
    which every costlier mode exceeds).
    """
    rcs = [rc for rc in RC_ORDER if rc in rcs]
    base = ParallelConfig(t, p, d, sp=sp, recompute=rcs[0], microbatch=b, microbatches=M,
                          schedule=name, virtual=V, first_layers=ends[0], last_layers=ends[1])
    try:
        # validate at the reduced M: same residue mod 2P, so the same divisibility rules
        small = base.with_(microbatches=small_key(base)[2])
        small.validate(model, cached_schedule)
    except ValueError as e:
        return [Candidate(base.with_(recompute=rc), False, str(e)) for rc in rcs]
    out = []
    zs = list(zeros)
    fitted: set[tuple[int, str]] = set()
    for rc in rcs:
        if any(_cheap(*z) for z in fitted):
            break
        todo = [z for z in zs if not fitted or _cheap(*z)]
        if not todo:
            break
        rep0 = fast_memory(model, base.with_(recompute=rc), seq)
        for z, mode in todo:
            cfg = base.with_(recompute=rc, zero=z, zero3_regather=mode)
            peak, rank = 0.0, 0
            for rm in rep0.per_rank:
                pb, gb_, ob = states_bytes(model, rm.params_count, cfg)
                tot = pb + gb_ + ob + rm.activations
                if tot > peak:
                    peak, rank = tot, rm.rank
            if peak > hw.memory:
                out.append(Candidate(cfg, False, f"needs {peak / 1e9:.1f} GB on rank {rank} > "
                                                  f"{hw.memory / 1e9:.0f} GB", peak, rank))
                continue
            fitted.add((z, mode))
            e = _estimate_cached(model, cfg.with_(zero=3 if z == 3 else 0), hw, seq)
            out.append(Candidate(cfg, True, "", peak, rank, e["step_time"], e["bubble_fraction"],
                                 e))
            if e["dp_exposed"] == 0:
                # Step time = makespan alone; any costlier recomputation has a longer makespan
                # whatever its ZeRO stage, so it is dominated too.
                fitted.update(zs)
    return out


@lru_cache(maxsize=8192)
def _estimate_cached(model, cfg, hw, seq):
    """ZeRO-0/1/2 move the same 2Ψ per step, so they share one estimate; ZeRO-3 has its own."""
    return estimate(model, cfg, hw, seq)


#: what the step-time model does not see, printed next to every estimate
LEAVES_OUT = (
    "kernel efficiency is one number (--efficiency); no per-kernel or small-matrix slowdown",
    "the LM head is timed on the last stage, the embedding's lookup is not",
    "communication never overlaps compute except the DP reduce behind the last backward "
    "and ZeRO-3's prefetched gathers",
    "no congestion: each axis gets its link bandwidth alone; no latency per message",
    "no optimizer step time, no data loading, no stragglers or failures",
    "DualPipe's F&B pairs gain nothing from overlap (tfb = tf + tb); kernels that overlap "
    "them would make it faster",
)


def explain(model: ModelSpec, cfg: ParallelConfig, hw: Hardware | None = None,
            seq: int | None = None) -> list[tuple[str, str]]:
    """The step time of one layout, term by term, as (term, value with its formula) rows:
    what lesson 09 shows when it opens the planner's box."""
    hw = hw or Hardware()
    e = estimate(model, cfg, hw, seq)
    tf, tb = compute_costs(model, cfg, hw, seq)
    M = cfg.microbatches
    ms = lambda x: f"{x * 1e3:.2f} ms"
    return [
        ("compute per microbatch", f"tf {ms(tf)}, tb {ms(tb)} = FLOPs/token × tokens ÷ "
         f"(PP·TP) ÷ ({hw.flops / 1e12:.0f} TFLOP/s × {hw.efficiency:.0%})"),
        ("with TP traffic", f"tf {ms(e['tf'])}, tb {ms(e['tb'])} (one all-reduce "
         f"{ms(e['tp_time_per_allreduce'])}, 4 per layer per F+B)"),
        ("ideal pipeline", f"M·(tf+tb) = {M} × {ms(e['tf'] + e['tb'])} = "
         f"{ms(M * (e['tf'] + e['tb']))}"),
        ("stage balance", "every stage costs the same" if not e["stage_scale"] else
         f"slowest stage {max(e['stage_scale']):.2f}× the average (LM head on the last "
         "stage, first/last layer counts); it paces the pipeline"),
        ("pipeline makespan", f"{ms(e['makespan'])} simulated ({cfg.schedule}, p2p hop "
         f"{ms(e['p2p'])}); bubble {e['bubble_fraction']:.1%}"),
        _dp_row(cfg, e, ms),
        ("step time", f"{ms(e['step_time'])} = makespan + exposed DP traffic"),
    ] + [("left out", item) for item in LEAVES_OUT]


def _dp_row(cfg, e, ms) -> tuple[str, str]:
    if cfg.zero >= 3 and cfg.zero3_regather == "per_microbatch":
        return ("ZeRO-3 traffic", f"{ms(e['dp_time'])}: gathers for every F and B of every "
                f"microbatch; {ms(e['dp_exposed'])} of it longer than the compute it hides "
                "behind (already in the makespan)")
    return ("DP gradient traffic", f"{ms(e['dp_time'])}, of which {ms(e['dp_exposed'])} is "
            "not hidden behind the last backward")
