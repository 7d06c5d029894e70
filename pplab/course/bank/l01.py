"""Lesson 01: the memory wall."""
from ...memory import ParallelConfig, get_preset, memory_report
from ..questions import Option, Question


def _per_gpu_gb(tp, dp, zero):
    m = get_preset("llama3-70b").with_(seq=4096)
    rep = memory_report(m, ParallelConfig(tp=tp, dp=dp, zero=zero, sp=tp > 1, recompute="full"))
    return rep.peak_bytes / 1e9


QUESTIONS = (
    Question(
        "01.model-states", "predict", "number",
        "A 70B-parameter model (Ψ = 70e9) trained with mixed-precision Adam: how many GB of "
        "parameters, gradients and optimizer states, before any activation?",
        answer=16 * 70, unit="GB", source="the ZeRO paper's count",
        traps=((140, "140 GB is the bf16 weights alone."),
               (280, "280 GB is weights and gradients; Adam adds 12 bytes per parameter."),
               (840, "840 GB is the optimizer states alone (12Ψ).")),
        explain="2 (bf16 weights) + 2 (gradients) + 4 (fp32 master) + 4 + 4 (Adam's moments) = "
                "16 bytes per parameter."),
    Question(
        "01.tp16", "predict", "choice",
        "Llama 3 70B, s = 4096: TP = 16 spans two nodes, so its all-reduces run over "
        "InfiniBand. Per layer and microbatch, how do the four all-reduces compare with the "
        "layer's compute?",
        options=(Option("A few percent: each moves one activation, far less than the weights",
                        "True inside a node (TP = 8 over NVLink: 14%); over InfiniBand the same "
                        "bytes take ~9× longer while the compute per GPU halves."),
                 Option("About the same: the link is ~9× slower but moves 1/16 of the data",
                        "Each GPU still sends almost two activations per all-reduce, whatever "
                        "TP is: the bytes do not shrink with TP."),
                 Option("Nearly three times the compute: the slow link dominates the layer",
                        "And the next operation waits for each sum.", True)),
        explain="The measurement prints 4 all-reduces against compute for TP = 2 … 16."),
    Question(
        "01.dp-copies", "predict", "number",
        "Llama 3 70B with TP = 8 and DP = 8, plain data parallelism (ZeRO-0), full "
        "recomputation. GB per GPU?",
        answer=lambda: _per_gpu_gb(8, 8, 0), unit="GB", tol=0.02, source="pplab.memory",
        traps=((_per_gpu_gb(8, 8, 0) / 8, "Dividing by DP would be ZeRO-3; plain DP copies "
                                           "everything."),),
        explain="Every replica keeps all model states of its TP shard: the same as DP = 1."),
    Question(
        "01.q-bytes-8b", "quiz", "number",
        "Model states of an 8.03B-parameter model with mixed-precision Adam, in GB?",
        answer=16 * 8.03, unit="GB",
        traps=((16.06, "That is bf16 weights only: 2 bytes per parameter."),),
        hint="16 bytes per parameter."),
    Question(
        "01.q-dp-memory", "quiz", "choice",
        "Why does adding data-parallel replicas not lower the memory per GPU?",
        options=(Option("The activations grow with DP, eating what the replicas save",
                        "Activations per GPU depend on the microbatch, not on DP."),
                 Option("Every replica holds all parameters, gradients and optimizer states",
                        "Only ZeRO/FSDP shard them across the replicas.", True),
                 Option("The gradient all-reduce needs a second copy of every gradient",
                        "PyTorch's DDP does keep one by default (its all-reduce buckets, "
                        "unless gradient_as_bucket_view=True), but that copy is the same "
                        "with 2 replicas or 64: it cannot be why more replicas save "
                        "nothing."))),
    Question(
        "01.q-tp64", "quiz", "choice",
        "Why not TP = 64 across 8 nodes?",
        options=(Option("TP must be a power of two, and the heads would not divide evenly",
                        "No power of two is needed, and a model can be built with heads "
                        "that split 64 ways (Llama 3 70B's 8 key/value heads do not); even "
                        "then every layer's all-reduces would cross InfiniBand."),
                 Option("TP cannot exceed the number of layers a model has",
                        "That is pipeline parallelism's rule; TP splits each layer's matrices."),
                 Option("Its all-reduces sit on the critical path and would run over InfiniBand",
                        "About 50 instead of 450 GB/s per GPU: communication would dominate.",
                        True))),
)


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals


