"""Lesson 12: from pplab to PyTorch."""
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "12.m-lt-p", "predict", "choice",
        "torch's Schedule1F1B with 4 stages and n_microbatches = 2. What happens?",
        options=(Option("It runs, its warm-up cut short and its bubble larger",
                        "pplab's generator would; torch refuses: it checks n_microbatches ≥ "
                        "the number of stages when the schedule is built."),
                 Option("It raises an error as the schedule is built",
                        "torch checks n_microbatches ≥ the number of stages when the schedule "
                        "is built.", True),
                 Option("It runs, each rank holding the whole batch at once",
                        "torch does not switch schedules; it refuses fewer microbatches than "
                        "stages.")),
        source="torch 2.13",
        explain="torch 2.13's Schedule1F1B checks n_microbatches ≥ the number of stages when it "
                "is built, before any step; ScheduleDualPipeV likewise needs at least as many "
                "microbatches as stages. pplab's 1f1b runs M < P with a shorter warm-up."),
    Question(
        "12.scale-grads", "predict", "number",
        "A per-microbatch mean loss, M = 4 microbatches, and torch's schedule built with "
        "scale_grads=False. By what factor is the gradient off from the full-batch gradient?",
        answer=4, tol=0.01, source="a one-process torch pipeline",
        traps=((0.25, "Without scaling the M gradients are summed, not averaged: larger."),),
        explain="The M backwards add up M mean-gradients: M times the full-batch gradient. "
                "scale_grads=True (the default) divides the accumulated gradients by M, as "
                "GPipe's 1/M in lesson 03; with scale_grads=False, scale the loss yourself "
                "(divide by M inside loss_fn), as pplab's runtime does."),
    Question(
        "12.same-order", "predict", "choice",
        "pplab's interleaved 1F1B and torch's ScheduleInterleaved1F1B at P = 2, M = 4, V = 2: "
        "do the per-rank orders agree?",
        options=(Option("Yes, action for action on both ranks",
                        "Here torch's interleaved schedule groups microbatches in rounds of "
                        "P, like Megatron-LM's and pplab's.", True),
                 Option("Same actions, some of them in another order",
                        "Not at this size: the benchmark prints \"same order\" on both ranks; "
                        "here both group microbatches in rounds of P."),
                 Option("No, torch runs a different set of actions",
                        "Both run every F and B of every chunk once, and here in the same "
                        "order.")),
        source="a real run",
        explain="The benchmark compares the orders rank by rank and the gradients with one "
                "process: it prints \"rank 0: same order\", \"rank 1: same order\" and a "
                "gradient error near 4e-07 for both runtimes (float round-off). At M = 4, P = 2 "
                "torch's rounds are P microbatches, Megatron-LM's and pplab's grouping."),
    Question(
        "12.q-reshard", "quiz", "choice",
        "FSDP2 inside torch's PipelineStage, 1F1B with M microbatches, default "
        "reshard_after_forward=True. How many all-gathers of a block's parameters per step?",
        options=(Option("About M + 1 all-gathers and one reduce-scatter",
                        "The stage keeps the parameters gathered after each backward and syncs "
                        "gradients only after the last; each forward frees them, so each "
                        "steady-state backward gathers again. reshard_after_forward=False "
                        "brings it to one.", True),
                 Option("2M all-gathers and M reduce-scatters",
                        "That is a hand-written accumulation loop with FSDP2's defaults; "
                        "torch's stage turns off resharding after backward and gradient sync "
                        "until the last backward."),
                 Option("One all-gather and one reduce-scatter",
                        "Only with reshard_after_forward=False: by default each forward frees "
                        "the parameters and the next backward gathers them again."),
                 Option("M all-gathers and one reduce-scatter",
                        "Each forward frees what it gathered, so every warm-up forward and "
                        "the first steady-state forward gather (w + 1 of them after w warm-up "
                        "forwards), then each of the M − w backwards that follow a forward: "
                        "M + 1 in all."))),
    Question(
        "12.q-loss", "quiz", "choice",
        "With PP, why must the training loop broadcast the loss before logging it?",
        options=(Option("Only the last stage computes it, so the other ranks have none",
                        "Broadcast from the last PP rank over the PP group.", True),
                 Option("It must first be averaged over the data-parallel replicas",
                        "That would be an all-reduce over the DP group, not a broadcast over "
                        "the pipeline."),
                 Option("scale_grads divides it by M, so each rank holds a part of it",
                        "scale_grads acts on gradients; the loss exists only on the last "
                        "stage."))),
)


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals
from ...registry import make_schedule
from ...sim import simulate


@_reveals("12.m-lt-p")
def _m_lt_p() -> str:
    from ...probe.env import browser_note, in_browser
    if in_browser():
        return browser_note("torch_refuses(\"Schedule1F1B\", P=4, M=2), pplab.runtime.torch_bridge")
    from ...runtime.torch_bridge import torch_refuses
    assert torch_refuses("Schedule1F1B", P=4, M=2)
    assert torch_refuses("Schedule1F1B", P=4, M=4) is None
    inflight = simulate(make_schedule("1f1b", 4, 2)).peak_inflight
    return "\n".join([
        f"pplab 1f1b P=4 M=2: in flight per rank {inflight}",
        f"torch Schedule1F1B, 4 stages, M=2: {torch_refuses('Schedule1F1B', P=4, M=2)}",
        f"torch ScheduleGPipe, 4 stages, M=2: "
        f"{torch_refuses('ScheduleGPipe', P=4, M=2) or 'accepted'}"])


@_reveals("12.scale-grads")
def _scale_grads() -> str:
    from ...probe.env import browser_note, in_browser
    if in_browser():
        return browser_note("torch_pipeline_grad_ratio(M=4) from pplab.runtime.torch_bridge")
    from ...runtime.torch_bridge import torch_pipeline_grad_ratio
    ratios = {s: torch_pipeline_grad_ratio(M=4, scale_grads=s) for s in (True, False)}
    assert abs(ratios[False] - 4) < 1e-4 and abs(ratios[True] - 1) < 1e-4
    return "\n".join(f"scale_grads={s!s:5s}: |pipeline gradient| / |full-batch gradient| = "
                     f"{r:.4f}" for s, r in ratios.items())


@_reveals("12.same-order")
def _same_order() -> str:
    """torch's own ScheduleInterleaved1F1B order, built in this process for each rank (torch's
    fake process group: building a schedule sends nothing), beside pplab's."""
    import re
    from ...probe.env import browser_note, in_browser
    if in_browser():
        return browser_note("torch_interleaved_order(2, 4, 2, rank) from "
                            "pplab.runtime.torch_orders")
    from ...runtime.torch_orders import torch_interleaved_order
    sched = make_schedule("interleaved", 2, 4, 2)
    lines = []
    for rank, mine in enumerate(sched.rank_texts()):
        theirs = [a for a in torch_interleaved_order(2, 4, 2, rank=rank)
                  if re.fullmatch(r"\d+[FBIW]\d+", a)]        # the compute actions
        assert theirs == mine
        lines += [f"rank {rank} pplab: {' '.join(mine)}", f"rank {rank} torch: {' '.join(theirs)}"]
    lines.append("The same order, action for action, on both ranks.")
    return "\n".join(lines)
