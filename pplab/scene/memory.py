"""Memory and communication pictures as scenes: FSDP's gather → compute → free walk, the
recomputation trade, bytes per parallel axis and the planner's layouts.

The canvases (lessons 08, 09) and the exported figures (``pplab.draw.memory``) both build
these, so the two show the same bars and points. Sizes in GB = 10⁹ bytes.
"""
from __future__ import annotations

from .panels import (AXIS_COLORS, GB, PART_COLORS, RECOMPUTE_COLORS, bars_panel, line,
                     lines_panel, scene)


def fsdp_scene(frames, step: int, layer_bytes: float, dp: int, title: str = "") -> dict:
    """Which layers are gathered at ``step`` (``memory.fsdp.fsdp_frames``), and parameter
    bytes resident on one GPU over the whole forward and backward, ``step`` marked."""
    if not 0 <= step < len(frames):
        raise ValueError(f"step must be in 0..{len(frames) - 1}, got {step}")
    fr, L = frames[step], len(frames) // 2
    gathered = layer_bytes * (1 - 1 / dp) / GB
    other = [gathered if i in fr["full"] and i != fr["layer"] else 0.0 for i in range(L)]
    now = [gathered if i == fr["layer"] else 0.0 for i in range(L)]
    shard = [layer_bytes / dp / GB] * L
    top = bars_panel(range(L), [("own shard (1/N_d)", PART_COLORS["params"], shard),
                                ("gathered, then freed", "#56B4E9", other),
                                (f"gathered, computing ({fr['phase']})", "#000000", now)],
                     title or f"step {step}: {fr['phase']} of layer {fr['layer']}, resident "
                     f"parameters {fr['resident'] / GB:.2f} GB", "GB / layer", "layer",
                     totals=False)
    res = [(k, f["resident"] / GB) for k, f in enumerate(frames)]
    bottom = lines_panel([line("resident parameters (GB)", PART_COLORS["params"], res,
                               step=True)],
                         "forward (left of the grey line), then backward",
                         "step (one layer each)", "GB resident",
                         marks=[[step, "#000000", False], [L - 0.5, "#999999", True]])
    return scene(top, bottom)


def recompute_scene(modes, act_bytes, flops_overhead, title: str = "") -> dict:
    """Activation bytes per layer and extra training FLOPs, one bar per recompute mode."""
    modes = list(modes)
    return scene(bars_panel(modes, [("activations", PART_COLORS["activations"],
                                     [b / GB for b in act_bytes])],
                            title, "GB per layer per microbatch", "recomputation",
                            fmt="{:.3f}"),
                 bars_panel(modes, [("extra FLOPs", "#999999",
                                     [f * 100 for f in flops_overhead])],
                            "extra training FLOPs (%)", "%", "recomputation"))


def comm_volumes_panel(volumes: dict, title: str = "bytes sent per GPU per step") -> dict:
    """GB sent per GPU per step on each parallel axis present (TP, PP, DP)."""
    axes = [k for k in ("tp", "pp", "dp") if k in volumes]
    return bars_panel([k.upper() for k in axes],
                      [(k.upper(), AXIS_COLORS[k], [volumes[k] / GB if j == k else 0.0
                                                    for j in axes]) for k in axes],
                      title, "GB", "parallel axis", fmt="{:.2f}")


def plan_panel(cands, gpu_memory: float, title: str) -> dict:
    """The planner's layouts that fit: step time vs peak memory, by recomputation; those
    that do not fit as a rug at their peak; the GPU's memory as a dashed line."""
    ok = [c for c in cands if c.feasible]
    series = [line(f"fits, recompute={rc}", col,
                   [(c.peak_bytes / GB, c.step_time) for c in ok if c.config.recompute == rc],
                   line=False, marker="o")
              for rc, col in RECOMPUTE_COLORS.items()]
    bad = [c for c in cands if not c.feasible and c.peak_bytes > 0]
    y = min((c.step_time for c in ok), default=0.0)
    series.append(line("does not fit (its peak)", "#b71c1c",
                       [(c.peak_bytes / GB, y) for c in bad], line=False, marker="|"))
    return lines_panel([s for s in series if s["points"]], title,
                       "peak GB on the fullest rank (log scale)", "estimated step time (s)",
                       xlog=True, marks=[[gpu_memory / GB, "#000000", True]])


__all__ = ["fsdp_scene", "recompute_scene", "comm_volumes_panel", "plan_panel"]
