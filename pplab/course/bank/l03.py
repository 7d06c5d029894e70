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
                        "The gradient itself is M times too large. Adam's update happens to "
                        "be nearly blind to a constant factor (up to its ε), but an SGD "
                        "step and gradient clipping by norm are not."),
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
        "P = 8 (the CS336 lesson page's 512-GPU example). What is the smallest M that brings the "
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


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals
from ...registry import make_schedule
from ...sim import Costs, simulate


@_reveals("03.gpipe-bubble")
def _gpipe_bubble() -> list:
    from ...draw import draw_timeline
    from ..measure import idle_split
    P, M, tf, tb = 4, 6, 1, 2
    tl = simulate(make_schedule("gpipe", P, M), Costs(tf=tf, tb=tb))
    assert abs(tl.bubble_fraction - 3 / 9) < 1e-12 and abs(tl.bubble_ratio - 3 / 6) < 1e-12
    lines = [f"GPipe P = {P}, M = {M}: makespan {tl.makespan:g}; bubble "
             f"{tl.bubble_fraction:.1%} of the total, {tl.bubble_ratio:.1%} of the ideal",
             "Where each rank waits:",
             "rank  waits at start  in the middle  at the end"]
    for r, (head, middle, tail) in enumerate(idle_split(tl)):
        assert (head, middle, tail) == (r * tf, (P - 1 - r) * (tf + tb), r * tb)
        lines.append(f"{r:4d}  {head:14g}  {middle:13g}  {tail:10g}")
    lines += [
        "Rank r waits r·tf before its first forward (microbatch 0 crosses r ranks), "
        "(P − 1 − r)(tf + tb) between its last forward and its first backward (the forwards "
        "still travel to the last rank and the backwards come back), and r·tb after its last "
        "backward (the ranks before it still run theirs). The three add up to "
        f"(P − 1)(tf + tb) = {(P - 1) * (tf + tb)} on every rank whatever M is, while the "
        f"work, M·(tf + tb) = {M * (tf + tb)}, grows with M: idle ÷ total = (P − 1)/(M + P − 1) "
        f"= 3/9.",
        "Divided by the work alone, the same idle time is (P − 1)/M = 3/6, the ÷ ideal "
        "figure of Megatron-LM and the Ultra-Scale Playbook; it can exceed 100%, while ÷ "
        "total, the GPipe paper's, cannot.",
        f"At P = {P} for other M, measured and by formula:",
        " M  makespan  idle÷total  (P-1)/(M+P-1)  idle÷ideal  (P-1)/M"]
    for m in (1, 2, 4, 8, 16, 32):
        t = simulate(make_schedule("gpipe", P, m))
        total, ideal = (P - 1) / (m + P - 1), (P - 1) / m
        assert abs(t.bubble_fraction - total) < 1e-12 and abs(t.bubble_ratio - ideal) < 1e-12
        lines.append(f"{m:2d}  {t.makespan:8g}  {t.bubble_fraction:10.3f}  {total:13.3f}  "
                     f"{t.bubble_ratio:10.3f}  {ideal:7.3f}")
    return ["\n".join(lines), draw_timeline(tl)]


@_reveals("03.smallest-m")
def _smallest_m() -> str:
    from ..measure import smallest_M
    lines = []
    for ideal in (False, True):
        M = smallest_M(8, 0.20, ideal=ideal)
        tl = simulate(make_schedule("gpipe", 8, M))
        lines.append(f"÷ {'ideal' if ideal else 'total'}: smallest M = {M} "
                     f"(bubble {tl.bubble_ratio if ideal else tl.bubble_fraction:.1%})")
    assert smallest_M(8, 0.20) == 4 * 7 + 1 and smallest_M(8, 0.20, ideal=True) == 36
    return "\n".join(lines)


