"""The head-of-line canvas (lesson 05) over its whole range; the button with the real run
replaced (tests/runtime/test_head_of_line.py runs it for real)."""
import itertools
from types import SimpleNamespace

import pytest

from pplab.canvases import head_of_line as H
from pplab.streams import warmup_end

GRID = list(itertools.product(range(H.HOL_P[0], H.HOL_P[1] + 1),
                              range(H.HOL_M[0], H.HOL_M[1] + 1),
                              range(H.HOL_V[0], H.HOL_V[1] + 1)))


def _steps(lo, hi, step):
    return [round(lo + i * step, 6) for i in range(int(round((hi - lo) / step)) + 1)]


@pytest.mark.slow
@pytest.mark.parametrize("P, M, V", GRID)
def test_every_shape_renders_or_says_why(P, M, V):
    pic, msg = H.render_head_of_line(P, M, V)
    if M % P:
        assert pic is None and "multiple of" in msg
        return
    assert [p["title"] for p in pic["panels"]] == ["front-loaded receives",
                                                  "just-in-time receives"]
    tls = H.simulate_orders(P, M, V, 1.0, 2.0)
    front, jit = tls["front-loaded"], tls["just-in-time"]
    assert front.makespan >= jit.makespan          # a blocking receive only ever adds waiting
    assert f"makespan {jit.makespan:.4g}" in msg and f"makespan {front.makespan:.4g}" in msg


@pytest.mark.parametrize("tb", _steps(*H.HOL_COSTS["tb"]))
@pytest.mark.parametrize("latency", _steps(*H.HOL_COSTS["latency"]))
def test_every_cost_renders_and_draws_lanes_once_messages_take_time(tb, latency):
    pic, msg = H.render_head_of_line(2, 8, 2, tb, latency)
    assert "front-loaded: makespan" in msg
    assert all(("lanes" in p) == (latency > 0) for p in pic["panels"])


def test_the_front_loaded_warm_up_ends_late_exactly_as_computed():
    tls = H.simulate_orders(2, 8, 2, 1.0, 2.0)
    assert warmup_end(tls["front-loaded"]) == 7.0 and warmup_end(tls["just-in-time"]) == 6.0
    same = H.simulate_orders(2, 8, 2, 1.0, 1.0)         # unit costs: the unit-time placement
    assert same["front-loaded"].makespan == same["just-in-time"].makespan   # is exact


def test_matplotlib_figure_has_both_orders():
    from pplab.draw import scene_figure
    fig = scene_figure(H.render_head_of_line(2, 8, 2, 2.0, 0.2)[0])
    titles = [ax.get_title(loc="left").split("\n")[0] for ax in fig.axes]
    assert titles == ["front-loaded receives", "just-in-time receives"]


def test_canvas_button_shows_measured_against_simulated(monkeypatch):
    def fake(P, M, V, tf, tb, progress=None, **kw):
        progress("rank 0 started")
        tls = H.simulate_orders(P, M, V, tf, tb)
        return {o: SimpleNamespace(timeline=tl, simulated=tl) for o, tl in tls.items()}
    monkeypatch.setattr(H, "measure_head_of_line", fake)
    c = H.head_of_line_canvas()
    assert "front-loaded: makespan 29" in c.last_message and c.errors == []
    c.controls["M"].value = 7
    assert "multiple of" in c.last_message
    c.controls["M"].value = 8
    c.button.click()
    c.state["thread"].join(900)   # returns when the work ends
    assert "+0.100 s measured, +0.100 s simulated" in c.measured.value
    assert not c.button.disabled


def test_in_a_browser_tab_the_button_says_what_to_run_instead(monkeypatch):
    c = H.head_of_line_canvas()
    monkeypatch.setattr(H, "in_browser", lambda: True)
    c.button.click()
    assert c.state["thread"] is None and "--comm front-loaded" in c.measured.value
