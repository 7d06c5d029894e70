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
