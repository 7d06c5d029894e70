"""Plain-text views of a timeline, for terminals and graders (no matplotlib)."""
from __future__ import annotations

from .timeline import Timeline


def metrics_line(tl: Timeline) -> str:
    """'makespan 33, bubble 27.3% of total, 37.5% of ideal' — the course's standard summary
    (one pass over the timeline: ``totals()``)."""
    t = tl.totals()
    return (f"makespan {t.makespan:.4g}, bubble {t.bubble_fraction:.1%} of total, "
            f"{t.bubble_ratio:.1%} of ideal")


def timeline_to_text(timeline: Timeline, width: int = 100) -> str:
    """One line per rank; each character is a slice of time showing the kind running
    (F, B, I, W, X for an overlapped pair) or '.' when the rank is idle."""
    span = timeline.makespan
    if span <= 0:
        return "(empty timeline)"
    t0 = timeline.start
    cols = max(10, width)
    lines = []
    for r, evs in enumerate(timeline.events_by_rank()):
        row = ["."] * cols
        for e in evs:
            a = int(round((e.start - t0) / span * cols))
            b = max(a + 1, int(round((e.end - t0) / span * cols)))
            ch = "X" if e.op.kind == "FB" else e.op.kind
            for i in range(a, min(b, cols)):
                row[i] = ch
        lines.append(f"rank {r} |{''.join(row)}|")
    return "\n".join(lines)


def per_rank(values, per_row: int = 16) -> str:
    """Per-rank numbers readably: ``[4, 3, 2, 1]`` up to ``per_row`` ranks; beyond, one
    line per ``per_row`` ranks, labelled and in aligned columns (P = 64: four lines)."""
    values = list(values)
    if len(values) <= per_row:
        return str(values)
    width = max(len(str(v)) for v in values)
    last = len(str(len(values) - 1))
    rows = []
    for lo in range(0, len(values), per_row):
        hi = min(lo + per_row, len(values)) - 1
        cells = " ".join(str(v).rjust(width) for v in values[lo:hi + 1])
        rows.append(f"ranks {str(lo).rjust(last)}–{str(hi).rjust(last)}: {cells}")
    return "\n".join(rows)


def metrics_text(timeline: Timeline) -> str:
    """The CLI's summary: the metrics line's figures in words, and the peaks."""
    t = timeline.totals()
    bf, br = t.bubble_fraction, t.bubble_ratio
    return (f"makespan {t.makespan:.4g}   bubble {bf:.2%} of total time "
            f"(idle ÷ P·makespan), {br:.2%} of ideal (idle ÷ busy)\n"
            f"peak in-flight microbatches per rank: {timeline.peak_inflight}")
