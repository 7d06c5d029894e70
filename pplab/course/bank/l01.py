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
        options=(Option("A few percent of it", "That is TP = 8 over NVLink."),
                 Option("About the same", "InfiniBand is ~9× slower than NVLink per GPU."),
                 Option("Nearly three times the compute", "And the next operation waits for "
                        "each sum.", True)),
        explain="The cell below prints 4 all-reduces against compute for TP = 2 … 16."),
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
        options=(Option("Each replica holds full parameters, gradients and optimizer states",
                        "Only ZeRO/FSDP shard them across replicas.", True),
                 Option("Because the activations grow with DP", "Activations per GPU depend on "
                        "the microbatch, not on DP."),
                 Option("It does lower it", "Look at the TP = 8, DP = 8, ZeRO-0 row."))),
    Question(
        "01.q-tp64", "quiz", "choice",
        "Why not TP = 64 across 8 nodes?",
        options=(Option("TP's all-reduces are on the critical path and would run at ~50 "
                        "instead of ~450 GB/s", "Communication would dominate compute.", True),
                 Option("TP must be a power of two", "64 is one."),
                 Option("TP cannot exceed the layer count", "That is PP's rule."))),
)