@_reveals("01.model-states")
def _model_states() -> str:
    from ...memory import get_preset, model_states_bytes
    lines = ["Per parameter (the ZeRO paper, §3.1): bf16 weights 2 + bf16 gradients 2 + an fp32 "
             "master copy 4 + Adam's momentum 4 + Adam's variance 4 = 16 bytes; the last three "
             "(12 bytes) are the optimizer states."]
    for label, psi in (("70B, rounded", 70e9),
                       ("Llama 3 70B, exact", get_preset("llama3-70b").num_params())):
        p, g, o = model_states_bytes(psi)
        assert p + g + o == 16 * psi
        lines.append(f"{label:20s} params {p / 1e9:7.1f} GB + grads {g / 1e9:6.1f} GB + "
                     f"optimizer {o / 1e9:7.1f} GB = {(p + g + o) / 1e9:7.1f} GB = "
                     f"{(p + g + o) / 80e9:4.1f} × an 80 GB GPU")
    lines.append("1.12 TB of model states for a 70B model, fourteen 80 GB GPUs' worth before "
                 "any activation. Even the bf16 weights alone (140 GB) do not fit one GPU: the "
                 "model must be split.")
    return "\n".join(lines)


@_reveals("01.tp16")
def _tp16() -> str:
    from ...memory import get_preset
    from ...memory.comm import Network
    m, net = get_preset("llama3-70b").with_(seq=4096), Network()
    act = m.seq * 1 * m.hidden * 2                       # one s·b·h activation in bf16
    flops = m.train_flops_per_token() * m.seq / m.layers  # one layer, one microbatch, F + B
    lines = [f"Llama 3 70B, s = 4096, b = 1: one activation s·b·h is {act / 1e6:.0f} MB; "
             f"compute at 40% of an H100's bf16 peak (989 TFLOP/s)"]
    ratio = {}
    for t in (2, 4, 8, 16):
        bw = net.intra_node if t <= net.gpus_per_node else net.inter_node
        per_ar = 2 * (t - 1) / t * act                   # ring all-reduce: bytes sent per GPU
        comm, compute = 4 * per_ar / bw, flops / t / (0.4 * 989e12)
        ratio[t] = comm / compute
        lines.append(f"TP={t:2d}: {'NVLink' if t <= 8 else 'InfiniBand':10s} 4 all-reduces = "
                     f"{comm * 1e3:5.2f} ms vs compute {compute * 1e3:5.2f} ms per layer per "
                     f"microbatch")
    assert max(ratio[t] for t in (2, 4, 8)) < 0.15 and 2.5 < ratio[16] < 3
    inside = [ratio[t] for t in (2, 4, 8)]
    lines.append(f"Inside the node the all-reduces cost {min(inside):.0%}–{max(inside):.0%} of "
                 "the layer's compute; across two nodes they take nearly three times the "
                 "compute, and they cannot be "
                 "hidden: the next operation needs the sum. That is why TP stays inside a node, "
                 "and pipeline parallelism (PP) across nodes and data parallelism (DP) take "
                 "over beyond it (lesson 09).")
    return "\n".join(lines)


@_reveals("01.dp-copies")
def _dp_copies() -> str:
    from ...memory import ParallelConfig, get_preset, memory_report
    m = get_preset("llama3-70b").with_(seq=4096)
    lines, peak = [], {}
    for tp, dp, zero in ((1, 1, 0), (8, 1, 0), (8, 8, 0), (8, 8, 3)):
        rep = memory_report(m, ParallelConfig(tp=tp, dp=dp, zero=zero, sp=tp > 1,
                                              recompute="full"))
        r, peak[tp, dp, zero] = rep.per_rank[0], rep.peak_bytes
        lines.append(f"TP={tp} DP={dp} ZeRO-{zero}: model states "
                     f"{(r.params + r.grads + r.optimizer) / 1e9:7.1f} GB + activations "
                     f"{r.activations / 1e9:5.1f} GB = {rep.peak_bytes / 1e9:7.1f} GB per GPU")
    assert peak[8, 8, 0] == peak[8, 1, 0] > 80e9 > peak[8, 8, 3]
    lines.append("Plain DP copies everything, so more replicas do not lower the memory at all "
                 "(the same GB with DP = 8 as with DP = 1). Sharding the model states over the "
                 "replicas (ZeRO-3, lesson 07) or splitting the layers over nodes (PP, lessons "
                 "02–06) is what makes it fit.")
    return "\n".join(lines)
