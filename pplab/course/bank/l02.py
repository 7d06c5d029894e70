"""Lesson 02: naive model parallelism and the bubble."""
from ..measure import bubble_pct, timeline
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "02.naive-makespan", "predict", "number",
        "Naive pipeline, P = 4 ranks, one batch, forward 1 and backward 2 time units per rank. "
        "How long is the step (the makespan)?",
        answer=lambda: timeline("naive", 4, 1).makespan, tol=0.01,
        traps=((3, "3 is one rank's own work; the others wait for it in turn."),
               (6, "6 counts the forward chain only: the backward also runs one rank at a time.")),
        explain="The forward visits the 4 ranks one after another (4 × 1), then the backward "
                "comes back the same way (4 × 2): 12, while each rank works only 3 of them."),
    Question(
        "02.naive-idle-p8", "predict", "number",
        "Naive pipeline with P = 8 ranks and one batch. What share of all rank-time is idle "
        "(in %)?",
        answer=lambda: bubble_pct("naive", 8, 1), unit="%", tol=0.01,
        traps=((7 / 15 * 100, "7/15 is the CS336 lesson page's (P−1)/(2P−1): it counts P + P − 1 "
                              "slots, but one rank is busy in only 2 of the 2P slots of a "
                              "step."),),
        explain="The step takes P·(tf + tb) and each rank works tf + tb of it: the idle share "
                "is (P−1)/P = 7/8."),
    Question(
        "02.ratio-to-ideal", "predict", "number",
        "Same naive pipeline, P = 4. How many times the ideal step time (all ranks busy all "
        "the time) is the bubble itself? (bubble ÷ ideal, as a plain number)",
        answer=lambda: timeline("naive", 4, 1).bubble_ratio, tol=0.01,
        traps=((0.75, "0.75 is the bubble ÷ total; here we divide by the ideal time, 3."),),
        explain="Ideal: 3 units. Step: 12. The bubble, 9 units, is 3 = P − 1 times the ideal."),
    Question(
        "02.q-more-ranks", "quiz", "choice",
        "You double the ranks of a naive pipeline from 4 to 8 (same model, same batch). "
        "What happens to the step time?",
        options=(Option("It halves: twice the devices share the same work",
                        "Only one rank works at a time; the work is still done one stage "
                        "after another."),
                 Option("It doubles: the batch now crosses twice the hops",
                        "Without communication costs the hops are free; the total work is the "
                        "same."),
                 Option("It stays: the same work still runs one rank at a time",
                        "Each rank does half as much, and they take turns.", True)),
        explain="Naive model parallelism buys memory (each rank holds 1/P of the layers), not "
                "speed."),
    Question(
        "02.q-idle-p5", "quiz", "number",
        "Naive pipeline, P = 5: the idle share of rank-time, in %?",
        answer=80.0, unit="%", tol=0.01,
        traps=((100 * 4 / 9, "That is (P−1)/(2P−1), the CS336 page's slip: use (P−1)/P."),),
        hint="Each rank is busy tf + tb out of P·(tf + tb)."),
)

#: a question's old id -> its id now (a progress file that recorded the old one keeps it)
RENAMED = {"02.q-idle-p2": "02.q-idle-p5"}


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals
from ...registry import make_schedule
from ...sim import Costs, simulate


@_reveals("02.naive-makespan")
def _naive_makespan() -> list:
    from ...draw import draw_timeline
    tl = simulate(make_schedule("naive", P=4, M=1), Costs(tf=1, tb=2))
    assert tl.makespan == 4 * (1 + 2) and tl.busy[0] == 1 + 2
    return [f"naive, P = 4, one batch: makespan {tl.makespan:g}; each rank busy "
            f"{tl.busy[0]:g} of it",
            draw_timeline(tl, metrics=False, title="naive P=4 M=1")]


@_reveals("02.naive-idle-p8")
def _naive_idle() -> str:
    lines = [" P  simulated idle share   (P-1)/P   the page's (P-1)/(2P-1)"]
    for P in (1, 2, 4, 8):
        idle = simulate(make_schedule("naive", P=P, M=1)).bubble_fraction
        assert abs(idle - (P - 1) / P) < 1e-12
        assert P == 1 or abs(idle - (P - 1) / (2 * P - 1)) > 0.15
        lines.append(f"{P:2d}  {idle:20.3f}   {(P - 1) / P:7.3f}   {(P - 1) / (2 * P - 1):13.3f}")
    lines += [
        "At any moment exactly one rank works: the step takes P·(tf + tb), and each rank is "
        "busy only tf + tb of it, so the idle share is (P−1)/P: 7/8 = 87.5% at P = 8.",
        "The page's slip: the CS336 lesson page derives the bubble of one microbatch as "
        "(P−1)/(P+P−1) = (P−1)/(2P−1), \"7/15 = 47% at P = 8\". Their own general formula, "
        "(P−1)/(m+P−1), gives (P−1)/P at m = 1, as the simulator does. The slip counts 2P − 1 "
        "time slots, but there are as many backward slots as forward ones, and each rank is "
        "busy in only two of them."]
    return "\n".join(lines)


@_reveals("02.ratio-to-ideal")
def _naive_ratio() -> str:
    tl = simulate(make_schedule("naive", P=4, M=1))
    assert tl.bubble_ratio == 4 - 1 and tl.bubble_fraction == 3 / 4
    return (f"naive, P = 4: bubble ÷ total {tl.bubble_fraction:.3f}, bubble ÷ ideal "
            f"{tl.bubble_ratio:.3f}\n"
            f"One idle time, two numbers: {tl.bubble_fraction:.0%} of the hardware-time is "
            f"wasted, and the bubble alone lasts P − 1 = {tl.bubble_ratio:g} times the ideal "
            f"step, on top of it. A bubble means nothing until you say which denominator it "
            f"uses.")
