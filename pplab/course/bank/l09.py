"""Lesson 09: 3D parallelism."""
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "09.loudest-axis", "predict", "choice",
        "Llama 3 70B on 64 GPUs as TP = 8 × PP = 4 × DP = 2, M = 32. Which axis moves the most "
        "bytes per GPU per step?",
        options=(Option("TP", "Four all-reduces of an activation per layer per microbatch.",
                        True),
                 Option("PP", "One activation per stage boundary per microbatch: small."),
                 Option("DP", "The gradients once per step: 2Ψ of this rank's share.")),
        explain="TP all-reduces an s·b·h activation four times per layer per microbatch; PP "
                "sends one per stage boundary; DP moves the gradients once per step."),
    Question(
        "09.dp", "predict", "number",
        "96 GPUs, TP = 8, PP = 4. What is DP?", answer=3, tol=0.0,
        source="GPUs ÷ (TP × PP)",
        traps=((24, "24 = 96/4 forgets TP."), (12, "12 = 96/8 forgets PP.")),
        explain="Every GPU is in exactly one TP, one PP and one DP group."),
    Question(
        "09.planner-tp", "predict", "choice",
        "The planner ranks every layout of Llama 3 70B on 64 × 80 GB GPUs (global batch 512 × "
        "4096 tokens). What TP do the fastest layouts use?",
        options=(Option("TP = 8", "The node size: it fits easily, but TP traffic is paid on "
                        "every op."),
                 Option("TP = 4", "Half the node: with ZeRO and selective recomputation the "
                        "model fits with little or no pipeline.", True),
                 Option("TP = 2", "Deep pipelines fit, but the stage holding the LM head is "
                        "slower than the rest and sets the pace."),
                 Option("TP = 1", "It fits only with full recomputation and a 4-stage "
                        "pipeline: a third more compute, about 28% slower than the best.")),
        explain="TP = 4 pays half of TP = 8's all-reduce time per op; going below it needs a "
                "deep pipeline, whose last stage also runs the 128k-vocabulary head."),
    Question(
        "09.q-order", "quiz", "choice",
        "In Megatron-LM's default rank order, why is TP the innermost axis and PP the "
        "outermost?",
        options=(Option("TP's collectives are large and wait on every layer; PP's are small",
                        "NVLink for TP; InfiniBand is enough for PP's point-to-point "
                        "messages.", True),
                 Option("PP's stages hold the most memory, so they get whole nodes",
                        "Memory does not decide the placement; bandwidth does: TP's "
                        "all-reduces are large and on the critical path."),
                 Option("TP cannot cross a node at all, while PP can go anywhere",
                        "It can, just slowly: over InfiniBand TP's all-reduces would take "
                        "about 9 times longer."),
                 Option("PP's messages are latency-bound, so they need the fastest links",
                        "PP sends a few small point-to-point messages per microbatch; TP's "
                        "all-reduces are the ones that need NVLink."))),
    Question(
        "09.q-48", "quiz", "choice",
        "48 GPUs, TP = 8, PP = 4: what is DP?",
        options=(Option("1.5: the GPUs over the 32 of one TP × PP group",
                        "DP must be a whole number of replicas."),
                 Option("None: 48 GPUs are no whole number of 32-GPU groups",
                        "TP × PP × DP must equal the GPU count.", True),
                 Option("1: one 32-GPU replica, with the other 16 GPUs idle",
                        "A layout uses every GPU; a planner would pick another one."),
                 Option("2: two replicas, the second one on 16 GPUs",
                        "Every replica holds the whole model on TP × PP = 32 GPUs."))),
)


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals


@_reveals("09.loudest-axis", "09.dp")
def _axes() -> str:
    from ...memory import ParallelConfig, get_preset, memory_report
    from ...memory.comm import Network, comm_times, comm_volumes
    GB = 1e9
    m = get_preset("llama3-70b").with_(seq=4096)
    cfg = ParallelConfig(tp=8, pp=4, dp=2, zero=1, sp=True, recompute="selective", microbatches=32)
    vol = comm_volumes(m, cfg, memory_report(m, cfg).schedule)
    tim = comm_times(vol, cfg, Network())
    assert vol["tp"] > vol["dp"] > vol["pp"] and 64 // (cfg.tp * cfg.pp) == cfg.dp
    return "\n".join([f"{k.upper()}: {vol[k] / GB:8.2f} GB per GPU per step, {tim[k]:6.2f} s at "
                      f"its bandwidth" for k in ("tp", "pp", "dp")]
                     + ["TP's bytes are spread over every layer and microbatch, on the critical "
                        "path: they need NVLink, inside the node. PP's are a few small "
                        "point-to-point messages; DP's come once a step, 2Ψ of the rank's share. "
                        "Hence Megatron's rank order: TP innermost, DP next, PP outermost.",
                        f"DP for 96 GPUs at TP = 8, PP = 4: 96 / (8 · 4) = {96 // (8 * 4)}"])


@_reveals("09.planner-tp")
def _planner_tp() -> str:
    from ...canvases.memory import plan_table
    from ...memory import get_preset
    from ...memory.planner import plan
    cands = plan(get_preset("llama3-70b").with_(seq=4096), 64)
    table = plan_table(cands, top=8)
    assert " 1. TP=4 " in table
    fits = [c for c in cands if c.feasible]
    tp1 = next(c for c in fits if c.config.tp == 1)          # the TP = 1 option's feedback
    assert (tp1.config.recompute, tp1.config.pp) == ("full", 4)
    assert 1.25 < tp1.step_time / fits[0].step_time < 1.31
    best = {}                                   # each TP's fastest layout (fits are ranked)
    for c in fits:
        best.setdefault(c.config.tp, c.step_time)
    slower = {tp: best[tp] / fits[0].step_time - 1 for tp in (2, 8, 1)}
    assert 0.04 < slower[2] < slower[8] < 0.08
    return [table, "The winners use TP = 4 and little or no pipeline: half the node's TP "
                   "traffic, and ZeRO-2 plus selective recomputation make the model fit. Deeper "
                   "pipelines with TP = 2 fit too, but the stage that also runs the LM head (a "
                   "128k vocabulary: about 1.1 layers of work) is the slowest, and the slowest "
                   "stage sets the pace of the whole pipeline.",
            "Against the usual recipe \"fill the node with TP\" (TP = 8): the best layout with "
            f"TP = 2 is {slower[2]:.0%} slower, with TP = 8 {slower[8]:.0%}, with TP = 1 "
            f"{slower[1]:.0%}. The model charges TP only its bandwidth (see Opening the planner's "
            "box below); per-shape efficiency, if it were modelled, would not rescue TP = 8 "
            "either: its smaller multiplies are the less efficient ones."]
