"""Lesson 10: real runs, measured."""
from ...lower import p2p_messages
from ...registry import make_schedule
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "10.messages", "predict", "number",
        "1F1B with P = 4, M = 6: how many point-to-point messages per step?",
        answer=lambda: p2p_messages(make_schedule("1f1b", 4, 6)), tol=0.0,
        source="the schedule's message count",
        traps=((18, "18 counts the forward activations only; gradients come back too."),),
        explain="Each microbatch crosses 3 boundaries forward and 3 back: 2·6·3."),
    Question(
        "10.add-mode", "predict", "choice",
        "In emulated \"add\" mode each op does its real compute, then sleeps the simulated "
        "duration. The measured makespan is…",
        options=(Option("a bit longer: real compute and messages add to the sleeps",
                        "Compute and message time add to the sleeps on the critical path.",
                        True),
                 Option("the same: the sleeps set each op's length, the rest hides",
                        "Nothing hides the real compute: it runs before the sleep, so it adds "
                        "to every op on the critical path."),
                 Option("a bit shorter: the ranks overlap their sleeps with messages",
                        "A rank that sleeps still waits for its inputs; the sleeps alone "
                        "reproduce the simulated schedule, and the real work comes on top.")),
        source="a real run",
        explain="The measured bars drift right of the simulated boxes: each op adds its real "
                "compute and messaging, a few milliseconds, to its sleep, and those on the "
                "critical path add up. With the run panel's defaults (1F1B, P = 4, M = 8, "
                "tf = 0.05 s, tb = 0.1 s, simulated 1.65 s and a 27.3% bubble) a busy 2-core "
                "machine (load 10) measured 1.96 s and 31.8%; a quieter one comes closer."),
    Question(
        "10.nccl-order", "predict", "choice",
        "P = 2. On NCCL, both ranks post every receive at the start of the step. What happens?",
        options=(Option("It hangs: each rank's first receive blocks the send its peer needs",
                        "Both streams start with a receive whose send is queued behind it on "
                        "the other rank.", True),
                 Option("It runs: each receive completes once its matching send arrives",
                        "On gloo it would: gloo matches by tag. NCCL runs a pair's operations "
                        "in posting order, so a receive at the head blocks what is behind it."),
                 Option("It runs: NCCL reorders the receives to match the peer's sends",
                        "NCCL matches by the order of operations between each pair of ranks; "
                        "it does not reorder them.")),
        explain="PyTorch runs every single send and receive between two ranks on one CUDA "
                "stream, in posting order. Each rank's stream starts with a receive, and the "
                "send its peer waits for sits behind it: each waits for the other, for ever. "
                "gloo matches messages by tag instead, so any posting order completes there."),
    Question(
        "10.q-grad", "quiz", "choice",
        "A run reports grad_max_rel_error = 4e-7. Is the pipeline wrong?",
        options=(Option("No: summing in another order rounds differently",
                        "Float addition is not associative; the run's check passes below "
                        "1e-5, and a lost microbatch shows as about 0.7.", True),
                 Option("Yes: the same arithmetic must give exactly 0",
                        "The pipeline adds the microbatches' gradients in another order than "
                        "one process, and float addition is not associative."),
                 Option("Yes: any error this size means a lost microbatch",
                        "Dropping a microbatch gives errors near 0.7."))),
    Question(
        "10.q-cpu-bubble", "quiz", "choice",
        "Without emulation, 1F1B at P = 4 on 2 cores shows a 50% bubble. What does that "
        "measure?",
        options=(Option("Mostly four ranks taking turns on two cores",
                        "Four ranks time-slice two cores, and per-message overhead is as large "
                        "as the tiny ops.", True),
                 Option("Mostly 1F1B's own bubble at this P and M",
                        "The schedule's bubble is 27.3% at M = 8."),
                 Option("Mostly the time to start Python and torch",
                        "Start-up comes before the step; the timeline measures the step."))),
)


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals
from ...registry import make_schedule


@_reveals("10.messages")
def _messages_1f1b() -> str:
    from ...lower import p2p_messages
    lines = []
    for P, M in [(2, 4), (4, 6), (8, 32)]:
        sched = make_schedule("1f1b", P, M)
        lines.append(f"1F1B P={P} M={M}: {p2p_messages(sched)} point-to-point messages per step "
                     f"(2·M·(P−1) = {2 * M * (P - 1)})")
        assert p2p_messages(sched) == 2 * M * (P - 1)
    return "\n".join(lines)


@_reveals("10.nccl-order")
def _nccl_order() -> str:
    from ...lower import check_in_order, in_order_plan, up_front_plan
    sched = make_schedule("1f1b", 2, 4)
    try:
        check_in_order(sched, up_front_plan(sched))
    except ValueError as e:
        stuck = str(e)
    else:
        raise AssertionError("posting every receive up front completed in order")
    check_in_order(sched, in_order_plan(sched))       # the in-order plan completes
    return ("1F1B, P = 2, M = 4, played on the strictest in-order model (one queue per rank, "
            f"every message waits for its partner), receives posted up front: {stuck}.\n"
            "The in-order plan (pplab/lower.py) completes on the same model: the smallest-key "
            "message still pending always has both ends posted, with nothing pending ahead of "
            "it.")
