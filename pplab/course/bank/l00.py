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
        options=(Option("Rank 0, the first", "It starts the most forwards before its first "
                        "backward comes back.", True),
                 Option("Rank 3, the last", "The last rank turns each microbatch around at "
                        "once: it holds one."),
                 Option("All the same", "The schedule treats ranks differently: lesson 04.")),
        explain="The simulator's per-rank peak in flight falls from the first rank to the last."),
    Question(
        "00.grad-error", "predict", "choice",
        "The real 4-process run trains the same tiny model as one process would. How close are "
        "the pipeline's gradients to the single-process ones (largest relative difference)?",
        options=(Option("Exactly 0", "The pipeline adds the microbatch gradients in a different "
                        "order, and float addition is not associative."),
                 Option("About 1e-7: float round-off", "Same computation, different order of "
                        "the sums.", True),
                 Option("About 1e-2: pipelines approximate", "A pipeline with a flush computes "
                        "exactly the full-batch gradient; 1e-2 would mean a bug.")),
        source="a real run", explain="Run the panel below and read the gradient error."),
    Question(
        "00.q-bubble", "quiz", "choice",
        "What is the bubble?",
        options=(Option("The time ranks sit idle, waiting for inputs", "It comes from the "
                        "order of the work, not from slow hardware.", True),
                 Option("The memory a rank keeps for its backward", "That is the activations "
                        "in flight — the other thing a schedule decides."),
                 Option("The time spent sending tensors", "Even with free communication a "
                        "pipeline has a bubble."))),
)
