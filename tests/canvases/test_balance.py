"""Lesson 11's stage-balancing canvas (pplab/canvases/balance.py) over its range: pure Python,
no processes."""
import matplotlib
import pytest

matplotlib.use("Agg")

from pplab.canvases import balance as BA  # noqa: E402
from pplab.draw import scene_figure  # noqa: E402


@pytest.mark.parametrize("method", BA.BALANCE_METHODS)
def test_render_balance_over_the_range(method):
    for layers in (4, 8, 16, 32):
        for P in range(1, 9):
            for head in (0.0, 4.0):
                pic, msg = BA.render_balance(layers, 0.5, head, P, 8, method)
                if P > layers:
                    assert "at least" in msg and pic is None
                else:
                    assert "makespan" in msg and pic is not None
    pic, msg = BA.render_balance(16, 0.5, 2.0, 4, 8, method)
    assert [p["type"] for p in pic["panels"]] == ["bars", "timeline"]
    assert len(scene_figure(pic).axes) == 2


def test_balanced_beats_even_on_a_heavy_head():
    _, even = BA.partition_costs(BA.layer_costs(32, 0.0, 2.16), 4, "even")
    _, bal = BA.partition_costs(BA.layer_costs(32, 0.0, 2.16), 4, "balanced")
    assert max(bal) < max(even)
    assert BA.balance_timeline(bal, 8).makespan < BA.balance_timeline(even, 8).makespan
