"""Lesson 11: stage balancing. Per-layer costs (the embedding's added to the first layer, the
final norm and LM head's to the last), cut into P stages evenly or balanced, and the 1F1B
timeline those stage costs give."""
from __future__ import annotations

from ..registry import make_schedule
from ..sim import Costs, simulate
from .base import build_canvas

BALANCE_METHODS = ("even", "balanced")


def layer_costs(layers: int, embed: float, head: float) -> list[float]:
    """Forward cost of each transformer layer (1 each) with the embedding's cost added to the
    first and the final norm + LM head's cost added to the last, in units of one layer."""
    costs = [1.0] * int(layers)
    costs[0] += float(embed)
    costs[-1] += float(head)
    return costs


def partition_costs(costs, P: int, method: str = "balanced"):
    """``(parts, stage_costs)`` for an even or a balanced (DP) split; ValueError if P > layers."""
    from ..partition import balanced_split, even_split
    parts = even_split(len(costs), P)            # also: the message when P > layers
    if method != "even":
        parts = balanced_split(costs, P)
    return parts, [sum(costs[r.start:r.stop]) for r in parts]


def balance_timeline(stage_costs, M: int, schedule: str = "1f1b"):
    """Simulate ``schedule`` with each stage's durations scaled by its cost relative to the
    mean stage (tf = 1 and tb = 2 for a stage of average cost)."""
    P = len(stage_costs)
    mean = sum(stage_costs) / P
    sched = make_schedule(schedule, P, int(M))
    return simulate(sched, Costs(stage_scale=[c / mean for c in stage_costs]))


def _balance_scene(costs, parts, stage, method, layers, P, tl, tl_even) -> dict:
    """Per-layer costs coloured by stage, over the simulated 1F1B timeline."""
    from ..scene import bars_panel, scene, timeline_panel
    series = [(f"stage {i}: {stage[i]:.2f}", "#56B4E9" if i % 2 == 0 else "#0072B2",
               [costs[j] if j in r else 0.0 for j in range(len(costs))])
              for i, r in enumerate(parts)]
    top = bars_panel(range(len(costs)), series, f"{method} split of {layers} layers into {P} "
                     "stages", "cost", "layer (embedding on the first, norm + head on the last)",
                     totals=False)
    return scene(top, timeline_panel(tl, xmax=max(tl.makespan, tl_even.makespan)))


def render_balance(layers: int = 16, embed: float = 0.5, head: float = 2.0, P: int = 4,
                   M: int = 8, method: str = "even"):
    """Layer costs → a partition → per-stage costs → the simulated 1F1B timeline.
    Returns ``(scene or None, message)``."""
    costs = layer_costs(layers, embed, head)
    try:
        parts, stage = partition_costs(costs, int(P), method)
    except ValueError as e:
        return None, f"{method} split of {layers} layers into P={P} stages: {e}"
    tl = balance_timeline(stage, M)
    _, even_stage = partition_costs(costs, int(P), "even")
    tl_even = balance_timeline(even_stage, M) if method != "even" else tl
    mean = sum(stage) / len(stage)
    ideal = (int(M) + int(P) - 1) * 3.0            # perfectly balanced 1F1B, tf=1, tb=2
    msg = (f"{method} split: layers per stage {[len(r) for r in parts]}; stage cost "
           f"{[round(c, 2) for c in stage]} (max/mean {max(stage) / mean:.2f})\n"
           f"1F1B makespan {tl.makespan:.4g} (perfect balance: {ideal:.4g}; even split: "
           f"{tl_even.makespan:.4g}); bubble {tl.bubble_fraction:.1%} of total")
    return _balance_scene(costs, parts, stage, method, layers, P, tl, tl_even), msg


def balance_canvas(layers: int = 16, embed: float = 0.5, head: float = 2.0, P: int = 4,
                   M: int = 8, method: str = "even"):
    """Layers, embedding and head cost, P, M and the split method; the per-layer costs coloured
    by stage and the simulated 1F1B timeline with those stage costs."""
    import ipywidgets as w

    islider = lambda d, v, lo, hi: w.IntSlider(value=v, min=lo, max=hi, description=d,
                                                continuous_update=False,
                                                layout=w.Layout(width="240px"))
    fslider = lambda d, v, hi: w.FloatSlider(value=v, min=0.0, max=hi, step=0.5, description=d,
                                             continuous_update=False,
                                             layout=w.Layout(width="240px"))
    controls = {"method": w.ToggleButtons(options=list(BALANCE_METHODS), value=method,
                                          description="split"),
                "layers": islider("layers", layers, 4, 32), "P": islider("P", P, 1, 8),
                "M": islider("M", M, 1, 16), "embed": fslider("embedding", embed, 2.0),
                "head": fslider("head", head, 4.0)}
    rows = [w.HBox([controls["method"], controls["layers"]]),
            w.HBox([controls["P"], controls["M"], controls["embed"], controls["head"]])]
    return build_canvas(render_balance, controls, rows, {})


__all__ = ["layer_costs", "partition_costs", "balance_timeline", "render_balance",
           "balance_canvas", "BALANCE_METHODS"]
