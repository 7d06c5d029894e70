"""Lesson 14: Llama 3 405B's pipeline at a fixed 2,048-sequence batch — move the sequences
per replica (M, and so DP and the GPU count) and the chunks per rank (V); watch the bubble in
both denominators and the worst rank's memory."""
from __future__ import annotations

from ..memory import published_run as pr
from ..memory import memory_report
from ..scene import memory_panel, scene, timeline_panel
from .base import Canvas, build_canvas

#: sequences per replica the canvas offers: M a multiple of P = 16 (interleaved's rule), DP a
#: whole number at 2,048 sequences, and at most 16,384 boxes in the picture
M_OPTIONS = (16, 32, 64)
#: chunks per rank with P·V dividing 128 (126 layers + the two emptied ends, ``end_layers``)
V_OPTIONS = (1, 2, 4, 8)


def row_for(M: int) -> pr.Row:
    """A Table 4-shaped row at TP 8, PP 16 and the paper's 2,048 sequences of 8,192 tokens,
    with ``M`` sequences per replica (one per microbatch); throughput columns left empty."""
    batch = pr.TABLE4[0].sequences
    if M < 1 or batch % M:
        raise ValueError(f"{M} sequences per replica do not divide the batch of {batch}; "
                         f"choose one of {', '.join(map(str, M_OPTIONS))}")
    dp = batch // M
    return pr.Row(8 * 16 * dp, 8, 1, 16, dp, 8192, M, "16M", 0.0, 0.0)


#: when the fp32 gradients of the M microbatches cross the DP group (``zero2_reduce``)
GRADS = {"once a step": "per_step", "every microbatch": "per_microbatch"}


def render_published_run(M: int = 32, V: int = 8, grads: str = "once a step"):
    """(scene or None, message): the simulated step with Llama 3's chunks and the per-rank
    memory of the layout, its gradients reduce-scattered ``grads``."""
    try:
        row = row_for(int(M))
        if grads not in GRADS:
            raise ValueError(f"gradients are reduce-scattered {' or '.join(GRADS)}, "
                             f"got {grads!r}")
        model, cfg = pr.layout(row, V=int(V), zero2_reduce=GRADS[grads])
        b = pr.bubble(16, int(M), int(V))
    except ValueError as e:
        return None, f"M={M}, V={V}: {e}"
    rep = memory_report(model, cfg)
    worst = max(rep.per_rank, key=lambda r: r.total)
    fits = "fits in" if worst.total <= 80e9 else "over"
    dp = pr.axis_bytes(row, V=int(V), zero2_reduce=GRADS[grads])["bytes"]["dp"]
    msg = (f"{row.gpus:,} GPUs (DP {row.dp}), M={M}, V={V}: bubble {b['ratio']:.1%} of the busy "
           f"time, {b['fraction']:.1%} of the total\nworst rank {worst.rank}: "
           f"{worst.total / 1e9:.1f} GB, "
           f"{fits} 80 GB ({worst.inflight:g} rank-shares of activations in flight, gradients "
           f"{worst.grads / 1e9:.1f} GB); gradients reduce-scattered {grads}: DP sends "
           f"{dp / 1e9:.0f} GB a step")
    return scene(timeline_panel(b["timeline"]), memory_panel(rep)), msg


def published_run_canvas(M: int = 32, V: int = 8, grads: str = "once a step") -> Canvas:
    """Two sliders, sequences per replica (M) and chunks per rank (V), and when the
    gradients are reduce-scattered."""
    import ipywidgets as w
    controls = {
        "M": w.SelectionSlider(options=list(M_OPTIONS), value=M, description="M per replica",
                               continuous_update=False, style={"description_width": "initial"}),
        "V": w.SelectionSlider(options=list(V_OPTIONS), value=V, description="V",
                               continuous_update=False),
        "grads": w.Dropdown(options=list(GRADS), value=grads,
                            description="gradients reduce-scattered",
                            style={"description_width": "initial"})}
    return build_canvas(render_published_run, controls, [w.HBox(list(controls.values()))], {})
