"""Canvases for the memory lessons (01, 07, 08, 09): the work is in plain ``render_*``
functions returning ``(scene | None, message)``; bad input (TP not dividing the heads,
GPUs ≠ TP×PP×DP, a schedule that cannot take this P and M) comes back as the library's own
one-line explanation, never as a traceback. The canvases reuse
:func:`pplab.canvases.base.build_canvas`,
so they land in :data:`pplab.canvases.base.CANVASES` and the headless notebook tests sweep them.
"""
from __future__ import annotations

from ..memory import ParallelConfig, PRESETS, get_preset, memory_report
from ..memory.activations import layer_activation_bytes
from ..memory.parallel import RECOMPUTE
from ..scene import memory_panel, scene
from ..scene.memory import comm_volumes_panel, fsdp_scene, plan_panel, recompute_scene
from .base import build_canvas
from .menus import menu

GB = 1e9
PRESET_NAMES = tuple(PRESETS)
TP_VALUES = (1, 2, 4, 8)
PP_VALUES = (1, 2, 4, 8, 16)
DP_VALUES = (1, 2, 4, 8, 16, 32, 64)
GPU_VALUES = (8, 16, 32, 64, 128)
SEQ_VALUES = (512, 1024, 2048, 4096, 8192)
#: the recompute canvas goes further: the quadratic attention term takes over at long s
RECOMPUTE_SEQ_VALUES = SEQ_VALUES + (16384, 32768)
MEM_SCHEDULES = menu("memory")       # those the planner knows how to extrapolate
M_RANGE = (1, 32)
MBS_RANGE = (1, 8)


def _onoff(v) -> bool:
    return v in (True, "on", 1)


def memory_config(preset="llama3-70b", tp=8, pp=8, dp=8, zero=1, sp="on", recompute="selective",
                  schedule="1f1b", M=32, mbs=1, seq=None, gpus=None):
    """(model, ParallelConfig) from canvas values; ``seq=None`` keeps the preset's length."""
    model = get_preset(preset)
    if seq:
        model = model.with_(seq=int(seq))
    cfg = ParallelConfig(tp=int(tp), pp=int(pp), dp=int(dp), zero=int(zero), sp=_onoff(sp),
                         recompute=recompute, microbatch=int(mbs), microbatches=int(M),
                         schedule=schedule, gpus=None if gpus is None else int(gpus))
    return model, cfg


def memory_summary(rep, gpu_memory: float = 80e9) -> str:
    m, c = rep.model, rep.config
    fits = "fits" if rep.peak_bytes <= gpu_memory else "does NOT fit"
    r = rep.per_rank[rep.peak_rank]
    return (f"{m.name} ({m.num_params() / 1e9:.2f}B parameters) on {c.num_gpus} GPUs: peak "
            f"{rep.peak_bytes / GB:.1f} GB on rank {rep.peak_rank} ({fits} in "
            f"{gpu_memory / GB:g} GB) = params {r.params / GB:.1f} + grads {r.grads / GB:.1f} + "
            f"optimizer {r.optimizer / GB:.1f} + activations {r.activations / GB:.1f}")


def render_memory(preset="llama3-70b", tp=8, pp=8, dp=8, zero=1, sp="on",
                  recompute="selective", schedule="1f1b", M=32, mbs=1, seq=None, gpus=None,
                  gpu_memory=80):
    """Per-rank memory bars for one layout: ``(scene or None, message)``."""
    try:
        model, cfg = memory_config(preset, tp, pp, dp, zero, sp, recompute, schedule, M, mbs,
                                   seq, gpus)
        rep = memory_report(model, cfg)
    except ValueError as e:
        return None, str(e)
    return scene(memory_panel(rep, gpu_memory * GB)), memory_summary(rep, gpu_memory * GB)


