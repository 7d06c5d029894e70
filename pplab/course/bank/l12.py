"""Lesson 12: from pplab to PyTorch."""
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "12.m-lt-p", "predict", "choice",
        "torch's Schedule1F1B with 4 stages and n_microbatches = 2. What happens?",
        options=(Option("It runs with a larger bubble", "pplab's generator would; torch "
                        "refuses."),
                 Option("It raises an error: 1F1B needs n_microbatches ≥ number of stages",
                        "torch checks M ≥ P when the schedule is built.", True),
                 Option("It silently runs GPipe", "torch does not switch schedules.")),
        source="torch 2.13"),
    Question(
        "12.scale-grads", "predict", "number",
        "A per-microbatch mean loss, M = 4 microbatches, and torch's schedule built with "
        "scale_grads=False. By what factor is the gradient off from the full-batch gradient?",
        answer=4, tol=0.01, source="a one-process torch pipeline",
        traps=((0.25, "Without scaling the M gradients are summed, not averaged: larger."),),
        explain="scale_grads=True (the default) divides by M, as GPipe's 1/M in lesson 03."),
    Question(
        "12.same-order", "predict", "choice",
        "pplab's interleaved 1F1B and torch's ScheduleInterleaved1F1B at P = 2, M = 4, V = 2: "
        "do the per-rank orders agree?",
        options=(Option("Yes, action for action", "torch's interleaved schedule groups "
                        "microbatches in rounds of P, like Megatron's and pplab's.", True),
                 Option("Not exactly: same actions, some in another order", "Not at this "
                        "size: the benchmark prints \"same order\" on both ranks."),
                 Option("No: torch runs other actions", "Both run every F and B once.")),
        source="a real run",
        explain="The benchmark compares the orders rank by rank and the gradients with one "
                "process."),
    Question(
        "12.q-reshard", "quiz", "choice",
        "FSDP2 inside torch's PipelineStage, 1F1B with M microbatches, default "
        "reshard_after_forward=True. How many all-gathers of a block's parameters per step?",
        options=(Option("About M + 1, and one reduce-scatter", "The stage keeps the parameters "
                        "gathered after each backward and syncs gradients only after the last; "
                        "each forward frees them, so each steady-state backward gathers again. "
                        "reshard_after_forward=False brings it to one.", True),
                 Option("2M, and M reduce-scatters", "That is a hand-written accumulation loop "
                        "with FSDP2's defaults; torch's stage turns off resharding after "
                        "backward and gradient sync until the last backward."),
                 Option("One: FSDP gathers once per step anyway", "Only with "
                        "reshard_after_forward=False."),
                 Option("Twice the activations", "Resharding touches parameters, not "
                        "activations."))),
    Question(
        "12.q-loss", "quiz", "choice",
        "With PP, why must the training loop broadcast the loss before logging it?",
        options=(Option("Only the last stage computes it; the other ranks have no loss",
                        "Broadcast from the last PP rank over the PP group.", True),
                 Option("To average it over data-parallel replicas", "That would be an "
                        "all-reduce over the DP group."),
                 Option("Because scale_grads divides it by M", "scale_grads acts on "
                        "gradients."))),
)
