"""Lesson 14: a published run, taken apart (Llama 3 405B's pre-training layout)."""
from ..questions import Option, Question

#: ids this lesson's questions went by before (pplab.course.bank keeps them answering)
RENAMED = {"14.q-seed-105": "14.q-coincidence"}


def _gradient_gb() -> float:
    """GB of fp32 gradients one GPU of the 8,192-GPU row's worst rank holds through the step
    when the microbatches' gradients are summed whole and reduce-scattered once."""
    from ...memory.published_run import TABLE4, gradient_ways
    return gradient_ways(TABLE4[0])[0]["grads"] / 1e9


QUESTIONS = (
    Question(
        "14.m-per-replica", "predict", "choice",
        "Table 4's first row: 8,192 GPUs as TP 8 × PP 16 × DP, 16M tokens per step in sequences "
        "of 8,192 tokens. With one sequence per microbatch, how many microbatches does each "
        "pipeline run per step?",
        options=(Option("32: the step's sequences shared among the data-parallel replicas",
                        "8,192 ÷ (8 · 16) = 64 replicas; 2^24 tokens ÷ 8,192 = 2,048 sequences; "
                        "2,048 ÷ 64 = 32.", True),
                 Option("128: the step's sequences shared among the pipeline's stages",
                        "128 = 2,048 ÷ 16 divides the batch by PP; the stages of one pipeline "
                        "all work on the same microbatches. Dividing by the replicas, DP = 64, "
                        "gives 32."),
                 Option("2,048: the step's sequences, all of them through every pipeline",
                        "Each pipeline runs only its replica's share of the batch: 2,048 ÷ 64 "
                        "replicas = 32."),
                 Option("16: one microbatch for each of the pipeline's stages",
                        "M is set by the batch, not by P; 16 is the 16,384-GPU row, where "
                        "DP = 128.")),
        explain="Microbatches per pipeline = sequences per DP replica ÷ sequences per "
                "microbatch; Table 4 prints the first as 'batch size/DP'."),
    Question(
        "14.denominators", "predict", "choice",
        "P = 16 ranks, V = 8 chunks per rank, the 8,192-GPU row's M (section 1), all chunks "
        "equal. The CS336 lesson page gives 405B's bubble as 10.5% in one place and 19% in "
        "another. What do "
        "the two denominators give?",
        options=(Option("Both near 6%, idle ÷ busy the larger of the two",
                        "15/256 of the busy time, 15/271 of the total.", True),
                 Option("Both near 6%, idle ÷ total the larger of the two",
                        "P·makespan = busy + idle is the larger denominator, so idle ÷ total "
                        "is always the smaller number: 15/271 against 15/256."),
                 Option("About 19% of the total, 23% of the busy time",
                        "That is V·M = 64 (e.g. V = 2): 15/79 is the ÷ total bubble there. "
                        "At V·M = 256 it is 15/271 and 15/256."),
                 Option("About 10.5% of the total, 12% of the busy time",
                        "15/143 is V·M = 128 ÷ total: M = 16 at V = 8, the 16,384-GPU row. "
                        "At M = 32 it is 15/271 and 15/256.")),
        explain="Interleaved 1F1B idles (P−1)/V of a rank's time per microbatch pass: "
                "(P−1)/(V·M) of the busy time, (P−1)/(V·M + P−1) of the total."),
    Question(
        "14.lighter-ends", "predict", "choice",
        "Now the chunks as Llama 3 made them: the first holds the embedding alone, the last the "
        "output layer and loss alone (about 0.6 of a layer's FLOPs), 126 layers on the other "
        "126 chunks. At the same M, how far does the simulated bubble move from the equal-chunk "
        "one?",
        options=(Option("Under half a point: the full ranks in between still set the pace",
                        "Two ranks lose a layer; the fourteen in between pace the step, and the "
                        "fill and drain still cross all 16 ranks 8 times.", True),
                 Option("About half of it goes: the light ends shorten the fill and the drain",
                        "Only two of the 128 chunks get lighter; the fill and drain still cross "
                        "the other 126."),
                 Option("All of it goes: with light ends every rank carries the same work",
                        "Balance removes the idle a slow stage causes, not the fill and drain."),
                 Option("It doubles: the light ends sit idle while the middle ranks work",
                        "The ends idle a little more, but only two chunks of 128 change.")),
        explain="The lighter ends are not a bubble trick. The paper's reasons are memory (the "
                "first rank holds the embedding and the most warm-up microbatches, section 5) "
                "and compute (the last runs the output layer and loss). The bubble is the fill "
                "and the drain, crossed V times: P, V and M set it."),
    Question(
        "14.grad-gb", "predict", "number",
        "Llama 3 accumulates the gradients of a step's microbatches in fp32 and sends them over "
        "the data-parallel group once a step. How many GB of gradients does one GPU of a middle "
        "pipeline rank (8 of the 126 layers, TP 8, DP 64) hold until then?",
        answer=_gradient_gb, tol=0.03, unit="GB", source="pplab's memory model",
        traps=((0.2, "0.2 GB is a 1/64 shard. A shard is what is left after the "
                     "reduce-scatter; summed over the microbatches before it, the gradient "
                     "is whole."),
               (6.4, "6.4 GB is the bf16 width; the paper accumulates in fp32, 4 bytes a "
                     "value."),
               (102, "102 GB is 8 layers' gradients on one GPU; TP 8 splits every matrix "
                     "8 ways.")),
        explain="8 layers × 3.19 B parameters ÷ TP 8 = 3.19 B per GPU, × 4 bytes: the whole "
                "fp32 gradient of the rank's stage, held from the first microbatch to the "
                "reduce-scatter."),
    Question(
        "14.mfu-bubble", "predict", "choice",
        "At 8,192 GPUs Llama 3 reports 430 TFLOPs per GPU, 43.5% of the H100's 989 (the "
        "paper prints 43%). Its bubble is the one section 3 simulated with the lighter ends, "
        "as a share of the step. How many points of peak does the pipeline bubble cost there?",
        options=(Option("A few points: idling costs only what the busy ranks would reach",
                        "With b the bubble's share of the step (section 3's measurement), "
                        "43.5% ÷ (1 − b) = 46.2% while busy: 2.7 points lost to idling.", True),
                 Option("Its share of the step, all of it counted against the peak",
                        "Idle time costs the utilisation the ranks would have had, 46%, not "
                        "100%: 5.9% of 46% is 2.7 points, not 5.9."),
                 Option("About 9 points: a bubble is the largest loss in a deep pipeline",
                        "That needs a bubble near 19%; at M = 32, V = 8 it is 5.9%, 2.7 points."),
                 Option("None: the idle slots are filled with the step's communication",
                        "A rank that waits for its input computes nothing, whatever the "
                        "network does meanwhile.")),
        explain="MFU = (1 − bubble ÷ total) × utilisation while busy. The bubble is small; "
                "matmuls below peak and exposed communication take the rest."),
    Question(
        "14.q-coincidence", "quiz", "choice",
        "The CS336 notes' 15/143 ≈ 10.5% equals one true figure of Llama 3's run. Which?",
        options=(Option("Idle ÷ total at 16,384 GPUs",
                        "Right, and only by coincidence: there V·M = 8 · 16 = 128 too, while "
                        "the notes got 128 from another batch, DP and formula.", True),
                 Option("Idle ÷ busy at 8,192 GPUs", "There V·M = 8 · 32 = 256: 15/256, "
                        "5.9%."),
                 Option("Idle ÷ total at 8,192 GPUs", "There V·M = 256: 15/271, 5.5%."),
                 Option("Idle ÷ total of 1F1B at 16,384 GPUs", "Llama 3 ran "
                        "interleaved 1F1B; with V = 1 and M = 16 it would idle 15/31 of the "
                        "time."))),
    Question(
        "14.q-loudest", "quiz", "choice",
        "In this layout, which axis sends the most bytes per GPU per step?",
        options=(Option("TP: collectives of a whole activation in every layer",
                        "Four per layer per microbatch: hundreds of GB, inside the node on "
                        "NVLink.", True),
                 Option("PP: an activation at each of 128 chunk boundaries",
                        "One activation per chunk boundary per microbatch, 1/TP of it per GPU: "
                        "tens of GB."),
                 Option("DP: the fp32 gradients of 405 billion parameters",
                        "Each rank's own gradients and parameters once a step, 1/(TP·PP) of "
                        "the model: about 19 GB."))),
)


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals


