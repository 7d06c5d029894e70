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
                        "A ring all-reduce works in place on buckets; it does not double the "
                        "gradients."))),
    Question(
        "01.q-tp64", "quiz", "choice",
        "Why not TP = 64 across 8 nodes?",
        options=(Option("TP must be a power of two, and the heads would not divide evenly",
                        "64 is a power of two, and 64 query heads divide by 64."),
                 Option("TP cannot exceed the number of layers a model has",
                        "That is pipeline parallelism's rule; TP splits each layer's matrices."),
                 Option("Its all-reduces sit on the critical path and would run over InfiniBand",
                        "About 50 instead of 450 GB/s per GPU: communication would dominate.",
                        True))),
)
