"""Export a Timeline to the Chrome trace-event JSON format (open it in Perfetto or
chrome://tracing). One process per rank, one complete event ('X') per op."""
from __future__ import annotations

import json

from .ir import KIND_NAMES
from .timeline import Timeline


def to_chrome_trace(timeline: Timeline, time_unit: float = 1.0) -> dict:
    """Build the trace dict. ``time_unit`` is how many seconds one timeline unit is: 1.0 for
    measured runs (seconds), and for simulations any scale — ticks are shown as µs."""
    scale = time_unit * 1e6 if timeline.source == "measured" else 1.0
    t0 = timeline.start
    events = []
    for r in range(timeline.num_ranks):
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                       "args": {"name": f"rank {r}"}})
    for e in timeline.events:
        first = e.op.parts[0]
        events.append({
            "name": str(e.op), "cat": KIND_NAMES[e.op.kind], "ph": "X", "pid": e.rank, "tid": 0,
            "ts": (e.start - t0) * scale, "dur": (e.end - e.start) * scale,
            "args": {"stage": first.stage, "microbatch": first.microbatch, "kind": e.op.kind},
        })
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"source": timeline.source,
                          **{k: str(v) for k, v in timeline.meta.items()}}}


def write_chrome_trace(timeline: Timeline, path: str, time_unit: float = 1.0) -> str:
    with open(path, "w") as f:
        json.dump(to_chrome_trace(timeline, time_unit), f)
    return path
