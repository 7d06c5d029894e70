"""Pick a layout: enumerate TP × PP × DP, schedule, V, ZeRO and recomputation, keep those
that fit in GPU memory, and rank them by an estimated step time.

Step time = the simulated pipeline makespan (``pplab.sim``: compute, bubble and the
point-to-point hops on the critical path) + the part of the DP gradient traffic that the
last backward cannot hide. TP traffic is added to every forward/backward: it sits on the
critical path of each layer. Compute per microbatch per rank is
FLOPs/token × tokens / (PP·TP) / (peak FLOP/s × efficiency), backward = 2 × forward; each
stage is scaled by its own FLOPs (the LM head on the last stage, uneven first/last layer
counts), so the slowest stage paces the pipeline. ZeRO-3 comes in two modes
(``ParallelConfig.zero3_regather``): re-gathered per microbatch its traffic stretches each
F and B it outlasts; kept gathered for the step it is priced like ZeRO-1. ZeRO-2 keeps only a
gradient shard because it reduce-scatters after every microbatch: each B lasts at least its
reduce-scatter (ZeRO-2 summing whole gradients and reducing once a step is ZeRO-1 in bytes
held and moved, so the planner does not list it apart).

Pruning keeps it quick: TP is a power of two inside one node, PP any depth whose stages
split the layers evenly (between fixed first/last ones when those are given) or, without
those, whose first and last stages can take the remainder (``_uneven_ends``; model chunks
too many for that leave an end the embedding or the head alone, ``split_ends``),
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
from .comm import Network, axis_bandwidths, cp_layer_bytes, ep_layer_bytes, zero12_scatters
from .dp_times import zero12_times, zero3_times
from .extrapolate import cached_schedule, makespan_unit
from .rank_memory import fast_memory, small_key
from .model_spec import ModelSpec
from .accounting import states_bytes
from .hardware import Hardware
from .parallel import ParallelConfig
from .units import fmt_bytes, fmt_seconds

SPLIT_BACKWARD = set(names(split_backward=True))
PERIOD_2 = {s.name for s in SPECS if s.planner and s.planner.period_2}
#: schedules that overlap one microbatch's all-to-alls with another's compute: DualPipe
#: (DeepSeek-V3 §3.2.1) and its V-shape placement
EP_OVERLAP = ("dualpipe", "dualpipev")


@dataclass
class Candidate:
    """One layout the planner tried: whether it fits the GPU's ``memory`` (bytes) and, when
    it does, its estimated step: the pipeline's makespan (its ``bubble_fraction`` is the
    pipeline's idle share only, 0 without a pipeline) plus ``exposed_comm``, the seconds of
    data-parallel traffic that compute does not hide."""
    config: ParallelConfig
    feasible: bool
    reason: str = ""
    peak_bytes: float = 0.0
    peak_rank: int = 0
    step_time: float = math.inf
    bubble_fraction: float = 0.0
    breakdown: dict = field(default_factory=dict)
    memory: float = 0.0
    exposed_comm: float = 0.0

    def layout(self) -> str:
        """The layout in one line: TP=4 PP=2 DP=8 zbv M=64 b=1 ZeRO-1 recompute=selective SP
        (CP=… after TP when the sequence is split)."""
        c = self.config
        v = f" V={c.virtual}" if c.virtual and c.virtual > 1 else ""
        cp = f" CP={c.cp}" if c.cp > 1 else ""
        ep = f" EP={c.ep}" if c.ep > 1 else ""
        return (f"TP={c.tp}{cp} PP={c.pp} DP={c.dp}{ep} {c.schedule}{v} M={c.microbatches} "
                f"b={c.microbatch} ZeRO-{c.zero}"
                f"{' kept' if c.zero == 3 and c.zero3_regather == 'per_step' else ''} "
                f"recompute={c.recompute}{' SP' if c.sp else ''}")

    @property
    def over_memory(self) -> bool:
        """Left out because its peak exceeds the GPU's memory (not for another rule)."""
        return self.peak_bytes > self.memory > 0

    def fit_text(self) -> str:
        """Whether it fits and by how much: "fits, 14.8 GB to spare" / "15.1 GB over"."""
        if not self.peak_bytes or not self.memory:
            return "not checked"
        spare = self.memory - self.peak_bytes
        return f"fits, {fmt_bytes(spare)} to spare" if spare >= 0 else \
            f"does not fit, {fmt_bytes(-spare)} over"

    def describe(self) -> str:
        if not self.feasible:
            return f"{self.layout()}: {self.reason}"
        return (f"{self.layout()}: {fmt_seconds(self.step_time, 4)}/step, bubble "
                f"{self.bubble_fraction:.1%}, exposed comm {fmt_seconds(self.exposed_comm)}, "
                f"peak {fmt_bytes(self.peak_bytes)} on rank {self.peak_rank} "
                f"({self.fit_text()})")

    def to_dict(self) -> dict:
        """The row as plain values (seconds, bytes): what ``pplab plan --json`` prints."""
        c = self.config
        return {"tp": c.tp, "cp": c.cp, "pp": c.pp, "dp": c.dp, "ep": c.ep, "zero": c.zero,
                "zero3_regather": c.zero3_regather if c.zero == 3 else None,
                "schedule": c.schedule,
                "virtual": 1 if c.pp == 1 else (c.virtual or spec(c.schedule).default_V),
                "microbatches": c.microbatches, "microbatch_size": c.microbatch,
                "global_batch": c.microbatches * c.microbatch * c.dp,
                "recompute": c.recompute, "sp": c.sp, "first_layers": c.first_layers,
                "last_layers": c.last_layers,
                "step_s": self.step_time if self.feasible else None,
                "bubble": self.bubble_fraction if self.feasible else None,
                "exposed_comm": self.exposed_comm if self.feasible else None,
                "peak_bytes": self.peak_bytes or None, "peak_rank": self.peak_rank,
                "gpu_memory_bytes": self.memory,
                "headroom_bytes": self.memory - self.peak_bytes if self.peak_bytes else None,
                "fits": self.feasible, "reason": self.reason or None}


