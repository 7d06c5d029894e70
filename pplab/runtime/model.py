"""A tiny GPT-like model, cut into pipeline stages that keep the full model's parameter names.

The full model is always built first from the seed and the stages take their layers out of it,
so a stage's weights do not depend on how many stages there are: the stage holding layer 5
has ``layers.5.*`` whatever P is, and gradients / checkpoints line up across any P.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass
from typing import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from ..ir import Schedule
from ..memory.parallel import RUNTIME_RECOMPUTE
from ..partition import stage_layers

#: none; full = every block checkpointed (Megatron's full recomputation); selective = only the
#: attention core; stage = all of a stage's blocks as one region (GPipe's re-materialization)
RECOMPUTE = RUNTIME_RECOMPUTE


@dataclass(frozen=True)
class TinyConfig:
    """Shape of the model. The memory model's "tiny" preset uses the same numbers."""
    vocab: int = 256
    hidden: int = 64
    heads: int = 4
    ffn: int = 256
    layers: int = 8
    seq: int = 32
    microbatch_size: int = 2
    tied_embeddings: bool = False
    dtype: str = "float32"

    def __post_init__(self):
        for name in ("vocab", "hidden", "heads", "ffn", "layers", "seq", "microbatch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"TinyConfig.{name} must be ≥ 1, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden={self.hidden} must be divisible by heads={self.heads}")
        if self.dtype not in ("float32", "float64", "bfloat16", "float16"):
            raise ValueError(f"dtype {self.dtype!r}: use float32, float64, bfloat16 or float16")

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TinyConfig":
        return cls(**d)


# ---- the model ---------------------------------------------------------------------------
def attention_core(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ / √d + causal mask) v — the part selective recomputation re-runs."""
    T = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class _Deferral:
    """Where SplitLinear's backward queues its weight-gradient inputs while deferring."""
    queue: list | None = None
    wrap = None


@contextlib.contextmanager
def defer_weight_grads(wrap=None):
    """Inside this block every SplitLinear backward computes only the input gradient and
    queues (module, input, grad_output) in the yielded list; ``weight_grads_from`` turns the
    queue into weight gradients later (the zero-bubble W). ``wrap`` keeps queued tensors in a
    saved-bytes count."""
    queue: list = []
    _Deferral.queue, _Deferral.wrap = queue, wrap or (lambda t: t)
    try:
        yield queue
    finally:
        _Deferral.queue = _Deferral.wrap = None


def weight_grads_from(queue: list) -> None:
    """Accumulate the weight gradients that ``defer_weight_grads`` queued."""
    for mod, hx, hgo in queue:
        x = getattr(hx, "tensor", hx)
        go = getattr(hgo, "tensor", hgo)
        gw, gb = linear_weight_grads(x, go, mod.bias is not None)
        for p, gr in ((mod.weight, gw), (mod.bias, gb)):
            if gr is None:
                continue
            if p.grad is None:
                p.grad = gr
            else:
                p.grad.add_(gr)


class _SplitLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, module):
        ctx.save_for_backward(x, weight)
        ctx.module, ctx.has_bias = module, bias is not None
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        grad_x = grad_out @ weight if ctx.needs_input_grad[0] else None
        if _Deferral.queue is not None:
            wrap = _Deferral.wrap
            _Deferral.queue.append((ctx.module, wrap(x), wrap(grad_out)))
            return grad_x, None, None, None
        gw, gb = linear_weight_grads(x, grad_out, ctx.has_bias)
        return grad_x, gw, gb, None


def linear_weight_grads(x, grad_out, has_bias):
    g2 = grad_out.reshape(-1, grad_out.shape[-1])
    gw = g2.t() @ x.reshape(-1, x.shape[-1])
    return gw, (g2.sum(0) if has_bias else None)


class SplitLinear(nn.Linear):
    """nn.Linear whose weight gradient can be deferred (see defer_weight_grads); same
    parameter names."""

    def forward(self, x):
        if torch.is_grad_enabled() and self.weight.requires_grad:
            return _SplitLinearFn.apply(x, self.weight, self.bias, self)
        return F.linear(x, self.weight, self.bias)


class _Tracked:
    """Hook point so the runtime can count tensors that checkpointing keeps alive itself
    (the inputs of a checkpointed region are held by the checkpoint, not by autograd's
    saved-tensor hooks). ``track(tensors, output)`` is set by the runtime; default no-op."""
    track = None


class Attention(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = SplitLinear(cfg.hidden, 3 * cfg.hidden)
        self.proj = SplitLinear(cfg.hidden, cfg.hidden)
        self.selective = False

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.reshape(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.selective and torch.is_grad_enabled():
            y = checkpoint(attention_core, q, k, v, use_reentrant=False)
            if _Tracked.track is not None:
                _Tracked.track((q, k, v), y)
        else:
            y = attention_core(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.fc1 = SplitLinear(cfg.hidden, cfg.ffn)
        self.fc2 = SplitLinear(cfg.ffn, cfg.hidden)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln1(x)), then + mlp(ln2(x))."""

    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.hidden)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.hidden)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Embeddings(nn.Module):
    """Token embedding plus GPT-2's learned positions (a seq × hidden table)."""

    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.hidden)
        self.pos = nn.Embedding(cfg.seq, cfg.hidden)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[-1], device=tokens.device)
        return self.tok(tokens) + self.pos(positions)