@_reveals("03.forget-1-over-m")
def _forget_1_over_m() -> str:
    from ...probe.env import browser_note, in_browser
    if in_browser():
        return browser_note("the accumulation check in pplab.runtime.accumulate")
    from ...runtime.accumulate import accumulation_error
    lines = [" M   loss × 1/M: error vs one batch     loss × 1: error"]
    for M in (2, 4, 8):
        ok, bad = accumulation_error(M), accumulation_error(M, scale_by_1_over_M=False)
        assert ok < 1e-5 and abs(bad - (M - 1)) < 1e-4
        lines.append(f"{M:2d}   {'< 1e-6 (round-off)' if ok < 1e-6 else f'{ok:.1e}':>28s}"
                     f"     {bad:14.2f}")
    lines.append(
        "Scaled by 1/M, the summed gradients are the gradient of the mean loss over the whole "
        "batch, up to float round-off. Unscaled, they add M gradients of means: M times the "
        "full-batch gradient, a relative error of M − 1 (one process, the course's tiny "
        "model). Stepping after every microbatch instead runs later microbatches on other "
        "weights: a different, asynchronous algorithm (PipeDream's), not a faster GPipe. "
        "Lesson 10 checks the scaled sum across real processes; lesson 12 shows torch's "
        "switch for it (scale_grads).")
    return "\n".join(lines)


@_reveals("03.remat-cost")
def _remat_cost() -> str:
    P, M = 4, 64
    plain = simulate(make_schedule("gpipe", P, M), Costs(tf=1, tb=2))
    remat = simulate(make_schedule("gpipe", P, M), Costs(tf=1, tb=3))  # re-run forward + backward
    assert abs(remat.makespan / plain.makespan - 4 / 3) < 1e-9
    ratio = remat.makespan / plain.makespan
    # the last rank runs M forwards, M re-runs, M backwards in series, after (P − 1)·tf of
    # fill, and the last gradient still crosses P − 1 ranks: a floor however early re-runs go
    floor = (P - 1) * 1 + M * (1 + 1 + 2) + (P - 1) * 2
    assert floor == plain.makespan + M * 1 and remat.makespan - floor == (P - 1) * 1
    return "\n".join([
        f"GPipe P = {P}, M = {M}, the re-run charged inside each backward (tb = 2 + 1): "
        f"makespan {plain.makespan:g} → {remat.makespan:g}, ×{ratio:.3f}",
        "The re-run repeats the forward only, once per microbatch, and a backward costs two "
        "forwards: each microbatch's 3 units of work become 4 on every rank, a third more "
        "compute. Charged inside the backward, every re-run waits for its gradient and sits "
        "on the critical path, so the step grows by exactly 4/3 for any P and M: that is "
        "the simulator's assumption.",
        "The GPipe paper (§2.3) points out that a re-run needs only the stored input, not the "
        "gradient, so it can be scheduled earlier, into a rank's wait before its first "
        "backward. The compute added stays a third, and only the waits can absorb it: the "
        "last rank waits not at all, so its M forwards, M re-runs and M backwards run one "
        "after another, and the last gradient still crosses P − 1 ranks. However early the "
        f"re-runs go, the step takes at least (M + P − 1)(tf + tb) + M·tf = {floor} here, "
        f"against {remat.makespan:g}: scheduling them early saves at most (P − 1)·tf = "
        f"{remat.makespan - floor:g} units, so 4/3 is close whenever M is large against P.",
        "Measured: Korthikanti et al. (2022, Reducing Activation Recomputation in Large "
        "Transformer Models) time one layer of their 22B GPT, forward and backward, in "
        "Table 4: full recomputation adds 39%, not the 33% that one more forward in three "
        "predicts, because their backward overlaps its all-reduce with the weight-gradient "
        "matmul and so takes about 1.5 forwards (11.9 ms against 7.7 ms), not 2 (§6.2). For "
        "their 530B and 1T models the same "
        "breakdown (§6.2, Figure 8) gives 36%. Both sit close to the one forward in three "
        "units that the simulator adds."])
