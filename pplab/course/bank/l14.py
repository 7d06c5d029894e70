"""Lesson 14: a published run, taken apart (Llama 3 405B's pre-training layout)."""
from ..questions import Option, Question

QUESTIONS = (
    Question(
        "14.m-per-replica", "predict", "choice",
        "Table 4's first row: 8,192 GPUs as TP 8 × PP 16 × DP, 16M tokens per step in sequences "
        "of 8,192 tokens. With one sequence per microbatch, how many microbatches does each "
        "pipeline run per step?",
        options=(Option("32: the batch's 2,048 sequences shared by 64 pipelines",
                        "8,192 ÷ (8 · 16) = 64 replicas; 2^24 tokens ÷ 8,192 = 2,048 sequences; "
                        "2,048 ÷ 64 = 32.", True),
                 Option("128, as the lecture says", "128 = 2,048 ÷ 16: the right batch over a "
                        "DP of 16, which no row of Table 4 has."),
                 Option("2,048: the whole batch", "Each pipeline runs only its replica's share "
                        "of the batch."),
                 Option("16: one per stage", "That is the 16,384-GPU row, where DP = 128.")),
        explain="Microbatches per pipeline = sequences per DP replica ÷ sequences per "
                "microbatch; Table 4 prints the first as 'batch size/DP'."),
    Question(
        "14.denominators", "predict", "choice",
        "P = 16 ranks, V = 8 chunks per rank, M = 32, all chunks equal. The lecture gives 405B's "
        "bubble as 10.5% in one place and 19% in another. What do the two denominators give?",
        options=(Option("Both near 6%, idle ÷ busy the larger of the two",
                        "15/256 of the busy time, 15/271 of the total.", True),
                 Option("Both near 6%, idle ÷ total the larger of the two",
                        "P·makespan = busy + idle is the larger denominator, so idle ÷ total "
                        "is always the smaller number."),
                 Option("About 19% of the total, 23% of the busy time",
                        "That is V·M = 64 (e.g. V = 2): 15/79 is the ÷ total bubble there."),
                 Option("10.5% either way", "15/143 is V·M = 128 ÷ total: M = 16 at V = 8, the "
                        "16,384-GPU row; ÷ busy it is 15/128.")),
        explain="Interleaved 1F1B idles (P−1)/V of a rank's time per microbatch pass: "
                "(P−1)/(V·M) of the busy time, (P−1)/(V·M + P−1) of the total."),
    Question(
        "14.lighter-ends", "predict", "choice",
        "Now the chunks as Llama 3 made them: the first holds the embedding alone, the last the "
        "output layer and loss alone (about 0.6 of a layer's FLOPs), 126 layers on the other "
        "126 chunks. At M = 32, how far does the simulated bubble move from the equal-chunk one?",
        options=(Option("Less than half a point, either way",
                        "Two ranks lose a layer; the fourteen in between still pace the step.",
                        True),
                 Option("It halves", "The fill and drain still cross all 16 ranks 8 times."),
                 Option("It disappears: balanced stages leave no bubble", "Balance removes the "
                        "idle that a slow stage causes, not the fill and drain."),
                 Option("It doubles", "The ends are lighter, not heavier.")),
        explain="The lighter ends answer the paper's memory and compute imbalance (the first "
                "rank's embedding and warm-up, the last rank's output layer and loss); the "
                "bubble is set by P, V and M."),
    Question(
        "14.mfu-bubble", "predict", "choice",
        "At 8,192 GPUs Llama 3 reports 430 TFLOPs per GPU, 43% of the H100's 989. How many "
        "points of peak does the pipeline bubble cost there?",
        options=(Option("About 3 points; most of the rest is lost while the ranks compute",
                        "The bubble takes 5.9% of the step: 43.5% / (1 − 0.059) = 46.2% while "
                        "busy, 2.7 points lost to idling.", True),
                 Option("About 9 points, as the lecture says", "That needs a 19% bubble."),
                 Option("About 19 points", "That would be a bubble of 30% of the step."),
                 Option("None: communication hides it", "A rank that waits for its input "
                        "computes nothing, whatever the network does.")),
        explain="MFU = (1 − bubble ÷ total) × utilisation while busy. The bubble is small; "
                "matmuls below peak and exposed communication take the rest."),
    Question(
        "14.q-seed-105", "quiz", "choice",
        "The lecture's 15/143 ≈ 10.5% equals one true figure of Llama 3's run. Which?",
        options=(Option("Idle ÷ total at 16,384 GPUs: M = 16, V = 8, V·M = 128",
                        "Right, and only by coincidence: the lecture got 128 from another "
                        "batch, DP and formula.", True),
                 Option("Idle ÷ busy at 8,192 GPUs", "That is 15/256."),
                 Option("The GPipe bubble of the run", "Llama 3 ran interleaved 1F1B, not "
                        "GPipe; with V = 1 and M = 16 it would idle 15/31 of the time."))),
    Question(
        "14.q-loudest", "quiz", "choice",
        "In this layout, which axis sends the most bytes per GPU per step?",
        options=(Option("TP: four all-reduces of an activation per layer per microbatch",
                        "Hundreds of GB, inside the node on NVLink.", True),
                 Option("PP: sixteen stages, eight chunks each", "One activation per chunk "
                        "boundary per microbatch: tens of GB."),
                 Option("DP: 64 replicas", "Each rank's gradients and parameters once per "
                        "step: about 19 GB."))),
)
