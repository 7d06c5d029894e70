"""The Figure every pplab picture is drawn on: it shows itself as a PNG in a notebook.

pplab builds figures without pyplot (safe in widget callbacks and threads, no figures left
open). Without pyplot, no backend registers a display hook for them, so a cell ending in
``draw_timeline(tl)`` would print ``<Figure size 1000x740 with 1 Axes>``. A ``DisplayFigure``
renders itself through IPython's ``_repr_png_`` whatever backend is active (inline, Agg,
widget); where an inline backend has registered its own PNG printer, IPython uses that one.
Its plain-text form names what it shows (title, axis labels, legend), for screen readers
and text-only front ends.
"""
from __future__ import annotations

import io

from matplotlib.figure import Figure
from matplotlib.text import Text

#: resolution of the PNG a notebook shows (matplotlib's own default)
DISPLAY_DPI = 100


class DisplayFigure(Figure):
    """A matplotlib Figure that a notebook displays as a picture."""

    def _repr_png_(self) -> bytes:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        FigureCanvasAgg(self)
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=DISPLAY_DPI)
        return buf.getvalue()

    def __repr__(self) -> str:
        words = " | ".join(t.replace("\n", " — ") for t in figure_texts(self))
        return f"<Figure: {words or 'no title'}>"


def figure_texts(fig: Figure) -> list[str]:
    """The words a reader sees on ``fig``: titles, axis labels, legend entries and text
    annotations, in drawing order, each once (not tick labels, nor the bare numbers that
    label a timeline's boxes)."""
    texts = []
    for ax in fig.axes:
        texts += [ax.get_title(loc) for loc in ("left", "center", "right")]
        texts += [ax.get_xlabel(), ax.get_ylabel()]
        legend = ax.get_legend()
        if legend is not None:
            texts += [t.get_text() for t in legend.get_texts()]
        texts += [t.get_text() for t in ax.texts]
    texts += [t.get_text() for t in fig.texts if isinstance(t, Text)]
    texts.append(fig.get_suptitle())
    return list(dict.fromkeys(t.strip() for t in texts if t and t.strip() and not t.isdigit()))
