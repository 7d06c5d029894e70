"""Lesson 08: activations, sequence parallelism, recomputation."""
from ...memory.activations import layer_activation_bytes
from ..questions import Option, Question


def _selective_saving() -> float:
    none = layer_activation_bytes(2048, 1, 12288, 96, 8, True, "none")
    sel = layer_activation_bytes(2048, 1, 12288, 96, 8, True, "selective")
    return 100 * (1 - sel / none)


QUESTIONS = (
    Question(
        "08.layer-gb", "predict", "number",
        "One Llama-3-70B-sized layer (s = 4096, b = 1, h = 8192, a = 64), 16-bit activations, "
        "no parallelism, no recomputation. GB kept for the backward?",
        answer=lambda: layer_activation_bytes(4096, 1, 8192, 64) / 1e9, unit="GB",
        source="Korthikanti et al.'s formula",
        traps=((2.82, "2.82 GB is a blog's b·s·(10h + a·s)·2, which drops most terms."),),
        explain="s·b·h·(34 + 5·a·s/h): the attention term 5·a·s/h = 160 dominates the 34."),
    Question(
        "08.selective", "predict", "number",
        "GPT-3 175B (a = 96, s = 2048, h = 12288), TP = 8 with SP. What share of the activation "
        "memory does selective recomputation save, in %?",
        answer=_selective_saving, unit="%", source="Korthikanti et al.'s formula",
        traps=((100 * 10 / 23, "That is TP without SP: the replicated 10·s·b·h stays."),),
        explain="With TP + SP the attention term is 80/t of the 114/t total."),
    Question(
        "08.full-cost", "predict", "choice",
        "Full recomputation keeps only each layer's input and re-runs the forward in the "
        "backward. How much compute does it add?",
        options=(Option("+100%", "It re-runs the forward only, not the backward."),
                 Option("About +33%", "One extra forward on top of F + B ≈ 3 forwards.", True),
                 Option("About +3%", "That is selective recomputation.")),
        explain="Megatron-LM's 96·B·s·L·h² FLOPs form already includes it: 72 without, 96 "
                "with, a ratio of 4/3."),
    Question(
        "08.q-tp-not", "quiz", "choice",
        "Which part of a layer's activations does TP alone not divide?",
        options=(Option("The 10·s·b·h of LayerNorm and dropout inputs", "Sequence parallelism "
                        "splits them along the sequence.", True),
                 Option("The attention scores", "TP splits the heads, so the scores too."),
                 Option("The MLP inputs", "They sit inside the TP region."))),
    Question(
        "08.q-double-s", "quiz", "choice",
        "Doubling s at fixed b: how do the no-recompute and selective rows scale?",
        options=(Option("Selective doubles; no-recompute more than doubles", "The attention "
                        "term grows as s².", True),
                 Option("Both double", "The a·s² scores grow faster."),
                 Option("Both quadruple", "The linear terms grow with s only."))),
)
