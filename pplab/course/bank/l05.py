"""Lesson 05: interleaved pipelines."""
from ...lower import p2p_messages
from ...registry import make_schedule
from ..measure import bubble_pct
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "05.bubble-v2", "predict", "number",
        "Interleaved 1F1B, P = 6, M = 18, V = 2 chunks per rank. The bubble ÷ ideal, in %?",
        answer=lambda: bubble_pct("interleaved", 6, 18, 2, ideal=True), unit="%",
        traps=((100 * 5 / 18, "That is plain 1F1B's (P−1)/M: the chunks make the fill V times "
                              "shorter."),
               (100 * 5 / 41, "That is ÷ total, (P−1)/(V·M+P−1); the question asks ÷ ideal.")),
        explain="Each hop of the fill costs tf/V instead of tf, so the fill and drain shrink "
                "to (P−1)(tf+tb)/V while the work stays: (P−1)/(V·M) = 5/36."),
    Question(
        "05.messages", "predict", "number",
        "How many point-to-point messages does one step of interleaved 1F1B send at P = 4, "
        "M = 8, V = 2 (forward activations plus backward gradients)?",
        answer=lambda: p2p_messages(make_schedule("interleaved", 4, 8, 2)), tol=0.0,
        source="the schedule's message count",
        traps=((48, "48 is plain 1F1B's 2·M·(P−1): each microbatch now crosses P·V − 1 "
                    "boundaries."),
               (96, "96 = 2 × 48 misses the hop from rank P−1 back to rank 0 between chunks.")),
        explain="The model is cut into P·V stages, and every boundary between two of them is "
                "a hop between two different ranks, the one from rank P−1 back to rank 0 "
                "included: 2·M·(P·V − 1) = 2 · 8 · 7."),
    Question(
        "05.best-v", "predict", "choice",
        "P = 4, M = 8, and every hop costs 0.25 (a forward through one rank's whole share of the "
        "layers costs 1). Which V gives the shortest step?",
        options=(Option("V = 1: at this hop cost no interleaving pays off",
                        "The bubble saving still beats the hop cost at V = 2."),
                 Option("V = 2: beyond it the hops cost more than they save",
                        "The next chunks add more hops than bubble they remove.", True),
                 Option("V = 4: up to it the bubble saved outweighs the hops",
                        "At 0.25 a hop, V = 4 is already slower than V = 2 (and V = 3)."),
                 Option("V = 6: the most chunks give the smallest bubble",
                        "True only with free communication.")),
        explain="The makespan against V, for each cost of a hop, shows where it turns."),
    Question(
        "05.q-v3", "quiz", "number",
        "P = 6, M = 18, interleaved with V = 3: bubble ÷ ideal, in %?",
        answer=100 * 5 / 54, unit="%",
        traps=((100 * 5 / 18, "That is 1F1B's (P−1)/M; divide by V too."),
               (100 * 5 / 59, "That is ÷ total; the question asks ÷ ideal.")),
        hint="(P−1)/(V·M)."),
    Question(
        "05.q-memory", "quiz", "choice",
        "Compared with 1F1B, how much more activation memory does interleaving (V chunks) need "
        "on each rank, in stage-equivalents?",
        options=(Option("At least (P−1)/V more, on every rank",
                        "Measured in section 5: each rank's warm-up runs further ahead in "
                        "1/V-size chunks.", True),
                 Option("(P−1)/V more on rank 0, less on the rest",
                        "Rank 0 gains (P−1)/V, but the measurement shows every rank holds "
                        "more, not less."),
                 Option("V times more: a chunk for each of V loops",
                        "Each chunk weighs 1/V of a rank's layers."))),
)

#: a question's old id -> its id now (a progress file that recorded the old one keeps it)
RENAMED = {"05.q-p8": "05.q-v3"}


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals
from ...registry import make_schedule
from ...sim import simulate


