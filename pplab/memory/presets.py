"""Named models. Every number here comes from the source named next to it."""
from __future__ import annotations

from .model_spec import MLA, ModelSpec, MoE

# The course's runtime model (pplab.runtime builds exactly this): GPT-2 style, untied head
# without bias, trained in float32 with microbatches of 2 sequences.
TINY = ModelSpec("tiny", layers=8, hidden=64, heads=4, ffn=256, vocab=256, seq=32,
                 tied_embeddings=False, arch="gpt")
TINY_MICROBATCH = 2
TINY_BYTES_PER_VALUE = 4        # float32

#: The released Llama 3.1 models' configuration files (``config.json`` of Meta's
#: Llama-3.1-8B, -70B and -405B on Hugging Face): the exact vocabulary, and an output layer
#: not tied to the embedding. The paper's Table 3 rounds the vocabulary to "128K".
LLAMA3_RELEASED_CONFIG = {"vocab_size": 128256, "tie_word_embeddings": False}
_LLAMA3 = dict(vocab=LLAMA3_RELEASED_CONFIG["vocab_size"],
               tied_embeddings=LLAMA3_RELEASED_CONFIG["tie_word_embeddings"], arch="llama")

PRESETS: dict[str, ModelSpec] = {
    "tiny": TINY,
    # Llama 3 paper (Dubey et al. 2024, "The Llama 3 Herd of Models"), Table 3: layers, model
    # and FFN dimensions, attention and key/value heads; pre-training sequence length 8,192
    # (§3.4.1). Vocabulary and head tying from the released configuration (above).
    "llama3-8b": ModelSpec("llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8,
                           ffn=14336, seq=8192, **_LLAMA3),
    "llama3-70b": ModelSpec("llama3-70b", layers=80, hidden=8192, heads=64, kv_heads=8,
                            ffn=28672, seq=8192, **_LLAMA3),
    "llama3-405b": ModelSpec("llama3-405b", layers=126, hidden=16384, heads=128, kv_heads=8,
                             ffn=53248, seq=8192, **_LLAMA3),
    # GPT-3 paper (Brown et al. 2020), Table 2.1: 96 layers, d_model 12288, 96 heads,
    # d_ff = 4·d_model, context 2048; GPT-2 BPE vocabulary of 50,257; tied embeddings.
    "gpt3-175b": ModelSpec("gpt3-175b", layers=96, hidden=12288, heads=96, ffn=4 * 12288,
                           vocab=50257, seq=2048, tied_embeddings=True, arch="gpt"),
    # DeepSeek-V3 Technical Report (arXiv 2412.19437) §4.2 and the released config.json of
    # deepseek-ai/DeepSeek-V3: 61 layers, hidden 7168, 128 heads; MLA with query latent 1536,
    # KV latent 512, 128 + 64 (rotary) query/key and 128 value dimensions per head; the first
    # 3 layers dense (FFN 18432), the rest 1 shared + 256 routed experts of width 2048, 8 per
    # token; vocabulary 129,280, untied head; pre-training sequences of 4K. The multi-token
    # prediction module (one more layer, §2.2) is not counted: 671B parameters as the report's
    # main model.
    "deepseek-v3": ModelSpec("deepseek-v3", layers=61, hidden=7168, heads=128, ffn=18432,
                             vocab=129280, seq=4096, tied_embeddings=False, arch="llama",
                             moe=MoE(experts=256, top_k=8, ffn=2048, shared=1, dense_layers=3),
                             mla=MLA(q_rank=1536, kv_rank=512, nope_dim=128, rope_dim=64,
                                     v_dim=128)),
}


def get_preset(name: str) -> ModelSpec:
    key = name.lower().replace("_", "-")
    if key not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[key]
