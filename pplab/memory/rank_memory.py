"""Per-rank memory for the planner: ``memory_report``'s numbers, with the schedule walked
once per (schedule, P, M, V) and activations extrapolated in M past ``SIM_MAX_M``."""
from __future__ import annotations

from functools import lru_cache

from ..partition import stage_layers
from ..timeline import peak_inflight
from .extrapolate import cached_schedule, planner_traits, reduced
from .model_spec import ModelSpec
from .parallel import ParallelConfig


def small_key(cfg):
    red = reduced(cfg.microbatches, cfg.pp, cfg.schedule)
    return (cfg.schedule, cfg.pp, red[0] if red else cfg.microbatches, cfg.virtual)


@lru_cache(maxsize=4096)
def _alive_states(name, P, M, V, layers, first=None, last=None, units=None) -> tuple:
    """Per rank, the distinct (layers alive, first-stage chunks alive, last-stage chunks alive,
    layers with a pending W, last-stage chunks with a pending W) seen along its run order. Any
    per-layer and per-extra byte sizes then give the peak as the max of a dot product, without
    walking the schedule again (peaks come only after a forward: I and W only shrink).
    ``units``: per stage, its layers in units of one layer's bytes when they differ (a MoE
    model's dense layers); None: their count."""
    sch = cached_schedule(name, P, M, V)
    rg = stage_layers(sch, layers, first, last)
    n = [len(rg[st]) if units is None else units[st] for st in range(sch.num_stages)]
    dst = [(n[st], int(sch.is_first(st)), int(sch.is_last(st)), 0, 0)
           for st in range(sch.num_stages)]
    pend = [(0, 0, 0, n[st], int(sch.is_last(st))) for st in range(sch.num_stages)]
    out = []
    for ops in sch.ranks:
        alive, waiting, cur, seen = set(), set(), [0] * 5, set()
        for op in ops:
            for a in op.parts:
                key = (a.stage, a.microbatch)
                d = dst[a.stage]
                if a.kind == "F":
                    alive.add(key)
                    cur = [c + x for c, x in zip(cur, d)]
                    seen.add(tuple(cur))
                elif a.kind == "I" and key in alive:
                    alive.discard(key)
                    waiting.add(key)
                    cur = [c - x + y for c, x, y in zip(cur, d, pend[a.stage])]
                elif a.kind == "B" and key in alive:
                    alive.discard(key)
                    cur = [c - x for c, x in zip(cur, d)]
                elif a.kind == "W" and key in waiting:
                    waiting.discard(key)
                    cur = [c - y for c, y in zip(cur, pend[a.stage])]
        out.append(tuple(seen) or ((0,) * 5,))
    return tuple(out)


def _activation_peaks(model, cfg, M, seq):
    from . import activations as act
    from .accounting import end_extra_bytes, layer_bytes
    s, b, t = cfg.local_seq(seq or model.seq), cfg.microbatch, cfg.tp
    layer = layer_bytes(model, cfg, seq)
    first, last = end_extra_bytes(model, cfg, seq)
    w = (layer, first, last,
         # a pending W at its own size (accounting.stage_w_pending_bytes)
         min(layer, act.layer_w_pending_bytes(s, b, model.hidden, t, cfg.sp, cfg.bytes_act)),
         min(last, act.last_stage_w_pending_bytes(s, b, model.hidden, model.vocab, t, cfg.sp,
                                                  cfg.bytes_act)))
    units = None
    if model.moe:
        from .accounting import layer_units
        sch = cached_schedule(cfg.schedule, cfg.pp, M, cfg.virtual)
        units = tuple(_units_fine(layer_units(model, cfg, r, seq))
                      for r in stage_layers(sch, model.layers, cfg.first_layers,
                                            cfg.last_layers))
    states = _alive_states(cfg.schedule, cfg.pp, M, cfg.virtual, model.layers, cfg.first_layers,
                           cfg.last_layers, units)
    return [max(sum(x * y for x, y in zip(st, w)) for st in rank) for rank in states]


def _units_fine(x: float) -> float:
    return float(f"{x:.9g}")


@lru_cache(maxsize=4096)
def rank_params(model: ModelSpec, t: int, name, P, M, V, first=None, last=None,
                ep: int = 1) -> tuple:
    """Per rank: (stages, layers, parameters on one GPU before ZeRO, of them routed
    experts) — cached per schedule."""
    from .accounting import stage_param_split
    sch = cached_schedule(name, P, M, V)
    rg = stage_layers(sch, model.layers, first, last)
    out = []
    for r in range(sch.P):
        stages = sch.stages_of_rank(r)
        splits = [stage_param_split(model, sch, st, rg[st], stages) for st in stages]
        psi = sum((sp.per_rank(t, ep) for sp in splits), 0.0)
        out.append((tuple(stages), sum(len(rg[st]) for st in stages), psi,
                    sum(sp.expert for sp in splits) / ep))
    return tuple(out)


@lru_cache(maxsize=4096)
def _equivalents(name, P, M, V) -> tuple:
    return tuple(peak_inflight(cached_schedule(name, P, M, V), stage_equivalents=True))


def fast_memory(model: ModelSpec, cfg: ParallelConfig, seq: int | None = None):
    """memory_report's numbers, with activations extrapolated in M beyond SIM_MAX_M.

    Equal to ``memory_report`` for M ≤ SIM_MAX_M (a test checks it); the schedule is
    generated at most twice per (schedule, P, M, V) and cached, and so are the per-rank
    parameter counts (they do not depend on recomputation, ZeRO or b).
    """
    from .accounting import MemoryReport, RankMemory, states_bytes
    red = reduced(cfg.microbatches, cfg.pp, cfg.schedule)
    key = small_key(cfg)
    if red is None:
        peaks = _activation_peaks(model, cfg, cfg.microbatches, seq)
    elif not planner_traits(cfg.schedule).peak_grows:
        # Past the fill, every schedule but GPipe holds a fixed number of microbatches:
        # the peak at Ma is the peak at any larger M (tested).
        peaks = _activation_peaks(model, cfg, red[0], seq)
    else:
        a = _activation_peaks(model, cfg, red[0], seq)
        b = _activation_peaks(model, cfg, red[1], seq)
        f = (cfg.microbatches - red[0]) / (red[1] - red[0])
        peaks = [x + f * (y - x) for x, y in zip(a, b)]
    rep = MemoryReport(model, cfg, cached_schedule(*key))
    params = rank_params(model, cfg.tp, *key, cfg.first_layers, cfg.last_layers, cfg.ep)
    for r, ((stages, nl, psi, ex), pk, eq) in enumerate(zip(params, peaks,
                                                             _equivalents(*key))):
        p, g, o = states_bytes(model, psi, cfg, ex)
        rep.per_rank.append(RankMemory(r, list(stages), nl, psi, p, g, o, pk, eq, ex))
    return rep