def compute_costs(model: ModelSpec, cfg: ParallelConfig, hw: Hardware,
                  seq: int | None = None) -> tuple[float, float]:
    """(tf, tb) seconds of pure compute for one microbatch through one rank's L/P layers."""
    s = seq or model.seq
    per_token = model.train_flops_per_token(cfg.recompute) if seq is None else \
        model.with_(seq=s).train_flops_per_token(cfg.recompute)
    base = model.with_(seq=s).train_flops_per_token("none")
    # each of CP ranks computes s/CP tokens (attention against all s keys: FLOPs/token holds it)
    ranks = cfg.pp * cfg.tp * cfg.cp
    fwd = base / 3 * s * cfg.microbatch / ranks / (hw.flops * hw.efficiency)
    extra = (per_token - base) * s * cfg.microbatch / ranks / (hw.flops * hw.efficiency)
    return fwd, 2 * fwd + extra


def _fine(x: float) -> float:
    """``x`` to 9 significant digits: ratios computed along different paths (float noise in
    the last bits) then share one cached simulation, and no two layouts that differ by more
    than a part in 10⁹ ever swap places. (Rounding tb/tf to 0.1 once moved step times by ~1%,
    more than the gap between a plan's first and second choices.)"""
    return float(f"{x:.9g}")


@lru_cache(maxsize=4096)
def _stage_scale(model: ModelSpec, name, P, M, V, first, last, seq) -> tuple | None:
    """Each stage's forward FLOPs over the average stage's (None when all are equal): the
    last stage also runs the LM head (2·V·h FLOPs per token, about 1.2 Llama-3-70B layers),
    and ``first``/``last`` layer counts move layers off the ends. The slowest stage then sets
    the pipeline's pace in the simulation (``Costs.stage_scale``)."""
    sch = cached_schedule(name, P, M, V)
    ranges = stage_layers(sch, model.layers, first, last)
    s = seq or model.seq
    attn = model.attention_flops(s)
    layer = [2 * model.active_layer_params(i) + attn for i in range(model.layers)]
    head = 2 * model.vocab * model.hidden
    mean = (sum(layer) + head) / sch.stages_per_copy
    out = tuple(_fine((sum(layer[i] for i in ranges[st]) + (head if sch.is_last(st) else 0))
                      / mean) for st in range(sch.num_stages))
    return None if len(set(out)) == 1 else out


