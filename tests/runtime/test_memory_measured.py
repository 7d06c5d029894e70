"""The memory model predicts what real torchrun processes measure (issue 4 §3).

Per rank, the runtime records the peak bytes of tensors saved for backward. The model
multiplies calibrated bytes per stage (measured once, in-process, on one- and two-layer
stages) by the activations the schedule keeps alive — read off the run order exactly as the
simulator's peak_inflight does. Within 5% on every rank means the schedule's in-flight count,
the thing the lessons teach, is what real processes hold.
"""
import pytest

torch = pytest.importorskip("torch")

from pplab import make_schedule  # noqa: E402
from pplab.memory.measured import predict_saved_bytes  # noqa: E402
from pplab.memory.presets import get_preset  # noqa: E402
from pplab.runtime import run_many  # noqa: E402
from pplab.runtime.memory_probe import calibrate  # noqa: E402

CASES = [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)]


def predicted(schedule, recompute="none"):
    cal = calibrate(recompute=recompute)
    return predict_saved_bytes(schedule, get_preset("tiny"), microbatch_size=2,
                               per_layer_bytes=cal.per_layer, per_stage_bytes=cal.per_stage,
                               first_extra_bytes=cal.first_extra, last_extra_bytes=cal.last_extra)


def test_calibration_matches_korthikanti_structure():
    none, full = calibrate(recompute="none"), calibrate(recompute="full")
    assert none.per_stage == 0 == full.per_stage
    assert full.per_layer == 32 * 2 * 64 * 4       # full recompute keeps the layer input: s·b·h
    assert none.per_layer > 10 * full.per_layer
    stage = calibrate(recompute="stage")           # GPipe keeps only the stage input
    assert (stage.per_layer, stage.per_stage) == (0, 32 * 2 * 64 * 4)


def test_predicted_peak_saved_bytes_within_5_percent():
    """At P = 4, where every rank of 1F1B holds a different number of microbatches (P = 2
    shows the recomputation saving too: test_runtime_grads.py)."""
    P = 4
    items = [(name, dict(M=8, V=V, steps=1)) for name, V in CASES]
    items.append(("1f1b", dict(M=8, V=1, steps=1, recompute="full")))
    items.append(("gpipe", dict(M=8, V=1, steps=1, recompute="stage")))
    results = run_many(items, P, timeout=300)
    for (name, kw), r in zip(items, results):
        schedule = make_schedule(name, P, 8, kw["V"])
        want = predicted(schedule, kw.get("recompute", "none"))
        got = r.peak_saved_bytes
        print(name, kw.get("recompute", "none"), "P", P, "measured", got, "predicted",
              [int(x) for x in want])
        assert len(got) == P
        for rank in range(P):
            assert got[rank] == pytest.approx(want[rank], rel=0.05), (name, rank)
    none_1f1b, full_1f1b = results[1].peak_saved_bytes, results[3].peak_saved_bytes
    assert all(f < 0.5 * n for f, n in zip(full_1f1b, none_1f1b))   # recompute frees memory
