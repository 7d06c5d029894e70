"""Pictures of memory and communication: per-rank stacked bars, ZeRO stages, FSDP's
gather → compute → free walk, activation memory vs recomputation, bytes per parallel axis.

Each draws the scene the matching canvas shows (:mod:`pplab.scene`, :mod:`pplab.scene.memory`)
with the panel drawers of :mod:`pplab.draw.scene_figure`: a
:class:`matplotlib.figure.Figure` built without pyplot state; the one-panel ones accept an
``ax`` to draw into. Sizes are shown in GB = 10⁹ bytes.
Colours: Okabe–Ito (parameters blue, gradients orange, optimizer states green, activations
vermillion), the GPU's memory as a dashed black line.
"""
from __future__ import annotations

from typing import Sequence

from matplotlib.figure import Figure

from ..memory.fsdp import fsdp_frames  # noqa: F401  (re-exported: pure, used by canvases)
from .figure import DisplayFigure
from .scene_figure import draw_bars_panel, draw_lines_panel, scene_figure
from ..scene import AXIS_COLORS, GB, PART_COLORS, PART_LABELS, bars_panel, memory_panel
from ..scene.memory import comm_volumes_panel, fsdp_scene, plan_panel, recompute_scene


def _fig_ax(ax, size):
    if ax is not None:
        return ax.figure, ax
    fig = DisplayFigure(figsize=size)
    return fig, fig.add_subplot(1, 1, 1)


def draw_stacked(labels: Sequence[str], rows: Sequence[dict], gpu_memory: float | None = None,
                 ax=None, title: str = "", xlabel: str = "") -> Figure:
    """Stacked bars, one per label; each row is {part: bytes} with parts from PART_COLORS."""
    series = [(PART_LABELS[p], PART_COLORS[p], [r.get(p, 0.0) / GB for r in rows])
              for p in PART_COLORS if any(r.get(p, 0) for r in rows)]
    panel = bars_panel(labels, series, title, "GB per GPU", xlabel,
                       limit=gpu_memory / GB if gpu_memory else None,
                       limit_label=f"GPU {gpu_memory / GB:g} GB" if gpu_memory else "")
    fig, ax = _fig_ax(ax, (min(10, 2.2 + 0.7 * len(labels)), 3.6))
    draw_bars_panel(ax, panel)
    if ax.figure.axes == [ax]:
        fig.subplots_adjust(right=0.78, bottom=0.18)
    return fig


def draw_memory_bars(report, gpu_memory: float | None = 80e9, ax=None,
                     title: str | None = None) -> Figure:
    """One stacked bar per pipeline rank of a :class:`~pplab.memory.MemoryReport`: the
    scene panel the browser canvas draws (:func:`pplab.scene.memory_panel`)."""
    panel = memory_panel(report, gpu_memory, title)
    fig, ax = _fig_ax(ax, (min(10, 2.2 + 0.7 * len(panel["labels"])), 3.6))
    draw_bars_panel(ax, panel)
    if ax.figure.axes == [ax]:
        fig.subplots_adjust(right=0.78, bottom=0.18)
    return fig


def draw_zero_stages(psi: float, dp: int, gpu_memory: float | None = 80e9, ax=None,
                     activations: float = 0.0) -> Figure:
    """Model states per GPU for ZeRO stages 0–3 (ZeRO paper §5) for Ψ parameters."""
    from ..memory.accounting import model_states_bytes
    rows = []
    for z in range(4):
        p, g, o = model_states_bytes(psi, dp, z)
        rows.append({"params": p, "grads": g, "optimizer": o, "activations": activations})
    labels = ["DP (ZeRO-0)", "ZeRO-1", "ZeRO-2", "ZeRO-3/FSDP"]
    return draw_stacked(labels, rows, gpu_memory, ax,
                        f"Ψ = {psi / 1e9:.2f}B parameters, N_d = {dp}: bytes per GPU")


def draw_fsdp_step(frames: list[dict], step: int, layer_bytes: float, dp: int,
                   ax=None, title: str = "") -> Figure:
    """Top: which layers are gathered at ``step`` (full bar) vs sharded (1/N_d). Bottom:
    parameter bytes resident on one GPU over the whole forward + backward, step marked
    (the FSDP canvas's scene, :func:`pplab.scene.memory.fsdp_scene`)."""
    return scene_figure(fsdp_scene(frames, step, layer_bytes, dp, title))


def draw_recompute(modes: Sequence[str], act_bytes: Sequence[float],
                   flops_overhead: Sequence[float], ax=None, title: str = "") -> Figure:
    """Two panels: activation bytes per layer and extra training FLOPs, per recompute mode
    (the recompute canvas's scene)."""
    return scene_figure(recompute_scene(modes, act_bytes, flops_overhead, title))


def draw_comm_volumes(volumes: dict, times: dict | None = None, ax=None,
                      title: str = "") -> Figure:
    """Bytes sent per GPU per step on each axis (and, if given, seconds at its bandwidth)."""
    panels = [comm_volumes_panel(volumes, title or "bytes sent per GPU per step")]
    if times is not None:
        axes = [k for k in ("tp", "pp", "dp") if k in times]
        panels.append(bars_panel([k.upper() for k in axes],
                                 [(k.upper(), AXIS_COLORS[k],
                                   [times[k] if j == k else 0.0 for j in axes]) for k in axes],
                                 "seconds if not overlapped", "s", "parallel axis",
                                 fmt="{:.3g}"))
    if ax is not None and len(panels) == 1:
        draw_bars_panel(ax, panels[0])
        return ax.figure
    return scene_figure({"panels": panels})


def draw_plan(cands, gpu_memory: float = 80e9, ax=None, title: str = "", top: int = 3) -> Figure:
    """Feasible layouts: estimated step time vs peak memory, coloured by recomputation; the
    fastest ``top`` numbered; layouts that do not fit as a rug at their peak (the plan
    canvas's panel, :func:`pplab.scene.memory.plan_panel`)."""
    panel = plan_panel(cands, gpu_memory, title)
    fig, ax = _fig_ax(ax, (8.5, 3.8))
    draw_lines_panel(ax, panel)
    for i, c in enumerate([c for c in cands if c.feasible][:top]):
        ax.annotate(f"#{i + 1}", (c.peak_bytes / GB, c.step_time), fontsize=7,
                    xytext=(-14, 6 + 8 * i), textcoords="offset points",
                    arrowprops={"arrowstyle": "-", "lw": 0.5})
    if fig.axes == [ax]:
        fig.subplots_adjust(bottom=0.15, right=0.72)
    return fig


__all__ = ["draw_stacked", "draw_memory_bars", "draw_zero_stages", "fsdp_frames",
           "draw_fsdp_step", "draw_recompute", "draw_comm_volumes", "draw_plan", "PART_COLORS",
           "GB"]
