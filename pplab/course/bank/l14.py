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
        "equal. Stanford CS336's "
        "Lecture 8 notes give 405B's bubble as 10.5% in one place and 19% in another. What do "
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
        explain="The lighter ends answer the paper's memory and compute imbalance (the first "
                "rank's embedding and warm-up, the last rank's output layer and loss); the "
                "bubble is set by P, V and M."),
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
        "paper prints 43%), and its bubble, with the lighter ends, is 5.9% of the step "
        "(section 4). How many points of peak does the pipeline bubble cost there?",
        options=(Option("About 3 points: small next to what the busy ranks leave unused",
                        "The bubble takes 5.9% of the step: 43.5% ÷ (1 − 0.059) = 46.2% while "
                        "busy, 2.7 points lost to idling.", True),
                 Option("About 6 points: the step's idle share, counted against the peak",
                        "Idle time costs the utilisation the ranks would have had, 46%, not "
                        "100%: 5.9% of 46% is 2.7 points."),
                 Option("About 9 points: a bubble is the largest loss in a deep pipeline",
                        "That needs a bubble near 19%; at M = 32, V = 8 it is 5.9%."),
                 Option("None: the idle slots are filled with the step's communication",
                        "A rank that waits for its input computes nothing, whatever the "
                        "network does meanwhile.")),
        explain="MFU = (1 − bubble ÷ total) × utilisation while busy. The bubble is small; "
                "matmuls below peak and exposed communication take the rest."),
    Question(
        "14.q-coincidence", "quiz", "choice",
        "The CS336 notes' 15/143 ≈ 10.5% equals one true figure of Llama 3's run. Which?",
        options=(Option("Idle ÷ total at 16,384 GPUs, where V·M = 8 · 16",
                        "Right, and only by coincidence: the notes got 128 from another "
                        "batch, DP and formula.", True),
                 Option("Idle ÷ busy at 8,192 GPUs, where V·M = 256", "That is 15/256, "
                        "5.9%."),
                 Option("Idle ÷ total at 8,192 GPUs, where V·M = 256", "That is 15/271, "
                        "5.5%."),
                 Option("Idle ÷ total of 1F1B at 16,384 GPUs, where M = 16", "Llama 3 ran "
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
