"""GPipe's re-materialization arithmetic and gradient accumulation (lesson 02)."""
import pytest

from pplab import make_schedule
from pplab.memory.measured import predict_saved_bytes
from pplab.memory.presets import get_preset
from pplab.memory.remat import gpipe_peak_activation_bytes
from pplab.runtime.accumulate import accumulation_error


@pytest.mark.parametrize("M, L, a, x", [(1, 1, 10.0, 1.0), (8, 2, 296960, 16384),
                                        (32, 8, 570e6, 33.5e6)])
def test_closed_forms(M, L, a, x):
    assert gpipe_peak_activation_bytes(M, L, a, x, "none") == M * L * a
    assert gpipe_peak_activation_bytes(M, L, a, x, "stage") == M * x + L * a
    assert gpipe_peak_activation_bytes(M, L, a, x, "full") == M * L * x + a


def test_keep_all_equals_the_memory_model_of_a_gpipe_middle_rank():
    # the memory model's GPipe peaks were measured on real processes (tests/test_memory_measured)
    spec, sched = get_preset("tiny"), make_schedule("gpipe", 4, 8)
    per_rank = predict_saved_bytes(sched, spec, 2, per_layer_bytes=296960.0)
    assert per_rank[1] == gpipe_peak_activation_bytes(8, spec.layers // 4, 296960.0, 16384.0)


def test_stage_remat_hardly_grows_with_M_but_does_not_help_at_M_1():
    a, x, L = 570e6, 33.5e6, 8
    peaks = [gpipe_peak_activation_bytes(M, L, a, x, "stage") for M in (1, 32)]
    assert peaks[1] / peaks[0] < 1.25
    assert gpipe_peak_activation_bytes(1, L, a, x, "stage") > gpipe_peak_activation_bytes(1, L, a, x)


@pytest.mark.parametrize("bad, words", [(dict(M=0), "M ≥ 1"), (dict(layers_on_rank=0), "one layer"),
                                        (dict(mode="gpipe"), "mode must be one of")])
def test_bad_input(bad, words):
    args = dict(M=4, layers_on_rank=2, layer_bytes=1.0, boundary_bytes=1.0, mode="none") | bad
    with pytest.raises(ValueError, match=words):
        gpipe_peak_activation_bytes(**args)


@pytest.mark.slow
@pytest.mark.parametrize("M", [1, 3, 8])
def test_accumulated_gradients_equal_the_batch_gradient_only_with_1_over_M(M):
    assert accumulation_error(M) < 1e-6
    assert accumulation_error(M, scale_by_1_over_M=False) == pytest.approx(M - 1, abs=1e-4)
    with pytest.raises(ValueError, match="M must be ≥ 1"):
        accumulation_error(0)


def test_table_rows_are_the_formulas():
    from pplab.memory.remat import remat_table
    text = remat_table("x", 8, 570.425e6, 33.554e6, Ms=(1, 32), unit="GB")
    rows = text.splitlines()[2:]
    assert rows[0].split() == ["1", "4.56", "GB", "4.60", "GB", "0.84", "GB"]
    assert rows[1].split() == ["32", "146.03", "GB", "5.64", "GB", "9.16", "GB"]
