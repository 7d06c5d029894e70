"""``pplab.draw`` in a browser tab (JupyterLite has no matplotlib): the same function names
return a picture drawn by the page from the same scene data (:mod:`pplab.scene`), so a
lesson's ``draw_timeline(tl)`` works in both places. ``figure_png`` (no PNG without
matplotlib) prints one line saying where to get one."""
from __future__ import annotations

from ..probe.env import browser_note
from ..memory.fsdp import fsdp_frames  # noqa: F401
from ..scene import (GB, KIND_COLORS, PART_COLORS, PART_LABELS, bars_panel, bubble_curve_panel,
                     inflight_panel, inflight_steps_panel, memory_panel, peak_bars_panel, scene,
                     timeline_panel)
from ..scene.memory import comm_volumes_panel, fsdp_scene, plan_panel, recompute_scene


def _view(*panels):
    return scene_figure(scene(*panels))


def scene_figure(picture: dict):
    """The scene drawn by the page (a canvas's ``render_*`` picture, shown once)."""
    from ..scene.view import SceneView
    return SceneView(picture)


def draw_timeline(timeline, overlay=None, title=None, metrics=True, **_):
    xmax = max(timeline.makespan, overlay.makespan if overlay is not None else 0)
    return _view(timeline_panel(timeline, title, xmax, subtitle=None if metrics else "",
                                overlay=overlay))


def draw_inflight(timeline_or_schedule, ax=None, title=None):
    obj = timeline_or_schedule
    panel = inflight_panel(obj) if hasattr(obj, "events") else inflight_steps_panel(obj)
    return _view(dict(panel, title=title) if title else panel)


def draw_peak_bars(timelines, ax=None, title=None):
    return _view(peak_bars_panel(list(timelines)))


def draw_bubble_curve(P, Ms, schedule="1f1b", V=1, costs=None, ax=None, title=None):
    return _view(bubble_curve_panel(P, Ms, schedule, V, costs, title))


def draw_stacked(labels, rows, gpu_memory=None, ax=None, title="", xlabel=""):
    series = [(PART_LABELS[p], PART_COLORS[p], [r.get(p, 0.0) / GB for r in rows])
              for p in PART_COLORS if any(r.get(p, 0) for r in rows)]
    limit = gpu_memory / GB if gpu_memory else None
    return _view(bars_panel(labels, series, title, "GB per GPU", xlabel, limit=limit,
                            limit_label=f"GPU {gpu_memory / GB:g} GB" if gpu_memory else ""))


def draw_memory_bars(report, gpu_memory=80e9, ax=None, title=None):
    return _view(memory_panel(report, gpu_memory, title))


def draw_zero_stages(psi, dp, gpu_memory=80e9, ax=None, activations=0.0):
    from ..memory.accounting import model_states_bytes
    rows = [dict(zip(("params", "grads", "optimizer"), model_states_bytes(psi, dp, z)),
                 activations=activations) for z in range(4)]
    return draw_stacked(["DP (ZeRO-0)", "ZeRO-1", "ZeRO-2", "ZeRO-3/FSDP"], rows, gpu_memory,
                        title=f"Ψ = {psi / 1e9:.2f}B parameters, N_d = {dp}: bytes per GPU")


def _absent(name):
    def draw(*_, **__):
        print(browser_note(f"make lab, then pplab.draw.{name}(...)"))
    draw.__name__ = name
    return draw


def draw_fsdp_step(frames, step, layer_bytes, dp, ax=None, title=""):
    return scene_figure(fsdp_scene(frames, step, layer_bytes, dp, title))


def draw_recompute(modes, act_bytes, flops_overhead, ax=None, title=""):
    return scene_figure(recompute_scene(modes, act_bytes, flops_overhead, title))


def draw_comm_volumes(volumes, times=None, ax=None, title=""):
    return _view(comm_volumes_panel(volumes, title or "bytes sent per GPU per step"))


def draw_plan(cands, gpu_memory=80e9, ax=None, title="", top=3):
    return _view(plan_panel(cands, gpu_memory, title))


figure_png = _absent("figure_png")
