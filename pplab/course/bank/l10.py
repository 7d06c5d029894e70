"""Lesson 10: real runs, measured."""
from ...comm_order import p2p_messages
from ...registry import make_schedule
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "10.messages", "predict", "number",
        "1F1B with P = 4, M = 8: how many point-to-point messages per step?",
        answer=lambda: p2p_messages(make_schedule("1f1b", 4, 8)), tol=0.0,
        source="the schedule's message count",
        traps=((24, "24 counts the forward activations only; gradients come back too."),),
        explain="Each microbatch crosses 3 boundaries forward and 3 back: 2·8·3."),
    Question(
        "10.add-mode", "predict", "choice",
        "In emulated \"add\" mode each op does its real compute, then sleeps the simulated "
        "duration. The measured makespan is…",
        options=(Option("a bit longer than simulated", "Compute and message time add to the "
                        "sleeps on the critical path.", True),
                 Option("equal to the simulated one", "The real compute and the messages are "
                        "not free."),
                 Option("shorter than simulated", "The sleeps alone already reproduce the "
                        "simulated schedule.")),
        source="a real run", explain="Run the panel and compare the two makespans."),
    Question(
        "10.nccl-order", "predict", "choice",
        "P = 2. On NCCL, both ranks post every receive at the start of the step. What happens?",
        options=(Option("It hangs", "Both streams start with a receive whose send is queued "
                        "behind it on the other rank.", True),
                 Option("It runs, a little slower", "On gloo it would: gloo matches by tag."),
                 Option("NCCL reorders the receives", "NCCL matches by the order of operations "
                        "between each pair of ranks."))),
    Question(
        "10.q-grad", "quiz", "choice",
        "A run reports grad_max_rel_error = 4e-7. Is the pipeline wrong?",
        options=(Option("No: float round-off from summing in a different order",
                        "Around 1e-2 or more would mean a bug.", True),
                 Option("Yes: it should be exactly 0", "Float addition is not associative."),
                 Option("Yes: a microbatch was dropped", "That gives errors near 0.7."))),
    Question(
        "10.q-cpu-bubble", "quiz", "choice",
        "Without emulation, 1F1B at P = 4 on 2 cores shows a 50% bubble. What does that "
        "measure?",
        options=(Option("Mostly CPU contention and per-message overhead", "Four ranks "
                        "time-slice two cores.", True),
                 Option("1F1B's true bubble", "The schedule's bubble is 27.3% at M = 8."),
                 Option("NCCL's latency", "The CPU runs on gloo."))),
)