@_reveals("05.bubble-v2")
def _bubble_v2() -> str:
    P, M = 6, 18
    lines = [" V  makespan  idle÷ideal  (P-1)/(V·M)  idle÷total  (P-1)/(V·M+P-1)"]
    for V in (1, 2, 4, 8):
        tl = simulate(make_schedule("interleaved", P, M, V))
        lines.append(f"{V:2d}  {tl.makespan:8g}  {tl.bubble_ratio:10.4f}  {(P - 1) / (V * M):11.4f}"
                     f"  {tl.bubble_fraction:10.4f}  {(P - 1) / (V * M + P - 1):15.4f}")
        assert abs(tl.bubble_ratio - (P - 1) / (V * M)) < 1e-12
    from ...draw import draw_timeline
    why = ("Rank P−1 waits for the first microbatch to cross P−1 chunks on the ranks above "
           "it: in 1F1B each costs tf, interleaved tf/V, and the same holds for the drain. "
           "The fill-and-drain idle time per rank becomes (P−1)(tf+tb)/V while the work "
           "M·(tf+tb) stays: ÷ ideal (P−1)/(V·M) (Megatron-LM's form), ÷ total "
           "(P−1)/(V·M + P−1), GPipe's form with M replaced by V·M.")
    return ["\n".join(lines), why,
            draw_timeline(simulate(make_schedule("interleaved", P, M, 2))), _article_table()]


def _article_table() -> str:
    """The article's bubble table (P = 8, M = 32) mixes denominators; measured like for like."""
    P, M = 8, 32
    article = {1: 0.179, 2: 0.109, 4: 0.055, 8: 0.027}
    tls = {V: simulate(make_schedule("interleaved", P, M, V)) for V in article}
    assert abs(tls[1].bubble_fraction - article[1]) < 0.001       # its V = 1 row: ÷ total
    assert all(abs(tls[V].bubble_ratio - article[V]) < 0.001 for V in (2, 4, 8))   # ÷ ideal
    rows = [f"{V:2d}  {tls[V].bubble_fraction:7.1%}  {tls[V].bubble_ratio:7.1%}   "
            f"{article[V]:.1%}" for V in article]
    return "\n".join([
        "A table that mixes denominators. The article Pipeline Parallelism: From GPipe to "
        "DualPipe — Eliminating the Bubble lists, for P = 8, M = 32, GPipe at 17.9% "
        "((P−1)/(P−1+M), of the total) beside interleaved V = 2, 4, 8 at 10.9%, 5.5%, 2.7% "
        "((P−1)/(M·V), of the ideal), and labels its V = 1 row 17.9% as well. Measured like "
        "for like:",
        " V   ÷total   ÷ideal   the article's number", *rows,
        f"Its V = 1 row is ÷ total, the others ÷ ideal. Like for like, V = 2 halves the "
        f"bubble ÷ ideal, {tls[1].bubble_ratio:.1%} → {tls[2].bubble_ratio:.1%}, and takes it "
        f"÷ total from {tls[1].bubble_fraction:.1%} to {tls[2].bubble_fraction:.1%}; the "
        f"table's 17.9% → 10.9% is neither."])


@_reveals("05.best-v")
def _best_v() -> str:
    from ...canvases.interleaved import makespan_vs_V
    P, M, Vs = 4, 8, (1, 2, 3, 4, 6)
    lines = ["makespan at P = 4, M = 8, by the cost of one hop",
             "comm   " + "  ".join(f"V={v:<5d}" for v in Vs) + " best V"]
    best = {}
    for comm in (0.0, 0.1, 0.25, 0.5, 1.0):
        pts = makespan_vs_V(P, M, comm, Vs=Vs)
        best[comm] = min(pts, key=lambda x: (x[1], x[0]))[0]
        lines.append(f"{comm:4.2f}   " + "  ".join(f"{t:7.2f}" for _, t in pts)
                     + f"  {best[comm]}")
    assert best[0.25] == 2 and best[0.0] == 6
    lines.append("With free hops more chunks always help; at 0.25 a hop the best is V = 2, and "
                 "V = 6 is already slower than plain 1F1B.")
    return "\n".join(lines)


@_reveals("05.messages")
def _messages() -> str:
    from ...lower import p2p_messages
    P, M, lines = 4, 8, []
    for V in (1, 2, 4):
        n = p2p_messages(make_schedule("interleaved", P, M, V))
        lines.append(f"V={V}: {n:4d} messages per step, 2·M·(P·V−1) = {2 * M * (P * V - 1)}")
        assert n == 2 * M * (P * V - 1)
    return "\n".join(lines)
