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
        explain="Rank r runs P − r − 1 warm-up forwards, then alternates one forward and one "
                "backward, then drains its backwards."),
    Question(
        "04.peaks", "predict", "choice",
        "1F1B, P = 4, M = 8. How many microbatches' activations does each rank hold at its "
        "peak (ranks 0, 1, 2, 3)?",
        options=(Option("4, 4, 4, 4", "\"P microbatches on every stage\" is a popular claim; "
                        "a later rank gets its first backward back sooner."),
                 Option("4, 3, 2, 1", "min(P − r, M).", True),
                 Option("0, 1, 2, 1", "\"min(k, P − k)\" describes a symmetric shape no 1F1B "
                        "rank has."),
                 Option("1, 1, 1, 1", "\"One microbatch at a time\" holds only for the last "
                        "rank.")),
        explain="Rank r starts P − r forwards before its first backward comes back."),
    Question(
        "04.same-bubble", "predict", "number",
        "GPipe at P = 4, M = 8 takes 33 time units (tf = 1, tb = 2). How long does 1F1B take "
        "at the same P and M?",
        answer=lambda: timeline("1f1b", 4, 8).makespan, tol=0.0,
        traps=((24, "24 is the ideal, M·(tf + tb): the fill and drain are still there."),),
        explain="1F1B reorders each rank's work but keeps the fill and drain: same makespan, "
                "same bubble, less memory."),
    Question(
        "04.fastest-m", "predict", "choice",
        "P = 8, a fixed batch of work split into M microbatches, and every forward and "
        "backward carries a fixed extra cost, fitted to the write-up's step times at M = 1 "
        "and M = 8 (a model of launch overhead and small-GEMM inefficiency). Which M gives "
        "the model's shortest step?",
        options=(Option("M = 8 = P", "The write-up measured M = 8 fastest, but a constant "
                        "cost per action fitted to its M = 1 and M = 8 points still favours "
                        "M = 16: the model misses that ordering."),
                 Option("M = 16", "Past it, the fixed cost per action outweighs the smaller "
                        "bubble (and the write-up measured M = 16 slower: a constant cost is "
                        "not the whole story).", True),
                 Option("M = 32, the largest", "Without the fixed cost, yes.")),
        explain="The reveal fits the fixed cost to the write-up's two step times and sweeps M; "
                "the bubble ÷ ideal keeps falling as (P−1)/M while the fixed costs add up."),
    Question(
        "04.q-switch", "quiz", "choice",
        "You switch GPipe to 1F1B at P = 4, M = 16. What happens?",
        options=(Option("Same makespan; rank 0 holds 4 microbatches instead of 16, rank 3 one",
                        "Same bubble, min(P − r, M) in flight.", True),
                 Option("Shorter makespan, same memory", "The bubble is the same; memory "
                        "changes."),
                 Option("Same makespan, every rank holds 4", "Only rank 0 holds P."))),
    Question(
        "04.q-warmup", "quiz", "number",
        "1F1B, P = 8: how many warm-up forwards does rank 2 run before the steady state?",
        answer=5, tol=0.0,
        traps=((8, "8 = pp_size is what a framework's docs say; rank r warms up with "
                   "P − r − 1."),
               (6, "6 counts the first steady-state forward too.")),
        hint="P − r − 1."),
)
