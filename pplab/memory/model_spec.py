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
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Split:
    """A parameter count split into the part tensor parallelism shards and the part it copies.

    Megatron-style TP shards the big matrices (and the biases of column-parallel layers) and
    keeps norms and row-parallel biases whole on every TP rank.
    """
    sharded: int = 0
    replicated: int = 0

    @property
    def total(self) -> int:
        return self.sharded + self.replicated

    def per_rank(self, tp: int) -> float:
        return self.sharded / tp + self.replicated

    def __add__(self, other: "Split") -> "Split":
        return Split(self.sharded + other.sharded, self.replicated + other.replicated)

    def __mul__(self, k: int) -> "Split":
        return Split(self.sharded * k, self.replicated * k)


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

    @property
    def kv(self) -> int:
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def with_(self, **changes) -> "ModelSpec":
        return replace(self, **changes)

    # ---- pieces --------------------------------------------------------------------------
    def layer_params(self) -> Split:
        """One transformer layer, split into TP-sharded and TP-replicated parameters."""
        h, f, kvd = self.hidden, self.ffn, self.kv * self.head_dim
        if self.arch == "gpt":
            attn = Split(h * (h + 2 * kvd) + (h + 2 * kvd), 0) + Split(h * h, h)   # qkv, proj
            mlp = Split(h * f + f, 0) + Split(f * h, h)                            # fc1, fc2
            norms = Split(0, 2 * 2 * h)                                           # 2 LayerNorms
        else:
            attn = Split(h * h + 2 * h * kvd + h * h, 0)                           # q, k, v, o
            mlp = Split(3 * h * f, 0)                                             # gate, up, down
            norms = Split(0, 2 * h)                                               # 2 RMSNorms
        return attn + mlp + norms

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
        return (self.embedding_params() + self.layer_params() * self.layers
                + self.final_norm_params() + self.head_params()).total

    def num_layer_params(self) -> int:
        return self.layer_params().total * self.layers

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
        scores; here the layer parameters are counted exactly, so GQA and SwiGLU are right.
        """
        L, h, s = self.layers, self.hidden, self.seq
        fwd = 2 * (self.num_layer_params() + self.vocab * h) + 4 * L * h * s
        extra = {"none": 0.0, "selective": 4 * L * h * s, "full": fwd}[recompute]
        return 3 * fwd + extra