def render_fsdp(preset="llama3-8b", dp=8, phase="forward", layer=0, prefetch="off"):
    """FSDP's gather → compute → free while ``layer`` runs its forward or backward."""
    from ..memory.fsdp import fsdp_frames
    model = get_preset(preset)
    L = model.layers
    if not 0 <= int(layer) < L:
        return None, f"{model.name} has {L} layers: layer must be 0..{L - 1}"
    if phase not in ("forward", "backward"):
        return None, f"phase must be forward or backward, got {phase!r}"
    layer_b = model.layer_params().total * 2            # bf16 parameters of one layer
    other = (model.embedding_params().total + model.head_params().total
             + model.final_norm_params().total) * 2 / int(dp)
    frames = fsdp_frames(L, layer_b, int(dp), _onoff(prefetch), other)
    step = int(layer) if phase == "forward" else 2 * L - 1 - int(layer)
    fr = frames[step]
    peak = max(f["resident"] for f in frames)
    msg = (f"step {fr['step']}: {fr['phase']} of layer {fr['layer']}; gathered layers "
           f"{fr['full']}; bf16 parameters resident {fr['resident'] / GB:.2f} GB (peak "
           f"{peak / GB:.2f} GB) vs {model.num_params() * 2 / GB:.1f} GB unsharded")
    return fsdp_scene(frames, step, layer_b, int(dp)), msg


def recompute_rows(preset="gpt3-175b", tp=8, sp="on", seq=None, mbs=1):
    """[(mode, activation bytes per layer, extra FLOPs fraction)] for none/selective/full."""
    model = get_preset(preset)
    if seq:
        model = model.with_(seq=int(seq))
    if model.heads % int(tp):
        raise ValueError(f"TP={tp} does not divide the {model.heads} attention heads of "
                         f"{model.name}; use a TP degree that divides {model.heads}")
    base = model.train_flops_per_token("none")
    rows = []
    for rc in RECOMPUTE:
        b = layer_activation_bytes(model.seq, int(mbs), model.hidden, model.heads, int(tp),
                                   _onoff(sp), rc)
        rows.append((rc, b, model.train_flops_per_token(rc) / base - 1))
    return model, rows


