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
                 Option("A few times 1e-7: the same sums, added in another order",
                        "Float round-off, nothing more: fp32 keeps about 7 significant "
                        "digits.", True),
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


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals
from ...registry import make_schedule
from ...sim import Costs, simulate


@_reveals("00.first-makespan")
def _first_makespan() -> list:
    from ...draw import draw_timeline
    P, M, tf, tb = 4, 8, 1, 2
    tl = simulate(make_schedule("1f1b", P, M), Costs(tf=tf, tb=tb))
    assert tl.makespan == M * (tf + tb) + (P - 1) * (tf + tb) == 33
    return [f"1F1B, P = {P}, M = {M}, tf = {tf}, tb = {tb}: makespan {tl.makespan:g} = "
            f"{M * (tf + tb)} units of work per rank + {(P - 1) * (tf + tb)} of fill and drain; "
            f"bubble {tl.bubble_fraction:.1%} of the total, {tl.bubble_ratio:.1%} of the ideal",
            draw_timeline(tl)]


@_reveals("00.busiest-memory")
def _busiest_memory() -> str:
    peaks = simulate(make_schedule("1f1b", 4, 8)).peak_inflight
    assert list(peaks) == [4, 3, 2, 1]
    return (f"1F1B, P = 4, M = 8: peak in-flight microbatches per rank {list(peaks)}. Rank 0 "
            f"starts {peaks[0]} forwards before its first backward comes back; the last rank "
            f"turns each microbatch around at once.")


@_reveals("00.grad-error")
def _grad_error() -> str:
    from ...probe.env import browser_note, in_browser
    if in_browser():
        return browser_note("the accumulation check in pplab.runtime.accumulate")
    from ...runtime.accumulate import accumulation_error
    err = accumulation_error(8)
    assert err < 1e-5
    return (f"One process, the course's tiny model in fp32: the gradient summed over 8 "
            f"microbatches (each loss × 1/8) against one backward of the whole batch differs "
            f"by at most {err:.1e} (relative): float round-off, the same sums added in another "
            f"order. The panel below measures the same between the 4-process pipeline and one "
            f"process.")
