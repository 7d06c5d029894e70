"""Lesson 10's calibration button: a click measures in a background thread and shows the
table; the measurement is replaced here by timelines the shared-core simulator made, so the
fit is exact and the test is fast."""
import pytest

from pplab import make_schedule, simulate
from pplab.canvases.calibration import SCHEDULES, calibration_panel
from pplab.sim import Costs

pytest.importorskip("torch")
KNOWN = Costs(tf=2e-3, tb=4e-3, tw=1.5e-3, comm=3e-4, fixed=5e-4)


def _fake_measure(names, P, M, repeats=3, progress=None, **_):
    progress and progress(f"{len(names) * repeats} runs")
    return {n: [simulate(make_schedule(n, P, M), KNOWN, cores=2)] * repeats for n in names}


@pytest.mark.slow
def test_click_measures_in_a_thread_and_shows_errors_before_and_after(monkeypatch):
    import pplab.runtime.calibration as rc
    monkeypatch.setattr(rc, "measure", _fake_measure)
    panel = calibration_panel(P=4, repeats=2)
    assert panel.report.value == "" and not panel.button.disabled
    panel.click()
    panel.join(900)   # returns when the work ends: a limit only a hang reaches
    text = panel.text
    assert "ranks sharing 2 cores (effectively)" in text and "≤ 10 % on 6/6" in text, text
    for name in SCHEDULES:
        assert f"| {name} | 4 |" in text
    assert "median 0.0%, max 0.0%" in text and "<pre>" in panel.report.value
    assert "done" in panel.status.value and not panel.button.disabled


def test_a_failed_measurement_is_one_message(monkeypatch):
    import pplab.runtime.calibration as rc
    monkeypatch.setattr(rc, "measure", lambda *a, **k: (_ for _ in ()).throw(
        RuntimeError("rank 1 died")))
    panel = calibration_panel()
    panel.click()
    panel.join(900)   # returns when the work ends: a limit only a hang reaches
    assert panel.text == "calibration failed: rank 1 died"
    assert "rank 1 died" in panel.status.value and not panel.button.disabled


def test_the_p_chooser_sets_the_ranks_measured(monkeypatch):
    """The chooser's P reaches the measurement and the report (the fit itself, a search over
    thousands of simulations, is the click test's: here it is given its answer)."""
    import pplab.runtime.calibration as rc
    seen = []

    def fake(names, P, M, repeats=3, progress=None, **_):
        seen.append(P)
        return _fake_measure(names, P, M, repeats)
    monkeypatch.setattr(rc, "measure", fake)
    monkeypatch.setattr(rc, "calibrate", lambda measured, fit_on, **_: (KNOWN, 2.0))
    panel = calibration_panel(repeats=1)
    assert panel.ranks.value == 2 and list(panel.ranks.options) == [2, 4]
    panel.click()
    panel.join(900)   # returns when the work ends: a limit only a hang reaches
    panel.ranks.value = 4
    panel.click()
    panel.join(900)   # returns when the work ends: a limit only a hang reaches
    assert seen == [2, 4] and "P = 4," in panel.text and "| naive | 4 |" in panel.text
