"""GPipe's re-materialization: what one pipeline rank keeps alive under GPipe's schedule.

GPipe runs all M forwards before any backward, so a rank's activations for all M microbatches
are alive at once. The GPipe paper (Huang et al. 2019) re-materializes: the forward keeps only
each microbatch's input to the rank's partition, and the backward re-runs the partition's forward
for one microbatch before differentiating it. The paper puts the peak at O(N + (L/K)·(N/M)) —
N samples in the mini-batch, L layers over K partitions. In bytes, per rank:

* ``none``:  M · L_r · a            every layer's activations of every microbatch
* ``stage``: M · x + L_r · a        M partition inputs, plus one microbatch re-run (GPipe)
* ``full``:  M · L_r · x + a        every layer's input kept, one layer re-run at a time
                                    (Megatron's full recomputation)

The names are the runtime's ``recompute=`` modes, which measure the kept part on real processes.

with L_r = layers on the rank, a = one layer's activations for one microbatch (Korthikanti),
x = one microbatch's boundary tensor (s·b·h values).
"""
from __future__ import annotations

REMAT_MODES = ("none", "stage", "full")


def gpipe_peak_activation_bytes(M: int, layers_on_rank: int, layer_bytes: float,
                                boundary_bytes: float, mode: str = "none") -> float:
    """Peak activation bytes of one GPipe rank (see the module docstring for the terms)."""
    if M < 1 or layers_on_rank < 1:
        raise ValueError(f"need M ≥ 1 and at least one layer on the rank, got M={M}, "
                         f"layers_on_rank={layers_on_rank}")
    if mode == "none":
        return M * layers_on_rank * layer_bytes
    if mode == "stage":
        return M * boundary_bytes + layers_on_rank * layer_bytes
    if mode == "full":
        return M * layers_on_rank * boundary_bytes + layer_bytes
    raise ValueError(f"mode must be one of {', '.join(REMAT_MODES)}, got {mode!r}")


def remat_table(label: str, layers_on_rank: int, layer_bytes: float, boundary_bytes: float,
                Ms=(1, 4, 8, 16, 32), unit: str = "MB") -> str:
    """The three modes side by side for several M, as text (lesson 03). The rank's layers are
    written L/P, as in the paper's L layers over K (= P) partitions."""
    u = {"kB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
    lines = [f"{label}: a = {layer_bytes / u:.3f} {unit} per layer, x = {boundary_bytes / u:.3f} "
             f"{unit}, L/P = {layers_on_rank} layers/rank",
             "   M    keep all   GPipe re-mat (M·x + L/P·a)  per-layer re-mat (M·L/P·x + a)"]
    for M in Ms:
        none, stage, full = (gpipe_peak_activation_bytes(M, layers_on_rank, layer_bytes,
                                                          boundary_bytes, mode)
                              for mode in REMAT_MODES)
        lines.append(f"  {M:2d} {none / u:10.2f} {unit} {stage / u:14.2f} {unit} "
                     f"{full / u:24.2f} {unit}")
    return "\n".join(lines)
