"""Lesson 06: zero bubble and DualPipe."""
from ..measure import idle_per_rank
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "06.zbh1-idle", "predict", "number",
        "P = 4, M = 12, tf = 1, full backward tb = 2 of which the weight part tw = 1. 1F1B idles "
        "(P−1)(tf+tb) = 9 per rank. How much does ZB-H1 idle per rank?",
        answer=lambda: idle_per_rank("zb-h1", 4, 12, 1, 2, 1), tol=0.0,
        traps=((9, "That is 1F1B: ZB-H1 fills part of the drain with postponed W passes."),
               (0, "Zero needs ZB-H2's extra memory or ZB-V's placement.")),
        explain="(P−1)(tf + tb − 2tw) = 3 · 1: a third of 1F1B's bubble."),
    Question(
        "06.zbh1-memory", "predict", "choice",
        "ZB-H1 at P = 4: at its peak, what does the last rank (rank 3) hold?",
        options=(Option("One microbatch, like 1F1B", "Rank r postpones up to r W passes, and "
                        "a pending W still needs memory."),
                 Option("4 whole microbatches, like rank 0", "That counts a pending W as a whole "
                        "microbatch; after I only what the weight gradients need stays."),
                 Option("1 whole microbatch and 3 pending Ws (the linear layers' inputs and "
                        "output gradients)", "Zero Bubble's worker i holds (P − i + 1)·M_B + "
                        "(i − 1)·M_W, with M_W = 32·s·b·h per layer.", True),
                 Option("7 microbatches", "That is ZB-H2's 2P − 1 cap.")),
        explain="The reveal prints whole and pending microbatches per rank at its peak, then "
                "the bytes for GPT-3's layer shapes."),
    Question(
        "06.dualpipe-m", "predict", "choice",
        "DualPipe at P = 8 (F = 1, B = 2, W = 1, F&B = 3): you double M from 32 to 64. The idle "
        "time per rank…",
        options=(Option("halves, as (P−1)/(2M) says", "(P−1)/(2M) is a blog's formula, not "
                        "DeepSeek's."),
                 Option("stays the same", "(P/2−1)(F&B + B − 3W) per step, whatever M.", True),
                 Option("doubles", "The fill and drain do not grow with M.")),
        explain="Only the percentage falls, because the step gets longer."),
    Question(
        "06.q-why-w", "quiz", "choice",
        "Why can W be postponed but not I?",
        options=(Option("The previous stage needs I to start its backward; W is needed only at "
                        "the optimizer step", "Postponing W costs memory, not time.", True),
                 Option("W is cheaper than I", "Their cost is not the reason; their consumers "
                        "are."),
                 Option("I does not need activations", "Both need them."))),
    Question(
        "06.q-dualpipe-cost", "quiz", "choice",
        "What does DualPipe pay for its small bubble?",
        options=(Option("Two copies of the parameters, P + 1 activations, M ≥ 2P even",
                        "DeepSeek-V3 Table 2.", True),
                 Option("Nothing: the overlap is free", "The overlap needs a second direction, "
                        "hence a second copy of every stage."),
                 Option("Twice the compute", "Each microbatch is computed once."))),
)
