"""Lesson 06: zero bubble and DualPipe."""
from ..measure import idle_per_rank
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "06.zbh1-idle", "predict", "number",
        "P = 4, M = 12, tf = 1, full backward tb = 2 of which the weight part tw = 1. 1F1B idles "
        "(P−1)(tf+tb) = 9 per rank. How much does ZB-H1 idle per rank?",
        answer=lambda: idle_per_rank("zb-h1", 4, 12, 1, 2, 1), tol=0.0,
        traps=((9, "That is 1F1B: ZB-H1 fills part of the drain with postponed W passes."),
               (0, "Even ZB-H2, with up to 2P − 1 microbatches alive, idles (P−1)·tf in a "
                   "flushed step; ZB-H1 keeps 1F1B's memory.")),
        explain="(P−1)(tf + tb − 2tw) = 3 · 1: a third of 1F1B's bubble."),
    Question(
        "06.zbh1-memory", "predict", "choice",
        "ZB-H1 at P = 4: at its peak, what does the last rank (rank 3) hold?",
        options=(Option("One whole microbatch: it turns each one around at once",
                        "Its W passes wait, and a pending W still keeps part of its "
                        "microbatch."),
                 Option("Four whole microbatches: each pending W keeps all of its own",
                        "After I, only what the weight gradients need stays: a pending W is "
                        "lighter than a whole microbatch."),
                 Option("One whole and three waiting for W, which keep only a part",
                        "Rank r postpones up to r of its Ws: three wait on the last rank, and "
                        "a pending W keeps only what the weight gradients need, less than a "
                        "whole microbatch.", True),
                 Option("Seven microbatches: ZB-H1 runs ahead up to 2P − 1 of them",
                        "2P − 1 is ZB-H2's cap; ZB-H1 keeps 1F1B's P.")),
        explain="The reveal prints whole and pending microbatches per rank at its peak, then "
                "the bytes for GPT-3's layer shapes."),
    Question(
        "06.dualpipe-m", "predict", "choice",
        "DualPipe at P = 8 (F = 1, B = 2, W = 1, F&B = 3): you double M from 32 to 64. The idle "
        "time per rank…",
        options=(Option("halves: the fill and drain are spread over twice the work",
                        "(P−1)/(2M) — the formula in the article From GPipe to DualPipe — is a "
                        "share of the step, and not DeepSeek's."),
                 Option("stays the same: the fill and drain do not grow with M",
                        "Table 2's DualPipe bubble has no M in it: a fixed cost per step.",
                        True),
                 Option("doubles: twice the microbatches wait at twice the turns",
                        "Each microbatch turns once per direction; the wait at the ends does "
                        "not grow with M.")),
        explain="Only the percentage falls, because the step gets longer."),
    Question(
        "06.q-why-w", "quiz", "choice",
        "Why can W be postponed but not I?",
        options=(Option("The previous stage waits for I; no one needs W until the optimizer",
                        "Postponing W costs memory, not time.", True),
                 Option("W is cheaper than I, so it fits into the gaps that are left",
                        "Their cost is not the reason; their consumers are."),
                 Option("I does not need the activations, so W must keep them anyway",
                        "Both need stored activations: I those of the nonlinear ops (GeLU, "
                        "softmax, LayerNorm), W each linear layer's input. Their consumers, "
                        "not their inputs, decide."))),
    Question(
        "06.q-dualpipe-cost", "quiz", "choice",
        "What does DualPipe pay for its small bubble (DeepSeek-V3, Table 2)?",
        options=(Option("Two copies of the parameters and P + 1 microbatches' activations",
                        "One copy per direction; the activations of P + 1.", True),
                 Option("Nothing: a pair's overlap is free, and so is the second direction",
                        "The second direction needs a second copy of every stage."),
                 Option("Twice the compute: each microbatch runs down both directions",
                        "Each microbatch is computed once, in one direction."))),
)


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals
from ...registry import make_schedule
from ...sim import Costs, simulate


@_reveals("06.zbh1-idle", "06.zbh1-memory")
def _zbh1() -> str:
    from ...memory.accounting import peak_split
    P, M = 4, 12
    lines = ["tf tb tw   1F1B idle  ZB-H1 idle  (P-1)(tf+tb-2tw)"]
    for tf, tb, tw in ((1, 2, 1), (1, 2, 0.5), (2, 3, 1), (1, 3, 1)):
        one = simulate(make_schedule("1f1b", P, M), Costs(tf=tf, tb=tb, tw=tw))
        zb = simulate(make_schedule("zb-h1", P, M), Costs(tf=tf, tb=tb, tw=tw))
        busy = M * (tf + tb)
        lines.append(f"{tf:2g} {tb:2g} {tw:3g}   {one.makespan - busy:9g}  {zb.makespan - busy:10g}"
                     f"  {(P - 1) * (tf + tb - 2 * tw):16g}")
        assert zb.makespan - busy == (P - 1) * (tf + tb - 2 * tw)
    # at each rank's peak: (whole microbatches, microbatches whose W is still pending)
    split = [(n, w) for _, n, w in peak_split(make_schedule("zb-h1", P, M),
                                             dict.fromkeys(range(P), 1.0),
                                             dict.fromkeys(range(P), 0.5))]
    assert split == [(P - r, r) for r in range(P)]
    lines.append(f"ZB-H1 (whole microbatches, pending Ws) at each rank's peak: {split}")
    why = ("Zero Bubble's Table 2 gives ZB-H1's idle time as (P−1)(tf + tb − 2tw) (written "
           "there as (P−1)(T_F + T_B − T_W) with T_B the input-gradient part only); the "
           "simulation matches it exactly while tw ≤ tf and tw ≤ tI. With tw = 1 of tb = 2 it "
           "is a third of 1F1B's. To fill the "
           "cool-down, ZB-H1 lets rank r postpone up to r of its Ws.")
    from ...draw import draw_timeline
    return ["\n".join(lines), why,
            draw_timeline(simulate(make_schedule("zb-h1", P, 8), Costs(tf=1, tb=2, tw=1))),
            _pending_w_bytes()]