def render_recompute(preset="gpt3-175b", tp=8, sp="on", seq=None, mbs=1):
    """Activation bytes per layer vs extra FLOPs for none / selective / full recomputation."""
    try:
        model, rows = recompute_rows(preset, tp, sp, seq, mbs)
    except ValueError as e:
        return None, str(e)
    none = rows[0][1]
    msg = "; ".join(f"{rc}: {b / GB:.3g} GB/layer ({1 - b / none:.0%} less), +{f:.1%} FLOPs"
                    for rc, b, f in rows)
    msg = f"{model.name} s={model.seq} b={mbs} TP={tp} SP={sp}: " + msg
    return recompute_scene([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                           f"{model.name}, s={model.seq}, b={mbs}, TP={tp}, SP {sp}"), msg


def render_layout(preset="llama3-70b", gpus=64, tp=8, pp=4, dp=2, zero=1, recompute="selective",
                  schedule="1f1b", M=32, gpu_memory=80, seq=None):
    """One 3D layout: per-rank memory, bytes per axis and the estimated step time
    (``seq``: tokens per sequence, the preset's own where None)."""
    from ..memory.comm import comm_volumes
    from ..memory.planner import Hardware, estimate
    try:
        if int(gpus) != int(tp) * int(pp) * int(dp):
            raise ValueError(f"{gpus} GPUs ≠ TP×PP×DP = {tp}×{pp}×{dp} = "
                             f"{int(tp) * int(pp) * int(dp)}; choose degrees whose product is "
                             f"{gpus}")
        model, cfg = memory_config(preset, tp, pp, dp, zero, "on" if int(tp) > 1 else "off",
                                   recompute, schedule, M, 1, seq, gpus)
        rep = memory_report(model, cfg)
        vols = comm_volumes(model, cfg, rep.schedule)
        hw = Hardware(memory=gpu_memory * GB)
        est = estimate(model, cfg, hw)
    except ValueError as e:
        return None, str(e)
    msg = (memory_summary(rep, hw.memory) + f"\nstep ≈ {est['step_time']:.2f} s (bubble "
           f"{est['bubble_fraction']:.1%}); per GPU per step TP {vols['tp'] / GB:.1f} GB, "
           f"PP {vols['pp'] / GB:.2f} GB, DP {vols['dp'] / GB:.1f} GB")
    return scene(memory_panel(rep, hw.memory, f"TP={tp} PP={pp} DP={dp} ZeRO-{zero} "
                              f"{schedule} M={M} {recompute}"), comm_volumes_panel(vols)), msg


def plan_table(cands, top: int = 8, infeasible: int = 6) -> str:
    """The fastest ``top`` feasible layouts, then examples of why others fail (one per kind)."""
    from ..memory.plan_text import misses
    ok = [c for c in cands if c.feasible]
    lines = [f"{len(ok)} of {len(cands)} layouts fit; fastest first:"]
    lines += [f"{i + 1:2d}. {c.describe()}" for i, c in enumerate(ok[:top])]
    why = misses(cands, infeasible)
    if why:
        lines.append("why others fail (nearest and worst memory miss, one of each other reason):")
        lines += ["  ✗ " + c.describe() for c in why]
    return "\n".join(lines)


def render_plan(preset="llama3-70b", gpus=64, gpu_memory=80, seq=None, top: int = 8):
    """The planner's ranking for a GPU budget, with reasons for the infeasible layouts."""
    from ..memory.planner import Hardware, plan
    model = get_preset(preset)
    if seq:
        model = model.with_(seq=int(seq))
    try:
        cands = plan(model, int(gpus), Hardware(memory=gpu_memory * GB))
    except ValueError as e:
        return None, str(e)
    msg = f"{model.name} (s={model.seq}) on {gpus} GPUs × {gpu_memory:g} GB\n" + plan_table(cands,
                                                                                         top)
    return scene(plan_panel(cands, gpu_memory * GB, f"{model.name} on {gpus} GPUs")), msg


# ---- canvases ---------------------------------------------------------------------------------
def _dd(w, name, options, value, width="190px"):
    return w.Dropdown(options=list(options), value=value, description=name,
                      layout=w.Layout(width=width), style={"description_width": "initial"})


def _int(w, name, value, rng, width="230px"):
    return w.IntSlider(value=value, min=rng[0], max=rng[1], description=name,
                       continuous_update=False, layout=w.Layout(width=width))


MEMORY_CONTROLS = ("preset", "tp", "pp", "dp", "zero", "sp", "recompute", "schedule", "M",
                   "mbs", "seq")


def memory_canvas(preset="llama3-70b", tp=8, pp=1, dp=8, zero=0, sp="on", recompute="selective",
                  schedule="1f1b", M=8, mbs=1, seq=4096, gpu_memory=80,
                  controls=MEMORY_CONTROLS):
    """Memory breakdown per pipeline rank; ``controls`` picks which knobs are shown (lesson
    01 shows preset, TP, DP; lesson 07 all of them). The others stay at their given value."""
    import ipywidgets as w

    values = dict(preset=preset, tp=tp, pp=pp, dp=dp, zero=zero, sp=sp, recompute=recompute,
                  schedule=schedule, M=M, mbs=mbs, seq=seq)
    make = {"preset": lambda v: _dd(w, "model", PRESET_NAMES, v, "220px"),
            "tp": lambda v: _dd(w, "TP", TP_VALUES, v, "110px"),
            "pp": lambda v: _dd(w, "PP", PP_VALUES, v, "110px"),
            "dp": lambda v: _dd(w, "DP", DP_VALUES, v, "110px"),
            "zero": lambda v: _dd(w, "ZeRO", (0, 1, 2, 3), v, "120px"),
            "sp": lambda v: _dd(w, "SP", ("off", "on"), v, "110px"),
            "recompute": lambda v: _dd(w, "recompute", RECOMPUTE, v, "200px"),
            "schedule": lambda v: _dd(w, "schedule", MEM_SCHEDULES, v, "200px"),
            "M": lambda v: _int(w, "M", v, M_RANGE),
            "mbs": lambda v: _int(w, "b", v, MBS_RANGE, "200px"),
            "seq": lambda v: _dd(w, "seq", SEQ_VALUES, v, "140px")}
    ctl = {k: make[k](values[k]) for k in controls}
    fixed = {k: v for k, v in values.items() if k not in ctl}
    fixed["gpu_memory"] = gpu_memory
    names = list(ctl)
    rows = [w.HBox([ctl[k] for k in names[i:i + 5]]) for i in range(0, len(names), 5)]
    return build_canvas(render_memory, ctl, rows, fixed)


def fsdp_canvas(preset="llama3-8b", dp=8, prefetch="off"):
    """Step through FSDP's forward and backward one layer at a time."""
    import ipywidgets as w

    L = get_preset(preset).layers
    ctl = {"dp": _dd(w, "N_d", DP_VALUES, dp, "120px"),
           "prefetch": _dd(w, "prefetch", ("off", "on"), prefetch, "150px"),
           "phase": _dd(w, "phase", ("forward", "backward"), "forward", "180px"),
           "layer": w.IntSlider(value=0, min=0, max=L - 1, description="layer",
                                continuous_update=False, layout=w.Layout(width="380px"))}
    return build_canvas(render_fsdp, ctl, [w.HBox(list(ctl.values()))],
                        {"preset": preset})


def recompute_canvas(preset="gpt3-175b", tp=8, sp="on", seq=2048, mbs=1):
    """Activation memory per layer vs extra FLOPs for the three recomputation modes."""
    import ipywidgets as w

    ctl = {"preset": _dd(w, "model", PRESET_NAMES, preset, "220px"),
           "tp": _dd(w, "TP", TP_VALUES, tp, "110px"),
           "sp": _dd(w, "SP", ("off", "on"), sp, "110px"),
           "seq": _dd(w, "seq", RECOMPUTE_SEQ_VALUES, seq, "140px"),
           "mbs": _int(w, "b", mbs, MBS_RANGE, "200px")}
    return build_canvas(render_recompute, ctl, [w.HBox(list(ctl.values()))], {})


def layout_canvas(preset="llama3-70b", gpus=64, tp=8, pp=4, dp=2, zero=1,
                  recompute="selective", schedule="1f1b", M=32, seq=None):
    """The 3D configurator: pick TP, PP, DP for a GPU count; see memory, traffic, step time
    (``seq`` fixed for the canvas, as the lesson's own calculation uses it)."""
    import ipywidgets as w

    ctl = {"preset": _dd(w, "model", PRESET_NAMES, preset, "220px"),
           "gpus": _dd(w, "GPUs", GPU_VALUES, gpus, "130px"),
           "tp": _dd(w, "TP", TP_VALUES, tp, "110px"),
           "pp": _dd(w, "PP", PP_VALUES, pp, "110px"),
           "dp": _dd(w, "DP", DP_VALUES, dp, "110px"),
           "zero": _dd(w, "ZeRO", (0, 1, 2, 3), zero, "120px"),
           "recompute": _dd(w, "recompute", RECOMPUTE, recompute, "200px"),
           "schedule": _dd(w, "schedule", MEM_SCHEDULES, schedule, "200px"),
           "M": _int(w, "M", M, M_RANGE)}
    names = list(ctl)
    rows = [w.HBox([ctl[k] for k in names[:5]]), w.HBox([ctl[k] for k in names[5:]])]
    return build_canvas(render_layout, ctl, rows, {"seq": seq})


def plan_canvas(preset="llama3-70b", gpus=64, gpu_memory=80, seq=4096):
    """The planner for a GPU budget: ranked feasible layouts, and why the others fail."""
    import ipywidgets as w

    ctl = {"preset": _dd(w, "model", ("llama3-8b", "llama3-70b", "gpt3-175b"), preset, "220px"),
           "gpus": _dd(w, "GPUs", (32, 64), gpus, "130px"),
           "gpu_memory": _dd(w, "GB/GPU", (80, 141), gpu_memory, "150px")}
    return build_canvas(render_plan, ctl, [w.HBox(list(ctl.values()))],
                        {"seq": seq})


__all__ = ["render_memory", "render_fsdp", "render_recompute", "render_layout", "render_plan",
           "memory_canvas", "fsdp_canvas", "recompute_canvas", "layout_canvas", "plan_canvas",
           "plan_table", "recompute_rows", "memory_config", "PRESET_NAMES", "TP_VALUES",
           "PP_VALUES", "DP_VALUES", "GPU_VALUES", "SEQ_VALUES", "RECOMPUTE_SEQ_VALUES",
           "MEM_SCHEDULES", "RECOMPUTE"]
