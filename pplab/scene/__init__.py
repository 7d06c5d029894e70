"""The scene layer, below both ``pplab.draw`` (matplotlib) and ``pplab.canvases`` (widgets).

``panels``, ``bubble`` and ``memory`` compute pictures as plain data (pure Python); ``view`` is the
browser widget that draws them (``scene.js``; it imports anywidget, so it is not imported
here). Drawing and canvases both start from these panels, so the exported figure and the
live picture show the same thing.
"""
from .bubble import BUBBLE_MS, bubble_curve_panel, simulated_bubbles
from .panels import *  # noqa: F403
from .panels import __all__ as _panels

__all__ = [*_panels, "BUBBLE_MS", "bubble_curve_panel", "simulated_bubbles"]