def _pending_w_bytes() -> str:
    """What a pending W keeps, in bytes for GPT-3 175B's layer shapes (P = 8, no recomputation)."""
    from ...memory.accounting import peak_split
    from ...memory.activations import layer_activation_bytes, layer_w_pending_bytes
    s, b, h, a, P = 2048, 1, 12288, 96, 8
    MB, MW = layer_activation_bytes(s, b, h, a), layer_w_pending_bytes(s, b, h)
    peaks = peak_split(make_schedule("zb-h1", P, 4 * P), dict.fromkeys(range(P), MB),
                       dict.fromkeys(range(P), MW))
    assert all(abs(p - ((P - r) * MB + r * MW)) < 1 for r, (p, _, _) in enumerate(peaks))
    return "\n".join([
        "What a pending W keeps: only what the weight gradients need, each linear layer's input "
        "and output gradient, Zero Bubble's M_W = 32·s·b·h bytes per layer (its Table 1), "
        "against M_B = s·b·(34h + 5·a·s) for a whole microbatch (Korthikanti et al. 2022, "
        "§4.1). So worker i (counted from 1) holds (P − i + 1)·M_B + (i − 1)·M_W. For GPT-3 "
        f"175B's layer shapes (s = {s}, h = {h}, a = {a}, no recomputation) at P = {P}:",
        f"M_B = {MB / 1e6:.0f} MB, M_W = {MW / 1e6:.0f} MB per layer ({MW / MB:.2f} M_B)",
        f"ZB-H1 peak per rank, in M_B: {[round(p / MB, 2) for p, _, _ in peaks]}",
        f"The last rank goes from 1 M_B under 1F1B to about {peaks[-1][0] / MB:.0f}, not to "
        f"P = {P}; rank 0 still holds P whole microbatches and stays the activation peak. How "
        "much a pending W saves depends on what a whole microbatch keeps: with selective "
        "recomputation M_B drops to 34·s·b·h while M_W stays 32·s·b·h, so pending Ws cost "
        "almost as much as whole microbatches. Which rank then needs the most memory, with the "
        "output layer and the fp32 logits on the last one, is a question lesson 07 asks."])


@_reveals("06.dualpipe-m")
def _dualpipe_m() -> str:
    lines = [" P    M   idle/rank  (P/2-1)(F&B+B-3W)  ÷total   ÷ideal   article's (P-1)/(2M)"]
    for P in (4, 8):
        for M in (2 * P, 4 * P, 8 * P, 16 * P):
            tl = simulate(make_schedule("dualpipe", P, M), Costs(tf=1, tb=2, tw=1, tfb=3))
            lines.append(f"{P:2d}  {M:3d}  {tl.makespan - 3 * M:9g}  {(P // 2 - 1) * 2:17g}"
                         f"  {tl.bubble_fraction:6.1%}  {tl.bubble_ratio:6.1%}"
                         f"   {(P - 1) / (2 * M):9.1%}")
            assert tl.makespan - 3 * M == (P // 2 - 1) * (3 + 2 - 3)
    lines.append("The idle time per rank is constant in M: DualPipe's bubble does not shrink with "
                 "M. It is a fixed (P/2−1)(F&B + B − 3W) per step (DeepSeek-V3, Table 2; its "
                 "§3.2.1 notes that neither the bubbles nor the activations grow with M), like "
                 "every flushed schedule's fill and drain; percentages fall only because the "
                 "denominator grows.")
    P, M = 8, 32
    tl = simulate(make_schedule("dualpipe", P, M), Costs(tf=1, tb=2, tw=1, tfb=3))
    lines.append(f"The article Pipeline Parallelism: From GPipe to DualPipe — Eliminating the "
                 f"Bubble gives DualPipe's bubble as (P−1)/(2M): not DeepSeek's formula, and it "
                 f"matches neither denominator. At P = {P}, M = {M} it says "
                 f"{(P - 1) / (2 * M):.1%}; measured, the idle time is {tl.bubble_fraction:.1%} "
                 f"of the total and {tl.bubble_ratio:.1%} of the ideal.")
    from ...draw import draw_timeline
    return ["\n".join(lines), draw_timeline(simulate(make_schedule("dualpipe", 4, 8),
                                                     Costs(tf=1, tb=2, tw=1, tfb=3)))]
