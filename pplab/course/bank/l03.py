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
        "03.smallest-m", "predict", "number",
        "P = 8 (the lecture's 512-GPU example). What is the smallest M that brings the bubble "
        "÷ total under 20%?",
        answer=lambda: smallest_M(8, 0.20), tol=0.0,
        traps=((32, "32 works (17.9%), but it is not the smallest."),
               (36, "36 is the answer for the bubble ÷ ideal, (P−1)/M < 0.2.")),
        explain="(P−1)/(M+P−1) < 0.2 ⇔ M > 4(P−1) = 28, so M = 29 (19.4%). Ask which "
                "denominator a target uses: ÷ ideal needs M = 36."),
    Question(
        "03.remat-cost", "predict", "choice",
        "GPipe's re-materialization re-runs each microbatch's forward during its backward. With "
        "a backward costing two forwards, how much compute does it add?",
        options=(Option("About 2×: every forward runs twice.", "The forward runs twice, but "
                        "the backward, twice as long, runs once: 3 → 4 units."),
                 Option("About +33%", "One extra forward on top of F + B = 3 units.", True),
                 Option("About +5%", "That is roughly selective recomputation (lesson 08), "
                        "which re-runs only the attention core."),
                 Option("Nothing: it hides in the bubble", "The re-run sits on the critical "
                        "path of every backward.")),
        explain="The simulator with tb = 3 (2 + the re-run forward) instead of 2 gives a step "
                "33% longer at large M; Korthikanti et al. measured +36–39% for full "
                "recomputation of GPT layers (their Table 4)."),
    Question(
        "03.forget-1-over-m", "predict", "choice",
        "You accumulate gradients over M = 4 microbatches but forget to scale each loss by 1/M. "
        "The accumulated gradient is…",
        options=(Option("the same: the optimizer normalises it", "SGD and Adam's first step "
                        "scale differently; the gradient itself is M times too large."),
                 Option("M = 4 times the full-batch gradient", "Four mean-loss gradients are "
                        "summed instead of averaged.", True),
                 Option("1/M of the full-batch gradient", "That would be dividing twice.")),
        explain="The relative error printed by accumulation_error is M − 1 = 3 without 1/M."),
    Question(
        "03.q-two-denominators", "quiz", "number",
        "P = 8, M = 8, GPipe. What share of the hardware-time is idle (÷ total, in %)?",
        answer=7 / 15 * 100, unit="%",
        traps=((87.5, "87.5% is ÷ ideal, (P−1)/M = 7/8: how much longer than ideal the step "
                      "is."),),
        hint="(P−1)/(M+P−1)."),
    Question(
        "03.q-which-m", "quiz", "choice",
        "A report says \"bubble 25%\" at P = 4. Which M did they use?",
        options=(Option("M = 12", "Only if 25% is ÷ ideal, (P−1)/M."),
                 Option("M = 9", "Only if 25% is ÷ total, (P−1)/(M+P−1)."),
                 Option("It depends on the denominator: 9 (÷ total) or 12 (÷ ideal)",
                        "A bubble number without its denominator is ambiguous.", True))),
    Question(
        "03.q-remat-m1", "quiz", "choice",
        "GPipe's re-materialization at M = 1: how much activation memory does it save?",
        options=(Option("Nothing: it keeps the input and re-runs the whole partition",
                        "At M = 1 the re-run holds every layer's activations anyway.", True),
                 Option("A factor M", "With M = 1 there is no factor to gain."),
                 Option("All of it", "The backward still needs the re-run activations."))),
)
