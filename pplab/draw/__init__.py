"""Matplotlib drawings of timelines and memory: static figures and exports.

``scene_figure(scene)`` draws any canvas's picture (what its ``render_*`` returns); the
named drawings (``draw_timeline`` …) build their scene panel and draw it the same way.

Only this package (and the canvases that call it) imports matplotlib; the pure core never
does, so it also runs where matplotlib is absent (JupyterLite)."""
from ..probe.env import in_browser

if in_browser():                 # no matplotlib in a browser tab: the page draws the scenes
    from .browser import (KIND_COLORS, draw_bubble_curve, draw_comm_volumes, draw_fsdp_step,
                          draw_inflight, draw_memory_bars, draw_peak_bars, draw_plan,
                          draw_recompute, draw_stacked, draw_timeline, draw_zero_stages,
                          figure_png, fsdp_frames, scene_figure)
    import sys as _sys
    from . import browser as _browser
    # lessons import pplab.draw.memory / .timeline too: both name the browser module there
    _sys.modules[__name__ + ".memory"] = _sys.modules[__name__ + ".timeline"] = _browser
else:
    from .memory import (draw_comm_volumes, draw_fsdp_step, draw_memory_bars, draw_plan,
                         draw_recompute, draw_stacked, draw_zero_stages, fsdp_frames)
    from .scene_figure import scene_figure
    from .timeline import (KIND_COLORS, draw_bubble_curve, draw_inflight, draw_peak_bars,
                           draw_timeline, figure_png)

__all__ = ["scene_figure", "KIND_COLORS", "draw_timeline", "draw_inflight", "draw_peak_bars",
           "draw_bubble_curve", "figure_png", "draw_stacked", "draw_memory_bars",
           "draw_zero_stages", "fsdp_frames", "draw_fsdp_step", "draw_recompute",
           "draw_comm_volumes", "draw_plan"]