class TinyGPT(nn.Module):
    """Embeddings (token + position) → blocks → LayerNorm → LM head → mean cross-entropy.
    No dropout. Its shape is the memory model's "tiny" preset (pplab.memory.presets)."""

    def __init__(self, cfg: TinyConfig = TinyConfig(), seed: int = 0):
        super().__init__()
        self.cfg = cfg
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.embed = Embeddings(cfg)
            self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
            self.norm = nn.LayerNorm(cfg.hidden)
            self.head = SplitLinear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tied_embeddings:
            self.head.weight = self.embed.tok.weight
        self.to(cfg.torch_dtype)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


class StageModule(nn.Module):
    """Some consecutive blocks of TinyGPT, plus the embedding (first stage of a copy) and the
    final norm + head (last stage). Parameter names are the full model's (``layers.5.*``)."""

    def __init__(self, full: TinyGPT, layers: range, first: bool, last: bool,
                 recompute: str = "none"):
        super().__init__()
        if recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
        import copy
        self.first, self.last, self.recompute = first, last, recompute
        self.layer_ids = list(layers)
        if first:
            self.embed = copy.deepcopy(full.embed)
        self.layers = nn.ModuleDict({str(i): copy.deepcopy(full.layers[i]) for i in layers})
        if last:
            self.norm = copy.deepcopy(full.norm)
            self.head = copy.deepcopy(full.head)
        for block in self.layers.values():
            block.attn.selective = recompute == "selective"

    def _blocks(self, x):
        for block in self.layers.values():
            x = block(x)
        return x

    @staticmethod
    def _checkpointed(fn, x):
        # a checkpoint keeps its input itself; report it so the saved-bytes count includes it
        y = checkpoint(fn, x, use_reentrant=False)
        if _Tracked.track is not None:
            _Tracked.track((x,), y)
        return y

    def _run_blocks(self, x):
        if not torch.is_grad_enabled() or self.recompute in ("none", "selective"):
            return self._blocks(x)
        if self.recompute == "stage":       # GPipe: keep the stage input, re-run every block
            return self._checkpointed(self._blocks, x)
        for block in self.layers.values():  # full: keep each block's input, re-run one block
            x = self._checkpointed(block, x)
        return x

    def forward(self, x, targets=None):
        if self.first:
            x = self.embed(x)
        x = self._run_blocks(x)
        if not self.last:
            return x
        logits = self.head(self.norm(x))
        if targets is None:          # logits only (torch.distributed.pipelining's loss_fn)
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def check_model_fits(schedule: Schedule, cfg: TinyConfig) -> list[range]:
    """Layer range per stage; ValueError for too many stages or tied embeddings with P > 1."""
    if cfg.tied_embeddings and schedule.P > 1:
        raise ValueError("tied_embeddings=True needs P=1: with a pipeline the tied weight would "
                         "live on two ranks (embedding on the first stage, LM head on the last) "
                         "and need an extra all-reduce of its gradient, which this runtime does "
                         "not do; set tied_embeddings=False")
    if cfg.tied_embeddings and schedule.stages_per_copy > 1:
        raise ValueError("tied_embeddings=True needs a single stage (the embedding and LM head "
                         "must sit in the same stage); use V=1 or tied_embeddings=False")
    return stage_layers(schedule, cfg.layers)


def build_stage_modules(schedule: Schedule, cfg: TinyConfig, seed: int, stages: Sequence[int],
                        recompute: str = "none", full: TinyGPT | None = None) -> dict:
    """stage id → StageModule for the given stages (every copy starts from the same seed)."""
    ranges = check_model_fits(schedule, cfg)
    full = full if full is not None else TinyGPT(cfg, seed)
    return {s: StageModule(full, ranges[s], schedule.is_first(s), schedule.is_last(s), recompute)
            for s in stages}


def make_batch(cfg: TinyConfig, num_microbatches: int, seed: int, step: int):
    """(inputs, targets), each [M × microbatch_size, seq], different for every step."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + 7919 * step + 1)
    tokens = torch.randint(cfg.vocab, (num_microbatches * cfg.microbatch_size, cfg.seq + 1),
                           generator=g)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def microbatch(batch, cfg: TinyConfig, index: int):
    n = cfg.microbatch_size
    return tuple(t[index * n:(index + 1) * n] for t in batch)


def make_optimizer(params, optimizer: str = "sgd", lr: float = 0.05):
    params = list(params)
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr)
    raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
