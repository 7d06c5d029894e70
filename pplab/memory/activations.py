"""Activation bytes saved for the backward pass (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models").

Table 2 gives bytes per transformer layer for 16-bit activations (and 1-byte dropout masks):

    no parallelism                 s·b·h·(34 + 5·a·s/h)
    tensor parallel (t)            s·b·h·(10 + 24/t + 5·a·s/(h·t))
    tensor + sequence parallel     s·b·h·(34/t + 5·a·s/(h·t))
    TP + selective recompute       s·b·h·(10 + 24/t)
    TP + SP + selective recompute  s·b·h·34/t
    full recompute                 2·s·b·h          (only the layer input is kept)

The 5·a·s/h term is the attention scores, softmax and its dropout mask (a·s² per sequence):
quadratic in s, and exactly what selective recomputation (or FlashAttention) avoids storing.
With t = 1 every row reduces to the no-parallelism row. Other value sizes (float32 in the
tiny model) scale the formula by bytes/2 — an approximation, since the masks stay 1 byte.
"""
from __future__ import annotations



def layer_activation_bytes(s: int, b: int, h: int, a: int, t: int = 1, sp: bool = False,
                           recompute: str = "none", bytes_per_value: float = 2,
                           keys: int | None = None) -> float:
    """Korthikanti Table 2: bytes one transformer layer keeps for one microbatch of ``s``
    tokens. ``keys``: the tokens each query attends over when that is not ``s`` (under
    context parallelism a rank holds s/CP queries against all s keys)."""
    sbh = s * b * h
    attn = 5 * a * (keys or s) / (h * t)       # scores + softmax + dropout mask, split over t
    if recompute == "full":
        per = 2.0
    elif recompute == "selective":
        per = 34 / t if sp else 10 + 24 / t
    elif recompute == "none":
        per = (34 / t if sp else 10 + 24 / t) + attn
    else:
        raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")
    return sbh * per * bytes_per_value / 2


#: how a layer's kept activations are counted (``ParallelConfig.activations``): Korthikanti's
#: Table 2 (a GPT layer: LayerNorm inputs, dropout masks, full-width K and V, a 4h GeLU MLP);
#: ``"kept"``: the tensors this model's own layer leaves for its backward (``kept_layer_bytes``,
#: ``moe_layer_bytes``); ``"fp8"``: DeepSeek-V3's recipe (``moe_layer_bytes``)
ACTIVATION_MODELS = ("korthikanti", "kept", "fp8")


def moe_layer_bytes(model, s: int, b: int, dense: bool, t: int = 1, recompute: str = "none",
                    fp8: bool = False, keys: int | None = None) -> float:
    """Bytes one layer of a model with latent attention or experts keeps for one microbatch.

    ``fp8=False``: every tensor its backward needs, in bf16, nothing recomputed. MLA: the
    norm output, both latents and their norm outputs, the rotary key, per-head Q, K, V and
    the attention output. A MoE MLP: the norm output, the router's fp32 scores, each token's
    ``top_k`` dispatched copies, their experts' gate, up and product, and the experts' outputs
    (the combine's backward needs them to weight the gradient), plus the shared experts'
    gate, up and product. ``fp8=True``: DeepSeek-V3's recipe (Technical Report §3.2.3,
    §3.3.3): RMSNorms and MLA's up-projections recomputed (so the layer input, the query
    latent, the KV latent and the rotary key are kept instead of Q, K, V and norm outputs),
    the attention output kept in E5M6 (1.5 bytes), every other Linear input cached in FP8,
    SwiGLU's inputs in FP8 with its output recomputed. The report does not say what the
    combine's backward keeps; pplab assumes each expert scales its recomputed SwiGLU output by
    the token's routing weight before the down projection, so the weight's gradient comes from
    that recomputation and the experts' outputs (top_k·h BF16 values a token: 114,688 bytes
    beside a DeepSeek-V3 MoE layer's 160,384) are not kept. Split over TP (with SP).
    ``"none"`` adds the softmax output (2·a·s² per sequence); ``"full"`` keeps the layer
    input only."""
    h, a, k = model.hidden, model.heads, keys or s
    if recompute == "full":
        return s * b * 2 * h / t
    m, x = model.mla, model.moe
    if m is None:
        kvd = model.kv * model.head_dim
        attn = 2 * (3 * h + 2 * kvd)
    elif fp8:
        attn = 2 * h + 2 * m.q_rank + 2 * (m.kv_rank + m.rope_dim) + 1.5 * a * m.v_dim + 4 * a
    else:
        attn = (2 * h + 4 * m.q_rank + 2 * (2 * m.kv_rank + m.rope_dim)
                + 4 * a * (m.nope_dim + m.rope_dim) + 4 * a * m.v_dim + 4 * a)
    if dense:
        mlp = 3 * h + 2 * model.ffn if fp8 else 2 * h + 6 * model.ffn
    elif fp8:
        mlp = 2 * h + 4 * x.experts + x.top_k * (h + 2 * x.ffn) + x.shared * (h + 2 * x.ffn)
    else:
        mlp = (2 * h + 4 * x.experts + x.top_k * (2 * h + 6 * x.ffn + 2 * h)
               + x.shared * 6 * x.ffn)
    per = attn + mlp + (2 * a * k if recompute == "none" else 0)
    return s * b * per / t


