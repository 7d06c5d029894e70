"""Pictures of memory and communication: per-rank stacked bars, ZeRO stages, FSDP's
gather → compute → free walk, activation memory vs recomputation, bytes per parallel axis.

Like :mod:`pplab.draw`, every function builds a :class:`matplotlib.figure.Figure` directly (no
pyplot state) and accepts an ``ax`` to draw into. Sizes are shown in GB = 10⁹ bytes.
Colours: Okabe–Ito (parameters blue, gradients orange, optimizer states green, activations
vermillion), the GPU's memory as a dashed black line.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from ..memory.fsdp import fsdp_frames  # noqa: F401  (re-exported: pure, used by canvases)
from .figure import DisplayFigure
from .scene_figure import draw_bars_panel
from ..scene import (AXIS_COLORS, GB, PART_COLORS, PART_LABELS, RECOMPUTE_COLORS, bars_panel,
                     memory_panel)


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
    parameter bytes resident on one GPU over the whole forward + backward, step marked."""
    if not 0 <= step < len(frames):
        raise ValueError(f"step must be in 0..{len(frames) - 1}, got {step}")
    fr = frames[step]
    L = len(frames) // 2
    fig = DisplayFigure(figsize=(9.5, 4.6))
    top, bot = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1.2, 1]})
    x = np.arange(L)
    shard = np.full(L, layer_bytes / dp / GB)
    full = np.zeros(L)
    for i in fr["full"]:
        full[i] = layer_bytes * (1 - 1 / dp) / GB
    top.bar(x, shard, color=PART_COLORS["params"], width=0.8, label="own shard (1/N_d)")
    top.bar(x, full, bottom=shard, color="#56B4E9", width=0.8, label="gathered, then freed")
    top.bar([fr["layer"]], [layer_bytes / GB], fill=False, edgecolor="black", linewidth=1.5,
            width=0.8, label=f"computing ({fr['phase']})")
    top.set_ylim(0, layer_bytes / GB * 1.25)
    top.set_ylabel("GB / layer", fontsize=8)
    top.set_xlabel("layer", fontsize=8)
    top.set_title(title or f"step {step}: {fr['phase']} of layer {fr['layer']}, "
                  f"resident parameters {fr['resident'] / GB:.2f} GB", fontsize=9)
    top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    if L > 40:
        top.set_xticks(x[::max(1, L // 16)])
    res = [f["resident"] / GB for f in frames]
    bot.step(range(len(res)), res, where="mid", color=PART_COLORS["params"])
    bot.axvline(step, color="black", linewidth=1)
    bot.axvline(L - 0.5, color="#999999", linestyle=":", linewidth=1)
    bot.text(L / 2, max(res) * 1.02, "forward", ha="center", fontsize=7)
    bot.text(1.5 * L, max(res) * 1.02, "backward", ha="center", fontsize=7)
    bot.set_ylim(0, max(res) * 1.15)
    bot.set_xlim(-0.5, len(res) - 0.5)
    bot.set_ylabel("GB resident", fontsize=8)
    bot.set_xlabel("step (one layer each)", fontsize=8)
    fig.subplots_adjust(right=0.76, hspace=0.55, top=0.92, bottom=0.11)
    return fig


def draw_recompute(modes: Sequence[str], act_bytes: Sequence[float],
                   flops_overhead: Sequence[float], ax=None, title: str = "") -> Figure:
    """Two panels: activation bytes per layer and extra training FLOPs, per recompute mode."""
    fig = DisplayFigure(figsize=(9, 3.2))
    a1, a2 = fig.subplots(1, 2)
    x = np.arange(len(modes))
    vals = np.array(act_bytes) / GB
    a1.bar(x, vals, color=PART_COLORS["activations"], width=0.6)
    for xi, v in zip(x, vals):
        a1.text(xi, v, f"{v:.3g}", ha="center", va="bottom", fontsize=7)
    a1.set_xticks(x)
    a1.set_xticklabels(modes, fontsize=8)
    a1.set_ylabel("GB per layer per microbatch", fontsize=8)
    a1.set_ylim(0, vals.max() * 1.2 if vals.max() > 0 else 1)
    ov = np.array(flops_overhead) * 100
    a2.bar(x, ov, color="#999999", width=0.6)
    for xi, v in zip(x, ov):
        a2.text(xi, v, f"+{v:.1f}%", ha="center", va="bottom", fontsize=7)
    a2.set_xticks(x)
    a2.set_xticklabels(modes, fontsize=8)
    a2.set_ylabel("extra training FLOPs (%)", fontsize=8)
    a2.set_ylim(0, max(ov.max() * 1.25, 1))
    if title:
        fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(wspace=0.35, top=0.85, bottom=0.12)
    return fig


def draw_comm_volumes(volumes: dict, times: dict | None = None, ax=None,
                      title: str = "") -> Figure:
    """Bytes sent per GPU per step on each axis (and, if given, seconds at its bandwidth)."""
    axes = [k for k in ("tp", "pp", "dp") if k in volumes]
    if times is None:
        fig, a1 = _fig_ax(ax, (4.5, 3))
        panels = [(a1, volumes, "GB sent per GPU per step", GB)]
    else:
        fig = DisplayFigure(figsize=(8, 3))
        a1, a2 = fig.subplots(1, 2)
        panels = [(a1, volumes, "GB sent per GPU per step", GB),
                  (a2, times, "seconds if not overlapped", 1.0)]
    for a, d, lab, unit in panels:
        vals = [d[k] / unit for k in axes]
        a.bar(range(len(axes)), vals, color=[AXIS_COLORS[k] for k in axes], edgecolor="black",
              linewidth=0.5)
        for i, v in enumerate(vals):
            a.text(i, v, f"{v:.3g}", ha="center", va="bottom", fontsize=7)
        a.set_xticks(range(len(axes)))
        a.set_xticklabels([k.upper() for k in axes])
        a.set_ylabel(lab, fontsize=8)
        a.set_ylim(0, max(vals + [1e-9]) * 1.25)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(wspace=0.4, top=0.84, bottom=0.12)
    return fig


def draw_plan(cands, gpu_memory: float = 80e9, ax=None, title: str = "", top: int = 3) -> Figure:
    """Feasible layouts: estimated step time vs peak memory, coloured by recomputation; the
    fastest ``top`` numbered; layouts that do not fit as a rug at the bottom (their peak)."""
    fig, ax = _fig_ax(ax, (8.5, 3.8))
    ok = [c for c in cands if c.feasible]
    bad = [c for c in cands if not c.feasible and c.peak_bytes > 0]
    times = [c.step_time for c in ok]
    lo = min(times) * 0.9 if times else 0.0
    hi = max(times) * 1.05 if times else 1.0
    for rc, col in RECOMPUTE_COLORS.items():
        sel = [c for c in ok if c.config.recompute == rc]
        if sel:
            ax.scatter([c.peak_bytes / GB for c in sel], [c.step_time for c in sel], s=10,
                       color=col, label=f"fits, recompute={rc}")
    if bad:
        y = lo + 0.02 * (hi - lo)
        ax.scatter([c.peak_bytes / GB for c in bad], [y] * len(bad), marker="|", s=60,
                   color="#b71c1c", label="does not fit (its peak)")
    for i, c in enumerate(ok[:top]):
        ax.annotate(f"#{i + 1}", (c.peak_bytes / GB, c.step_time), fontsize=7,
                    xytext=(-14, 6 + 8 * i), textcoords="offset points",
                    arrowprops={"arrowstyle": "-", "lw": 0.5})
    ax.axvline(gpu_memory / GB, color="black", linestyle="--", linewidth=1)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("peak GB on the fullest rank (log scale)")
    ax.set_ylabel("estimated step time (s)")
    ax.set_xscale("log")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.subplots_adjust(bottom=0.15, right=0.72)
    return fig


__all__ = ["draw_stacked", "draw_memory_bars", "draw_zero_stages", "fsdp_frames",
           "draw_fsdp_step", "draw_recompute", "draw_comm_volumes", "draw_plan", "PART_COLORS",
           "GB"]
