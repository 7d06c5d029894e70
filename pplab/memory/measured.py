"""Predict what the real runtime measures: per-rank peak bytes saved for backward.

The analytic Korthikanti bytes assume 16-bit values, 1-byte dropout masks and Megatron's
exact op list; the tiny float32 model on CPU saves a different set of tensors. So the
prediction takes a *calibrated* per-layer byte count (measure one layer once, e.g. with
``torch.autograd.graph.saved_tensors_hooks``) plus per-stage extras for the embedding
(first stage) and the final norm + head + logits (last stage). What the schedule decides —
how many (stage, microbatch) activations are alive at once on each rank — is read from the
run order exactly as ``peak_inflight`` does it.
"""
from __future__ import annotations

from ..ir import Schedule
from ..partition import stage_layers
from . import activations as act
from .accounting import peak_weighted
from .model_spec import ModelSpec


def predict_saved_bytes(schedule: Schedule, model_spec: ModelSpec, microbatch_size: int,
                        recompute: str = "none", bytes_per_value: float = 4,
                        per_layer_bytes: float | None = None,
                        first_extra_bytes: float | None = None,
                        last_extra_bytes: float | None = None,
                        per_stage_bytes: float = 0.0) -> list[float]:
    """Per-rank peak saved-for-backward bytes. Unset sizes fall back to Korthikanti's formulas.
    ``per_stage_bytes``: kept once per stage and microbatch whatever its layers (GPipe's
    stage-level re-materialization keeps just the stage input)."""
    m, s, b = model_spec, model_spec.seq, microbatch_size
    if per_layer_bytes is None:
        per_layer_bytes = act.layer_activation_bytes(s, b, m.hidden, m.heads, 1, False,
                                                     recompute, bytes_per_value)
    if first_extra_bytes is None:
        first_extra_bytes = act.first_stage_extra_bytes(s, b, m.hidden)
    if last_extra_bytes is None:
        last_extra_bytes = act.last_stage_extra_bytes(s, b, m.hidden, m.vocab, 1, False,
                                                      bytes_per_value)
    ranges = stage_layers(schedule, m.layers)
    w = {}
    for st in range(schedule.num_stages):
        w[st] = per_stage_bytes + len(ranges[st]) * per_layer_bytes
        if schedule.is_first(st):
            w[st] += first_extra_bytes
        if schedule.is_last(st):
            w[st] += last_extra_bytes
    return peak_weighted(schedule, w)
