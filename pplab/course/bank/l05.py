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
        explain="2·M·(P·V − 1) = 2 · 8 · 7."),
    Question(
        "05.best-v", "predict", "choice",
        "P = 4, M = 8, and every hop costs 0.25 (a forward chunk of one rank's full share costs "
        "1). Which V gives the shortest step?",
        options=(Option("V = 1: at this hop cost no interleaving pays off",
                        "The bubble saving still beats the hop cost at V = 2."),
                 Option("V = 2: beyond it the hops cost more than they save",
                        "The next chunks add more hops than bubble they remove.", True),
                 Option("V = 6: the most chunks give the smallest bubble",
                        "True only with free communication.")),
        explain="The makespan-against-V table below shows the turn."),
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
                        "Measured in section 4: each rank's warm-up runs further ahead in "
                        "1/V-size chunks.", True),
                 Option("(P−1)/V more on rank 0, less on the rest",
                        "Rank 0 gains (P−1)/V, but the measurement shows every rank holds "
                        "more, not less."),
                 Option("V times more: a chunk for each of V loops",
                        "Each chunk weighs 1/V of a rank's layers."))),
)

#: a question's old id -> its id now (a progress file that recorded the old one keeps it)
RENAMED = {"05.q-p8": "05.q-v3"}
