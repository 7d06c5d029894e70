"""Lesson 14's canvas over its whole range: every (M, V) it offers renders a picture and a
message that agree with the package; bad input is a message, never an exception."""
import itertools

import pytest

from pplab.canvases import base as W
from pplab.canvases import published as C
from pplab.memory import published_run as pr


@pytest.mark.slow
@pytest.mark.parametrize("M,V,grads", list(itertools.product(C.M_OPTIONS, C.V_OPTIONS, C.GRADS)))
def test_every_setting_draws_and_says_both_denominators(M, V, grads):
    """Llama 3's own chunks' bubble, both ways; not the equal chunks' beside it, which would
    answer 14.lighter-ends (how far the lighter ends move it) at every setting."""
    pic, msg = C.render_published_run(M, V, grads)
    assert pic is not None, msg
    timeline, memory = pic["panels"]
    assert timeline["type"] == "timeline" and timeline["ranks"] == 16
    assert memory["type"] == "bars" and len(memory["labels"]) == 16
    b = pr.bubble(16, M, V)
    assert f"bubble {b['ratio']:.1%} of the busy time, {b['fraction']:.1%} of the total" in msg
    assert "equal" not in msg
    assert f"{C.row_for(M).gpus:,} GPUs" in msg and ("fits in" in msg) != ("over" in msg)
    dp = pr.axis_bytes(C.row_for(M), V=V, zero2_reduce=C.GRADS[grads])["bytes"]["dp"]
    assert f"reduce-scattered {grads}: DP sends {dp / 1e9:.0f} GB a step" in msg


def test_the_gradient_choice_trades_memory_for_dp_traffic():
    """Once a step: the whole fp32 gradient held, DP ~19 GB; every microbatch: a shard held,
    DP M times the gradients. Same bubble either way."""
    once, every = (C.render_published_run(32, 8, g)[1] for g in C.GRADS)
    assert once.split("\n")[0] == every.split("\n")[0]
    assert "gradients 12.8 GB" in once and "gradients 1.8 GB" in every
    assert "DP sends 19 GB" in once and "DP sends 408 GB" in every


def test_the_layouts_of_table4_are_on_the_sliders():
    """With its gradients accumulated whole (Llama 3 §3.3.2) neither row fits pplab's count
    of 80 GB; reduce-scattering every microbatch, only V = 1 does."""
    assert C.row_for(32).gpus == 8192 and C.row_for(16).gpus == 16384
    for M in (32, 16):
        assert "over 80 GB" in C.render_published_run(M, 8)[1]
        assert "over 80 GB" in C.render_published_run(M, 8, "every microbatch")[1]
        assert "fits in 80 GB" in C.render_published_run(M, 1, "every microbatch")[1]


@pytest.mark.parametrize("M,V,grads", [(24, 8, "once a step"), (0, 8, "once a step"),
                                       (32, 3, "once a step"), (32, 16, "once a step"),
                                       (32, 8, "sometimes")])
def test_settings_the_model_cannot_mean_are_messages(M, V, grads):
    pic, msg = C.render_published_run(M, V, grads)
    assert pic is None and msg.startswith(f"M={M}, V={V}: ") and "\n" not in msg


@pytest.mark.slow
def test_widget_builds_and_reacts_without_a_kernel():
    c = C.published_run_canvas()
    assert "8,192 GPUs" in c.last_message
    for M, V, g in itertools.product(C.M_OPTIONS, C.V_OPTIONS, C.GRADS):
        c.controls["M"].value, c.controls["V"].value, c.controls["grads"].value = M, V, g
        assert f"M={M}, V={V}" in c.last_message and f"reduce-scattered {g}" in c.last_message
    assert c.errors == [] and W.CANVASES[-1] is c