@_reveals("14.m-per-replica")
def _m_per_replica() -> str:
    from ...memory.published_run import TABLE4, check_row
    assert [r.batch_per_dp for r in TABLE4[:2]] == [32, 16]
    assert TABLE4[0].sequences // 16 == 128          # the CS336 notes' 128: this batch over DP 16
    return "\n".join(line for r in TABLE4 for line in check_row(r))


@_reveals("14.denominators")
def _denominators() -> str:
    from ...memory.published_run import bubble
    lines = ["P=16, M=32, equal chunks",
             " V  V·M  idle÷busy  (P-1)/(V·M)  idle÷total  (P-1)/(V·M+P-1)"]
    for V in (1, 2, 4, 8):
        b = bubble(16, 32, V, uneven=False)
        assert abs(b["ratio"] - 15 / (32 * V)) < 1e-12
        assert abs(b["fraction"] - 15 / (32 * V + 15)) < 1e-12
        lines.append(f"{V:2d}  {32 * V:3d}  {b['ratio']:9.1%}  {b['closed_ratio']:11.1%}  "
                     f"{b['fraction']:10.1%}  {b['closed_fraction']:15.1%}")
    lines.append("the CS336 notes' 15/79 is the V·M = 64 row ÷ total, their 15/143 the "
                 "V·M = 128 row")
    lines.append("idle ÷ (P·makespan) is GPipe's and Zero Bubble's \"bubble rate\"; idle ÷ busy "
                 "is Megatron-LM's, and the Llama 3 paper's (PP − 1)/(V·M). With equal chunks "
                 "the simulator gives (P−1)/(V·M + P−1) and (P−1)/(V·M) exactly (lesson 05): "
                 "each pass of a microbatch through the fill and drain idles (P−1)/V of a "
                 "rank's time.")
    from ...closed_forms import bubble_fraction
    from ...memory.published_run import lecture_claims
    assert abs(bubble_fraction(16, 128) - 15 / 143) < 1e-12
    lines.append("The CS336 notes' inputs against Table 4 (section 4 reads them):")
    for c in lecture_claims():
        assert not c["ok"]
        lines.append(f"  notes: {c['claim']}\n     Table 4: {c['table']}")
    return "\n".join(lines)


