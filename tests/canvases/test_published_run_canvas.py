"""Lesson 14's canvas over its whole range: every (M, V) it offers renders a picture and a
message that agree with the package; bad input is a message, never an exception."""
import itertools

import pytest

from pplab.canvases import base as W
from pplab.canvases import published as C
from pplab.closed_forms import bubble_both


@pytest.mark.parametrize("M,V", list(itertools.product(C.M_OPTIONS, C.V_OPTIONS)))
def test_every_setting_draws_and_says_both_denominators(M, V):
    pic, msg = C.render_published_run(M, V, draw="scene")
    assert pic is not None, msg
    timeline, memory = pic["panels"]
    assert timeline["type"] == "timeline" and timeline["ranks"] == 16
    assert memory["type"] == "bars" and len(memory["labels"]) == 16
    frac, ratio = bubble_both(16, M, V)
    assert f"(equal chunks: {ratio:.1%}, {frac:.1%})" in msg
    assert f"{C.row_for(M).gpus:,} GPUs" in msg and ("fits in" in msg) != ("over" in msg)


def test_the_layouts_of_table4_are_on_the_sliders():
    assert C.row_for(32).gpus == 8192 and C.row_for(16).gpus == 16384
    assert "over 80 GB" in C.render_published_run(32, 8, draw=False)[1]
    assert "fits in 80 GB" in C.render_published_run(16, 8, draw=False)[1]


@pytest.mark.parametrize("M,V", [(24, 8), (0, 8), (32, 3), (32, 16)])
def test_settings_the_model_cannot_mean_are_messages(M, V):
    pic, msg = C.render_published_run(M, V, draw="scene")
    assert pic is None and msg.startswith(f"M={M}, V={V}: ") and "\n" not in msg


def test_widget_builds_and_reacts_without_a_kernel():
    c = C.published_run_canvas()
    assert "8,192 GPUs" in c.last_message
    for M, V in itertools.product(C.M_OPTIONS, C.V_OPTIONS):
        c.controls["M"].value, c.controls["V"].value = M, V
        assert f"M={M}, V={V}" in c.last_message
    assert c.errors == [] and W.CANVASES[-1] is c
