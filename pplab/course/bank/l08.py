"""Lesson 08: activations, sequence parallelism, recomputation."""
from ...memory.activations import article_layer_bytes, layer_activation_bytes
from ..questions import Option, Question


def _saving(recompute: str) -> float:
    """% of a GPT-3 175B layer's activations (TP 8 with SP) that ``recompute`` saves."""
    none = layer_activation_bytes(2048, 1, 12288, 96, 8, True, "none")
    kept = layer_activation_bytes(2048, 1, 12288, 96, 8, True, recompute)
    return 100 * (1 - kept / none)


QUESTIONS = (
    Question(
        "08.layer-gb", "predict", "number",
        "A GPT-style layer as Korthikanti et al. count it (LayerNorm, dropout, the attention "
        "scores stored, a 4h MLP) at Llama-3-70B's size: s = 4096, b = 1, h = 8192, a = 64 "
        "heads; 16-bit activations, no parallelism, no recomputation. GB kept for the backward?",
        answer=lambda: layer_activation_bytes(4096, 1, 8192, 64) / 1e9, unit="GB",
        source="Korthikanti et al.'s formula",
        traps=((2.82, "2.82 GB is b·s·(10h + a·s)·2, the estimate of the article Pipeline "
                      "Parallelism: From GPipe to DualPipe, which drops most terms."),
               (1.12, "About 1.1 GB is what a Llama-style layer of this size keeps "
                      "(FlashAttention, no dropout, SwiGLU): right for a modern layer, but this "
                      "one stores the a·s² scores and the dropout masks.")),
        explain="s·b·h·(34 + 5·a·s/h): the attention term 5·a·s/h = 160 dominates the 34."),
    Question(
        "08.selective", "predict", "number",
        "GPT-3 175B (a = 96, s = 2048, h = 12288), TP = 8 with SP. What share of the activation "
        "memory does selective recomputation save, in %?",
        answer=lambda: _saving("selective"), unit="%", source="Korthikanti et al.'s formula",
        traps=((100 * 10 / 23, "That is TP without SP: the replicated 10·s·b·h stays."),),
        explain="With TP + SP the attention term is 80/t of the 114/t total."),
    Question(
        "08.full-saving", "predict", "number",
        "Same layer, GPT-3 175B with TP = 8 and SP. Full recomputation keeps only each layer's "
        "input, whole on every rank as Korthikanti et al.'s Table 2 counts it, and re-runs the "
        "whole forward in the backward. What share of the activation memory does it save, in %?",
        answer=lambda: _saving("full"), unit="%", source="Korthikanti et al.'s formula",
        traps=((100.0, "The layer's input stays, 2 bytes a value on every rank."),
               (100 * 80 / 114, "That is selective recomputation; full keeps even less."),
               (100 * (1 - 0.25 / 14.25), "That shards the kept input over the 8 ranks, as "
                                          "SP could; Table 2 keeps it whole on every rank.")),
        explain="It keeps only the layer's input, 2 bytes a value, whole on every rank as "
                "Table 2 counts it: 2 of the 14.25 bytes per token and hidden unit that "
                "TP + SP keep without recomputation."),
    Question(
        "08.q-tp-not", "quiz", "choice",
        "Which part of a layer's activations does TP alone not divide?",
        options=(Option("LayerNorm inputs, dropout masks, QKV and first-MLP matmul inputs",
                        "10·s·b·h (4 + 2 + 4, Korthikanti et al. §4.2.1–4.2.2), whole on every TP "
                        "rank; sequence parallelism splits them along the sequence.", True),
                 Option("The attention scores and softmax outputs of each rank's heads",
                        "TP splits the heads, so the scores too."),
                 Option("The inputs of the output projection and of the second MLP matmul",
                        "They are the outputs of column-parallel matmuls: each rank keeps its "
                        "1/t share."))),
    Question(
        "08.q-double-s", "quiz", "choice",
        "Doubling s at fixed b: how do the no-recompute and selective rows scale?",
        options=(Option("Selective doubles; without recomputation it more than doubles",
                        "The attention term grows as s².", True),
                 Option("Both double, as every term grows with s alone",
                        "The a·s² scores grow faster than s."),
                 Option("Both quadruple, as attention makes the layer quadratic in s",
                        "The linear terms grow with s only, and selective keeps only those."),
                 Option("Selective quadruples; without recomputation it doubles",
                        "Selective drops the quadratic scores, so it is the one that grows "
                        "like s."))),
)


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals


@_reveals("08.layer-gb")
def _layer_gb() -> str:
    from ...memory.activations import layer_activation_bytes
    from ..layer_tensors import GPT_LAYER, gpt_layer_bytes
    s, b, h, a, GB = 4096, 1, 8192, 64, 1e9
    lines = [f"{k.name:30s} {(k.per_h * h + k.per_score * a * s) * s * b / GB:6.3f} GB"
             for k in GPT_LAYER]
    total = gpt_layer_bytes(s, b, h, a)
    assert total == layer_activation_bytes(s, b, h, a)
    lines.append(f"{'kept for the backward':30s} {total / GB:6.3f} GB  "
                 f"({total / (s * b * h):.0f}·s·b·h)")
    article = article_layer_bytes(s, b, h, a)
    assert round(total / article, 1) == 2.3
    lines.append(f"The article's b·s·(10h + a·s)·2 gives {article / GB:.2f} GB: Korthikanti's "
                 f"count is {total / article:.1f}× larger.")
    return "\n".join(lines)


@_reveals("08.selective", "08.full-saving")
def _selective() -> str:
    from ...canvases.memory import recompute_rows
    GB = 1e9
    g, rows = recompute_rows("gpt3-175b", tp=8, sp="on")
    L, h, s, v = g.layers, g.hidden, g.seq, g.vocab
    none = rows[0][1]
    lines = [f"{rc:9s} {byts / GB:6.3f} GB/layer  ({1 - byts / none:5.1%} less)  +{extra:5.1%} "
             f"FLOPs (pplab count)" for rc, byts, extra in rows]
    kor = (s / (6 * h)) / (1 + s / (6 * h) + v / (12 * L * h))
    lines.append(f"Korthikanti's selective overhead (s/6h)/(1 + s/6h + v/12Lh) = {kor:.1%}")
    _, no_sp = recompute_rows("gpt3-175b", tp=8, sp="off")
    lines.append(f"without SP (TP 8): selective {1 - no_sp[1][1] / no_sp[0][1]:.1%} less, the "
                 f"attention term 10 of 23·s·b·h (the replicated 10·s·b·h stays)")
    assert abs(1 - rows[1][1] / none - 80 / 114) < 1e-9
    assert abs(1 - rows[2][1] / none - (1 - 2 / 14.25)) < 1e-9
    assert abs(1 - no_sp[1][1] / no_sp[0][1] - 10 / 23) < 1e-9
    return "\n".join(lines)
