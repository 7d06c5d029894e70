"""The browser-drawn picture of a canvas: an anywidget whose only state is a scene.

The kernel computes the scene (:mod:`pplab.scene`, pure Python) and sends it as JSON; the
front end draws it on a ``<canvas>`` (``scene.js``). Slider → new picture costs a simulation
and a few kilobytes of JSON instead of a matplotlib PNG, and it works in JupyterLite, where
matplotlib is not available.
"""
from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

ESM = Path(__file__).with_name("scene.js")


class SceneView(anywidget.AnyWidget):
    """``SceneView(scene)``; assign ``.scene`` to redraw."""
    _esm = ESM
    scene = traitlets.Dict().tag(sync=True)

    def __init__(self, scene: dict | None = None, **kw):
        super().__init__(scene=scene or {"panels": []}, **kw)


def show_scene(scene: dict) -> SceneView:
    """Display a scene once (a static picture drawn in the browser, no matplotlib needed)."""
    from IPython.display import display
    view = SceneView(scene)
    display(view)
    return view


__all__ = ["SceneView", "show_scene", "ESM"]
