"""A decoder-only transformer described by its shapes, and its parameters counted from them.

Counting from the shapes (rather than quoting "70B") lets every later number — bytes per
stage, per TP shard, per ZeRO shard — follow from the same few integers. Two layer styles:

* ``gpt``: GPT-2/GPT-3 style. LayerNorm with weight and bias, fused qkv projection with bias,
  output projection with bias, a 2-matrix MLP with biases, learned positional embedding.
  Per layer: 4h² + 2h·f + 9h + f, which is 12h² + 13h when f = 4h — the Ultra-Scale
  Playbook's Ψ ≈ h·v + L(12h² + 13h) + 2h (it leaves out the s·h positional table).
* ``llama``: Llama style (Touvron et al. 2023; Llama 3 paper §3). RMSNorm (weight only), no
  biases, grouped-query attention (q and o are h×h, k and v are h×(kv_heads·head_dim)),
  SwiGLU MLP with three h×f matrices, rotary positions (no parameters), untied head.

A ``llama`` model may also have mixture-of-experts MLPs (``MoE``: every layer past the first
``dense_layers`` routes each token to ``top_k`` of ``experts`` SwiGLU experts of width
``ffn`` beside ``shared`` always-on ones) and multi-head latent attention (``MLA``: queries and
keys/values projected down to small latents and back up per head), as DeepSeek-V3 has
(DeepSeek-V3 Technical Report, arXiv 2412.19437, §2.1).
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Split:
    """A parameter count split into the part tensor parallelism shards, the part it copies,
    and the routed experts, which expert parallelism spreads over EP ranks instead (each rank
    holds experts/EP of them whole: no TP inside an expert).

    Megatron-style TP shards the big matrices (and the biases of column-parallel layers) and
    keeps norms and row-parallel biases whole on every TP rank.
    """
    sharded: int = 0
    replicated: int = 0
    expert: int = 0

    @property
    def total(self) -> int:
        return self.sharded + self.replicated + self.expert

    def per_rank(self, tp: int, ep: int = 1) -> float:
        return self.sharded / tp + self.replicated + self.expert / ep

    def __add__(self, other: "Split") -> "Split":
        return Split(self.sharded + other.sharded, self.replicated + other.replicated,
                     self.expert + other.expert)

    def __mul__(self, k: int) -> "Split":
        return Split(self.sharded * k, self.replicated * k, self.expert * k)


@dataclass(frozen=True)
class MoE:
    """Mixture-of-experts MLPs: past the first ``dense_layers`` layers (which keep the dense
    ``ModelSpec.ffn``), a router scores ``experts`` SwiGLU experts of width ``ffn`` for every
    token and sends it to ``top_k``; ``shared`` experts see every token."""
    experts: int
    top_k: int
    ffn: int
    shared: int = 0
    dense_layers: int = 0


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2 §2.1; DeepSeek-V3 §2.1.1): the input projected
    down to a query latent (``q_rank``) and a key/value latent (``kv_rank``) plus one shared
    rotary key (``rope_dim``), each latent normed and projected up per head to ``nope_dim`` +
    ``rope_dim`` query/key dimensions and ``v_dim`` value dimensions."""
    q_rank: int
    kv_rank: int
    nope_dim: int
    rope_dim: int
    v_dim: int


