"""The run panel: its factored functions, one small real run, invalid combinations and failed
runs as messages, and the button driven headlessly (click → background thread → join).

Only ONE real torchrun job (P=2, M=4, tiny emulated durations) runs here; everything else
monkeypatches ``pplab.runtime.run_schedule``.
"""
import json

import matplotlib
import pytest

matplotlib.use("Agg")

import pplab.runtime as rt  # noqa: E402
from pplab.canvases import runs as RW  # noqa: E402
from pplab.draw import scene_figure  # noqa: E402
from pplab.timeline import Timeline  # noqa: E402
from pplab.canvases.base import CANVASES  # noqa: E402

EMU = dict(emulate=True, tf=0.02, tb=0.04, tw=0.0)


@pytest.fixture(scope="module")
def real_result():
    lines = []
    res, msg = RW.launch("1f1b", P=2, M=4, V=None, timeout=120, progress=lines.append, **EMU)
    assert res is not None, msg
    assert lines and lines[0].startswith("starting torchrun")
    return res


def test_one_real_run_is_drawn_with_bubble_and_grad_error(real_result, tmp_path):
    res = real_result
    assert isinstance(res.timeline, Timeline) and res.timeline.source == "measured"
    assert res.simulated is not None and res.simulated.source == "simulated"
    trace = tmp_path / "t.json"
    picture, text = RW.render_result(res, str(trace))
    (panel,) = picture["panels"]                          # a scene, like every render_*
    assert len(panel["lanes"]) == len(res.timeline.events)     # the measured run's thin bars
    fig = scene_figure(picture)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time (s)" and "measured" in ax.get_title(loc="left") + \
        fig.axes[0].get_title()
    assert len(ax.patches) + len(ax.artists) > 2          # simulated boxes + measured bars
    assert "measured: makespan" in text and "bubble" in text
    assert "simulated with the same costs" in text
    assert "max relative error" in text and "✓ matches" in text
    assert res.grad_max_rel_error < RW.GRAD_TOLERANCE
    assert "gloo/cpu" in text
    d = json.loads(trace.read_text())
    assert sum(e["ph"] == "X" for e in d["traceEvents"]) == len(res.timeline.events) == 16
    assert "Perfetto trace written" in text


@pytest.mark.parametrize("args, words", [
    (dict(schedule="interleaved", P=4, M=6, V=2), "multiple of P"),
    (dict(schedule="dualpipe", P=3, M=6, V=1), "even number of ranks"),
    (dict(schedule="1f1b", P=8, M=8, V=2), "1f1b with P=8, M=8, V=2"),
    (dict(schedule="interleaved", P=4, M=8, V=4), "only 8 layers"),
    (dict(schedule="1f1b", P=2, M=4, V=1, tw=0.2, tb=0.1), "tw"),
])
def test_invalid_combination_is_a_message_and_launches_nothing(args, words, monkeypatch):
    calls = []
    monkeypatch.setattr(rt, "run_schedule", lambda *a, **k: calls.append((a, k)))
    kw = dict(EMU)
    kw.update(args)
    res, msg = RW.launch(**kw)
    assert res is None and words in msg and "nothing launched" in msg
    assert "Traceback" not in msg
    assert calls == []
    _, pmsg = RW.preview(**kw)
    assert words in pmsg


def test_run_error_becomes_a_message(monkeypatch):
    def boom(*a, **k):
        raise rt.RunError("rank 1 failed: RuntimeError: boom (traceback: worker.py line 3)")
    monkeypatch.setattr(rt, "run_schedule", boom)
    res, msg = RW.launch("1f1b", 2, 4, None, **{k: v for k, v in EMU.items()})
    assert res is None
    assert msg.startswith("the real run failed: rank 1 failed: RuntimeError: boom")


def test_preview_without_emulation_warns():
    _, msg = RW.preview("1f1b", 4, 8, 1, emulate=False)
    assert msg.startswith("ready") and "CPU contention" in msg


def _panel(**kw):
    return RW.run_panel("1f1b", P=2, M=4, tf=0.02, tb=0.04, **kw)


def test_button_click_runs_in_a_thread_and_shows_the_result(monkeypatch, real_result, tmp_path):
    """The click path, headless: the handler starts a thread; the result is drawn into the
    image and the text into the HTML. run_schedule is replaced by one returning the real
    result of the run above (no second torchrun job)."""
    import threading
    gate = threading.Event()
    seen = {}

    def fake(sched, **k):
        seen.update(k, name=sched.name, P=sched.P)
        k["progress"]("1f1b: step 1/2 loss 5.0")
        gate.wait(10)
        return real_result
    monkeypatch.setattr(rt, "run_schedule", fake)
    panel = _panel(trace_path=str(tmp_path / "p.json"))
    assert panel in CANVASES and not panel.button.disabled
    panel.controls["trace"].value = True
    assert panel.image.layout.display == "none"       # no broken-image icon before a run
    panel.click()
    assert panel.thread is not None and panel.thread.is_alive()
    assert panel.button.disabled                      # disabled while running
    panel.click()                                     # a second click does nothing
    gate.set()
    panel.join(900)                                   # returns when the work ends
    assert not panel.thread.is_alive() and not panel.button.disabled
    assert seen["P"] == 2 and seen["emulate"] == dict(tf=0.02, tb=0.04, tw=0.0)
    assert seen["timeout"] == 120.0
    assert panel.progress_lines == ["1f1b: step 1/2 loss 5.0"]
    assert panel.result is real_result and panel.figure is not None
    assert panel.image.value[:4] == b"\x89PNG" and panel.image.layout.display is None
    assert "max relative error" in panel.result_message
    assert (tmp_path / "p.json").exists()
    assert not panel.errors


def test_button_with_failed_run_and_invalid_combo(monkeypatch):
    def boom(*a, **k):
        raise rt.RunError("stuck ranks: 0, 1 — rank 0 waiting for 1B0")
    monkeypatch.setattr(rt, "run_schedule", boom)
    panel = _panel()
    panel.click()
    panel.join(900)                                   # returns when the work ends
    assert "stuck ranks: 0, 1" in panel.result_message and panel.result is None
    assert panel.image.layout.display == "none"
    calls = []
    monkeypatch.setattr(rt, "run_schedule", lambda *a, **k: calls.append(1))
    panel.controls["schedule"].value = "interleaved"
    panel.controls["M"].value = 3
    assert panel.button.disabled and "multiple of P" in panel.last_message
    panel.button.disabled = False                     # even if forced, nothing launches
    panel.click()
    assert panel.thread is None or not panel.thread.is_alive()
    panel.join(5)
    assert calls == [] and "nothing launched" in panel.result_message
    assert not panel.errors


def test_moving_controls_never_launches(monkeypatch):
    monkeypatch.setattr(rt, "run_schedule", lambda *a, **k: pytest.fail("launched"))
    panel = _panel()
    for name in ("P", "M", "V"):
        c = panel.controls[name]
        for v in range(c.min, c.max + 1):
            c.value = v
    for name in ("tf", "tb", "tw"):
        c = panel.controls[name]
        for v in (c.min, c.max):
            c.value = v
    for s in panel.controls["schedule"].options:
        panel.controls["schedule"].value = s
    assert not panel.errors and panel.thread is None