@_reveals("14.lighter-ends")
def _lighter_ends() -> list:
    from ...draw import draw_timeline
    from ...memory.published_run import bubble, chunk_scales
    lines = [f"chunk FLOPs ÷ the mean chunk: first {chunk_scales(16, 32, 8)[0]:g}, others "
             f"{chunk_scales(16, 32, 8)[1]:g}, last {chunk_scales(16, 32, 8)[-1]:g}"]
    for M in (32, 16):
        eq, ll = bubble(16, M, 8, uneven=False), bubble(16, M, 8)
        assert abs(ll["fraction"] - eq["fraction"]) < 0.005
        lines.append(f"M={M}: idle÷total {eq['fraction']:.2%} equal → {ll['fraction']:.2%} "
                     f"Llama 3's; idle÷busy {eq['ratio']:.2%} → {ll['ratio']:.2%}")
    picture = draw_timeline(bubble(16, 16)["timeline"],
                            title="Llama 3's chunks, P = 16, V = 8, M = 16 (the 16,384-GPU row)")
    return ["\n".join(lines), picture]


@_reveals("14.grad-gb")
def _grad_gb() -> str:
    from ...memory.published_run import (TABLE4, activation_budget, gradient_ways,
                                         implied_step_time, memory_table)
    lo, hi = TABLE4[0], TABLE4[1]
    lines = []
    for row in (lo, hi):
        for w in gradient_ways(row):
            how = "summed whole, reduced once a step" if w["mode"] == "per_step" else \
                "reduce-scattered every microbatch"
            lines.append(f"{row.label}, gradients {how}: rank {w['rank']} holds "
                         f"{w['grads'] / 1e9:.2f} GB of them, {w['total'] / 1e9:.1f} GB in all "
                         f"({'fits in' if w['fits'] else 'over'} 80 GB); DP sends "
                         f"{w['dp_bytes'] / 1e9:.1f} GB a step")
    (lo_once, lo_every), (hi_once, hi_every) = gradient_ways(lo), gradient_ways(hi)
    assert lo_once["grads"] > 7 * lo_every["grads"] and \
        lo_every["dp_bytes"] > 20 * lo_once["dp_bytes"]
    assert not (lo_once["fits"] or lo_every["fits"] or hi_once["fits"] or hi_every["fits"])
    rows = memory_table(lo)
    lines += ["", "memory per GPU of each pipeline rank, 8,192 GPUs (GB):"] + rows[:4] + \
        ["   ..."] + rows[-2:]
    mid = rows[2].split()                                          # rank 1, a middle rank
    budget = activation_budget(lo)
    full = max(float(r.split()[-1]) for r in memory_table(lo, recompute="full")[1:])
    kept = [gradient_ways(row, activations="kept") for row in (lo, hi)]
    kept_layer = activation_budget(lo, activations="kept")["per_layer_sbh_t"]
    assert not kept[0][0]["fits"] and kept[0][1]["fits"] and kept[1][1]["fits"]
    lines += [
        "",
        f"- Weights: {float(mid[2]):.1f} GB on a middle rank (8 layers, TP 8, bf16); the "
        f"optimizer shard is small ({float(mid[4]):.1f} GB) because DP = 64 divides it. The "
        "first rank's embedding and the last rank's output layer (2.1 B parameters each, "
        "over TP 8) take the place of the layer each gave up.",
        f"- Gradients: 8 layers of 3.19 B parameters over TP 8 = 3.19 B per GPU, 4 bytes each "
        f"= {float(mid[3]):.1f} GB, whole from the first microbatch to the reduce-scatter; a "
        f"1/64 shard, {lo_every['grads'] / 1e9 - float(mid[3]) / 8:.1f} GB, is what remains "
        "after it.",
        f"- Activations are the largest item: interleaved 1F1B keeps P + (P-1)/V = "
        f"{16 + 15 / 8:.1f} rank-shares in flight on rank 0 (lesson 05), each a whole 8,192-"
        "token sequence through 8 layers; rank 1, with 8 full layers and almost rank 0's "
        "depth, holds the most bytes.",
        "",
        "Once a step or every microbatch? The paper's words, FP32 gradient accumulation over "
        "micro-batches, read most simply as the first: a sum kept whole on every GPU and "
        f"reduce-scattered once, DP traffic {lo_once['dp_bytes'] / 1e9:.1f} GB a step (section "
        "6); torch's own pipelining runtime does the same (torch.distributed.pipelining turns "
        "FSDP's gradient sync off in every microbatch's backward and reduce-scatters once, "
        f"after the last). pplab then puts rank {lo_once['rank']} at "
        f"{lo_once['total'] / 1e9:.1f} GB at 8,192 GPUs and {hi_once['total'] / 1e9:.1f} GB at "
        "16,384: over the 80 GB the paper trained in. Reduce-scattering after every "
        f"microbatch keeps a shard plus one layer's gradient ({lo_every['grads'] / 1e9:.1f} GB): "
        f"{lo_every['total'] / 1e9:.1f} and {hi_every['total'] / 1e9:.1f} GB, still over, and "
        f"sends {lo_every['dp_bytes'] / 1e9:.0f} GB a step instead of "
        f"{lo_once['dp_bytes'] / 1e9:.1f}, {lo_every['dp_seconds']:.0f} s of a "
        f"{implied_step_time(lo):.1f} s step at 50 GB/s unless it hides behind the backward.",
        "",
        f"Either way pplab's count is {lo_once['total'] / 1e9 - 80:.0f} GB too high with whole "
        "gradients, more than a modelling error of a few GB, and it sizes what must give: the "
        f"rank fits if it keeps {budget['fits_inflight']:.1f} rank-shares in flight instead of "
        f"{budget['inflight']:.1f}, or if a layer keeps about "
        f"{budget['fits_per_layer_sbh_t']:.0f}·sbh/t instead of Korthikanti's "
        f"{budget['per_layer_sbh_t']:g}. His count is for a GPT layer: two dropout masks "
        "Llama has none of, a 4h GeLU MLP, full-width K and V. Counting what a Llama layer's "
        "backward needs (the norms' outputs, Q, K and V at GQA's 8 heads, the attention "
        f"output, SwiGLU's gate, up and product) gives {kept_layer:.2f}·sbh/t: "
        f"{kept[0][0]['total'] / 1e9:.1f} GB with whole gradients, still over, and "
        f"{kept[0][1]['total'] / 1e9:.1f} GB (8,192 GPUs) and {kept[1][1]['total'] / 1e9:.1f} GB "
        "(16,384) with gradients reduce-scattered every microbatch, which fit. That is the "
        "reading pplab's planner takes for its published-runs table (docs/memory.md); the paper "
        "prints neither its per-layer bytes nor when it reduces, so the lesson keeps both. "
        f"Full recomputation, which the paper did not need, would bring it to {full:.0f} GB."]
    return "\n".join(lines)