def _makespan(cfg: ParallelConfig, tf: float, tb: float, p2p: float, scale) -> float:
    """The simulated pipeline makespan for forward ``tf``, full backward ``tb`` and hop
    ``p2p`` seconds. W ≈ one forward's matmuls (Zero Bubble §2), only where B is split."""
    ratio = _fine(tb / tf)
    tw = min(1.0 if cfg.schedule in SPLIT_BACKWARD else 0.0, ratio)
    return tf * makespan_unit(cfg.schedule, cfg.pp, cfg.microbatches, cfg.virtual, ratio, tw,
                              _fine(p2p / tf), scale)


def estimate(model: ModelSpec, cfg: ParallelConfig, hw: Hardware | None = None,
             seq: int | None = None) -> dict:
    """Step-time estimate for a valid ``cfg``: the pipeline's makespan (compute with TP
    traffic, bubble, hops) + ``exposed_comm``, the DP/ZeRO traffic compute does not hide.
    ``bubble_fraction`` is the pipeline's idle share of its makespan: 0 at PP = 1."""
    hw = hw or Hardware()
    s = seq or model.seq
    tf, tb = compute_costs(model, cfg, hw, seq)
    bw = axis_bandwidths(cfg, hw.network)
    t = cfg.tp
    act = cfg.local_seq(s) * cfg.microbatch * model.hidden * cfg.bytes_act
    lat = hw.network.latency                              # per message, in turn
    ar = 0.0 if t == 1 else 2 * (t - 1) / t * act / bw["tp"] + 2 * (t - 1) * lat
    layers_per_rank = model.layers / cfg.pp
    n_ar = 4 + (2 if cfg.recompute == "full" else 0)      # TP all-reduces per layer, F+B
    ring = cp_layer_bytes(model, cfg, seq) / bw["cp"] + 3 * (cfg.cp - 1) * lat   # CP, F+B
    # TP (and CP) traffic stretches every op
    scale = 1 + (n_ar * layers_per_rank * ar + layers_per_rank * ring) / (tf + tb)
    # EP's all-to-alls too, except where the schedule pairs one microbatch's forward with
    # another's backward and runs each one's all-to-alls under the other's compute
    # (DualPipe, DeepSeek-V3 §3.2.1): there an op lasts the longer of the two
    moe_layers = (model.layers - model.moe.dense_layers) / cfg.pp if model.moe else 0.0
    a2a = moe_layers * (ep_layer_bytes(model, cfg, seq) / bw["ep"]
                        + (4 * (cfg.ep - 1) * lat if cfg.ep > 1 else 0.0))
    scale = max(scale, a2a / (tf + tb)) if cfg.schedule in EP_OVERLAP else \
        scale + a2a / (tf + tb)
    # the all-to-alls hold the NIC that DP's traffic needs once EP leaves the node: half of
    # them in each forward, half in each backward (``dp_times``)
    nic = a2a / 2 if cfg.tp * cfg.cp * cfg.ep > hw.network.gpus_per_node else 0.0
    tf_all, tb_all = tf * scale, tb * scale
    p2p = act / t / bw["pp"] + lat if cfg.pp > 1 else 0.0
    key = small_key(cfg)
    stage_scale = _stage_scale(model, *key, cfg.first_layers, cfg.last_layers, seq)
    makespan = _makespan(cfg, tf_all, tb_all, p2p, stage_scale)
    # Every rank runs each microbatch once through its L/P layers, whatever the placement:
    # V chunks of 1/V each, or DualPipe's two copies fed M/2 microbatches each.
    busy = cfg.microbatches * (tf_all + tb_all)
    bubble = max(0.0, 1 - busy / makespan) if cfg.pp > 1 else 0.0
    z3 = zero3_times(model, cfg, bw["dp"], tf_all, tb_all, nic, nic)
    if cfg.zero >= 3:
        dp_time, exposed = z3["dp_time"], z3["exposed"]
        if (z3["tf_run"], z3["tb_run"]) != (tf_all, tb_all):   # gathers outlast compute
            stretched = _makespan(cfg, z3["tf_run"], z3["tb_run"], p2p, stage_scale)
            exposed = max(0.0, stretched - makespan)
    else:
        z12 = zero12_times(model, cfg, bw["dp"], tb_all, nic)
        dp_time, exposed = z12["dp_time"], z12["tail"]   # what the last backward cannot hide
        if z12["tb_run"] != tb_all:                 # reduce-scatters outlast backwards
            stretched = _makespan(cfg, tf_all, z12["tb_run"], p2p, stage_scale)
            exposed += max(0.0, stretched - makespan)
    return {"step_time": makespan + exposed, "makespan": makespan, "bubble_fraction": bubble,
            "exposed_comm": exposed, "tf": tf_all, "tb": tb_all, "p2p": p2p,
            "dp_time": dp_time, "dp_exposed": exposed, "tp_time_per_allreduce": ar,
            "stage_scale": stage_scale}


