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
        "1F1B with P = 6 ranks and M = 4 microbatches. How many microbatches' activations "
        "does each rank hold at its peak (ranks 0 to 5)?",
        options=(Option("4, 4, 4, 4, 4, 4", "\"P microbatches on every stage\" (the article "
                        "From GPipe to DualPipe), capped at the M = 4 there are; but rank r "
                        "starts only P − r forwards before its first backward returns, so the "
                        "last ranks hold fewer."),
                 Option("6, 5, 4, 3, 2, 1", "P − r is the warm-up's reach, but only M = 4 "
                        "microbatches exist: no rank can hold more than the M there are."),
                 Option("4, 4, 4, 3, 2, 1", "Rank r starts P − r forwards before its first "
                        "backward comes back, and never more than M: min(P − r, M).", True),
                 Option("1, 1, 1, 1, 1, 1", "\"One microbatch at a time\" (the CS336 lesson page) "
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
        options=(Option("M = 8: the fit passes through the guide's fastest run",
                        "The fit passes through R1 (M = 1) and R4 (M = 8), not through their "
                        "minimum: its constant cost still favours M = 16, while the guide "
                        "measured M = 8 fastest."),
                 Option("M = 16: past it the fixed costs outweigh the smaller bubble",
                        "The fixed cost per action grows with M while the bubble's gain "
                        "shrinks; the guide measured M = 16 slower, so a constant cost is not "
                        "the whole story.", True),
                 Option("M = 32: the bubble keeps shrinking as M grows, so more is faster",
                        "Without the fixed cost, yes."),
                 Option("M = 4: past it the fixed costs already outweigh the smaller bubble",
                        "The fitted cost does grow with M, but M = 4 still has twice M = 8's "
                        "bubble, and the model's fixed cost there is small against it.")),
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


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals
from ...registry import make_schedule
from ...sim import simulate


@_reveals("04.order-grid")
def _order_grid() -> list:
    from ...draw import draw_timeline
    s = make_schedule("1f1b", P=3, M=4)
    return [s.to_text() + "\nEach rank starts with a few forwards (the warm-up), then "
            "alternates one forward and one backward (the steady state), then drains its "
            "remaining backwards.",
            draw_timeline(simulate(s), metrics=False, title="1f1b P=3 M=4")]


@_reveals("04.same-bubble")
def _same_bubble() -> str:
    tls = {name: simulate(make_schedule(name, P=5, M=10)) for name in ("gpipe", "1f1b")}
    assert tls["1f1b"].makespan == tls["gpipe"].makespan == 42
    return "\n".join([f"{name:5s} P=5 M=10: makespan {tl.makespan:g}, bubble "
                       f"{tl.bubble_fraction:.1%} of total" for name, tl in tls.items()] + [
        "The total work and the fill and drain are unchanged, so the bubble is the same: "
        "(P − 1)/(M + P − 1) of the total, lesson 03's GPipe formula. At M = P it is "
        "(P − 1)/(2P − 1), the largest KempnerForge's n_microbatches ≥ pp_size allows (section "
        "5). What changes is how many microbatches each rank keeps alive."])


@_reveals("04.peaks")
def _peaks() -> list:
    from ...draw import draw_inflight
    lines = []
    for P, M in ((6, 4), (4, 8), (8, 3)):
        peaks = simulate(make_schedule("1f1b", P, M)).peak_inflight
        lines += [f"1F1B at P={P} M={M}, peak in flight per rank:",
                  "  rank  measured  min(P-r,M)  claim1:P  claim2:min(k,P-k) "
                  "k=r  k=r+1  claim3:1"]
        for r, peak in enumerate(peaks):
            lines.append(f"  {r:4d}  {peak:8d}  {min(P - r, M):10d}  {P:8d}  {min(r, P - r):21d}"
                         f"  {min(r + 1, P - r - 1):5d}  {1:8d}")
            assert peak == min(P - r, M) >= 1
        # min(k, P − k) gives some stage nothing, whichever way the stages are numbered
        assert 0 in [min(r, P - r) for r in range(P)]
        assert 0 in [min(r + 1, P - r - 1) for r in range(P)]
    lines += [
        "Rank r runs P − r − 1 warm-up forwards and then its first steady-state forward "
        "before its first backward comes back: it holds min(P − r, M) microbatches at its "
        "peak. The first rank holds the most, the last holds one, and when M < P nobody can "
        "hold more than M.",
        "Claim 1 (P on every stage) is true only for rank 0, and only when M ≥ P; claim 2 "
        "gives some stage nothing to hold whichever way the stages are numbered (k = r gives "
        "rank 0 zero, k = r + 1 the last rank), and its shape peaks in the middle where "
        "1F1B's falls from rank 0; claim 3 is true only for the last rank."]
    return ["\n".join(lines), draw_inflight(simulate(make_schedule("1f1b", P=6, M=4)))]


@_reveals("04.fastest-m")
def _fastest_m() -> str:
    from ..measure import fit_fixed_cost, fixed_cost_step
    P, reported = 8, {1: 2920, 8: 875}          # ms per step, the guide's runs R1 and R4
    W, c = fit_fixed_cost(P, reported)
    lines = [f"fitted: work per rank W = {W:.1f} ms, fixed cost per action c = {c:.2f} ms "
             f"(c/W = {c / W:.4f})",
             " M   modelled ms   reported   bubble÷ideal   [no fixed cost]"]
    times = {}
    for M in (1, 2, 4, 8, 16, 32):
        times[M] = fixed_cost_step(P, M, W, c)
        lines.append(f"{M:2d}  {times[M]:11.0f}  {reported.get(M, ''):>9}  {(P - 1) / M:13.3f}"
                     f"   [{fixed_cost_step(P, M, W, 0):6.0f}]")
    assert all(abs(times[M] - t) < 1e-6 for M, t in reported.items())
    assert min(times, key=times.get) == 16 and times[32] > times[8]
    lo, hi = 7 / 256, 7 / 64      # M = 8 beats M = 16 and M = 4 only for 7/256 ≤ c/W ≤ 7/64
    lines.append(f"M = 8 is the fastest only for {lo:.4f} ≤ c/W ≤ {hi:.4f}")
    lines.append(
        f"Fitted to R1 and R4, the fixed cost is about {c / W:.0%} of the work per action "
        f"({c:.1f} ms against {W:.0f} ms). That is enough to make the step slower at M = 32, "
        f"as the guide saw in R6, while the bubble ÷ ideal keeps falling as (P−1)/M: queueing "
        f"is not needed to explain a slowdown. But the same fit puts M = 16 about "
        f"{1 - times[16] / times[8]:.0%} ahead of M = 8, and the guide measured R5 (M = 16) "
        f"slower than R4. A constant cost per action cannot reproduce that ordering together "
        f"with R1 and R4: making M = 8 the fastest needs c/W of at least 7/256, which no "
        f"longer fits R1. What the data point to is a cost that grows faster than a constant "
        f"as the microbatch shrinks (GEMMs at microbatch sizes 2 and 1 run well below peak); "
        f"telling these apart needs a profile of step time against microbatch size.")
    return "\n".join(lines)
