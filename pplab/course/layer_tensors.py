"""What one transformer layer keeps for its backward pass, tensor by tensor (lesson 08).

Two layers of the same size: the GPT-style layer Korthikanti et al. 2022 count ("Reducing
Activation Recomputation in Large Transformer Models", §4.1: LayerNorm, dropout after the
attention and the MLP and on the attention probabilities, the a·s² scores stored, an MLP of
width 4h), and a Llama-style layer (RMSNorm, no dropout, FlashAttention, which keeps no a·s²
values, grouped-query attention, a SwiGLU MLP of width f). Each tensor says how many bytes per
token it holds and whether tensor parallelism splits it (§4.2.1), so the totals and the
picture come from one list. Pure Python but the picture (matplotlib).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kept:
    """One saved tensor: bytes per token (``per_h`` × h, or ``per_score`` × a·s for the
    attention scores), and whether TP splits it across the t ranks."""
    name: str
    part: str                    # "attention", "MLP" or "LayerNorm"
    per_h: float = 0.0
    per_score: float = 0.0
    split: bool = True


#: Korthikanti §4.1, 16-bit values and 1-byte dropout masks; ``split`` per §4.2.1
GPT_LAYER = (
    Kept("QKV matmul input", "attention", per_h=2, split=False),
    Kept("Q and K", "attention", per_h=4),
    Kept("softmax output", "attention", per_score=2),
    Kept("attention dropout mask", "attention", per_score=1),
    Kept("attention dropout output", "attention", per_score=2),
    Kept("V", "attention", per_h=2),
    Kept("output projection input", "attention", per_h=2),
    Kept("dropout mask after attention", "attention", per_h=1, split=False),
    Kept("first MLP matmul input", "MLP", per_h=2, split=False),
    Kept("GeLU input", "MLP", per_h=8),
    Kept("second MLP matmul input", "MLP", per_h=8),
    Kept("dropout mask after the MLP", "MLP", per_h=1, split=False),
    Kept("two LayerNorm inputs", "LayerNorm", per_h=4, split=False),
)


def gpt_layer_bytes(s: int, b: int, h: int, a: int, t: int = 1, sp: bool = False) -> float:
    """Bytes the GPT-style layer keeps for one microbatch, summed over GPT_LAYER: each tensor
    ÷ t if TP splits it or if sequence parallelism shards its (replicated) region."""
    total = 0.0
    for k in GPT_LAYER:
        per_token = k.per_h * h + k.per_score * a * s
        total += s * b * per_token / (t if (k.split or sp) else 1)
    return total


def llama_layer(h: int, kv_dim: int, ffn: int) -> list[tuple[str, float]]:
    """(tensor, bytes per token) a Llama-style layer keeps in bf16 with FlashAttention: the
    two RMSNorm inputs, the inputs of the four matmul groups (QKV, output projection = the
    attention output, gate/up, down), Q, K and V for the attention's backward, and the gate
    and up outputs for SwiGLU's. FlashAttention's per-row softmax statistics (4·a bytes a
    token) are left out: under 0.1 %."""
    return [("two RMSNorm inputs", 4 * h), ("QKV matmul input", 2 * h), ("Q", 2 * h),
            ("K and V (grouped-query)", 4 * kv_dim), ("attention output", 2 * h),
            ("gate/up matmul input", 2 * h), ("gate and up outputs", 4 * ffn),
            ("down matmul input", 2 * ffn)]


def llama_layer_bytes(s: int, b: int, h: int, kv_dim: int, ffn: int) -> float:
    return s * b * sum(v for _, v in llama_layer(h, kv_dim, ffn))


def draw_tp_split(t: int = 8):
    """Each layout's bytes per s·b·h on one rank, linear terms only (the 34 of one token and
    hidden unit), stacked by tensor: hatched where TP leaves the tensor whole on every rank,
    dotted where sequence parallelism splits those along the sequence instead."""
    import numpy as np
    from matplotlib.patches import Patch

    from ..draw.figure import DisplayFigure
    colors = {"attention": "#0072B2", "MLP": "#E69F00", "LayerNorm": "#009E73"}
    layouts = [("no parallelism", 1, False), (f"TP = {t}", t, False),
               (f"TP = {t} + SP", t, True)]
    fig = DisplayFigure(figsize=(8.5, 3.4))
    ax = fig.add_subplot(1, 1, 1)
    rows = [k for k in GPT_LAYER if k.per_h]
    for y, (label, tt, sp) in enumerate(layouts):
        left = 0.0
        for k in rows:
            w = k.per_h / (tt if (k.split or sp) else 1)
            ax.barh(y, w, left=left, color=colors[k.part], edgecolor="white",
                    hatch=None if k.split or tt == 1 else ("..." if sp else "///"),
                    height=0.6)
            left += w
        ax.text(left + 0.3, y, f"{left:g}", va="center", fontsize=8)
    ax.set_yticks(np.arange(len(layouts)))
    ax.set_yticklabels([lab for lab, _, _ in layouts], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 38)
    ax.set_xlabel("bytes per token and hidden unit on one rank (the a·s² scores not drawn)",
                  fontsize=8)
    handles = [Patch(color=c, label=part) for part, c in colors.items()]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                         label="whole on every TP rank"))
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="...",
                         label="split along the sequence (SP)"))
    ax.legend(handles=handles, fontsize=7, loc="lower right", frameon=False)
    ax.set_title("What one GPT-style layer keeps per rank, tensor by tensor", fontsize=9)
    fig.subplots_adjust(left=0.16, bottom=0.17)
    return fig