@_reveals("14.q-coincidence")
def _coincidence() -> str:
    """Section 4's reading of the CS336 page's figures, claim by claim, once the quiz is
    answered: its closing numbers are the bubble question's answers."""
    from ...memory.published_run import TABLE4, bubble
    lo, hi = TABLE4[0], TABLE4[1]
    eq = {r.gpus: bubble(16, r.batch_per_dp, 8, uneven=False) for r in (lo, hi)}
    ll = {r.gpus: bubble(16, r.batch_per_dp, 8) for r in (lo, hi)}
    assert abs(eq[hi.gpus]["fraction"] - 15 / 143) < 1e-12     # the page's 15/143, by chance
    pct = lambda d, k: f"{d[k]:.1%}"                          # noqa: E731
    return "\n".join([
        "What went wrong, claim by claim:",
        f"* GPUs and DP: no row has DP = 16: 405B ran on {lo.gpus:,} GPUs (DP {lo.dp}) and "
        f"{hi.gpus:,} (DP {hi.dp}, or DP 8 with CP 16 for 131,072-token sequences).",
        f"* Batch: 16M tokens per step is {lo.sequences:,} sequences of 8,192, not 16,384 "
        "(that would be 134M tokens).",
        f"* Microbatches: per pipeline it is batch/DP, {lo.batch_per_dp} or "
        f"{hi.batch_per_dp} with one sequence each. The page's 128 is the right "
        f"{lo.sequences:,} sequences over its wrong DP of 16; its 64 matches no row.",
        "* Formula: (P−1)/(M+P−1) is GPipe's and 1F1B's, for V = 1. Llama 3 interleaves, and "
        f"with V = 8 its bubble is 15/(8·M): {pct(eq[lo.gpus], 'ratio')} of the busy time at "
        f"{lo.gpus:,} GPUs, {pct(eq[hi.gpus], 'ratio')} at {hi.gpus:,} (÷ total "
        f"{pct(eq[lo.gpus], 'fraction')} and {pct(eq[hi.gpus], 'fraction')}). The 15/143 "
        f"equals the {hi.gpus:,}-GPU row's ÷ total figure only because 8 × 16 = 128 as well; "
        "15/79 would need V·M = 64.",
        "* MFU: 38% is the long-context row (CP 16, 131,072 tokens); the 8,192-token rows "
        "report 43% and 41%. Section 7 works out what the bubble costs in MFU.",
        "* The article Pipeline Parallelism: From GPipe to DualPipe tabulates GPipe's bubble; "
        "its row P = 16, M = 128 gives the same 10.5%, right for GPipe. It says nothing about "
        "405B's schedule.",
        f"So 405B's bubble is {pct(eq[lo.gpus], 'ratio')} of the busy time "
        f"({pct(eq[lo.gpus], 'fraction')} of the total) at {lo.gpus:,} GPUs, "
        f"{pct(eq[hi.gpus], 'ratio')} ({pct(eq[hi.gpus], 'fraction')}) at {hi.gpus:,}, with "
        "V = 8 and one sequence per microbatch; Llama 3's lighter ends move the simulated "
        f"values to {pct(ll[lo.gpus], 'ratio')} ({pct(ll[lo.gpus], 'fraction')}) and "
        f"{pct(ll[hi.gpus], 'ratio')} ({pct(ll[hi.gpus], 'fraction')})."])