def bubble_breakdown(model: ModelSpec, cfg: ParallelConfig, hw: Hardware | None = None,
                     seq: int | None = None) -> dict:
    """Where ``estimate``'s bubble comes from, each step ÷ total (1 − the average stage's busy
    time ÷ the makespan): the schedule alone with equal stages and free hops; then with the
    stages as they are (the one that also runs the LM head is slower and paces the rest);
    then with the point-to-point hops too: ``estimate``'s ``bubble_fraction``. Each value
    also ÷ ideal: idle ÷ the average stage's busy time."""
    e = estimate(model, cfg, hw, seq)
    tf, tb = e["tf"], e["tb"]
    busy = cfg.microbatches * (tf + tb)

    def both(scale, p2p):
        ms = _makespan(cfg, tf, tb, p2p, scale)
        if cfg.pp == 1:
            return 0.0, 0.0
        return max(0.0, 1 - busy / ms), max(0.0, ms / busy - 1)
    return {"schedule": both(None, 0.0), "stages": both(e["stage_scale"], 0.0),
            "hops": both(e["stage_scale"], e["p2p"])}


def _pp_choices(layers: int, limit: int, first: int | None = None,
                last: int | None = None) -> list[int]:
    """Every pipeline depth up to ``limit`` the layers allow. With first/last layer counts
    fixed: those whose other stages split the rest evenly (PP = 16 for Llama 3 405B's 126
    layers with 7 on the first and the last stage, 8 on each of the 14 between). Without:
    those that split the layers evenly (PP = 35 for a 105-layer model, as Megatron-LM's
    Table 1 runs the 530B model), and every other depth whose ends can take the remainder
    (``_uneven_ends``)."""
    ends = [n for n in (first, last) if n is not None]
    out = [1]
    for p in range(2, min(layers, limit) + 1):
        if not ends:
            if layers % p == 0 or _uneven_ends(layers, p):
                out.append(p)
            continue
        middle, rest = p - len(ends), layers - sum(ends)
        if (middle == 0 and rest == 0) or (middle > 0 and rest >= middle
                                           and rest % middle == 0):
            out.append(p)
    return out


