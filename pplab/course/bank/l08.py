"""Lesson 08: activations, sequence parallelism, recomputation."""
from ...memory.activations import layer_activation_bytes
from ..questions import Option, Question


def _saving(recompute: str) -> float:
    """% of a GPT-3 175B layer's activations (TP 8 with SP) that ``recompute`` saves."""
    none = layer_activation_bytes(2048, 1, 12288, 96, 8, True, "none")
    kept = layer_activation_bytes(2048, 1, 12288, 96, 8, True, recompute)
    return 100 * (1 - kept / none)


QUESTIONS = (
    Question(
        "08.layer-gb", "predict", "number",
        "One Llama-3-70B-sized layer (s = 4096, b = 1, h = 8192, a = 64), 16-bit activations, "
        "no parallelism, no recomputation. GB kept for the backward?",
        answer=lambda: layer_activation_bytes(4096, 1, 8192, 64) / 1e9, unit="GB",
        source="Korthikanti et al.'s formula",
        traps=((2.82, "2.82 GB is b·s·(10h + a·s)·2, the estimate of the article Pipeline "
                      "Parallelism: From GPipe to DualPipe, which drops most terms."),),
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
        "input and re-runs the whole forward in the backward. What share of the activation "
        "memory does it save, in %?",
        answer=lambda: _saving("full"), unit="%", source="Korthikanti et al.'s formula",
        traps=((100.0, "The layer's input stays, 2 bytes a value, sharded by SP."),
               (100 * 80 / 114, "That is selective recomputation; full keeps even less.")),
        explain="It keeps only the layer's input, 2 bytes a value sharded over the 8 TP ranks: "
                "2 of the 14.25 bytes per token and hidden unit that TP + SP keep without "
                "recomputation."),
    Question(
        "08.q-tp-not", "quiz", "choice",
        "Which part of a layer's activations does TP alone not divide?",
        options=(Option("The LayerNorm and dropout inputs outside the TP region",
                        "10·s·b·h, replicated on every TP rank; sequence parallelism splits "
                        "them along the sequence.", True),
                 Option("The attention scores of the heads each rank holds",
                        "TP splits the heads, so the scores too."),
                 Option("The inputs of the MLP's two matrix multiplies",
                        "They sit inside the TP region: each rank keeps its share."))),
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
