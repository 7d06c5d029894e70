"""Lesson 03: GPipe — microbatches, two denominators, accumulation, re-materialization."""
from ..measure import bubble_pct, smallest_M
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "03.gpipe-bubble", "predict", "number",
        "GPipe, P = 4, M = 6 microbatches. What share of all rank-time is idle (in %)?",
        answer=lambda: bubble_pct("gpipe", 4, 6), unit="%",
        traps=((50.0, "50% is (P−1)/M, the bubble ÷ ideal: a different denominator."),
               (75.0, "75% is the naive pipeline's: microbatches let ranks overlap.")),
        explain="Fill and drain still cost (P−1)(tf+tb) per rank, but the useful work is now "
                "M·(tf+tb): (P−1)/(M+P−1) = 3/9 of the total."),
    Question(
        "03.remat-cost", "predict", "choice",
        "GPipe's re-materialization re-runs each microbatch's forward during its backward. With "
        "a backward costing two forwards, how much compute does it add?",
        options=(Option("About 2×: every forward now runs twice",
                        "The forward runs twice, but the backward, twice as long, runs once: "
                        "3 → 4 units."),
                 Option("About a third more: one forward more per three units",
                        "One extra forward on top of F + B = 3 units.", True),
                 Option("About a twentieth more: it re-runs only the attention core",
                        "That is roughly selective recomputation (lesson 08); GPipe re-runs "
                        "the whole partition."),
                 Option("Nothing: the re-run hides in the pipeline's idle time",
                        "Some of its time can hide, if it is scheduled before its gradient "
                        "arrives; its compute, one forward per microbatch, is still done.")),
        explain="Each microbatch's F + B = 3 units gain one forward: 4 units of compute. How "
                "much of that lengthens the step depends on when the re-runs are scheduled."),
    Question(
        "03.forget-1-over-m", "predict", "choice",
        "You accumulate gradients over M = 4 microbatches but forget to scale each loss by 1/M. "
        "The accumulated gradient is…",
        options=(Option("the same: the optimizer's step normalises its size",
                        "SGD and Adam's first step scale differently; the gradient itself is "
                        "M times too large."),
                 Option("4 times the full-batch one: four sums, no mean",
                        "Four mean-loss gradients are summed instead of averaged.", True),
                 Option("a quarter of the full-batch one: each loss is too small",
                        "Each microbatch's loss is its own mean; nothing divides it again.")),
        explain="Each microbatch's loss is already a mean over its own samples; summing four "
                "such gradients without 1/M gives four times their mean, a relative error of "
                "M − 1 = 3."),
    Question(
        "03.q-two-denominators", "quiz", "number",
        "P = 8, M = 12, GPipe. What share of the hardware-time is idle (÷ total, in %)?",
        answer=7 / 19 * 100, unit="%",
        traps=((700 / 12, "That is ÷ ideal, (P−1)/M = 7/12: how much longer than ideal the "
                          "step is."),),
        hint="(P−1)/(M+P−1)."),
    Question(
        "03.smallest-m", "quiz", "number",
        "P = 8 (the CS336 lecture's 512-GPU example). What is the smallest M that brings the "
        "bubble ÷ total under 20%?",
        answer=lambda: smallest_M(8, 0.20), tol=0.0,
        traps=((32, "32 works (17.9%), but it is not the smallest."),
               (36, "36 is the answer for the bubble ÷ ideal, (P−1)/M < 0.2.")),
        hint="Solve (P−1)/(M+P−1) < 0.2 for M, then take the next whole number.",
        explain="(P−1)/(M+P−1) < 0.2 ⇔ M > 4(P−1) = 28, so M = 29 (19.4%). Ask which "
                "denominator a target uses: ÷ ideal needs M = 36."),
    Question(
        "03.q-which-m", "quiz", "choice",
        "A report says \"bubble 25%\" at P = 4. Which M did they use?",
        options=(Option("M = 12: a bubble is always quoted ÷ the ideal time",
                        "Only if 25% is ÷ ideal, (P−1)/M; the GPipe paper divides by the "
                        "total."),
                 Option("M = 9: a bubble is always quoted ÷ the total time",
                        "Only if 25% is ÷ total, (P−1)/(M+P−1); Megatron-LM divides by the "
                        "ideal."),
                 Option("M = 9 or 12: the report must say which it divides by",
                        "A bubble without its denominator is ambiguous.", True))),
    Question(
        "03.q-remat-m1", "quiz", "choice",
        "GPipe's re-materialization at M = 1: how much activation memory does it save?",
        options=(Option("Nothing: the re-run holds the whole partition's activations",
                        "At M = 1 the one microbatch's activations are all needed at once "
                        "during its re-run.", True),
                 Option("A factor M: one microbatch's activations instead of M",
                        "With M = 1 there is no factor to gain."),
                 Option("All of it: the backward recomputes what it needs",
                        "The backward still needs the re-run activations, all at once."))),
)
