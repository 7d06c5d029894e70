"""Lesson 04: 1F1B — the same bubble, less memory, measured in flight."""
from ...registry import make_schedule
from ..measure import timeline
from ..questions import Option, Question, order_rows

QUESTIONS = (
    Question(
        "04.order-grid", "predict", "order",
        "Sketch 1F1B for P = 3 ranks and M = 4 microbatches: one line per rank, each rank's "
        "forwards (F0…F3) and backwards (B0…B3) in the order it runs them.",
        answer=lambda: order_rows(make_schedule("1f1b", 3, 4)), source="pplab's 1F1B",
        explain="Each rank starts with a few forwards, then alternates one forward and one "
                "backward, then drains its backwards; the measurement shows every rank's row."),
    Question(
        "04.peaks", "predict", "choice",
        "1F1B with P = 6 ranks and only M = 4 microbatches. How many microbatches' activations "
        "does each rank hold at its peak (ranks 0 to 5)?",
        options=(Option("6, 6, 6, 6, 6, 6", "\"P microbatches on every stage\" (the article "
                        "From GPipe to DualPipe): no rank can hold more than the M there are."),
                 Option("6, 5, 4, 3, 2, 1", "P − r is the warm-up's reach, but only M = 4 "
                        "microbatches exist."),
                 Option("4, 4, 4, 3, 2, 1", "Rank r starts P − r forwards before its first "
                        "backward comes back, and never more than M: min(P − r, M).", True),
                 Option("1, 1, 1, 1, 1, 1", "\"One microbatch at a time\" (the CS336 lecture) "
                        "holds only for the last rank.")),
        explain="Rank r holds min(P − r, M) microbatches at its peak."),
    Question(
        "04.same-bubble", "predict", "number",
        "GPipe at P = 5, M = 10 takes 42 time units (tf = 1, tb = 2). How long does 1F1B take "
        "at the same P and M?",
        answer=lambda: timeline("1f1b", 5, 10).makespan, tol=0.0,
        traps=((30, "30 is the ideal, M·(tf + tb): the fill and drain are still there."),),
        explain="1F1B reorders each rank's work but keeps the fill and drain: same makespan, "
                "same bubble, less memory."),
    Question(
        "04.fastest-m", "predict", "choice",
        "P = 8, a fixed batch of work split into M microbatches, and every forward and "
        "backward carries a fixed extra cost, fitted to the Megatron-LM guide's step times at "
        "M = 1 and M = 8 (a model of launch overhead and small-GEMM inefficiency). Which M gives "
        "the model's shortest step?",
        options=(Option("M = 8: beyond P microbatches the extra ones wait in a queue",
                        "1F1B does not queue microbatches: its bubble keeps shrinking with M. "
                        "The guide measured M = 8 fastest, but the fitted constant cost still "
                        "favours M = 16."),
                 Option("M = 16: past it the fixed costs outweigh the smaller bubble",
                        "The fixed cost per action grows with M while the bubble's gain "
                        "shrinks; the guide measured M = 16 slower, so a constant cost is not "
                        "the whole story.", True),
                 Option("M = 32: the bubble keeps shrinking as M grows, so more is faster",
                        "Without the fixed cost, yes."),
                 Option("M = 4: small microbatches leave the GPU's matmuls half idle",
                        "The fitted cost does grow with M, but M = 4 still has twice M = 8's "
                        "bubble.")),
        explain="The measurement fits the fixed cost to the guide's two step times and sweeps M."),
    Question(
        "04.q-switch", "quiz", "choice",
        "You switch GPipe to 1F1B at P = 4, M = 12. What happens?",
        options=(Option("Same makespan; rank 0 holds 4 microbatches instead of 12",
                        "Same bubble, min(P − r, M) in flight.", True),
                 Option("Shorter makespan; every rank still holds all 12 of them",
                        "The bubble is the same; the memory changes."),
                 Option("Same makespan; every rank holds 4 microbatches at its peak",
                        "Only rank 0 holds P; rank r holds P − r."))),
    Question(
        "04.q-warmup", "quiz", "number",
        "1F1B, P = 12: how many warm-up forwards does rank 2 run before the steady state?",
        answer=9, tol=0.0,
        traps=((12, "12 = pp_size is what a framework's documentation says; rank r warms up "
                    "with P − r − 1."),
               (10, "10 counts the first steady-state forward too.")),
        hint="P − r − 1."),
)
