"""Lesson 09 states what the planner finds for Llama 3 70B on 64 × 80 GB GPUs; each statement
is pinned here against the planner, so a change in the model that moves them fails a test."""
from pathlib import Path

import nbformat
import pytest

from pplab.memory import get_preset
from pplab.memory.planner import plan

NB = Path(__file__).resolve().parents[2] / "notebooks" / "09_3d_parallelism.ipynb"


@pytest.fixture(scope="module")
def text() -> str:
    return "\n".join(" ".join(c.source.split()) for c in nbformat.read(NB, as_version=4).cells)


@pytest.fixture(scope="module")
def layouts():
    return plan(get_preset("llama3-70b").with_(seq=4096), 64)


def test_the_winner_and_the_best_of_each_tp(text, layouts):
    fits = [c for c in layouts if c.feasible]
    first = fits[0].config
    assert (first.tp, first.pp, first.zero, first.recompute) == (4, 1, 2, "selective")
    assert first.zero2_reduce == "per_microbatch"           # the shard ZeRO-2 keeps
    best = {}
    for c in fits:
        best.setdefault(c.config.tp, c.step_time)
    slower = {tp: best[tp] / best[4] - 1 for tp in (2, 8)}
    from pplab.course.reveals import measurement_text     # the winner waits for the guess
    assert (f"the best layout with TP = 2 is {slower[2]:.0%} slower, with TP = 8 "
            f"{slower[8]:.0%}") in measurement_text("09.planner-tp")
    assert f"{slower[2]:.0%} slower" not in text and "winner above uses" not in text


def test_the_nearest_miss(text, layouts):
    misses = sorted((c for c in layouts if not c.feasible and c.peak_bytes),
                    key=lambda c: c.peak_bytes)
    near = misses[0]
    assert (near.config.schedule, near.config.tp, near.config.pp, near.peak_rank) == \
        ("1f1b", 2, 4, 0)
    assert (f"The nearest miss is a 1F1B layout at TP = 2, PP = 4 whose *first* rank (the "
            f"deepest warm-up, four microbatches in flight) needs "
            f"{near.peak_bytes / 1e9:.1f} GB") in text


def test_the_lm_heads_weight(text):
    """The last stage's share of work that section 3 and the planner question's reveal quote."""
    from pplab.course.reveals import measurement_text
    from pplab.memory.planner import _stage_scale
    m8 = get_preset("llama3-8b").with_(seq=4096)
    v1 = _stage_scale(m8, "1f1b", 8, 8, None, None, None, 4096)[-1]
    v2 = _stage_scale(m8, "interleaved", 8, 8, 2, None, None, 4096)[-1]
    assert f"about {v1:.1f} stages of work at V = 1 and {v2:.1f} chunks at V = 2" in text
    m70 = get_preset("llama3-70b").with_(seq=4096)
    layer = 2 * m70.layer_params().total + 4 * m70.hidden * 4096
    head = 2 * m70.vocab * m70.hidden / layer
    assert f"about {head:.1f} layers of work" in measurement_text("09.planner-tp")
