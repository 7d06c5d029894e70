"""Graders for exercise 03: ZeRO bytes, Korthikanti activation bytes, the 1F1B activation
peak per rank, and a 3D layout that fits and beats a step-time target.

Every grader compares the student's answer with ``pplab.memory`` on cases the notebook does
not show and raises ``AssertionError`` naming the case, the expected value and a hint.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ..memory import ParallelConfig, get_preset, layer_activation_bytes, memory_report
from ..memory.accounting import model_states_bytes
from ..partition import stage_layers
from ..registry import make_schedule
from ..timeline import inflight_profile
from .bubble import _call, _fail
from .guard import graded
from .normalise import normalise


def _close(a, b, rel=1e-6) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-6)
    except (TypeError, ValueError):
        return False


ZERO_CASES = [(7.5e9, 64), (70e9, 64), (70e9 / 64, 8), (1e9, 1), (13e9, 3), (405e9, 512)]


@graded
def check_zero_bytes(zero_bytes, cases=ZERO_CASES) -> bool:
    """``zero_bytes(psi, nd, stage)``: model-state bytes per GPU (params + grads + Adam) for
    mixed-precision Adam (2 + 2 + 12 bytes per parameter), ZeRO stage 0–3 over N_d GPUs."""
    hints = {0: "plain DP keeps all 16 bytes per parameter on every GPU",
             1: "ZeRO-1 shards only the 12 bytes of optimizer states: 4Ψ + 12Ψ/N_d",
             2: "ZeRO-2 shards optimizer states and gradients: 2Ψ + 14Ψ/N_d",
             3: "ZeRO-3 (FSDP) shards everything: 16Ψ/N_d"}
    for psi, nd in cases:
        for z in range(4):
            want = sum(model_states_bytes(psi, nd, z))
            got = _call(zero_bytes, psi, nd, z)
            if not _close(got, want):
                _fail(f"zero_bytes(psi={psi:g}, nd={nd}, stage={z}) returned {got!r}, expected "
                      f"{want:.6g} bytes ({want / 1e9:.3f} GB). Hint: {hints[z]}.")
    print(f"✓ zero_bytes matches the ZeRO paper on {len(cases) * 4} cases "
          f"(7.5B on 64 GPUs: 120 → 31.4 → 16.6 → 1.9 GB)")
    return True


ACT_CASES = [(2048, 1, 12288, 96), (4096, 1, 8192, 64), (8192, 2, 4096, 32), (1024, 4, 2048, 16),
             (32, 2, 64, 4)]


@graded
def check_layer_activations(act_bytes, cases=ACT_CASES) -> bool:
    """``act_bytes(s, b, h, a, t, sp, recompute)``: Korthikanti Table 2 bytes for one layer."""
    n = 0
    for s, b, h, a in cases:
        for t in (1, 2, 4, 8):
            if a % t:
                continue
            for sp in (False, True):
                for rc in ("none", "selective", "full"):
                    want = layer_activation_bytes(s, b, h, a, t, sp, rc)
                    got = _call(act_bytes, s, b, h, a, t, sp, rc)
                    n += 1
                    if not _close(got, want):
                        sbh = s * b * h
                        hint = {"full": "full recomputation keeps only the layer input, 2·s·b·h",
                                "selective": "selective drops the 5·a·s/(h·t) attention term",
                                "none": "34 + 5as/h without TP; 10 + 24/t + 5as/(ht) with TP; "
                                        "SP also divides the 10 by t"}[rc]
                        got_txt = (f"{float(got) / sbh:.4g}·sbh"
                                   if isinstance(got, (int, float)) else repr(got))
                        _fail(f"act_bytes(s={s}, b={b}, h={h}, a={a}, t={t}, sp={sp}, "
                              f"recompute={rc!r}) returned {got_txt}, expected "
                              f"{want / sbh:.4g}·sbh = {want:.6g} bytes. Hint: {hint}.")
    print(f"✓ act_bytes matches Korthikanti Table 2 on {n} cases")
    return True


PEAK_CASES = [(4, 8, 32), (8, 32, 80), (8, 3, 80), (3, 7, 10), (5, 5, 7), (1, 4, 12), (16, 64, 126)]


def expected_1f1b_peak(P, M, r, layers, per_layer) -> float:
    """Read the peak off the 1F1B run order (the same walk as ``peak_inflight``)."""
    sch = make_schedule("1f1b", P, M)
    rg = stage_layers(sch, layers)
    w = {st: len(rg[st]) * per_layer for st in range(sch.num_stages)}
    return max(inflight_profile(sch.ranks[r], w), default=0.0)


@graded
def check_peak_1f1b(peak_bytes, cases=PEAK_CASES) -> bool:
    """``peak_bytes(P, M, r, layers, per_layer)``: peak activation bytes on rank r under 1F1B,
    layers split as evenly as possible with the remainder on the first ranks."""
    per_layer = 1e9
    for P, M, L in cases:
        for r in range(P):
            want = expected_1f1b_peak(P, M, r, L, per_layer)
            got = _call(peak_bytes, P, M, r, L, per_layer)
            if not _close(got, want):
                lay = L // P + (1 if r < L % P else 0)
                _fail(f"peak_bytes(P={P}, M={M}, r={r}, layers={L}, per_layer=1e9) returned "
                      f"{got!r}, expected {want:.6g}: rank {r} holds {lay} layers and "
                      f"min(P − r, M) = {min(P - r, M)} microbatches in flight. Hint: rank r "
                      f"starts P − r forwards before its first backward returns, and never more "
                      f"than M; with {L} layers on {P} ranks the first {L % P} ranks get one "
                      f"extra layer.")
    print(f"✓ peak_bytes matches the schedule's run order on {sum(c[0] for c in cases)} "
          f"ranks (including M < P and uneven layer splits)")
    return True


def check_layout(cfg, preset: str = "llama3-70b", seq: int = 4096, gpus: int = 64,
                 global_batch: int = 512, target_s: float = 45.0, gpu_memory: float = 80e9):
    """``cfg`` (a ParallelConfig) must use exactly ``gpus`` GPUs, train ``global_batch``
    sequences per step (DP × M × b), fit in ``gpu_memory`` on every rank, and have an
    estimated step time (``pplab.memory.planner.estimate``) under ``target_s``."""
    from ..memory.planner import Hardware, estimate
    cfg = _as_config(cfg)
    model = get_preset(preset).with_(seq=seq)
    if cfg.num_gpus != gpus:
        _fail(f"TP×PP×DP = {cfg.tp}×{cfg.pp}×{cfg.dp} = {cfg.num_gpus} GPUs, but the budget is "
              f"{gpus}: choose degrees whose product is {gpus}")
    batch = cfg.dp * cfg.microbatches * cfg.microbatch
    if batch != global_batch:
        _fail(f"DP × M × b = {cfg.dp} × {cfg.microbatches} × {cfg.microbatch} = {batch} "
              f"sequences per step, but the global batch is {global_batch}: set "
              f"M = {global_batch} / (DP·b)")
    try:
        rep = memory_report(model, cfg)
    except ValueError as e:
        _fail(f"this layout is not valid for {model.name}: {e}")
    if not rep.peak_bytes <= gpu_memory:            # fails closed: NaN never fits
        r = rep.per_rank[rep.peak_rank]
        _fail(f"rank {rep.peak_rank} needs {rep.peak_bytes / 1e9:.1f} GB > "
              f"{gpu_memory / 1e9:.0f} GB (params {r.params / 1e9:.1f}, grads "
              f"{r.grads / 1e9:.1f}, optimizer {r.optimizer / 1e9:.1f}, activations "
              f"{r.activations / 1e9:.1f}). Hint: selective recomputation with SP, a higher "
              f"ZeRO stage, or more PP")
    est = estimate(model, cfg, Hardware(memory=gpu_memory))
    if not est["step_time"] <= target_s:
        _fail(f"fits ({rep.peak_bytes / 1e9:.1f} GB on rank {rep.peak_rank}) but the estimated "
              f"step is {est['step_time']:.2f} s > {target_s:g} s (bubble "
              f"{est['bubble_fraction']:.1%}, one TP all-reduce "
              f"{est['tp_time_per_allreduce'] * 1e3:.2f} ms). Hint: keep TP inside a node and "
              f"small, use a low-bubble schedule, avoid full recomputation")
    print(f"✓ {cfg.tp}×{cfg.pp}×{cfg.dp} fits ({rep.peak_bytes / 1e9:.1f} GB on rank "
          f"{rep.peak_rank}) and steps in {est['step_time']:.2f} s < {target_s:g} s")
    return True




@dataclass(frozen=True)
class Budget:
    """What a layout must fit: a model preset, GPUs, memory per GPU, sequences per step."""
    preset: str = "llama3-70b"
    gpus: int = 64
    gpu_memory: float = 80e9
    global_batch: int = 512
    seq: int = 4096


#: budgets a grading run draws from (8 GPUs per node throughout)
BUDGET_MENU = [("llama3-8b", 16, 40e9), ("llama3-8b", 32, 80e9), ("llama3-8b", 8, 80e9),
               ("llama3-70b", 32, 80e9), ("llama3-70b", 64, 80e9), ("llama3-70b", 128, 80e9)]
#: the bound is this much slower than the best layout a restricted planner search finds
BOUND_SLACK = 1.25


def draw_budget(seed: int | None) -> Budget:
    """The visible budget for ``None``; otherwise one drawn from ``BUDGET_MENU``."""
    if seed is None:
        return Budget()
    rng = random.Random(seed)
    preset, gpus, mem = rng.choice(BUDGET_MENU)
    return Budget(preset, gpus, mem, gpus * rng.choice([4, 8]), rng.choice([2048, 4096]))


def step_bound(budget: Budget) -> float:
    """The planner's best step time (1F1B or ZB-V, ZeRO-1/2, selective recomputation with
    SP) times ``BOUND_SLACK``: beatable by a sensible layout, not by a guess."""
    from ..memory.planner import Hardware, plan
    best = plan(get_preset(budget.preset).with_(seq=budget.seq), budget.gpus,
                Hardware(memory=budget.gpu_memory), global_batch=budget.global_batch,
                schedules=("1f1b", "zbv"), zero_stages=(1, 2), recompute=("selective",),
                virtual=(2,))[0]
    if not best.feasible:
        raise ValueError(f"no layout fits {budget}; the budget menu is wrong")
    return best.step_time * BOUND_SLACK


#: what a layout chooses, and so the only fields of the student's config that are read; the
#: byte sizes (mixed-precision Adam, 16-bit activations) are the task's, never the answer's
LAYOUT_FIELDS = ("tp", "pp", "dp", "zero", "sp", "recompute", "microbatch", "microbatches",
                 "schedule", "virtual", "zero3_regather", "zero2_reduce", "first_layers",
                 "last_layers")
_WHOLE = {"tp": 1, "pp": 1, "dp": 1, "microbatch": 1, "microbatches": 1, "zero": 0,
          "virtual": 1, "first_layers": 0, "last_layers": 0}      # the least each may be
_MAY_BE_NONE = ("virtual", "first_layers", "last_layers")
_TEXT = ("recompute", "schedule", "zero3_regather", "zero2_reduce")


def _as_config(cfg) -> ParallelConfig:
    """A fresh ParallelConfig from only the layout's own fields of the student's config, each
    checked (whole numbers where they count things, text where they name a choice): a field
    the task does not define (a byte size of 0 or NaN) never reaches the memory report."""
    if not all(hasattr(cfg, name) for name in LAYOUT_FIELDS):
        _fail(f"expected a ParallelConfig, got {type(cfg).__name__}: build one like "
              "ParallelConfig(tp=.., pp=.., dp=.., zero=.., sp=.., recompute=.., "
              "microbatches=.., schedule=..)")
    fields = {name: normalise(getattr(cfg, name)) for name in LAYOUT_FIELDS}   # numpy → int
    for name, value in fields.items():
        if name in _MAY_BE_NONE and value is None:
            continue
        if name in _WHOLE and (type(value) is not int or value < _WHOLE[name]):
            _fail(f"{name}={value!r:.60}: it counts GPUs, microbatches, stages or layers, so "
                  f"it must be a whole number ≥ {_WHOLE[name]}")
        if name in _TEXT and type(value) is not str:
            _fail(f"{name}={value!r:.60} must be text, e.g. {getattr(ParallelConfig, name)!r}")
        if name == "sp" and type(value) is not bool:
            _fail(f"sp={value!r:.60} must be True or False")
    return ParallelConfig(**fields)


@graded
def check_layout_for_budget(choose_layout, cases=(None,)) -> bool:
    """``choose_layout(budget)`` returns a ParallelConfig for a :class:`Budget`; it must fit
    and beat :func:`step_bound`. Hidden cases are budgets drawn at grading time."""
    for seed in cases:
        budget = draw_budget(seed)
        bound = step_bound(budget)
        cfg = _as_config(_call(choose_layout, budget))
        try:
            check_layout(cfg, budget.preset, budget.seq, budget.gpus, budget.global_batch,
                         bound, budget.gpu_memory)
        except AssertionError as e:
            _fail(f"for {budget}: {e}")
    return True
