"""Lessons 00, 10, 11: the session's run of each (tests/helpers/lesson_run.py) has every
canvas control moved with ``pplab.runtime.run_schedule`` replaced by a refusal (the run
panel's controls only re-preview — no torchrun job may start), the checked outputs carry the
numbers the prose relies on, and every real run sits in a cell tagged ``nbval-skip``.
"""
from pathlib import Path

import nbformat
import pytest
from cell_tags import checked, skipped
from lesson_run import lesson_run

ROOT = Path(__file__).resolve().parents[2]

LESSONS = {
    "00_setup_and_first_run.ipynb": (["run_panel("], 1, ["1f1b: P=4 M=8 V=1 placement stage->rank [0, 1, 2, 3]"]),
    "10_real_runs.ipynb": (["run_panel("], 1,
                           ["makespan 1.650 s, bubble 27.3% of total, 37.5% of ideal",
                            "10 events: 2 rank names + 8 ops"]),
    "11_engineering_a_pipeline.ipynb": (["balance_canvas("], 0,
                                        ["layers.5.mlp.fc2.weight",
                                         "needs an even number of ranks",
                                         "tied_embeddings=True needs P=1",
                                         "has only 8 layers",
                                         "1f1b  P=4 M=16: bubble 15.8% of total, peak in-flight "
                                         "per rank [4, 3, 2, 1]",
                                         "P=8, M= 8: bubble 46.7% of total"]),
}


def _read(name):
    return nbformat.read(ROOT / "notebooks" / name, as_version=4)


def _checked_text(nb):
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   and checked(c) for o in c.outputs)


@pytest.mark.parametrize("name", LESSONS)
def test_checked_numbers_and_canvases(name):
    nb = _read(name)
    calls, _, numbers = LESSONS[name]
    text = _checked_text(nb)
    for n in numbers:
        assert n in text, n
    src = "\n".join(c.source for c in nb.cells)
    for call in calls:
        cells = [c for c in nb.cells if call in c.source]
        assert cells, call
        assert all("nbval-ignore-output" in c.metadata.get("tags", []) for c in cells)
    for c in nb.cells:       # every real run is skipped by nbval and the lesson executor
        if c.cell_type == "code" and ("run_schedule(" in c.source and "import" in c.source):
            assert skipped(c), c.source[:60]
    assert "Check your understanding" in src or name.startswith("00")


def test_welcome_lists_the_lessons_that_exist():
    nb = _read("00_setup_and_first_run.ipynb")
    intro = nb.cells[0].source
    for p in sorted((ROOT / "notebooks").glob("*.ipynb")):
        if p.name != "00_setup_and_first_run.ipynb":
            assert f"`{p.name}`" in intro, p.name
    assert "04_real_pipeline" in intro


@pytest.mark.parametrize("name", LESSONS)
def test_lesson_runs_with_canvases_driven_and_nothing_launched(name):
    out = lesson_run(ROOT / "notebooks" / name).sweep
    assert "errors: []" in out, out
    panels = LESSONS[name][1]
    assert f"PANELS {panels} threads 0 launch refused True" in out, out


@pytest.mark.slow
def test_torch_interleaved_takes_m_not_a_multiple_of_p():
    """Lesson 11: M a multiple of P is pplab's (and Megatron-LM's) rule; torch 2.13's
    ScheduleInterleaved1F1B runs P = 4, M = 6 correctly and refuses M = 9 (two rounds)."""
    pytest.importorskip("torch.distributed.pipelining")
    from torch_interleaved_worker import run
    error, refusal = run(4, 6, other=9)
    assert error < 1e-5 and "multiple of the number of rounds (2)" in refusal
    text = "".join(c.source for c in _read("11_engineering_a_pipeline.ipynb").cells)
    assert "runs M = 6 in one round of six" in text and "refuses M = 9" in text


@pytest.mark.slow
def test_torch_v_schedules_refuse_as_lesson12_says():
    """Lesson 12: torch 2.13's ZB-V wants exactly two stages per rank, DualPipeV at least as
    many microbatches as stages (built in a one-rank group: torch checks before any send)."""
    torch = pytest.importorskip("torch")
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S

    from pplab import make_schedule
    from pplab.runtime.model import TinyConfig, build_stage_modules
    from pplab.runtime.torch_bridge import _loss_fn, one_process_group
    said = {}
    with one_process_group():
        mods = build_stage_modules(make_schedule("dualpipev", 1, 2), TinyConfig(), 0, [0, 1])
        stages = [PipelineStage(mods[s], s, 2, torch.device("cpu")) for s in (0, 1)]
        for cls, M, mine in (("ScheduleDualPipeV", 1, stages), ("ScheduleZBVZeroBubble", 2, stages[:1])):
            with pytest.raises(ValueError) as e:
                getattr(S, cls)(mine, n_microbatches=M, loss_fn=_loss_fn())
            said[cls] = str(e.value)
    assert "at least as many microbatches as stages" in said["ScheduleDualPipeV"]
    assert "exactly 2 stages per rank" in said["ScheduleZBVZeroBubble"]
    from pplab.course.bank import get
    text = "".join(c.source for c in _read("12_pplab_to_pytorch.ipynb").cells)
    assert "need exactly two stages per rank" in text
    # the M rule is told once the M < P guess is in (the page would answer it)
    assert "at least as many microbatches as stages" in get("12.m-lt-p").explain