def kept_layer_bytes(s: int, b: int, h: int, a: int, kv_dim: int, ffn: int, t: int = 1,
                     sp: bool = False, recompute: str = "none", bytes_per_value: float = 2,
                     keys: int | None = None) -> float:
    """Bytes one Llama-style layer (RMSNorm, GQA, SwiGLU, no dropout) keeps for one microbatch
    when nothing its backward needs is recomputed and nothing else is kept — what "The Llama 3
    Herd of Models" §3.3.2 reached by deallocating every tensor not used again ("based on
    detailed memory allocation profiling"). Per token, in values: each RMSNorm's output (h; the
    norm's backward works from its output, as Megatron-LM's memory-efficient norm does, and it
    is the next matmul's input anyway), FlashAttention's Q (h), K and V (``kv_dim`` each) and
    output O (h, also the output projection's input), SwiGLU's gate and up (f each) and their
    product (f, the down projection's input): 4h + 2·kv_dim + 3f. Korthikanti's 34·s·b·h
    counts instead LayerNorm inputs, two dropout masks, full-width K and V and a 4h GeLU MLP.
    Without SP the two norm outputs (the column-parallel inputs) are whole on every TP rank;
    with SP everything is split. ``recompute="none"`` adds the softmax output (2·a·s² per
    sequence, no dropout) that FlashAttention would not keep; ``"full"`` keeps the input only."""
    if recompute == "full":
        per = 2.0 * h
    elif recompute in ("none", "selective"):
        split = 2 * h + 2 * kv_dim + 3 * ffn
        per = 2 * (2 * h / (t if sp else 1) + split / t)
        if recompute == "none":
            per += 2 * a * (keys or s) / t
    else:
        raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")
    return s * b * per * bytes_per_value / 2


def layer_w_pending_bytes(s: int, b: int, h: int, t: int = 1, sp: bool = False,
                          bytes_per_value: float = 2) -> float:
    """Bytes one layer keeps for a microbatch whose input gradient ``I`` has run but whose
    weight gradient ``W`` has not: each linear layer's input and output gradient, 32·s·b·h
    bytes at t = 1 (Zero Bubble's M_W, against Korthikanti's M_B = 34·s·b·h + 5·a·s²·b).
    Under TP without SP the column-parallel inputs and row-parallel output gradients are
    replicated (8·s·b·h) and the rest is split: 8 + 24/t; with SP all of it is split."""
    per = 32 / t if sp else 8 + 24 / t
    return s * b * h * per * bytes_per_value / 2


def last_stage_w_pending_bytes(s: int, b: int, h: int, vocab: int, t: int = 1, sp: bool = False,
                               bytes_per_value: float = 2) -> float:
    """The output layer's pending W: its input (2·s·b·h, ÷t with SP) and the logits' gradient
    (s·b·V/t values)."""
    k = bytes_per_value / 2
    return 2 * s * b * h * k / (t if sp else 1) + 2 * k * s * b * vocab / t


def first_stage_extra_bytes(s: int, b: int, h: int, t: int = 1, sp: bool = False) -> float:
    """The embedding's dropout mask, s·b·h bytes (÷t with SP) — Korthikanti §4.3."""
    return s * b * h / (t if sp else 1)


def last_stage_extra_bytes(s: int, b: int, h: int, vocab: int, t: int = 1, sp: bool = False,
                           bytes_per_value: float = 2) -> float:
    """Final norm input 2sbh, output-layer input 2sbh (÷t with SP) and the fp32 logits
    4·s·b·V/t kept for the cross-entropy — Korthikanti §4.3: 4sbh/t·(1 + V/h) with SP."""
    k = bytes_per_value / 2
    return 4 * s * b * h * k / (t if sp else 1) + 4 * s * b * vocab / t


def boundary_activation_bytes(s: int, b: int, h: int, t: int = 1,
                              bytes_per_value: float = 2) -> float:
    """Bytes of one activation crossing a pipeline stage boundary (and of its gradient coming
    back): the s·b·h hidden states, 1/t of them per GPU under TP (Megatron's scatter/gather;
    with SP they are sharded already, so SP does not change the figure)."""
    return s * b * h * bytes_per_value / t


def article_layer_bytes(s: int, b: int, h: int, a: int) -> float:
    """The rough figure b·s·(10h + a·s)·2 bytes of the article "Pipeline Parallelism: From
    GPipe to DualPipe — Eliminating the Bubble" — kept only to show the gap to Korthikanti's."""
    return b * s * (10 * h + a * s) * 2


#: the same function under its first name (lessons 01 and 07 import it so)
seed_article_layer_bytes = article_layer_bytes
