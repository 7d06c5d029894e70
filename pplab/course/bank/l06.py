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
        options=(Option("One whole microbatch: it turns each one around at once",
                        "Its W passes wait, and a pending W still keeps part of its "
                        "microbatch."),
                 Option("Four whole microbatches: each pending W keeps all of its own",
                        "After I, only what the weight gradients need stays: a pending W is "
                        "lighter than a whole microbatch."),
                 Option("One whole and three waiting for W, which keep only a part",
                        "Rank r postpones up to r of its Ws: three wait on the last rank, and "
                        "a pending W keeps only what the weight gradients need, less than a "
                        "whole microbatch.", True),
                 Option("Seven microbatches: ZB-H1 runs ahead up to 2P − 1 of them",
                        "2P − 1 is ZB-H2's cap; ZB-H1 keeps 1F1B's P.")),
        explain="The reveal prints whole and pending microbatches per rank at its peak, then "
                "the bytes for GPT-3's layer shapes."),
    Question(
        "06.dualpipe-m", "predict", "choice",
        "DualPipe at P = 8 (F = 1, B = 2, W = 1, F&B = 3): you double M from 32 to 64. The idle "
        "time per rank…",
        options=(Option("halves: the fill and drain are spread over twice the work",
                        "(P−1)/(2M) — the formula in the article From GPipe to DualPipe — is a "
                        "share of the step, and not DeepSeek's."),
                 Option("stays the same: the fill and drain do not grow with M",
                        "Table 2's DualPipe bubble has no M in it: a fixed cost per step.",
                        True),
                 Option("doubles: twice the microbatches wait at twice the turns",
                        "Each microbatch turns once per direction; the wait at the ends does "
                        "not grow with M.")),
        explain="Only the percentage falls, because the step gets longer."),
    Question(
        "06.q-why-w", "quiz", "choice",
        "Why can W be postponed but not I?",
        options=(Option("The previous stage waits for I; no one needs W until the optimizer",
                        "Postponing W costs memory, not time.", True),
                 Option("W is cheaper than I, so it fits into the gaps that are left",
                        "Their cost is not the reason; their consumers are."),
                 Option("I does not need the activations, so W must keep them anyway",
                        "Both need activations: I the saved inputs' partners, W the inputs."))),
    Question(
        "06.q-dualpipe-cost", "quiz", "choice",
        "What does DualPipe pay for its small bubble (DeepSeek-V3, Table 2)?",
        options=(Option("Two copies of the parameters and P + 1 microbatches' activations",
                        "One copy per direction; the activations of P + 1.", True),
                 Option("Nothing: a pair's overlap is free, and so is the second direction",
                        "The second direction needs a second copy of every stage."),
                 Option("Twice the compute: each microbatch runs down both directions",
                        "Each microbatch is computed once, in one direction."))),
)
