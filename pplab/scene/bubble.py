"""The bubble-vs-M panel: closed-form lines with simulated points on top.

One function computes it for both the canvas (lesson 03) and the exported figure
(``pplab.draw.draw_bubble_curve``), so the two show the same curve by construction.
"""
from __future__ import annotations

from ..closed_forms import bubble_both
from ..registry import make_schedule
from ..sim import simulate
from .panels import line, lines_panel

BUBBLE_MS = (1, 2, 4, 8, 16, 32, 64)
CURVE_POINTS = 100                 # points on each closed-form line (log-spaced in M)


def simulated_bubbles(schedule: str, P: int, Ms, V: int = 1, costs=None) -> list[tuple]:
    """(M, bubble ÷ total, bubble ÷ ideal) per M the generator accepts; others skipped."""
    out = []
    for m in Ms:
        try:
            tl = simulate(make_schedule(schedule, P, m, V), costs)
        except ValueError:             # e.g. interleaved with M not a multiple of P
            continue
        t = tl.totals()
        out.append((m, t.bubble_fraction, t.bubble_ratio))
    return out


def bubble_curve_panel(P: int, Ms=BUBBLE_MS, schedule: str = "1f1b", V: int = 1,
                       costs=None, title: str | None = None) -> dict:
    """Closed-form bubble vs M (both denominators) with simulated points on top."""
    P, V = int(P), int(V)
    Ms = sorted(set(int(m) for m in Ms))
    n = CURVE_POINTS - 1
    grid = [Ms[0] * (Ms[-1] / Ms[0]) ** (i / n) for i in range(n + 1)] if len(Ms) > 1 else Ms
    both = [bubble_both(P, m, V) for m in grid]
    sim = simulated_bubbles(schedule, P, Ms, V, costs)
    v = "" if V == 1 else "V·"
    series = [line("÷ ideal: (P−1)/" + ("M" if V == 1 else "(V·M)"), "#D55E00",
                   [(m, b[1]) for m, b in zip(grid, both)]),
              line(f"÷ total: (P−1)/({v}M+P−1)", "#0072B2",
                   [(m, b[0]) for m, b in zip(grid, both)]),
              line(f"simulated {schedule}, ÷ ideal", "#D55E00", [(m, r) for m, _, r in sim],
                   line=False, marker="o"),
              line(f"simulated {schedule}, ÷ total", "#0072B2", [(m, f) for m, f, _ in sim],
                   line=False, marker="s")]
    title = title or (f"bubble vs M at P={P}" + (f", V={V}" if V != 1 else "")
                      + " — two denominators")
    return lines_panel(series, title, "microbatches M", "bubble", xlog=True, percent=True,
                       xticks=Ms)


__all__ = ["BUBBLE_MS", "bubble_curve_panel", "simulated_bubbles"]