def _uneven_ends(layers: int, stages: int) -> tuple[int, int] | None:
    """(first, last) layer counts for ``stages`` that do not split the layers evenly: each
    middle stage takes m = ⌈layers/stages⌉ and the two ends share the rest, the first the
    larger half (the last also runs the output layer): Llama 3 405B's 126 layers on 16
    stages are 7 + 14·8 + 7, DeepSeek-V3's 61 are 3 + 14·4 + 2. None where an end would be
    left without a layer."""
    m = -(-layers // stages)
    rest = layers - (stages - 2) * m
    return ((rest + 1) // 2, rest // 2) if rest >= 2 else None


def split_ends(model: ModelSpec, p: int, name: str, V, first, last, M: int,
               seq: int | None = None) -> tuple:
    """(first, last) layer counts for depth ``p`` under schedule ``name``: the user's when
    given (none at PP = 1); none when ``p`` divides the layers; otherwise ``_uneven_ends``
    over the schedule's P·V model chunks. Where the chunks are too many for that (an end
    would get under two layers between them), the ends hold one layer or none, the embedding
    or the head and loss then their own chunk's whole work, or the chunks split as evenly as
    they go, whichever leaves the busiest rank the least (``_busiest_rank``; even on a tie):
    Llama 3 405B's 126 layers on 128 interleaved chunks are 0 + 126·1 + 0 ("The Llama 3 Herd
    of Models" §3.3.2), DeepSeek-V3's 61 on DualPipeV's 32 are 1 + 30·2 + 0."""
    if p == 1:
        return (None, None)
    layers = model.layers
    if first is not None or last is not None or layers % p == 0:
        return (first, last)
    sch = spec(name)
    per_rank = {"any": V or sch.default_V, "fixed": sch.default_V}.get(sch.stages_per_rank, 1)
    ends = _uneven_ends(layers, p * per_rank)
    if ends:
        return ends
    key = small_key(ParallelConfig(pp=p, microbatches=M, schedule=name, virtual=V))
    options = [(None, None), (0, 0), (1, 0)]
    loads = [_busiest_rank(model, key, ends, seq) for ends in options]
    best = min(range(len(options)), key=lambda i: loads[i])
    return options[best] if loads[best] < math.inf else (None, None)


def _busiest_rank(model: ModelSpec, key: tuple, ends: tuple, seq) -> float:
    """The forward FLOPs of the busiest pipeline rank (the sum of its chunks' scales, in
    average chunks) with ``ends`` as the first/last layer counts; inf where they cannot be."""
    try:
        scale = _stage_scale(model, *key, *ends, seq)
        sch = cached_schedule(*key)
    except ValueError:
        return math.inf
    if scale is None:
        return sch.num_stages / sch.num_ranks
    return max(sum(scale[st] for st in sch.stages_of_rank(r)) for r in range(sch.num_ranks))


def _ep_choices(model: ModelSpec, eps, shard: int) -> list[int]:
    """The EP degrees of ``eps`` that divide the DP·CP ranks and the model's experts."""
    experts = model.moe.experts if model.moe else 1
    return [e for e in eps if shard % e == 0 and experts % e == 0] or [1]


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
         sp: bool = True, max_pp: int | None = None,
         zero3_regather: tuple[str, ...] = ("per_microbatch", "per_step"),
         first_layers: int | None = None, last_layers: int | None = None,
         cps: tuple[int, ...] = (1,), activations: str = "korthikanti",
         eps: tuple[int, ...] = (1,), bytes_grad: float = 2,
         bytes_optim: float = 12) -> list[Candidate]:
    """All candidate layouts, feasible ones first, fastest first; infeasible ones say why.

    ``global_batch`` counts sequences per step (default 8 per GPU); M = global_batch/(DP·b).
    ``max_pp`` caps the pipeline depth (None: every depth the layers allow).
    ``zero3_regather``: the ZeRO-3 modes to consider (``ParallelConfig.zero3_regather``).
    ``first_layers``/``last_layers``: fixed layer counts of the first/last stage when PP > 1.
    ``cps``: the context-parallel degrees tried (DP = GPUs ÷ (TP·CP·PP)).
    ``activations``: how every layout's kept activations are counted
    (``ParallelConfig.activations``).
    ``eps``: the expert-parallel degrees tried, each where it divides DP·CP and the experts.
    ``bytes_grad``/``bytes_optim``: every layout's gradient and optimizer bytes per parameter
    (``ParallelConfig``), so that a published run is ranked among layouts of its own recipe.
    """
    hw = hw or Hardware()
    if gpus < 1:
        raise ValueError(f"need at least one GPU, got {gpus}")
    gb = global_batch or 8 * gpus
    out: list[Candidate] = []
    tps = [t for t in _pow2_upto(min(hw.network.gpus_per_node, gpus))
           if model.heads % t == 0 and model.kv % t == 0 and model.ffn % t == 0]
    for t, c in ((t, c) for t in tps for c in cps if gpus % (t * c) == 0):
        for p in _pp_choices(model.layers, min(gpus // (t * c), max_pp or model.layers),
                             first_layers, last_layers):
            if gpus % (t * c * p):
                continue
            d = gpus // (t * c * p)
            for b in micro_batches:
                if gb % (d * b):
                    out.append(Candidate(ParallelConfig(t, p, d, microbatch=b, cp=c,
                                                        activations=activations,
                                                        bytes_grad=bytes_grad,
                                                        bytes_optim=bytes_optim), False,
                                         f"global batch {gb} is not a multiple of DP×b = "
                                         f"{d * b}", memory=hw.memory))
                    continue
                M = gb // (d * b)
                zeros = _zero_options(zero_stages, zero3_regather, d * c)
                for e, name in ((e, n) for e in _ep_choices(model, eps, d * c)
                                for n in (schedules if p > 1 else ("1f1b",))):
                    for V in (virtual if spec(name).stages_per_rank == "any" else (None,)):
                        ends = split_ends(model, p, name, V, first_layers, last_layers, M,
                                          seq)
                        out.extend(_evaluate(model, t, p, d, b, M, name, V, tuple(recompute),
                                             sp and t > 1, zeros, hw, seq, ends, c,
                                             activations, e, (bytes_grad, bytes_optim)))
    out.sort(key=lambda c: (not c.feasible, c.step_time if c.feasible else c.peak_bytes))
    return out


def sized(model: ModelSpec, cfg: ParallelConfig, hw: Hardware | None = None,
          seq: int | None = None) -> tuple[Candidate, list[float]]:
    """One layout the user names, sized as the planner sizes its own: (its ``Candidate``,
    every pipeline rank's bytes). ValueError (one line) for a layout the model cannot take."""
    hw = hw or Hardware()
    cfg.validate(model, cached_schedule)
    rep = fast_memory(model, cfg, seq)
    peak, rank = rep.peak_bytes, rep.peak_rank
    fits = peak <= hw.memory
    why = "" if fits else (f"needs {fmt_bytes(peak)} on rank {rank}, "
                           f"{fmt_bytes(peak - hw.memory)} over the "
                           f"{fmt_bytes(hw.memory, exact=True)} GPU")
    e = estimate(model, cfg, hw, seq)
    c = Candidate(cfg, fits, why, peak, rank, e["step_time"], e["bubble_fraction"], e,
                  hw.memory, e["exposed_comm"])
    return c, [r.total for r in rep.per_rank]


def mfu(model: ModelSpec, cfg: ParallelConfig, step_time: float, hw: Hardware | None = None,
        seq: int | None = None) -> float:
    """Model FLOPs utilisation: the step's training FLOPs without recomputation (what MFU
    counts: PaLM's definition, the one the Llama 3 paper reports) over GPUs × peak × step."""
    hw = hw or Hardware()
    m = model if seq is None else model.with_(seq=seq)
    tokens = cfg.microbatches * cfg.microbatch * cfg.dp * m.seq      # CP splits each sequence
    return tokens * m.train_flops_per_token("none") / (cfg.num_gpus * hw.flops * step_time)


def rank_among(c: Candidate, cands: list[Candidate]) -> int:
    """1 + the fitting layouts in ``cands`` strictly faster than ``c`` (ties share a place)."""
    return 1 + sum(o.feasible and o.step_time < c.step_time * (1 - 1e-9) for o in cands)


RC_ORDER = ("none", "selective", "full")      # cheapest in FLOPs first, most memory first


def _zero_options(stages, regathers, d) -> list[tuple[int, str]]:
    """(ZeRO stage, ZeRO-3 mode) pairs worth trying; ZeRO over one replica changes nothing.
    ZeRO-2 is tried reducing per microbatch, what its gradient shard needs (summed whole
    and reduced once a step it is ZeRO-1)."""
    out = []
    for z in stages:
        if z > 0 and d == 1:
            continue
        out.extend((z, m) for m in (regathers if z == 3 else ("per_microbatch",)))
    return out


def _cheap(z, mode, M) -> bool:
    """ZeRO-0/1, ZeRO-2 over one microbatch, and ZeRO-3 kept gathered for the step: 2Ψ of
    traffic, the least there is."""
    return z < 2 or (z == 2 and M == 1) or (z == 3 and mode == "per_step")


def _evaluate(model, t, p, d, b, M, name, V, rcs, sp, zeros, hw, seq,
              ends=(None, None), cp=1, activations="korthikanti", ep=1,
              states=(2, 12)) -> list[Candidate]:
    """Every recomputation × ZeRO choice for one (TP, PP, DP, b, M, schedule, V) that can
    rank first; the rest are pruned by dominance and not listed (docs/memory.md, "Planner").

    Recomputation only trades FLOPs for memory: for one layout "none" is never slower than
    "selective", which is never slower than "full". ZeRO-0/1 move the same 2Ψ per step
    (same time), ZeRO-3 kept gathered for the step moves 2Ψ too (and needs ZeRO-1's bytes);
    ZeRO-2 reduce-scattering every microbatch moves (M + 1)Ψ and ZeRO-3 re-gathering per
    microbatch 3MΨ, each never faster than the cheap ones, and per-microbatch ZeRO-3 never
    faster than ZeRO-2 (more traffic under every op). So for each recomputation mode the
    stages are tried in that order and the first cheap one that fits ends the search: the
    higher stages it would list tie with it or lose (with gradients wider than the parameters,
    ZeRO-0's all-reduce moves 2Ψ of them where ZeRO-1 moves Ψ of each width, so the cheap
    stages go in order of their bytes, ``_step_bytes``). Once a mode fits with a cheap stage,
    costlier modes are dominated; once it fits only with a per-microbatch one, costlier
    modes are tried with cheap stages only — unless that layout hides all its DP traffic
    (its step time is then the makespan, which every costlier mode exceeds).
    """
    rcs = [rc for rc in RC_ORDER if rc in rcs]
    base = ParallelConfig(t, p, d, sp=sp, recompute=rcs[0], microbatch=b, microbatches=M,
                          schedule=name, virtual=V, first_layers=ends[0], last_layers=ends[1],
                          cp=cp, activations=activations, ep=ep, bytes_grad=states[0],
                          bytes_optim=states[1])
    try:
        # validate at the reduced M: same residue mod 2P, so the same divisibility rules
        small = base.with_(microbatches=small_key(base)[2])
        small.validate(model, cached_schedule)
    except ValueError as e:
        return [Candidate(base.with_(recompute=rc), False, str(e), memory=hw.memory)
                for rc in rcs]
    out: list[Candidate] = []
    zs = sorted(zeros, key=lambda z: (not _cheap(*z, M), _step_bytes(z[0], base), z[0]))
    fitted_only_regathering = False
    for rc in rcs:
        todo = [z for z in zs if _cheap(*z, M)] if fitted_only_regathering else zs
        rep0 = fast_memory(model, base.with_(recompute=rc), seq)
        for z, mode in todo:
            cfg = base.with_(recompute=rc, zero=z, zero3_regather=mode)
            peak, rank = _peak(model, rep0, cfg)
            if peak > hw.memory:
                out.append(Candidate(cfg, False, f"needs {fmt_bytes(peak)} on rank {rank}, "
                                     f"{fmt_bytes(peak - hw.memory)} over the "
                                     f"{fmt_bytes(hw.memory, exact=True)} GPU", peak, rank,
                                     memory=hw.memory))
                continue
            try:
                e = _estimate_cached(model, _same_traffic(cfg), hw, seq)
            except ValueError as err:      # a schedule rule only the full M breaks
                out.append(Candidate(cfg, False, str(err), peak, rank, memory=hw.memory))
                return out
            out.append(Candidate(cfg, True, "", peak, rank, e["step_time"], e["bubble_fraction"],
                                 e, hw.memory, e["exposed_comm"]))
            if _cheap(z, mode, M) or e["exposed_comm"] == 0:
                return out       # every costlier choice ties or loses
            fitted_only_regathering = True
            break
    return out


def _step_bytes(zero: int, cfg: ParallelConfig) -> float:
    """Bytes per parameter a cheap ZeRO stage moves a step: ZeRO-0 all-reduces the gradients
    (2 × their width), ZeRO-1/2/3 reduce-scatter them and gather the parameters."""
    return 2 * cfg.bytes_grad if zero == 0 else cfg.bytes_grad + cfg.bytes_param


def _peak(model, rep0, cfg) -> tuple[float, int]:
    """(peak bytes, its rank) for ``cfg``: ``rep0``'s activations plus cfg's model states."""
    peak, rank = 0.0, 0
    for rm in rep0.per_rank:
        pb, gb_, ob = states_bytes(model, rm.params_count, cfg, rm.experts_count)
        tot = pb + gb_ + ob + rm.activations
        if tot > peak:
            peak, rank = tot, rm.rank
    return peak, rank


@lru_cache(maxsize=8192)
def _estimate_cached(model, cfg, hw, seq):
    return estimate(model, cfg, hw, seq)


def _same_traffic(cfg: ParallelConfig) -> ParallelConfig:
    """The layout whose estimate ``cfg`` shares: ZeRO-0, ZeRO-1 and ZeRO-2 reducing once
    move the same 2Ψ per step (gradients and parameters of one width), so they share ZeRO-0's;
    ZeRO-2 reducing per microbatch and ZeRO-3 have their own."""
    once = cfg.zero < 2 or (cfg.zero == 2 and zero12_scatters(cfg, cfg.microbatches) == 1)
    return cfg.with_(zero=0) if once and cfg.bytes_grad == cfg.bytes_param else cfg


#: what the step-time model does not see, printed next to every estimate
LEAVES_OUT = (
    "kernel efficiency is one number (--efficiency); no per-kernel or small-matrix slowdown",
    "the LM head is timed on the last stage, the embedding's lookup is not",
    "communication never overlaps compute except the DP reduce behind the last backward, "
    "ZeRO-3's prefetched gathers and EP's all-to-alls under DualPipe(V); DP traffic hides "
    "only in the link time an op's own all-to-alls leave free",
    "no congestion: each axis gets its link bandwidth alone (above a pod, the oversubscribed "
    "share when the network names one); latency per message only where the network gives "
    "one, and never on the DP collectives",
    "context parallelism's ring of keys and values does not overlap the attention it feeds",
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
    ms = fmt_seconds
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
        ("step time", f"{ms(e['step_time'])} = makespan + exposed communication"),
    ] + [("left out", item) for item in LEAVES_OUT]


def _dp_row(cfg, e, ms) -> tuple[str, str]:
    if zero12_scatters(cfg, cfg.microbatches) > 1:
        return ("ZeRO-2 traffic", f"{ms(e['dp_time'])}: the gradients reduce-scattered after "
                f"every microbatch's backward (a backward lasts at least its reduce-scatter); "
                f"exposed {ms(e['exposed_comm'])}")
    if cfg.zero >= 3 and cfg.zero3_regather == "per_microbatch":
        return ("ZeRO-3 traffic", f"{ms(e['dp_time'])}: gathers for every F and B of every "
                f"microbatch; exposed {ms(e['exposed_comm'])}: what the gathers outlast the "
                "compute they hide behind (ops stretched to their gathers' length)")
    return ("DP gradient traffic", f"{ms(e['dp_time'])}, of which {ms(e['exposed_comm'])} "
            "(exposed) is not hidden behind the last backward")
