"""The browser-drawn picture of a canvas: an anywidget whose only state is a scene.

The kernel computes the scene (:mod:`pplab.scene.panels`, pure Python) and sends it as JSON; the
front end draws it on a ``<canvas>`` (``scene.js``). Slider → new picture costs a simulation
and a few kilobytes of JSON instead of a matplotlib PNG, and it works in JupyterLite, where
matplotlib is not available.
"""
from __future__ import annotations

import json
from pathlib import Path

import anywidget
import traitlets

ESM = Path(__file__).with_name("scene.js")


def _to_json(value, _widget) -> str:
    """One JSON string on the wire: ipywidgets then skips walking a thousand box lists in
    search of binary buffers (a sixth of the redraw time at P=8, M=32, V=2)."""
    return json.dumps(value, separators=(",", ":"))


def _from_json(value, _widget):
    return json.loads(value) if isinstance(value, str) else value


class SceneView(anywidget.AnyWidget):
    """``SceneView(scene)``; assign ``.scene`` to redraw."""
    _esm = ESM
    scene = traitlets.Dict().tag(sync=True, to_json=_to_json, from_json=_from_json)
    #: bumped on every update, so the page redraws (and tests see it) even when the scene
    #: is unchanged, e.g. V moved on a schedule that ignores V
    frame = traitlets.Int(0).tag(sync=True)

    def show(self, scene: dict | None) -> None:
        """Draw ``scene`` (one message to the page); ``None`` hides the picture."""
        with self.hold_sync():
            if scene is not None:
                self.scene = scene
            self.frame += 1
            self.layout.display = None if scene is not None else "none"

    def __init__(self, scene: dict | None = None, **kw):
        super().__init__(scene=scene or {"panels": []}, **kw)


def show_scene(scene: dict) -> SceneView:
    """Display a scene once (a static picture drawn in the browser, no matplotlib needed)."""
    from IPython.display import display
    view = SceneView(scene)
    display(view)
    return view


__all__ = ["SceneView", "show_scene", "ESM"]
