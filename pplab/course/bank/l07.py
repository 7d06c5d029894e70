"""Lesson 07: where the memory goes."""
from ...memory import model_states_bytes
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "07.zero1-70b", "predict", "number",
        "70B parameters on 64 data-parallel GPUs with ZeRO-1, which shards only the optimizer "
        "states over the GPUs. GB of model states per GPU?",
        answer=lambda: sum(model_states_bytes(70e9, 64, 1)) / 1e9, unit="GB",
        source="the ZeRO paper's formula",
        traps=((230, "~230 GB is the CS336 page's figure; parameters and gradients (4Ψ = "
                     "280 GB) stay whole under ZeRO-1."),
               (17.5, "17.5 GB is ZeRO-3 / FSDP, which shards everything.")),
        explain="4Ψ + 12Ψ/N_d: the bf16 weights and gradients stay on every GPU; only the "
                "12Ψ optimizer states are divided by 64."),
    Question(
        "07.gpipe-vs-1f1b", "predict", "choice",
        "Llama 3 70B, P = 8, M = 32. Going from 1F1B to GPipe, rank 0's activations…",
        options=(Option("stay the same: both schedules run the same microbatches",
                        "Same microbatches, not at the same time: GPipe runs all 32 forwards "
                        "first."),
                 Option("double: GPipe's long warm-up keeps twice as many alive",
                        "1F1B's rank 0 holds P = 8, GPipe's all M = 32."),
                 Option("grow 4×: from P microbatches alive to all M of them",
                        "From P = 8 microbatches to M = 32.", True),
                 Option("grow 32×: GPipe keeps all of them, 1F1B only one",
                        "Only 1F1B's last rank holds one; its rank 0 holds P.")),
        explain="GPipe runs all 32 forwards before any backward; 1F1B's rank 0 turns around "
                "after P."),
    Question(
        "07.zbh1-peak-rank", "predict", "choice",
        "Same layout under ZB-H1, with selective recomputation. Which rank needs the most "
        "memory?",
        options=(Option("Rank 0: it holds P whole microbatches and the embedding",
                        "Rank 0 still holds P whole microbatches, but the last rank's 7 "
                        "pending Ws keep 32 of the 34 bytes per token and hidden unit that "
                        "selective recomputation leaves, plus the output layer and the fp32 "
                        "logits."),
                 Option("The last rank: its pending Ws weigh almost a microbatch",
                        "It goes from 1 microbatch (1F1B) to 1 whole and 7 with a pending W; "
                        "under selective recomputation a pending W costs almost a whole "
                        "microbatch, and it also holds the output layer and the fp32 logits.",
                        True),
                 Option("A middle rank: it pays for both whole and pending ones",
                        "A middle rank holds fewer whole microbatches than rank 0 and fewer "
                        "pending ones than the last rank."),
                 Option("All equal: ZB-H1 keeps P microbatches alive on each rank",
                        "Alive, not whole: and parameters and logits differ between ranks.")),
        explain="pplab's memory report names the peak rank for each schedule."),
    Question(
        "07.q-zero2", "quiz", "number",
        "ZeRO-2 on N_d = 8 for Ψ = 10B: GB per GPU?",
        answer=37.5, unit="GB",
        traps=((20, "20 GB is 2Ψ alone (and, at N_d = 8, also ZeRO-3's 16Ψ/N_d); ZeRO-2 "
                    "keeps the bf16 parameters whole and adds the sharded 14Ψ/N_d."),),
        hint="2Ψ + 14Ψ/N_d."),
    Question(
        "07.q-rank0", "quiz", "choice",
        "Why does rank 0 of a 1F1B pipeline need more memory than the middle ranks, with equal "
        "layers?",
        options=(Option("It keeps P microbatches alive and holds the token embedding",
                        "Both show in the per-rank bars.", True),
                 Option("It keeps the optimizer states of every rank in the pipeline",
                        "Each rank keeps its own."),
                 Option("It computes the loss and keeps the logits of every microbatch",
                        "The last rank does."))),
)


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals


@_reveals("07.zero1-70b")
def _zero1_70b() -> list:
    from ...draw.memory import draw_zero_stages
    from ...memory import model_states_bytes
    psi, nd, GB = 70e9, 64, 1e9
    paper = [sum(model_states_bytes(7.5e9, nd, z)) / GB for z in range(4)]
    assert [round(x, 1) for x in paper] == [120.0, 31.4, 16.6, 1.9]      # ZeRO's Figure 1
    claims = {1: "~230 GB", 2: "~160 GB", 3: "17.5 GB"}
    assert abs(sum(model_states_bytes(psi, nd, 1)) / GB - (4 * 70 + 12 * 70 / 64)) < 1e-9
    per = {z: sum(model_states_bytes(psi, nd, z)) / GB for z in (1, 2, 3)}
    assert per[3] < 80 < per[2] < per[1]
    table = ["ZeRO's stages, bytes of model states per GPU with Ψ parameters (ZeRO §5):",
             "  stage         also sharded        bytes per GPU",
             "  0 (plain DP)  nothing             2Ψ + 2Ψ + 12Ψ = 16Ψ",
             "  1             optimizer states    4Ψ + 12Ψ/N_d",
             "  2             + gradients         2Ψ + 14Ψ/N_d",
             "  3 (= FSDP)    + parameters        16Ψ/N_d", "",
             "The ZeRO paper's own example, Ψ = 7.5B on N_d = 64 GPUs (its Figure 1):",
             *[f"  ZeRO-{z}: {paper[z]:6.2f} GB per GPU" for z in range(4)], ""]
    return ["\n".join(table +
        ["Ψ = 70B on N_d = 64 GPUs, your question (the CS336 page's example):"] +
        [f"  ZeRO-{z}: {per[z]:6.1f} GB   (lecture: {claims[z]})" for z in (1, 2, 3)] +
        ["The CS336 page's 70B table, checked: ZeRO-1 is "
         f"{per[1]:.1f} GB, not ~230 GB, because 4Ψ = {4 * psi / GB:.0f} GB stays on every GPU "
         f"(the bf16 parameters and gradients are not sharded); ZeRO-2 is {per[2]:.1f} GB, "
         f"close to the lecture's ~160; FSDP's {per[3]:.1f} GB is right. Only stage 3 gets a "
         "70B model under 80 GB with data parallelism alone."]),
            draw_zero_stages(7.5e9, nd)]


def _schedules_memory(names) -> tuple[list, dict]:
    """Rank 0's in-flight count and each schedule's peak rank, Llama 3 70B at TP = PP = DP = 8."""
    from ...memory import ParallelConfig, get_preset, memory_report
    GB = 1e9
    m = get_preset("llama3-70b").with_(seq=4096)
    cfg = ParallelConfig(tp=8, pp=8, dp=8, zero=1, sp=True, recompute="selective",
                         microbatches=32)
    lines, reps = [], {}
    for name, V in names:
        rep = reps[name] = memory_report(m, cfg.with_(schedule=name, virtual=V))
        r0 = rep.per_rank[0]
        lines.append(f"{name:11s} rank 0: in-flight {r0.inflight:5.2f} rank-shares, params "
                     f"{r0.params / GB:5.2f} GB, activations {r0.activations / GB:6.2f} GB, peak "
                     f"{rep.peak_bytes / GB:6.2f} GB on rank {rep.peak_rank}")
    return lines, reps


@_reveals("07.gpipe-vs-1f1b")
def _gpipe_vs_1f1b() -> str:
    lines, reps = _schedules_memory((("gpipe", None), ("1f1b", None)))
    assert reps["gpipe"].per_rank[0].inflight == 4 * reps["1f1b"].per_rank[0].inflight
    return "\n".join(lines + ["GPipe's rank 0 holds all M = 32 microbatches, 1F1B's P = 8."])


@_reveals("07.zbh1-peak-rank")
def _zbh1_peak_rank() -> str:
    lines, reps = _schedules_memory((("gpipe", None), ("1f1b", None), ("interleaved", 2),
                                     ("zb-h1", None), ("dualpipev", None), ("dualpipe", None)))
    from ...registry import make_schedule
    from ...timeline import peak_inflight
    zb, one = reps["zb-h1"], reps["1f1b"]
    assert zb.peak_rank == 7 and [round(r.inflight) for r in zb.per_rank] == [8] * 8
    last_1f1b, last_zb = one.per_rank[7].activations / 1e9, zb.per_rank[7].activations / 1e9
    assert round(last_1f1b, 2) == 1.71 and round(last_zb, 2) == 12.08 and last_zb < 8 * last_1f1b
    assert peak_inflight(make_schedule("dualpipev", 8, 32))[0] == 2 * 8 + 1
    return "\n".join(["Each schedule's peak rank, Llama 3 70B at TP = PP = DP = 8, M = 32",
                      "(in-flight: microbatches, in units of one rank's full share of layers):"]
                     + lines + [
        "",
        "GPipe runs all 32 forwards first: every rank holds all 32 microbatches, and the last",
        "rank, which also keeps the fp32 logits of every microbatch, is the peak.",
        "Interleaved (V = 2): rank 0 holds 8 × (1 + (P − 1)/(P·V)) = 11.5 rank-shares,",
        "Korthikanti §4.2.3's factor: the warm-up runs further ahead in half-size chunks.",
        "ZB-H1 keeps P microbatches alive on every rank, but rank r holds only P − r of them",
        "whole: up to r wait for their W and keep the linear layers' inputs and output",
        "gradients (32·s·b·h bytes per layer at t = 1, Zero Bubble's M_W, its Table 1). With",
        "selective recomputation a whole microbatch keeps 34·s·b·h, so a pending W is almost",
        f"as heavy: the last rank's activations go from {last_1f1b:.2f} GB (1F1B) to "
        f"{last_zb:.2f} GB,",
        "and with the output layer and the fp32 logits it becomes the peak rank.",
        "DualPipeV folds the pipeline into a V: rank 0 holds the first and the last stage",
        "(embedding and output layer) and 2P + 1 = 17 half-size chunks at its peak.",
        "DualPipe runs two pipelines in opposite directions: every rank holds two copies of",
        "its parameters (DeepSeek-V3 Table 2: 2× parameters, P + 1 activations)."])
