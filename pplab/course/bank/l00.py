"""Lesson 00: set-up and a first run."""
from ..measure import timeline
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "00.first-makespan", "predict", "number",
        "1F1B with P = 4 ranks and M = 8 microbatches; a forward costs 1, a backward 2. One rank "
        "alone would need 8 × 3 = 24. How long does the pipelined step take?",
        answer=lambda: timeline("1f1b", 4, 8).makespan, tol=0.0,
        traps=((24, "24 would need every rank busy from the first instant to the last."),
               (96, "96 is one device doing all four ranks' work.")),
        explain="The ranks wait for each other at the start and the end: 9 units of fill and "
                "drain on top of the 24 units of work. Lessons 02–04 take that apart."),
    Question(
        "00.busiest-memory", "predict", "choice",
        "In that pipeline, which rank keeps the most microbatches' activations alive at once?",
        options=(Option("Rank 3: the last rank also holds the loss and the logits",
                        "The last rank turns each microbatch around at once: its backward "
                        "starts right after its forward, so it holds one."),
                 Option("Rank 0: its backwards come back after the longest round trip",
                        "Rank 0 starts the most forwards before its first backward returns.",
                        True),
                 Option("Every rank: each one runs the same forwards and backwards",
                        "Same work, but not at the same times: the schedule treats ranks "
                        "differently (lesson 04 counts them).")),
        explain="The simulator's per-rank peak in flight falls from the first rank to the last."),
    Question(
        "00.grad-error", "predict", "choice",
        "The real 4-process run trains the same tiny model as one process would. How close are "
        "the pipeline's gradients to the single-process ones (largest relative difference)?",
        options=(Option("Exactly 0: the same model sees the same data",
                        "The pipeline adds the microbatch gradients in another order, and float "
                        "addition is not associative."),
                 Option("About 1e-7: the same sums, added in another order",
                        "Float round-off, nothing more.", True),
                 Option("About 1e-2: a pipeline only approximates the gradient",
                        "A pipeline that flushes before the optimizer step computes exactly the "
                        "full-batch gradient; 1e-2 would mean a bug."),
                 Option("About 1: each microbatch sees weights updated by the last",
                        "That would be stepping the optimizer after every microbatch; here it "
                        "steps once, after the flush.")),
        source="a real run",
        explain="The pipeline adds the same microbatch gradients in another order: float "
                "round-off. The measurement checks it in one process; the panel below, across "
                "four."),
    Question(
        "00.q-bubble", "quiz", "choice",
        "What is the bubble?",
        options=(Option("Memory a rank keeps for the activations of its backward",
                        "That is the activations in flight — the other thing a schedule "
                        "decides."),
                 Option("Time spent sending activations and gradients between ranks",
                        "Even with free communication a pipeline has a bubble."),
                 Option("Time a rank sits idle, waiting for inputs or gradients",
                        "It comes from the order of the work, not from slow hardware.", True))),
)
