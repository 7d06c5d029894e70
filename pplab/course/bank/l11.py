"""Lesson 11: engineering a pipeline."""
from ...registry import make_schedule
from ...sim import Costs, simulate
from ..measure import lm_head_layers
from ..questions import Option, Question


def _slow_last() -> float:
    costs = Costs(tf=1, tb=2, stage_scale=[1, 1, 1, 1.3])
    return simulate(make_schedule("1f1b", 4, 8), costs).makespan


QUESTIONS = (
    Question(
        "11.slow-stage", "predict", "number",
        "1F1B, P = 4, M = 8, tf = 1, tb = 2: the makespan is 33. Make the last stage 30% slower. "
        "New makespan?",
        answer=_slow_last, tol=0.005,
        traps=((33.9, "That spreads the slowdown over the step; the slow stage paces every "
                      "microbatch."),),
        explain="The steady state runs at the slow stage's pace: +0.9 per microbatch, 8 times."),
    Question(
        "11.head-layers", "predict", "number",
        "Llama-3-8B-like shape (h = 4096, MLP 14336, vocabulary 128,256). The LM head's forward "
        "FLOPs are worth how many transformer layers?",
        answer=lambda: lm_head_layers(4096, 14336, 128_256), tol=0.03,
        source="the FLOP count",
        traps=((1, "A head is a hidden × vocabulary matmul: the vocabulary is 31× the hidden "
                   "size."),),
        explain="2·h·vocab against 2·(4h² + 3·h·ffn) per token."),
    Question(
        "11.slow-first", "predict", "choice",
        "Is a 30% slower *first* stage as costly as a slow last stage?",
        options=(Option("Just as costly: the slowest stage sets every rank's pace",
                        "In the steady state it does, but where it sits matters: +4.5 for "
                        "the first stage against +7.2 for the last."),
                 Option("Less costly: the others absorb part of it in warm-up and drain",
                        "The other ranks absorb part of it in their warm-up and drain.", True),
                 Option("More costly: every microbatch has to pass it before the rest",
                        "Every microbatch passes every stage; the first stage's extra time is "
                        "partly absorbed by the others' warm-up and drain.")),
        explain="The simulator, not a formula, is the reliable answer."),
    Question(
        "11.q-names", "quiz", "choice",
        "Why does a checkpoint with stage-local names (layers.0 on every stage) fail to load "
        "with a different P?",
        options=(Option("Loading cannot tell which global layer a saved tensor is",
                        "Full-model names make the mapping explicit.", True),
                 Option("A layer's tensors have another shape when P changes",
                        "A layer's shape does not depend on P."),
                 Option("The optimizer state is saved under different names",
                        "It is saved by the same names as the parameters."))),
    Question(
        "11.q-more-m", "quiz", "choice",
        "1F1B, P = 4, fixed microbatch size: M from 4 to 16. Bubble and rank 0's peak "
        "activations?",
        options=(Option("The bubble falls and rank 0 still holds 4 microbatches",
                        "42.9% → 15.8% of the total; 1F1B keeps min(P, M) in flight.", True),
                 Option("The bubble falls and rank 0 holds 16 microbatches",
                        "That is GPipe: 1F1B keeps min(P, M) in flight."),
                 Option("The bubble stays and rank 0 still holds 4 microbatches",
                        "The bubble, (P−1)/(M+P−1), shrinks with M."),
                 Option("The bubble stays and rank 0 holds 16 microbatches",
                        "The bubble shrinks with M, and 1F1B keeps min(P, M) in flight."))),
)


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals
from ...registry import make_schedule
from ...sim import Costs, simulate


@_reveals("11.slow-stage", "11.slow-first")
def _slow_stage() -> str:
    sched = make_schedule("1f1b", 4, 8)
    lines, spans = [], {}
    for scale in ((1, 1, 1, 1), (1, 1, 1, 1.3), (1.3, 1, 1, 1)):
        tl = simulate(sched, Costs(tf=1, tb=2, stage_scale=list(scale)))
        spans[scale] = tl.makespan
        lines.append(f"stage_scale {list(scale)}: makespan {tl.makespan:.4g}, bubble "
                     f"{tl.bubble_fraction:.1%} of total")
    assert abs(spans[(1, 1, 1, 1.3)] - (33 + 8 * 0.9)) < 1e-9
    assert spans[(1.3, 1, 1, 1)] < spans[(1, 1, 1, 1.3)]
    last, first = (spans[k] - spans[(1, 1, 1, 1)] for k in ((1, 1, 1, 1.3), (1.3, 1, 1, 1)))
    lines += [f"A 30 % slower last stage adds 0.3 × (tf + tb) = 0.9 per microbatch, 8 times: "
              f"+{last:.1f}. In 1F1B's steady state every rank waits for the slowest, so the "
              f"step grows by up to M times the slow stage's extra time, not 1/P of it.",
              f"A slow first stage costs less, +{first:.1f}: the other ranks absorb part of it "
              f"in their warm-up and drain. Where the slow stage sits matters, so the simulator, "
              f"not a formula, gives the answer."]
    return "\n".join(lines)


@_reveals("11.head-layers")
def _head_layers() -> str:
    from ...canvases.balance import balance_timeline, layer_costs, partition_costs
    from ..measure import lm_head_layers
    h, ffn, vocab = 4096, 14336, 128_256
    head = lm_head_layers(h, ffn, vocab)
    lines = [f"one layer 2·(4h² + 3h·ffn) = {2 * (4 * h * h + 3 * h * ffn) / 1e9:.3f} GFLOP per "
             f"token, the LM head 2·h·vocab = {2 * h * vocab / 1e9:.3f}: {head:.2f} layers"]
    costs = layer_costs(32, embed=0.0, head=head)       # the embedding is a lookup: ~free
    spans = {}
    for method in ("even", "balanced"):
        parts, stage = partition_costs(costs, 4, method)
        spans[method] = balance_timeline(stage, M=8).makespan
        lines.append(f"{method:8s}: layers per stage {[len(r) for r in parts]}, stage cost "
                     f"{[round(c, 2) for c in stage]}, 1F1B makespan {spans[method]:.4g}")
    perfect = (8 + 4 - 1) * 3
    assert [len(r) for r in partition_costs(costs, 4, "balanced")[0]] == [8, 9, 9, 6]
    assert perfect < spans["balanced"] < spans["even"]
    even, balanced = (spans[k] / perfect - 1 for k in ("even", "balanced"))
    lines.append(f"perfect balance {perfect}: the even split is {even:+.0%}, the balanced one "
                 f"{balanced:+.1%}; what remains is granularity, a stage holds whole layers.")
    return "\n".join(lines)