@dataclass(frozen=True)
class ModelSpec:
    """Shapes of a decoder-only transformer. ``seq`` is the training sequence length."""
    name: str
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    seq: int
    kv_heads: int | None = None        # None: as many as query heads (no GQA)
    tied_embeddings: bool = False
    arch: str = "gpt"                  # "gpt" or "llama"
    moe: MoE | None = None             # None: every MLP dense
    mla: MLA | None = None             # None: (grouped-query) multi-head attention

    def __post_init__(self):
        for f in ("layers", "hidden", "heads", "ffn", "vocab", "seq"):
            if getattr(self, f) < 1:
                raise ValueError(f"model {f} must be ≥ 1, got {getattr(self, f)}")
        if self.arch not in ("gpt", "llama"):
            raise ValueError(f"arch must be 'gpt' or 'llama', got {self.arch!r}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by {self.heads} heads")
        if self.heads % self.kv:
            raise ValueError(f"{self.heads} query heads cannot be grouped over "
                             f"{self.kv} KV heads (must divide)")
        if (self.moe or self.mla) and self.arch != "llama":
            raise ValueError("mixture-of-experts and latent attention need arch='llama'")
        if self.moe and not (1 <= self.moe.top_k <= self.moe.experts
                             and 0 <= self.moe.dense_layers <= self.layers):
            raise ValueError(f"MoE needs 1 ≤ top_k ≤ experts and 0 ≤ dense layers ≤ "
                             f"{self.layers}, got {self.moe}")

    @property
    def kv(self) -> int:
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def with_(self, **changes) -> "ModelSpec":
        return replace(self, **changes)

    # ---- pieces --------------------------------------------------------------------------
    def attention_params(self) -> Split:
        """q, k, v, o (GPT: fused qkv and proj with biases), or MLA's down/up projections
        and latent norms."""
        h, kvd = self.hidden, self.kv * self.head_dim
        if self.arch == "gpt":
            return Split(h * (h + 2 * kvd) + (h + 2 * kvd), 0) + Split(h * h, h)
        if self.mla is None:
            return Split(h * h + 2 * h * kvd + h * h, 0)
        m, a = self.mla, self.heads
        down = h * m.q_rank + h * (m.kv_rank + m.rope_dim)            # replicated latents
        up = m.q_rank * a * (m.nope_dim + m.rope_dim) + m.kv_rank * a * (m.nope_dim + m.v_dim)
        return Split(up + a * m.v_dim * h, down + m.q_rank + m.kv_rank)

    def is_dense(self, index: int) -> bool:
        return self.moe is None or index < self.moe.dense_layers

    def mlp_params(self, dense: bool = True) -> Split:
        """The dense MLP, or a MoE layer's router (whole on every rank), shared experts
        (TP-sharded like a dense MLP) and routed experts (spread over EP)."""
        h, f = self.hidden, self.ffn
        if self.arch == "gpt":
            return Split(h * f + f, 0) + Split(f * h, h)
        if dense:
            return Split(3 * h * f, 0)
        m = self.moe
        return Split(3 * h * m.ffn * m.shared, h * m.experts, 3 * h * m.ffn * m.experts)

    def layer_params(self, index: int | None = None) -> Split:
        """One transformer layer (layer ``index``; by default the last, a MoE layer when
        there are any), split into TP-sharded, TP-replicated and expert parameters."""
        dense = self.is_dense(self.layers - 1 if index is None else index)
        norms = Split(0, 2 * 2 * self.hidden) if self.arch == "gpt" else Split(0, 2 * self.hidden)
        return self.attention_params() + self.mlp_params(dense) + norms

    def layers_params(self, indices) -> Split:
        """The layers ``indices`` together."""
        out = Split()
        for dense in (True, False):
            n = sum(1 for i in indices if self.is_dense(i) == dense)
            if n:
                out = out + self.layer_params(0 if dense else self.layers - 1) * n
        return out

    def active_layer_params(self, index: int | None = None) -> int:
        """Parameters one token multiplies through in layer ``index``: all of a dense layer;
        of a MoE layer the router, the shared experts and ``top_k`` routed experts."""
        p = self.layer_params(index)
        if p.expert == 0:
            return p.total
        return p.sharded + p.replicated + p.expert * self.moe.top_k // self.moe.experts

    def attention_flops(self, s: int) -> float:
        """Forward attention FLOPs per token against ``s`` keys: 2·s·heads·(qk + v dims),
        4·h·s without MLA (PaLM's 12·L·H·Q·T over fwd+bwd)."""
        if self.mla is None:
            return 4 * self.hidden * s
        m = self.mla
        return 2 * s * self.heads * (m.nope_dim + m.rope_dim + m.v_dim)

    def embedding_params(self) -> Split:
        """Token embedding (vocab-parallel under TP) plus GPT's learned positions (s×h)."""
        pos = self.seq * self.hidden if self.arch == "gpt" else 0
        return Split(self.vocab * self.hidden, pos)

    def final_norm_params(self) -> Split:
        return Split(0, (2 if self.arch == "gpt" else 1) * self.hidden)

    def head_params(self) -> Split:
        """Output projection h×v. When tied it is the embedding matrix itself (no new count)."""
        return Split(0, 0) if self.tied_embeddings else Split(self.vocab * self.hidden, 0)

    def num_params(self) -> int:
        """Exact count for the whole model (one copy)."""
        return (self.embedding_params() + self.layers_params(range(self.layers))
                + self.final_norm_params() + self.head_params()).total

    def num_layer_params(self) -> int:
        return self.layers_params(range(self.layers)).total

    def num_active_layer_params(self) -> int:
        return sum(self.active_layer_params(i) for i in range(self.layers))

    def playbook_params(self) -> int:
        """Ultra-Scale Playbook approximation Ψ ≈ h·v + L(12h² + 13h) + 2h (GPT, tied, f = 4h)."""
        h = self.hidden
        return h * self.vocab + self.layers * (12 * h * h + 13 * h) + 2 * h

    def megatron_params(self) -> float:
        """Megatron-LM: 12Lh²(1 + 13/(12h) + (V+s)/(12Lh)) — GPT, tied, with positions."""
        L, h = self.layers, self.hidden
        return 12 * L * h * h * (1 + 13 / (12 * h) + (self.vocab + self.seq) / (12 * L * h))

    def train_flops_per_token(self, recompute: str = "none") -> float:
        """Training FLOPs per token: 6·(layer params + head) + attention 12·L·h·s.

        Megatron-LM §5.1 writes 72·B·s·L·h²(1 + s/(6h) + V/(12Lh)) per iteration for GPT
        (96 instead of 72 with full recomputation: one extra forward). Per token that is
        6·12Lh² + 12·L·h·s + 6·h·V, i.e. 6 × (layer parameters + head) plus the attention
        scores; here the layer parameters are counted exactly, so GQA and SwiGLU are right; a
        MoE layer counts the parameters a token passes through (``active_layer_params``) and
        MLA its own attention widths (``attention_flops``).
        """
        L, h, s = self.layers, self.hidden, self.seq
        attn = L * self.attention_flops(s)
        fwd = 2 * (self.num_active_layer_params() + self.vocab * h) + attn
        extra = {"none": 0.0, "selective": attn, "full": fwd}[recompute]
        return 3 * fwd + extra