@_reveals("14.mfu-bubble")
def _mfu_bubble() -> str:
    from ...memory.published_run import TABLE4, fit_efficiency, mfu_budget
    lines = ["row                        MFU   bubble÷total  busy util.  bubble costs  rest"]
    for row in TABLE4:
        b = mfu_budget(row)
        lines.append(f"{row.label:25s} {b['mfu']:5.1%}  {b['bubble_fraction']:12.1%}  "
                     f"{b['busy']:10.1%}  {b['bubble_points'] * 100:9.1f} pt  "
                     f"{b['rest_points'] * 100:4.1f} pt")
    first = mfu_budget(TABLE4[0])
    assert 0.02 < first["bubble_points"] < 0.035 and first["rest_points"] > 0.5
    lines.append("An idle rank computes nothing, so MFU = (1 − bubble ÷ total) × (share of peak "
                 "reached while the ranks compute). The rest is whatever slows the busy ranks: "
                 "matmuls below peak, communication not hidden, stragglers. The CS336 notes' "
                 "\"~47%, ~9 points\" is the same identity applied to the long-context row's 38% "
                 "and a 19% bubble the run did not have.")
    for row in TABLE4[:2]:
        eff, est = fit_efficiency(row)
        lines.append(f"{row.label}: pplab's step model, fitted to the reported throughput "
                     f"(matmuls at {eff:.1%} of peak), puts the bubble with the point-to-point "
                     f"hops at {est['bubble_fraction']:.1%} of the step")
    return "\n".join(lines)
